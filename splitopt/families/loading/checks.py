"""The loading family's check: every field of ``settings.loading`` and what the layers
must offer, checked while the family's data is derived from them (``data.py``: one pass
that names the first field out of place)."""

from __future__ import annotations

from splitopt.families.loading.data import data
from splitopt.families.loading.settings import LoadingInstance


def check_loading(inst: LoadingInstance) -> None:
    """Raise InvalidInstance (one line naming the field and value) unless ``inst`` is a
    consistent loading instance. The JSON Schema has checked types when the instance came
    from JSON; instances built in Python are checked here the same way."""
    data(inst)
