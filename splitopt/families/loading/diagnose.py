"""Why a loading instance has no plan, in one line naming the limit: the only limits are
the bounds on the number of children and the trainable tail, so an instance is
infeasible exactly when ``children.min > N - m + 1`` (the last child holds at least the
``m`` tail blocks, every other child at least one block)."""

from __future__ import annotations

from splitopt.families.loading.data import LoadingData


def no_child_count_message(d: LoadingData) -> str:
    """The message when no number of children is allowed (``d.child_counts()`` empty)."""
    most = d.last_start_max + 1
    return (f"infeasible: children.min = {d.k_min} cannot be met: with trainable_tail = {d.tail} of {d.n} blocks in "
            f"the last child, at most {most} children are possible (limit: children.min)")


def diagnose(d: LoadingData) -> str:
    """One line naming the binding limit (called on INFEASIBLE)."""
    if not d.child_counts():
        return no_child_count_message(d)
    return "infeasible: no plan meets the limits children.min, children.max and trainable_tail"
