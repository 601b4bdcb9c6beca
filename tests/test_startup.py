"""Start-up: what a command loads, and that what is deferred still works when used.

``benchmarks/startup.py`` measures the times; here are the properties they rest on,
none of them a time:

* ``splitopt solve`` of an edge/cloud instance (the default ``auto``, CP-SAT) through the
  entry point loads neither pandas nor networkx nor another family than the instance's,
  and answers OPTIMAL; ``splitopt --help`` loads none of markdown-it, pygments, attrs or
  ``splitopt.api``;
* in the command line's process, OR-Tools' ``cp_model`` gets pandas on first use
  (``splitopt.cli.deferred_imports``): its pandas-indexed functions work, ``import pandas``
  gives the real package, and the hook does nothing where pandas is imported already; the
  library never installs the hook (CP-SAT solved through ``splitopt.solve`` has the real
  pandas);
* ``import splitopt`` loads no reading code, yet an Instance built after importing
  ``splitopt.core.instance`` alone is checked;
* reading an instance checks it against its family's part of the schema first: a defect
  is worded as the whole schema words it.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from splitopt import api
from splitopt.core.errors import InvalidInstance
from splitopt.core.instance_io import check_schema
from splitopt.families.registry import FAMILIES

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "instances" / "resnet50_eyeriss.json"

#: run the CLI entry point, then print the loaded top-level packages and splitopt modules as JSON
ENTRY = """
import json, sys
sys.argv = ["splitopt", *sys.argv[1:]]
from splitopt.cli import main
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
loaded = sorted(m for m in sys.modules if sys.modules[m] is not None)
sys.stderr.write("LOADED " + json.dumps({"code": code, "modules": loaded}) + "\\n")
"""


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=dict(os.environ, COLUMNS="100"))


def entry_point(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """``splitopt ARGS`` through the entry point: the process and the modules it had loaded."""
    proc = run_python(ENTRY, *args)
    line = next((l for l in proc.stderr.splitlines() if l.startswith("LOADED ")), None)
    assert line is not None, proc.stderr[-2000:]
    report = json.loads(line[len("LOADED "):])
    assert report["code"] == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    return proc, set(report["modules"])


def packages(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_an_edge_cloud_solve_loads_no_pandas_networkx_or_other_family():
    proc, modules = entry_point("solve", str(RESNET))
    assert "Status   OPTIMAL" in proc.stdout
    assert "ortools.sat.python.cp_model" in modules  # CP-SAT answered: the deferral was in play
    assert not packages(modules) & {"pandas", "networkx", "torch", "jsonschema", "google"}
    families = {m.split(".")[2] for m in modules if m.startswith("splitopt.families.") and m.count(".") >= 3}
    assert families == {"edge_cloud"}, families


def test_help_loads_no_markdown_traceback_or_reading_code():
    proc, modules = entry_point("--help")
    assert "solve" in proc.stdout
    assert not packages(modules) & {"markdown_it", "pygments", "attr", "numpy", "pandas", "networkx", "ortools"}
    assert not {"rich.markdown", "rich.traceback", "splitopt.api", "splitopt.families.base"} & modules


def test_cp_model_in_the_command_lines_process_gets_pandas_on_first_use():
    proc = run_python("""
import sys
from splitopt.cli.deferred_imports import defer_unused_imports
defer_unused_imports()
from ortools.sat.python import cp_model
print("pandas loaded after cp_model:", "pandas" in sys.modules)
import pandas as pd
print("import pandas is the real one:", pd.__name__ == "pandas" and hasattr(pd, "DataFrame") and cp_model.pd is not pd)
model = cp_model.CpModel()
xs = model.new_int_var_series(name="x", index=pd.Index(range(3)), lower_bounds=0, upper_bounds=5)
model.add(xs.sum() == 7)
model.add(xs[0] >= 4)
model.maximize(xs[2])
solver = cp_model.CpSolver()
assert solver.solve(model) == cp_model.OPTIMAL
values = solver.values(xs)
print("values:", type(values).__name__, list(values))
print("isinstance through the stand-in:", isinstance(values, cp_model.pd.Series), isinstance(1, cp_model.pd.Series))
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "pandas loaded after cp_model: False",
        "import pandas is the real one: True",
        "values: Series [4, 0, 3]",
        "isinstance through the stand-in: True False",
    ]


