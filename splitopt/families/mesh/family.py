"""The mesh family (problem ``mesh``, JMSNAS Eq. 2 generalised): a layer DAG on any
directed device graph, tensors routed over links, latency the makespan of a schedule in
which branches on different devices overlap. Model: ``splitopt.families.mesh.data``;
formulation: ``formulations/mesh_schedule.md``."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

from splitopt.core.errors import NotApplicable
from splitopt.core.program import Program
from splitopt.families.base import Family, Method
from splitopt.families.mesh import methods
from splitopt.families.mesh.bound import mesh_lower_bound
from splitopt.families.mesh.checks import check_mesh
from splitopt.families.mesh.cpsat import build_cpsat
from splitopt.families.mesh.data import mesh_data
from splitopt.families.mesh.diagnose import diagnose
from splitopt.families.mesh.enumerate import enumerate_plans
from splitopt.families.mesh.evaluate import MeshMetrics, evaluate
from splitopt.families.mesh.milp import build_milp
from splitopt.families.mesh.plan import PLAN_FORMAT, MeshPlan, plan_from_dict
from splitopt.families.mesh.report import report
from splitopt.families.mesh.space import mesh_space
from splitopt.families.mesh.settings import MeshInstance, MeshSettings
from splitopt.families.mesh.start import start_plan
from splitopt.search.space import SearchSpace

METHODS = (
    Method("heft", "HEFT-style list scheduling: earliest finish time per layer", methods.heft, hint=True),
    Method("best-single-device", "all layers on one device, the device of least makespan that fits",
           methods.best_single_device, aliases=("mesh-best-single-device",), hint=True),
)

class MeshFamily(Family):
    name = "mesh"
    problems = ("mesh",)
    objectives = ("latency",)
    settings_class = MeshSettings
    plan_format = PLAN_FORMAT
    program_kinds = ("cpsat", "linear")
    default_backend = "cpsat"
    description = "layers over a device graph; latency is the makespan of the schedule (JMSNAS Eq. 2)"

    def check(self, inst: MeshInstance) -> None:
        check_mesh(inst)

    def build_data(self, inst: MeshInstance) -> Any:
        return mesh_data(inst)

    def plan_from_dict(self, inst: MeshInstance, data: Any, where: str = "plan") -> MeshPlan:
        self.prepare(inst)
        return plan_from_dict(inst, data, where)

    def plan_type(self) -> type:
        return MeshPlan

    def evaluate(self, inst: MeshInstance, plan: MeshPlan) -> MeshMetrics:
        return evaluate(inst, plan, self.prepare(inst))

    def start_plan(self, inst: MeshInstance) -> MeshPlan | None:
        return start_plan(inst, self.prepare(inst))

    def diagnose(self, inst: MeshInstance, resolve: Callable[[MeshInstance], bool]) -> str:
        self.prepare(inst)
        return diagnose(inst)

    def build_program(self, inst: MeshInstance, kind: str, start: MeshPlan | None) -> Program:
        self.prepare(inst)
        if kind == "cpsat":
            return build_cpsat(inst, start)
        if kind == "linear":
            return build_milp(inst, start)
        raise NotApplicable(f"problem 'mesh' builds no program of kind '{kind}'")

    def methods(self) -> Sequence[Method]:
        return METHODS

    def enumerate_plans(self, inst: MeshInstance, limit: int) -> Iterator[MeshPlan]:
        self.prepare(inst)
        return enumerate_plans(inst, limit)

    def space(self, inst: MeshInstance) -> SearchSpace:
        self.prepare(inst)
        return mesh_space(inst)

    def lower_bound(self, inst: MeshInstance) -> float | None:
        self.prepare(inst)
        return mesh_lower_bound(inst)

    def random_instance(self, seed: int) -> MeshInstance:
        from splitopt.families.mesh.examples import small_random_data

        return self.instance_from_data(small_random_data(seed))

    def report(self, console, inst: MeshInstance, plan: MeshPlan, metrics: MeshMetrics, show_layers: bool = True) -> None:
        report(console, inst, plan, metrics, show_layers)

    # ===== what the generic layers ask (analysis, command line, suites, tests) =================
    contract_examples = 100

    def not_affine_reason(self, inst: MeshInstance) -> str:
        return ("a schedule's makespan is a max over paths of affine functions of 1/bandwidth, so the optimum is not "
                "concave in it")
    # ----- the torch bridge and hardware presets ------------------------------------------------
    torch_side = "splitopt.torch.mesh.side:MeshSide"
    topology = "mesh"

    def topology_links(self, devices):
        """A link from every device to every later one (the input arrives at the first, the
        output leaves from the last)."""
        return [(a, b) for i, a in enumerate(devices) for b in devices[i + 1:]]

    def topology_settings(self, names, devices, bit_widths, quantized, reference_bits):
        """The first device receives the input, the last delivers the outputs; shortest-path
        routing."""
        return {"problem": "mesh", "edge": names[0], "cloud": names[-1],
                "mesh": {"routing": "shortest", "deliver_outputs": True}}
