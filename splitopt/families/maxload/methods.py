"""Methods of the maxload family besides the generic programs.

* ``all-on-cpu``: every node on ``cpu0`` (needs ``maxCPUs >= 1``): it meets every
  placement rule, so it is the plan a time-limited solve falls back on; its max-load is
  the sum of the CPU times, its latency the DAG's longest path of CPU times.
"""

from __future__ import annotations

from splitopt.core.errors import NotApplicable
from splitopt.core.options import SolveOptions
from splitopt.core.result import BackendOutput, Status
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement


def all_on_cpu_placement(inst: MaxloadInstance) -> MaxloadPlacement | None:
    """Every node on cpu0, or None without a CPU core."""
    if not inst.cpus:
        return None
    return MaxloadPlacement({v: inst.cpus[0] for v in inst.node_by_id})


def all_on_cpu(inst: MaxloadInstance, options: SolveOptions) -> BackendOutput:
    """Every node on cpu0."""
    placement = all_on_cpu_placement(inst)
    if placement is None:
        raise NotApplicable("all-on-cpu: the instance has no CPU core (maxCPUs=0)")
    return BackendOutput(Status.FEASIBLE, plan=placement)
