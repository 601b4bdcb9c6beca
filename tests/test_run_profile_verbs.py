"""One verb per job: ``splitopt profile`` and ``splitopt run`` choose what to do from the
model or the instance's family (its torch side), with every family's options in a panel
of ``--help``; an option the family does not take is one line naming it (exit 2) before
torch is imported; ``run --transport tcp`` is the former ``run-tcp``. The former names
are hidden, still work, and on a terminal say in one line what replaces them. And what
the sides compute is reachable from the library without the command line."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from splitopt.cli import app
from splitopt.core.errors import InvalidOption, NotApplicable

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
TOY = ROOT / "tests" / "data" / "toy.json"
TINY = ROOT / "tests" / "data" / "profile_golden" / "tiny_cnn.py"
FORMER = ("profile-loading", "profile-separable", "run-loading", "run-separable", "run-tcp", "dnnp-solve",
          "dnnp-eval")

#: run the CLI entry point; report on stderr, after the command, whether torch was imported
TRACKED = """
import sys
sys.argv = ["splitopt", *sys.argv[1:]]
from splitopt.cli import main
try:
    main()
finally:
    sys.stderr.write("torch imported: %s\\n" % ("torch" in sys.modules))
"""


def tracked(*args, cwd: Path = ROOT) -> tuple[subprocess.CompletedProcess, list[str], bool]:
    """``splitopt ARGS`` in a fresh process: the process, its stderr lines (without the
    report) and whether torch had been imported by the end."""
    proc = subprocess.run([sys.executable, "-c", TRACKED, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env=dict(os.environ, COLUMNS="200"))
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    return proc, [l for l in lines if not l.startswith("torch imported:")], "torch imported: True" in lines


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line(res, code, *needles) -> str:
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert all(n in lines[0] for n in needles), (needles, lines[0])
    return lines[0]


# ----- the help tree --------------------------------------------------------------------------

def test_help_shows_one_profile_and_one_run_and_no_former_name():
    res = invoke("--help")
    assert res.exit_code == 0
    # the rows of the commands panel: "│ NAME  description"
    names = [line.split()[1] for line in res.stdout.splitlines() if line.startswith("│ ") and line[2:3].isalpha()]
    assert names.count("profile") == 1 and names.count("run") == 1, names
    assert not set(FORMER) & set(names), names


def test_family_options_are_grouped_in_panels():
    run = invoke("run", "--help")
    assert run.exit_code == 0
    for panel in ("User model inputs", "Multiview options", "Loading options", "Separable options",
                  "Process/TCP options"):
        assert panel in run.stdout, panel
    profile = invoke("profile", "--help")
    for panel in ("Layer-graph models", "Loading options", "Separable options"):
        assert panel in profile.stdout, panel


@pytest.mark.parametrize("name", FORMER)
def test_former_names_are_hidden_but_answer(name):
    assert invoke(name, "--help").exit_code == 0


# ----- the former names' notice ----------------------------------------------------------------

#: a bad input of each former name (refused before anything is read), and what replaces it
FORMER_CASES = [
    (["profile-loading", "resnet152", "-o", "{tmp}/x.json", "--threads", "0"], "profile"),
    (["profile-separable", "-o", "{tmp}/x.json", "--epochs", "0"], "profile sep_resnext"),
    (["run-loading", TOY, TOY, "--model", "resnet152", "--repeats", "0"], "run"),
    (["run-separable", TOY, TOY, "--repeats", "0"], "run"),
    (["run-tcp", TOY, TOY, "--model", "resnet50", "--samples", "0"], "run --transport tcp"),
    (["dnnp-solve", "{tmp}/missing.json"], "solve"),
    (["dnnp-eval", "{tmp}/missing.json", "{tmp}/missing.json"], "evaluate FILE PLACEMENT --json"),
]


@pytest.mark.parametrize("args, replacement", FORMER_CASES, ids=[c[0][0] for c in FORMER_CASES])
def test_a_former_name_says_what_replaces_it_on_a_terminal_only(tmp_path, args, replacement):
    args = [str(a).format(tmp=tmp_path) for a in args]
    command = [sys.executable, "-m", "splitopt", *args]
    piped = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    lines = [l for l in piped.stderr.splitlines() if l.strip()]
    assert piped.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), piped.stderr
    # the same command with a terminal as stderr: the notice, then the same error
    main, tty = pty.openpty()
    try:
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=tty, cwd=ROOT, timeout=120)
        os.close(tty)
        tty = -1
        out = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        if tty >= 0:
            os.close(tty)
        os.close(main)
    seen = [l for l in out.decode().replace("\r", "").splitlines() if l.strip()]
    assert proc.returncode == 2
    assert seen == [f"splitopt {args[0]}: use `splitopt {replacement}` (this name still works)", lines[0]], seen


# ----- options of another family: one line, before torch -------------------------------------

@pytest.fixture(scope="module")
def eyeriss_plan(tmp_path_factory):
    """A plan of the shipped ResNet-50 edge/cloud instance (everything on the cloud)."""
    from splitopt.api import load_instance
    from splitopt.api import plan_to_dict
    from splitopt.families.edge_cloud.plan import uniform_plan

    inst = load_instance(INSTANCES / "resnet50_eyeriss.json")
    path = tmp_path_factory.mktemp("plans") / "cloud.json"
    path.write_text(json.dumps(plan_to_dict(inst, uniform_plan(inst, []))))
    return path


@pytest.mark.parametrize("args, needle", [
    (["run", INSTANCES / "resnet50_eyeriss.json", "{plan}", "--model", "resnet50", "--cache", "cold"],
     "--cache: not an option of `splitopt run` on problem 'split_bits'"),
    (["run", INSTANCES / "resnet50_eyeriss.json", "{plan}", "--model", "resnet50", "--checkpoint", "{plan}"],
     "--checkpoint: not an option"),
    (["run", INSTANCES / "resnet50_eyeriss.json", "{plan}"], "--model: needed by `splitopt run` on problem"),
    (["run", INSTANCES / "jmsnas_mesh_googlenet.json", "{plan}", "--transport", "tcp", "-m", "googlenet"],
     "--transport tcp: problem 'mesh' is not supported"),
    (["profile", TINY.as_posix() + ":build", "-o", "{tmp}/x.json", "--threads", "2"],
     "--threads: not an option of `splitopt profile"),
    (["profile", "resnet152", "-o", "{tmp}/x.json", "--threads", "2", "--preset", "pi4,v100"],
     "--preset: not an option of `splitopt profile resnet152`"),
    (["profile", "sep_resnext", "-o", "{tmp}/x.json", "--cache", "cold"], "--cache: not an option"),
    (["profile", "resnet152", "-o", "{tmp}/x.json"], "--threads: needed by `splitopt profile resnet152`"),
    (["profile", "resnet152", "-o", "{tmp}/x.json", "--family", "separable"], "unknown model 'resnet152'"),
    (["profile", "resnet50", "-o", "{tmp}/x.json", "--family", "maxload"], "--family maxload: no profiler"),
    (["profile", "resnet50", "-o", "{tmp}/x.json", "--family", "nosuch"], "--family nosuch: unknown family"),
    (["profile", "resnet50", "-o", "{tmp}/x.json", "--family", "mesh", "--topology", "chain"],
     "--family mesh: its topology is mesh, not --topology chain"),
])
def test_an_option_the_family_does_not_take_is_one_line_before_torch(tmp_path, eyeriss_plan, args, needle):
    proc, lines, torch_imported = tracked(*[str(a).format(tmp=tmp_path, plan=eyeriss_plan) for a in args])
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and needle in lines[0], lines
    assert not torch_imported


def test_a_family_without_a_torch_side_is_one_line():
    root = ROOT.parent / "shared" / "peer-instances" / "dnn-partitioning"
    peer = root / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    if not peer.exists():
        pytest.skip("peer instances not beside the checkout")
    proc, lines, _ = tracked("run", peer, root / "human-experts" / "bert24_inference_expert.json", "--model", "x")
    assert proc.returncode == 2 and len(lines) == 1
    assert "problem 'maxload'" in lines[0], lines


# ----- the library: options, sides, lookups -------------------------------------------------------

def test_build_options_names_an_unknown_or_missing_option():
    from splitopt.torch.layer_graph import ModelRunOptions
    from splitopt.torch.side import build_options

    assert build_options(ModelRunOptions, {"model": "resnet50", "samples": 3}, "x").samples == 3
    with pytest.raises(InvalidOption, match=r"--fine-tune: not an option of run here \(its options: --model, --seed"):
        build_options(ModelRunOptions, {"model": "resnet50", "fine_tune": 2}, "run here")
    with pytest.raises(InvalidOption, match="--model: needed by run here"):
        build_options(ModelRunOptions, {}, "run here")
    with pytest.raises(InvalidOption, match=r"--samples: must be an integer in \[1, 100000\], got 0"):
        build_options(ModelRunOptions, {"model": "resnet50", "samples": 0}, "run here")


def test_every_familys_side_is_found_through_the_registry():
    from splitopt.api import load_instance
    from splitopt.families.registry import family_of
    from splitopt.torch.side import side_of, side_of_verb, torch_side

    for name, family in [("resnet50_eyeriss", "edge_cloud"), ("jmsnas_chain_resnet50", "chain"),
                         ("jmsnas_mesh_googlenet", "mesh"), ("digits_cnn_widths", "multiview"),
                         ("loading_mobilenet_v1_host", "loading"), ("separable_digits_pi", "separable")]:
        inst = load_instance(INSTANCES / f"{name}.json")
        side = side_of(inst, "run")
        assert side.family == family == family_of(inst).name and side is torch_side(family_of(inst))
    assert side_of_verb("run-loading").family == "loading" and side_of_verb("profile-separable").family == "separable"


def test_partition_finds_the_side_by_the_plan_type_without_an_instance():
    from splitopt.core.plan import Plan
    from splitopt.families.mesh.plan import MeshPlan
    from splitopt.families.multiview.plan import MultiviewPlan
    from splitopt.torch.side import partition_side

    assert not partition_side(Plan({"a": "x"}, {}, {})).staged
    assert partition_side(MeshPlan({"a": "x"})).staged
    with pytest.raises(NotApplicable, match="problem 'multiview' is not supported by partition"):
        partition_side(MultiviewPlan.__new__(MultiviewPlan))


def test_the_loading_side_checks_the_instance_it_runs_without_torch():
    from splitopt.api import load_instance
    from splitopt.torch.side import side_of_verb

    side = side_of_verb("run-loading")
    inst = load_instance(INSTANCES / "loading_mobilenet_v1_host.json")
    side.check_run(inst, side.run_options(model="mobilenet_v1"), "where.json")
    with pytest.raises(InvalidOption, match="instance 'loading_mobilenet_v1_host' was profiled from 'mobilenet_v1'"):
        side.check_run(inst, side.run_options(model="resnet152"), "where.json")
    with pytest.raises(NotApplicable, match="where.json: problem 'split_bits' is not a loading instance"):
        side.check_family(load_instance(INSTANCES / "resnet50_eyeriss.json"), "where.json")
    with pytest.raises(InvalidOption, match="--workdir"):
        side.run_options(model="mobilenet_v1", workdir=TOY)


def test_the_separable_side_refuses_the_ring_plan():
    from splitopt.api import load_instance, plan_from_dict
    from splitopt.torch.side import side_of_verb

    side = side_of_verb("run-separable")
    inst = load_instance(INSTANCES / "separable_digits_pi.json")
    ring = plan_from_dict(inst, {"format": "splitopt-separable-plan/1", "ring_allreduce": True})
    with pytest.raises(NotApplicable, match="p.json: a ring all-reduce plan is the unseparated model"):
        side.check_run_plan(inst, ring, side.run_options(), "p.json")


def test_topologies_come_from_the_families():
    from splitopt.families.topologies import default_topology, topology_family, topology_names

    assert topology_names() == ["edge-cloud", "chain", "mesh"]
    assert [default_topology(n) for n in (2, 3, 5)] == ["edge-cloud", "chain", "chain"]
    assert topology_family("mesh").name == "mesh"
    with pytest.raises(InvalidOption, match="topology 'ring': must be one of edge-cloud, chain, mesh"):
        topology_family("ring")


# ----- every family through `run` and `profile` ------------------------------------------------

torch_only = pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None, reason="needs torch")


@pytest.fixture(scope="module")
def tiny_chain(tmp_path_factory):
    """The small CNN profiled onto three device presets (a chain) and a plan over them."""
    d = tmp_path_factory.mktemp("chain")
    spec = f"{TINY}:build"
    inst_path = d / "chain.json"
    res = invoke("profile", spec, "-o", inst_path, "--preset", "pi4,jetson,v100", "--calibration-images", "2")
    assert res.exit_code == 0, res.output
    from splitopt.api import load_instance, plan_to_dict
    from splitopt.solve import solve

    inst = load_instance(inst_path)
    plan_path = d / "plan.json"
    plan_path.write_text(json.dumps(plan_to_dict(inst, solve(inst, "cpsat", time_limit=30).plan)))
    return {"spec": spec, "inst": inst_path, "plan": plan_path}


@torch_only
@pytest.mark.torch
def test_run_a_chain_plan_in_one_process_and_over_tcp(tiny_chain):
    res = invoke("run", tiny_chain["inst"], tiny_chain["plan"], "--model", tiny_chain["spec"], "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] and report["kind"] == "sequential" and [p["device"] for p in report["parts"]] == [
        "pi4", "jetson", "v100"]
    res = invoke("run", tiny_chain["inst"], tiny_chain["plan"], "--model", tiny_chain["spec"], "--transport", "tcp",
                 "--samples", "1", "--warmup", "0", "--threads", "1", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] and report["devices"] == ["pi4", "jetson", "v100"] and report["bytes_match"]


@torch_only
@pytest.mark.torch
@pytest.mark.slow
def test_profile_and_run_a_block_model(tmp_path):
    inst_path = tmp_path / "m.json"
    res = invoke("profile", "mobilenet_v1", "-o", inst_path, "--threads", "2", "--width", "0.0625", "--depth", "0.2",
                 "--image-size", "32", "--repeats", "1", "--children-max", "3")
    assert res.exit_code == 0, res.output
    assert "blocks" in res.stdout
    from splitopt.api import load_instance, plan_to_dict
    from splitopt.solve import solve

    inst = load_instance(inst_path)
    assert inst.problem == "loading"
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan_to_dict(inst, solve(inst, "cpsat", time_limit=20).plan)))
    res = invoke("run", inst_path, plan_path, "--model", "mobilenet_v1", "--repeats", "1", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ok"]
    # an option of a layer-graph run is not a loading run's
    one_line(invoke("run", inst_path, plan_path, "--model", "mobilenet_v1", "--samples", "2"), 2,
             "--samples: not an option of `splitopt run` on problem 'loading'")


@torch_only
@pytest.mark.torch
@pytest.mark.slow
def test_profile_and_run_the_separable_network(tmp_path):
    from splitopt.torch.separable.model import SepConfig, build_model
    from splitopt.torch.separable.nas import save_models

    checkpoint = tmp_path / "sep.pt"
    save_models(checkpoint, build_model(SepConfig(), seed=0))
    inst_path = tmp_path / "sep.json"
    res = invoke("profile", "sep_resnext", "-o", inst_path, "--load", checkpoint, "--devices", "analytic",
                 "--bandwidth-mbps", "100", "--samples", "1")
    assert res.exit_code == 0, res.output
    assert "G = 4" in res.stdout
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps({"format": "splitopt-separable-plan/1", "steps": [
        {"send_to": [1, 0, 3, 2], "level": 8, "dtype": "float32"}] * 3}))
    res = invoke("run", inst_path, plan_path, "--checkpoint", checkpoint, "--repeats", "1", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] and report["bytes_equal"] and report["plan"] == str(plan_path)


@torch_only
@pytest.mark.torch
def test_the_library_profiles_runs_and_exports_without_the_command_line(tmp_path):
    """What the commands print comes from functions that return data: the profile of a
    model (the instance the command writes), a side's run report, the export report."""
    from splitopt.api import load_instance
    from splitopt.core.instance_io import instance_json
    from splitopt.families.edge_cloud.plan import uniform_plan
    from splitopt.torch.export_parts import export_plan
    from splitopt.torch.profile_model import LayerGraphProfileOptions, profile_model
    from splitopt.torch.side import side_of

    spec = f"{TINY}:build"
    profiled = profile_model(spec, LayerGraphProfileOptions(preset="pi4,v100", calibration_images=2))
    inst = profiled.instance
    assert inst.problem == "split_bits" and profiled.summary.startswith("4 layers")
    assert inst.settings.error_budget is not None  # the family completed it: the W8A8 error
    path = tmp_path / "inst.json"
    path.write_text(instance_json(inst))
    inst = load_instance(path)
    plan = uniform_plan(inst, ["conv1"], bits=8)
    side = side_of(inst, "run")
    report = side.run(inst, plan, side.run_options(model=spec, samples=1))
    assert report["ok"] and report["bytes_match"] and report["instance"] == inst.name
    assert [c["source"] for c in report["crossings"]] == ["pi4"]
    exported = export_plan(inst, plan, model=spec, fmt="pt2", directory=tmp_path / "parts", samples=1)
    assert exported["ok"] and exported["bytes_match"] and len(exported["parts"]) == 2
    assert (tmp_path / "parts" / "manifest.json").exists()
