"""The separable family's check: every field of ``settings.separable``, checked while the
family's data is derived from them (``data.py``), and the published policies the
instance carries, each checked as a plan (``plan.reference_plans``)."""

from __future__ import annotations

from splitopt.families.separable.data import data
from splitopt.families.separable.plan import reference_plans
from splitopt.families.separable.settings import SeparableInstance


def check_separable(inst: SeparableInstance) -> None:
    """Raise InvalidInstance (one line naming the field and value) unless ``inst`` is a
    consistent separable instance, its reference policies included."""
    data(inst)
    reference_plans(inst)
