"""How the generic backends emit and run a ``LinearProgram``: a 0/1 variable whose bounds
are not [0, 1] keeps them (PuLP's LpBinary resets bounds to [0, 1]; a Boolean CP-SAT
variable has none), and HiGHS still solves after something else in the process fixed
its thread count."""

from __future__ import annotations

import subprocess
import sys

import pytest

from splitopt.backends.milp import to_pulp
from splitopt.backends.registry import get_backend
from splitopt.core.options import SolveOptions
from splitopt.core.program import LinearProgram, Program
from splitopt.core.result import Status


def _fixed_binaries() -> LinearProgram:
    """min -a - b - c with a, b, c binary, ``a`` fixed to 0 and ``c`` to 1 by their bounds
    (as symmetry breaking fixes a variable): optimum -2 at (0, 1, 1)."""
    lp = LinearProgram()
    a = lp.var("a", ub=0.0)
    b = lp.var("b")
    c = lp.var("c", lb=1.0)
    never = lp.var("never", binary=False, lb=0.0, ub=0.0)  # a continuous 0/1 variable fixed to 0
    for i in (a, b, c):
        lp.add_objective(i, -1.0)
    lp.add({b: 1.0, never: 1.0}, "<=", 1.0, name="b_or_never")
    lp.add_objective(never, -5.0)
    return lp


def test_pulp_keeps_the_bounds_of_a_fixed_binary():
    prob, xs = to_pulp(_fixed_binaries())
    assert [(x.lowBound, x.upBound) for x in xs[:3]] == [(0.0, 0.0), (0.0, 1.0), (1.0, 1.0)]
    assert xs[0].cat == "Integer" and xs[1].cat == "Integer"  # LpBinary is an Integer in [0, 1]


@pytest.mark.parametrize("solver", ["milp-cbc", "milp-highs", "cpsat"])
def test_every_backend_keeps_the_bounds_of_a_fixed_binary(solver):
    lp = _fixed_binaries()
    out = get_backend(solver).run(Program(kind="linear", model=lp, decode=lambda values: None), SolveOptions())
    assert out.status is Status.OPTIMAL, out.message
    assert [round(v) for v in out.values] == [0, 1, 1, 0]
    assert out.objective == pytest.approx(-2.0)


def test_highs_after_another_thread_count_in_the_process():
    # HiGHS fixes its thread count at the first solve of a process; milp-highs must still
    # solve (not stop with "Not Set" and fall back) after a solve with another count. In a
    # subprocess: the first solve here would fix the count of this test process.
    code = (
        "import pulp\n"
        "from splitopt.core.program import LinearProgram, Program\n"
        "from splitopt.core.options import SolveOptions\n"
        "from splitopt.backends.registry import get_backend\n"
        "p = pulp.LpProblem('t', pulp.LpMinimize); a = pulp.LpVariable('a', 0, 1, cat='Integer')\n"
        "p += a; p += a >= 0.5; p.solve(pulp.HiGHS(msg=False, threads=1))\n"
        "lp = LinearProgram(); x = lp.var('x'); y = lp.var('y'); lp.add({x: 1.0, y: 1.0}, '>=', 1.0)\n"
        "lp.add_objective(x, 3.0); lp.add_objective(y, 2.0)\n"
        "out = get_backend('milp-highs').run(Program(kind='linear', model=lp, decode=lambda v: None),"
        " SolveOptions(threads=2))\n"
        "print(out.status.value, out.objective, out.message)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # (HiGHS through PuLP answered "Not Set" here and splitopt ran again without the option;
    # the direct highspy model solves at once)
    assert proc.stdout.startswith("OPTIMAL 2.0 HiGHS: optimal"), proc.stdout
