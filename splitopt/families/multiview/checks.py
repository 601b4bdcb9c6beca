"""The multiview family's check: ``settings.multiview`` and what the sensors, the
aggregator and the layers must offer, checked while the family's data is derived from
them (``data.py``: one pass that names the first field out of place)."""

from __future__ import annotations

from splitopt.families.multiview.data import data
from splitopt.families.multiview.settings import MultiviewInstance


def check_multiview(inst: MultiviewInstance) -> None:
    """Raise InvalidInstance (one line naming the field and value) unless ``inst`` is a
    consistent multiview instance."""
    data(inst)
