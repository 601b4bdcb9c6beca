"""The registry is the one list of families: a family is its folder and one registry
line, and nothing else needs editing for it to be checked, listed, benchmarked, read and
validated; an instance of a problem no family handles is refused by name, never skipped.

The proof registers a throwaway family for the test only
(``splitopt.families.registry.registered``): "solo", problem ``solo``, every layer on
one device of the instance's choosing, latency the summed compute time there, weights
that must fit the device's memory. Small as it is, it is a real family: an evaluator, a
linear program the exact backends solve, a search space, a baseline. With it registered,
the contract suites run on it, ``splitopt solvers`` lists its method, the shipped suite
takes its instances with their family's default solvers, the schema names its problem and
``validate`` and ``solve`` read its files; the generic layers refuse what it does not have
(a Pareto front, exact bandwidth breakpoints) in one line. Unregistered, the same file is
one line naming the unknown problem, everywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

from splitopt.cli.app import app
from splitopt.core.errors import InvalidInstance, InvalidOption, InvalidPlan, NotApplicable
from splitopt.core.program import LinearProgram, Program
from splitopt.core.settings import FamilySettings
from splitopt.families.base import Family, Method, plan_output
from splitopt.families.settings_fields import schema_of, unused_schema
from splitopt.families.registry import FAMILIES, family, registered
from splitopt.search.space import ChoiceGene, SearchSpace
from splitopt.testing import contracts

runner = CliRunner()
FORMAT = "splitopt-solo-plan/1"


@dataclass(frozen=True)
class SoloPlan:
    """Every layer on ``device``."""

    device: str

    def key(self) -> str:
        return self.device

    def to_dict(self, inst: Any) -> dict[str, Any]:
        return {"format": FORMAT, "instance": inst.name, "device": self.device}


@dataclass(frozen=True)
class SoloMetrics:
    objective_ms: float
    weight_bytes: float
    violations: tuple[str, ...] = ()

    @property
    def feasible(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {"objective_ms": self.objective_ms, "weight_bytes": self.weight_bytes, "feasible": self.feasible,
                "violations": list(self.violations)}


@dataclass(frozen=True)
class SoloSettings(FamilySettings):
    """The precision every layer runs at (``cloud_bits``, bits per value)."""

    cloud_bits: int = 16

    SCHEMA = schema_of("cloud_bits")
    UNUSED = unused_schema("problem 'solo'", "edge", "cloud", "edge_memory_bytes", "error_budget", "bit_widths",
                           "transmit_bits", "edge_required")

    @property
    def reference_bits(self) -> int:
        return self.cloud_bits


def compute_ms(inst: Any, device: Any) -> float:
    """Every layer's MACs at the device's rate, in ms."""
    return 1000.0 * sum(layer.macs for layer in inst.layers) / device.mac_per_s


def weight_bytes(inst: Any) -> float:
    """The weights at the reference precision, in bytes."""
    return sum(layer.weights for layer in inst.layers) * inst.settings.cloud_bits / 8


class SoloFamily(Family):
    name = "solo"
    problems = ("solo",)
    settings_class = SoloSettings
    plan_format = FORMAT
    program_kinds = ("linear",)
    has_schedule = False
    description = "every layer on one device (a throwaway family of tests/test_one_list.py)"

    def check(self, inst: Any) -> None:
        if not inst.devices:
            raise InvalidInstance("instance.devices: problem 'solo' needs a device")

    def plan_from_dict(self, inst: Any, data: Any, where: str = "plan") -> SoloPlan:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InvalidPlan(f"{where}: a {FORMAT} object is expected")
        if data.get("device") not in inst.device_by_name:
            raise InvalidPlan(f"{where}.device: unknown device {data.get('device')!r}")
        return SoloPlan(data["device"])

    def plan_type(self) -> type:
        return SoloPlan

    def evaluate(self, inst: Any, plan: SoloPlan) -> SoloMetrics:
        device = inst.device_by_name.get(plan.device)
        if device is None:
            raise InvalidPlan(f"plan.device: unknown device {plan.device!r}")
        need = weight_bytes(inst)
        over = [f"memory: {need:.0f} B of weights on {device.name}, which holds {device.memory_bytes:.0f} B"] \
            if need > device.memory_bytes else []
        return SoloMetrics(compute_ms(inst, device), need, tuple(over))

    def start_plan(self, inst: Any) -> SoloPlan | None:
        fits = [d for d in inst.devices if weight_bytes(inst) <= d.memory_bytes]
        return SoloPlan(min(fits, key=lambda d: compute_ms(inst, d)).name) if fits else None

    def diagnose(self, inst: Any, resolve: Any) -> str:
        return f"memory: no device holds the {weight_bytes(inst):.0f} B of weights"

    def build_program(self, inst: Any, kind: str, start: SoloPlan | None) -> Program:
        if kind != "linear":
            raise NotApplicable(f"problem 'solo' builds a linear program, not '{kind}'")
        lp = LinearProgram()
        x = {d.name: lp.var(f"on[{d.name}]") for d in inst.devices}
        lp.add({i: 1.0 for i in x.values()}, "==", 1.0, name="one device")
        need = weight_bytes(inst)
        for d in inst.devices:
            lp.add({x[d.name]: need}, "<=", d.memory_bytes, kind="bits", name=f"memory[{d.name}]")
            lp.add_objective(x[d.name], compute_ms(inst, d))

        def encode(plan: SoloPlan) -> list[float]:
            return [1.0 if name == plan.device else 0.0 for name in x]

        return Program(kind="linear", model=lp, encode=encode, hint=None if start is None else encode(start),
                       decode=lambda values: SoloPlan(next(n for n, i in x.items() if values[i] > 0.5)))

    def methods(self) -> list[Method]:
        def first(inst: Any, options: Any) -> Any:
            return plan_output(SoloPlan(inst.devices[0].name))

        return [Method("solo-first", "every layer on the instance's first device", first)]

    def enumerate_plans(self, inst: Any, limit: int) -> Iterator[SoloPlan]:
        if len(inst.devices) > limit:
            raise NotApplicable(f"{len(inst.devices)} plans, more than {limit}")
        return iter([SoloPlan(d.name) for d in inst.devices])

    def space(self, inst: Any) -> SearchSpace:
        return SearchSpace((ChoiceGene("device", tuple(d.name for d in inst.devices)),),
                           to_plan=lambda genome: SoloPlan(genome["device"]),
                           from_plan=lambda plan: {"device": plan.device})

    def lower_bound(self, inst: Any) -> float:
        return min(compute_ms(inst, d) for d in inst.devices)

    def random_instance(self, seed: int) -> Any:
        return self.instance_from_data(solo_data(seed))

    def report(self, console: Any, inst: Any, plan: SoloPlan, metrics: SoloMetrics, show_layers: bool = True) -> None:
        console.print(f"every layer on {plan.device}: {metrics.objective_ms:.4f} ms", highlight=False)


def solo_data(seed: int) -> dict[str, Any]:
    """A random instance's JSON of problem solo (the layers and devices of an edge/cloud
    example)."""
    from splitopt.families.edge_cloud.examples import random_instance_data

    data = random_instance_data(seed, 4, problem="split", edge_required=False)
    data["settings"]["problem"] = "solo"
    data["name"] = f"solo-s{seed}"
    return data


@pytest.fixture
def solo():
    with registered(SoloFamily()) as fam:
        yield fam
    assert "solo" not in FAMILIES


def one_line(res, *needles: str, code: int = 2) -> str:
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize("seed", range(4))
def test_the_contract_suites_run_on_a_registered_family(solo, seed):
    contracts.check_protocol("solo")
    for backend in contracts.EXACT_BACKENDS:
        contracts.check_exact_matches_brute_force("solo", backend, seed)
    contracts.check_program_agrees_with_evaluator("solo", seed)
    contracts.check_methods_never_beat_the_optimum("solo", seed)
    contracts.check_plan_json_round_trip("solo", seed)
    contracts.check_start_plan("solo", seed)
    contracts.check_exact_never_worse_than_hints("solo", seed)
    contracts.check_search_space("solo", seed)
    contracts.check_heuristic("solo", "evolutionary", seed)
    contracts.check_lower_bound("solo", seed)
    contracts.check_auto("solo", seed)
    assert family("solo").contract_examples >= 1  # what tests/test_contracts.py draws per check


def test_solvers_lists_its_method(solo):
    res = runner.invoke(app, ["solvers", "--json"])
    assert res.exit_code == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert rows["solo-first"]["families"] == "solo (solo)"


def test_validate_solve_and_the_schema_take_its_files(solo, tmp_path):
    path = tmp_path / "solo.json"
    path.write_text(json.dumps(solo_data(0)))
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 0 and res.stdout.startswith("ok: solo-s0"), (res.stdout, res.stderr)
    res = runner.invoke(app, ["schema"])
    assert "solo" in json.loads(res.stdout)["$defs"]["settings"]["properties"]["problem"]["enum"]
    res = runner.invoke(app, ["solve", str(path), "--solver", "milp-highs", "--json"])
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["status"] == "OPTIMAL" and out["plan"]["format"] == FORMAT


def test_the_suites_take_its_instances_with_its_default_solvers(solo, tmp_path):
    from splitopt.sweep.suites import SuiteOptions, default_solvers, shipped_sources, solvers_for

    (tmp_path / "solo.json").write_text(json.dumps(solo_data(1)))
    sources = shipped_sources(SuiteOptions(instances_dir=tmp_path))
    assert [(s.family, s.problem) for s in sources] == [("solo", "solo")]
    assert sources[0].solvers == ("cpsat", "milp-highs", "solo-first")  # the base's default: exact, baselines
    assert default_solvers()["solo"] == sources[0].solvers
    assert solvers_for(sources, ["solo-first", "cpsat"]) == [(sources[0], ("solo-first", "cpsat"))]


def test_what_it_lacks_is_refused_in_one_line(solo, tmp_path):
    path = tmp_path / "solo.json"
    path.write_text(json.dumps(solo_data(2)))
    one_line(runner.invoke(app, ["pareto", str(path)]), "problem 'solo' has no Pareto front", "split_bits")
    one_line(runner.invoke(app, ["bandwidth", str(path), "--from", "1e6", "--to", "1e7", "--exact"]),
             "--exact: problem 'solo'", "not an affine function")
    one_line(runner.invoke(app, ["solve", str(path), "--contiguity", "authors"]), "--contiguity authors",
             "applies to problem maxload")
    one_line(runner.invoke(app, ["solve", str(path), "--problem", "split"]),
             "--problem split: applies to edge_cloud instances (split, split_bits), not to problem 'solo'")


def test_unregistered_its_problem_is_named_and_refused(tmp_path):
    from splitopt.api import instance_schema
    from splitopt.sweep.suites import SuiteOptions, shipped_sources

    assert "solo" not in FAMILIES
    path = tmp_path / "solo.json"
    path.write_text(json.dumps(solo_data(0)))
    one_line(runner.invoke(app, ["validate", str(path)]), "solo")
    one_line(runner.invoke(app, ["solve", str(path)]), "solo")
    with pytest.raises(InvalidOption, match="solo.json: .*'solo'"):
        shipped_sources(SuiteOptions(instances_dir=tmp_path))
    assert "solo" not in instance_schema()["$defs"]["settings"]["properties"]["problem"]["enum"]
    res = runner.invoke(app, ["solvers", "--json"])
    assert "solo-first" not in {r["name"] for r in json.loads(res.stdout)}


def test_registering_a_name_twice_is_refused():
    with pytest.raises(KeyError, match="registered already"):
        with registered(family("chain")):
            pass
    assert FAMILIES["chain"].endswith(":ChainFamily")