def test_the_hook_leaves_modules_alone_where_the_package_is_imported_already():
    proc = run_python("""
import pandas
from splitopt.cli.deferred_imports import defer_unused_imports
defer_unused_imports()
from ortools.sat.python import cp_model
print(cp_model.pd is pandas)
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True"]


def test_typer_help_formatter_in_the_command_lines_process_gets_rich_markdown_on_use():
    proc = run_python("""
import sys
from splitopt.cli.deferred_imports import defer_unused_imports
defer_unused_imports()
import typer.rich_utils as ru
print("markdown loaded:", "rich.markdown" in sys.modules, "rich.traceback" in sys.modules)
md = ru.Markdown("*x*")
import rich.markdown, rich.traceback
print("real Markdown:", type(md) is rich.markdown.Markdown, isinstance(md, ru.Markdown))
print("class attribute:", ru.Traceback.from_exception == rich.traceback.Traceback.from_exception)
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["markdown loaded: False False", "real Markdown: True True",
                                        "class attribute: True"]


def test_the_library_never_installs_the_hook():
    proc = run_python("""
import sys
import splitopt
inst = splitopt.load_instance("tests/data/toy.json")
print(splitopt.solve(inst, solver="cpsat").status.value)
cp_model = sys.modules["ortools.sat.python.cp_model"]
print(cp_model.pd is sys.modules["pandas"], any("deferred" in type(f).__module__ for f in sys.meta_path))
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["OPTIMAL", "True", "False"]


def test_import_splitopt_loads_no_reading_code_and_a_built_instance_is_still_checked():
    proc = run_python("""
import sys
from splitopt.core.instance import Device, InputTensor, Instance, Layer, Link
from splitopt.families.edge_cloud.settings import EdgeCloudSettings
print("api loaded:", "splitopt.api" in sys.modules)
try:
    Instance(name="b", inputs=[InputTensor("x", (1, 3), 8)], layers=[Layer("a", "conv", ("zz",), 1e6, 1000, (1, 8))],
             devices=[Device("edge", 1e9, None, 0, 1e6, [8, 16]), Device("cloud", 1e12, None, 0, 1e9, (8, 16))],
             links=[Link("edge", "cloud", 1e6)], problem="split",
             settings=EdgeCloudSettings(edge="edge", cloud="cloud", edge_memory_bytes=1e6, error_budget=None,
                                        bit_widths=(8, 16)))
except Exception as e:
    print(type(e).__name__, str(e))
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "api loaded: False",
        "InvalidInstance instance.graph.layers[0].inputs: layer 'a' reads unknown tensor 'zz' (dangling edge)"]


def test_reading_an_instance_imports_its_family_alone():
    proc = run_python("""
import sys, splitopt
splitopt.load_instance("instances/resnet50_eyeriss.json")
print(sorted({m.split(".")[2] for m in sys.modules if m.startswith("splitopt.families.") and m.count(".") >= 3}))
""")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['edge_cloud']"]


def _defects() -> list[tuple[str, dict]]:
    base = json.loads(RESNET.read_text())

    def changed(edit) -> dict:
        data = copy.deepcopy(base)
        edit(data)
        return data

    return [
        ("objective of another family", changed(lambda d: d["settings"].update(objective="throughput"))),
        ("setting of another family", changed(lambda d: d["settings"].update(chain=["eyeriss", "tpu"]))),
        ("missing setting", changed(lambda d: d["settings"].pop("edge"))),
        ("bad bit-widths", changed(lambda d: d["settings"].update(bit_widths="eight"))),
        ("unknown problem", changed(lambda d: d["settings"].update(problem="spilt"))),
        ("problem of another family", changed(lambda d: d["settings"].update(problem="chain"))),
        ("problem not a string", changed(lambda d: d["settings"].update(problem=["split"]))),
        ("negative bandwidth", changed(lambda d: d["links"][0].update(bandwidth_bits_per_s=-1))),
        ("layer without a name", changed(lambda d: d["graph"]["layers"][0].pop("name"))),
    ]


@pytest.mark.parametrize("what,data", _defects(), ids=[w for w, _ in _defects()])
def test_a_defect_is_worded_as_the_whole_schema_words_it(what, data):
    with pytest.raises(InvalidInstance) as read:
        api.parse_instance(data)
    try:
        check_schema(data, api.instance_schema())
    except InvalidInstance as whole:
        assert str(read.value) == str(whole)
    else:  # the whole schema takes another family's objective: the objective check refuses it, as before
        assert what == "objective of another family"
        assert str(read.value) == ("instance.settings.objective: 'throughput' is not an objective of problem "
                                   "'split_bits' (objectives: latency)")


def test_every_family_is_found_by_its_problems():
    from splitopt.families.registry import family, family_for_problem

    for name in FAMILIES:
        for problem in family(name).problems:
            assert family_for_problem(problem).name == name
