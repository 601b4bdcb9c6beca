"""Why a maxload instance has no placement: with a CPU core every rule is met by all
nodes on cpu0 (whose latency is defined), so only accelerator-only instances
(maxCPUs = 0) can be infeasible."""

from __future__ import annotations

from splitopt.families.maxload.data import groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.milp_throughput import simple_infeasibility


def diagnose(inst: MaxloadInstance) -> str:
    """One line naming the limit no placement can meet."""
    reason = simple_infeasibility(inst, groups_of(inst))
    if reason is not None:
        return f"infeasible: {reason}"
    calls = (" with convex accelerator calls that do not wait on each other"
             if inst.objective == "latency" else "")
    return (f"infeasible: maxSizePerFPGA={inst.max_size_per_fpga:.6g} bytes on maxFPGAs={inst.max_fpgas} "
            f"accelerators (maxCPUs=0): no contiguous, colour-consistent placement{calls} fits the accelerator "
            "memory")
