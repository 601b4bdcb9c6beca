"""The library's top level: ``splitopt.solve``, ``splitopt.evaluate``, ``splitopt.save_plan``
end to end on shipped instances; ``import splitopt`` stays light (``solve`` is imported on
first use) whichever import comes first; an :class:`~splitopt.Instance` built in Python is
checked like a JSON file (one-line InvalidInstance naming the field and value, never a bare
KeyError); and the ``py.typed`` marker ships with the package.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

import splitopt
from splitopt import Instance, InvalidInstance
from splitopt.core.instance import Bus, Device, InputTensor, Layer, Link
from splitopt.families.chain.settings import ChainSettings
from splitopt.families.edge_cloud.settings import EdgeCloudSettings

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "instances" / "resnet50_eyeriss.json"
CHAIN = ROOT / "instances" / "jmsnas_chain_mobilenetv2.json"


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=dict(os.environ))


# ----- top-level functions ----------------------------------------------------------------

@pytest.mark.parametrize("path", [RESNET, CHAIN])
def test_solve_save_load_evaluate_end_to_end(tmp_path, path):
    inst = splitopt.load_instance(path)
    result = splitopt.solve(inst, time_limit=20)
    assert isinstance(result, splitopt.SolveResult) and result.status.has_plan
    out = tmp_path / "plan.json"
    splitopt.save_plan(inst, result.plan, out)
    plan = splitopt.load_plan(inst, out)
    metrics = splitopt.evaluate(inst, plan)
    assert metrics.feasible and metrics.objective_ms == pytest.approx(result.objective)
    assert splitopt.plan_from_dict(inst, json.loads(out.read_text())) == plan
    assert splitopt.plan_to_dict(inst, plan) == json.loads(out.read_text())


def test_every_public_name_resolves():
    for name in splitopt.__all__:
        assert getattr(splitopt, name) is not None, name
    assert {"solve", "evaluate", "save_plan", "load_plan", "load_instance"} <= set(splitopt.__all__)


def test_solve_is_the_module_and_callable():
    import splitopt.solve as module
    from splitopt.solve import solve as function

    assert splitopt.solve is module and callable(splitopt.solve) and splitopt.solve.solve is function
    from splitopt import solve

    assert solve is module


def test_replacing_the_solve_function_is_seen_through_the_top_level(monkeypatch):
    monkeypatch.setattr("splitopt.solve.solve", lambda *a, **k: "stand-in")
    assert splitopt.solve(None) == "stand-in"
    monkeypatch.undo()
    monkeypatch.setattr(splitopt, "solve", lambda *a, **k: "replaced")
    assert splitopt.solve(None) == "replaced"
    monkeypatch.undo()
    assert splitopt.solve is sys.modules["splitopt.solve"]


@pytest.mark.parametrize("first", ["import splitopt", "import splitopt.solve", "from splitopt.solve import solve",
                                   "import splitopt.cli.app"])
def test_top_level_solve_in_a_fresh_process_whatever_comes_first(first):
    proc = run_python(f"""
import sys
{first}
import splitopt
inst = splitopt.load_instance("tests/data/toy.json")
print(splitopt.solve(inst, solver="milp-cbc").status.value, type(splitopt.solve.solve).__name__)
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["OPTIMAL", "function"]


