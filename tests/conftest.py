"""Test setup: hypothesis profiles and a private temporary home.

Profiles: "ci" (the default) is derandomized, so every run draws the same examples and
a failure reproduces; "dev" draws new examples each run. Pick one with
``HYPOTHESIS_PROFILE=dev pytest``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings

# keep tools that write under $HOME (solver logs, caches) out of the real home
_TMP = tempfile.mkdtemp(prefix="splitopt-tests-")
os.environ.setdefault("TMPDIR", _TMP)
os.environ["HOME"] = _TMP
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)

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
