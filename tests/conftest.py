"""Test setup: hypothesis profiles and a private temporary home.

Profiles: "ci" (the default) is derandomized, so every run draws the same examples and
a failure reproduces; "dev" draws new examples each run. Pick one with
``HYPOTHESIS_PROFILE=dev pytest``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile

import pytest
from hypothesis import HealthCheck, settings

# keep tools that write under $HOME (solver logs, caches) out of the real home
_TMP = tempfile.mkdtemp(prefix="splitopt-tests-")
os.environ.setdefault("TMPDIR", _TMP)
os.environ["HOME"] = _TMP
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)

# a shell starts a background job (`pytest &`) with SIGINT ignored, and every process it
# starts inherits that: the Ctrl-C tests then fail and leave their solver children running.
# Python's own handler here makes the processes the tests start get the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def one_torch_thread():
    """One torch intra-op thread for the test (the torch extra's tests use it): on a shared
    2-core host two OpenMP threads stall each other."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