def test_import_splitopt_stays_light():
    proc = run_python("""
import sys
import splitopt
heavy = ("torch", "networkx", "numpy", "ortools", "pulp", "highspy", "jsonschema", "scipy", "matplotlib")
print(" ".join(sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy})) or "-")
print("splitopt.solve" in sys.modules, "splitopt.backends.registry" in sys.modules)
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["-", "False", "False"]


# ----- instances built in Python ----------------------------------------------------------

def settings(**changes) -> EdgeCloudSettings:
    base = dict(edge="edge", cloud="cloud", edge_memory_bytes=1e6, error_budget=None, bit_widths=(8, 16))
    base.update(changes)
    return EdgeCloudSettings(**base)


def build(**changes) -> Instance:
    fields = dict(
        name="built",
        inputs=[InputTensor("x", (1, 3, 8, 8), 8)],
        layers=[Layer("a", "conv", ("x",), 1e6, 1000, (1, 8, 8, 8)),
                Layer("b", "conv", ["a"], 1e6, 1000, [1, 8, 4, 4])],
        devices=[Device("edge", 1e9, None, 0, 1e6, [16, 8]), Device("cloud", 1e12, None, 0, 1e9, (8, 16))],
        links=[Link("edge", "cloud", 1e6)],
        problem="split",
        settings=settings(),
    )
    fields.update(changes)
    return Instance(**fields)


def test_a_valid_built_instance_solves_and_is_stored_like_a_parsed_one():
    inst = build()
    assert isinstance(inst.layers, tuple) and inst.layers[1].inputs == ("a",)
    assert inst.layers[1].output_shape == (1, 8, 4, 4) and inst.devices[0].bit_widths == (8, 16)
    result = splitopt.solve(inst)
    assert result.status.value == "OPTIMAL"
    assert splitopt.evaluate(inst, result.plan).objective_ms == pytest.approx(result.objective)


def two_layers(second_inputs=("a",), second_name="b") -> list[Layer]:
    return [Layer("a", "conv", ("x",), 1e6, 1000, (1, 8, 8, 8)),
            Layer(second_name, "conv", second_inputs, 1e6, 1000, (1, 8, 4, 4))]


@pytest.mark.parametrize("changes, message", [
    (dict(layers=two_layers(("missing",))),
     "instance.graph.layers[1].inputs: layer 'b' reads unknown tensor 'missing' (dangling edge)"),
    (dict(layers=two_layers(second_name="a")), "instance.graph.layers[1].name: duplicate name 'a'"),
    (dict(layers=two_layers(("x", "b"))), "instance.graph.layers: the layer graph has a cycle"),
    (dict(inputs=[InputTensor("x", (1, 3, 8, 8), 8), InputTensor("y", (1,), 8)]),
     "instance.graph.inputs: input 'y' is read by no layer"),
    (dict(links=[Link("edge", "cloud", 1e6), Link("edge", "moon", 1e6)]),
     "instance.links[1].target: unknown device 'moon'"),
    (dict(links=[Link("edge", "edge", 1e6), Link("edge", "cloud", 1e6)]),
     "instance.links[0]: link from device 'edge' to itself"),
    (dict(links=[Link("edge", "cloud", 1e6, bus="bus0")]), "instance.links[0].bus: unknown bus 'bus0'"),
    (dict(links=[Link("edge", "cloud", float("nan"))]),
     "instance.links[0].bandwidth_bits_per_s: must be a finite number, got nan"),
    (dict(links=[Link("cloud", "edge", 1e6)]), "no link from edge device 'edge' to cloud device 'cloud'"),
    (dict(buses=[Bus("b", 1e6), Bus("b", 1e6)]), "instance.buses[1].name: duplicate name 'b'"),
    (dict(layers=[Layer("a", "conv", ("x",), -1.0, 1000, (1, 8))]),
     "instance.graph.layers[0].macs: must be at least 0, got -1"),
    (dict(layers=[Layer("a", "conv", ("x",), 1.0, -5, (1, 8))]),
     "instance.graph.layers[0].weights: must be at least 0, got -5"),
    (dict(inputs=[InputTensor("x", (1, 0), 8)]), "instance.graph.inputs[0].shape[1]: must be at least 1, got 0"),
    (dict(devices=[Device("edge", 0.0, None, 0, 1e6, (8, 16)), Device("cloud", 1e12, None, 0, 1e9, (8, 16))]),
     "instance.devices[0].mac_per_s: must be at least 1, got 0"),
    (dict(layers=[Layer("a", "conv", "x", 1.0, 5, (1, 8))]),
     "instance.graph.layers[0].inputs: must be a tuple or list, got string 'x'"),
    (dict(layers=[{"name": "a"}]), "instance.graph.layers[0]: must be a Layer (splitopt.core.instance), got dict"),
    (dict(layers=[Layer("a", "conv", ("x",), 1.0, 5, (1, 8), weight_error={"8": 0.1})]),
     "instance.graph.layers[0].weight_error: keys must be bit-widths (int), got string '8'"),
    (dict(name=""), "instance.name: '' should be non-empty"),
    (dict(settings=settings(edge="fog")), "instance.settings.edge: unknown device 'fog' (devices: cloud, edge)"),
    (dict(problem="chain", settings=ChainSettings(chain=("edge", "fog"))),
     "instance.settings.chain[1]: unknown device 'fog'"),
    (dict(problem="nope"), "instance.settings.problem: unknown problem 'nope' (problems: split, split_bits"),
    (dict(problem=None), "instance.problem: must be a problem name (string), got NoneType"),
    (dict(objective="throughput"), "instance.settings.objective: 'throughput' is not an objective of problem 'split'"),
    (dict(settings=settings(edge_memory_bytes=None)), "instance.settings.edge_memory_bytes: must be a number"),
    (dict(settings={"problem": "split"}), "instance.settings: must be a family's settings object"),
    (dict(problem="chain"), "instance.settings: must be a ChainSettings (the settings of problem 'chain'), got "
                            "EdgeCloudSettings"),
    (dict(settings=settings(bit_widths="8")), "instance.settings.bit_widths: must be a tuple or list"),
])
def test_a_defect_of_a_built_instance_is_one_line(changes, message):
    with pytest.raises(InvalidInstance) as info:
        build(**changes)
    text = str(info.value)
    assert message in text and "\n" not in text and len(text) < 400, text


def test_the_same_defect_reads_the_same_from_json_and_from_python():
    from splitopt.core.instance_io import to_dict

    data = to_dict(build())
    data["graph"]["layers"][1]["inputs"] = ["missing"]
    with pytest.raises(InvalidInstance) as from_json:
        splitopt.parse_instance(data)
    with pytest.raises(InvalidInstance) as from_python:
        build(layers=two_layers(("missing",)))
    assert str(from_json.value) == str(from_python.value)


def test_replace_checks_again_and_with_settings_stays_cheap():
    inst = build()
    with pytest.raises(InvalidInstance, match="unknown tensor 'zz'"):
        dataclasses.replace(inst, layers=two_layers(("zz",)))
    assert inst.with_settings(edge_memory_bytes=2e6).settings.edge_memory_bytes == 2e6


# ----- py.typed ---------------------------------------------------------------------------

def test_py_typed_ships_with_the_package():
    assert resources.files("splitopt").joinpath("py.typed").is_file()
    assert (Path(splitopt.__file__).parent / "py.typed").is_file()
    import tomllib

    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["splitopt"]
