"""``milp-cbc``: CBC 2.10.3, the binary PuLP bundles, as a child process.

PuLP writes the program as MPS and reads CBC's solution file back; splitopt runs the
binary itself (``splitopt.backends.deadline.run_child``) rather than through
``PULP_CBC_CMD``, which waits on the child without a deadline and leaves it running on
Ctrl-C (both seen: runs of 2-30x the limit, and a ``cbc`` process alive after splitopt
exited). CBC's ``-sec`` limit counts wall-clock time (``-timeMode elapsed``); at the
deadline or on Ctrl-C CBC gets SIGINT, which stops its branch and bound with the
incumbent written out; a CBC still in its root LP or preprocessing (where SIGINT does
nothing) is killed after the grace period and the family's start plan is returned.

Threads: one (``-threads 1``), whatever ``--threads`` says. CBC 2.10.3's repeatable
parallel mode (``-threads 100+n``) crashed with SIGSEGV on ``googlenet_eyeriss`` (3 runs of
3, the same MPS file solves single-threaded in 1.2 s) and its other parallel mode does
not give the same plan for the same run, which splitopt promises.

The solver's own options (``--option cuts=off``, ``strategy=2``, ``heuristics=off``, ...)
are CBC's parameters, checked by name against the binary's own parameter list and by
value by the binary itself before the instance is read; those splitopt sets, those that
change what OPTIMAL or INFEASIBLE mean (tolerances, cutoff, increment) and actions are
refused.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import warnings
from functools import lru_cache
from typing import Any, Callable, Mapping

from splitopt.backends.deadline import check_deadline, run_child
from splitopt.backends.milp import (
    LogTail,
    MilpAnswer,
    MilpBackend,
    read_text,
    remaining_budget,
    solver_option_value,
    to_pulp,
)
from splitopt.core.errors import InvalidOption, SolverFailure
from splitopt.core.jsonfile import cut, shown
from splitopt.core.options import SolveOptions
from splitopt.core.program import LinearProgram
from splitopt.core.result import Status

#: CBC parameters splitopt sets itself, and the option that sets them
RESERVED = {
    "seconds": "--time-limit", "threads": "--threads", "timeMode": "--time-limit (wall-clock)",
    "ratioGap": "the portable option mip_gap", "allowableGap": "the portable option mip_gap_abs",
    "randomSeed": "--seed", "randomCbcSeed": "--seed",
    "logLevel": "--verbose (splitopt reads CBC's log)", "slogLevel": "--verbose (splitopt reads CBC's log)",
    "messages": "--verbose (splitopt reads CBC's log)", "outputFormat": "--export-model",
    "printingOptions": "nothing: splitopt reads CBC's solution file",
}
#: CBC parameters refused because they change what a result means
FIXED = {
    **{name: "the programs state their tolerances at CBC's defaults"
       for name in ("dualTolerance", "primalTolerance", "integerTolerance", "preTolerance", "zeroTolerance")},
    "cutoff": "a cutoff makes CBC call a feasible instance infeasible",
    "increment": "splitopt sets it to 0; another increment makes CBC prune the optimum",
    "constraintfromCutoff": "a cutoff makes CBC call a feasible instance infeasible",
    "direction": "splitopt minimises latency",
    "forceSolution": "CBC's solution comes from its search",
    "allCommands": "not a solver setting", "errorsAllowed": "not a solver setting",
    "keepNames": "not a solver setting", "PrepNames": "not a solver setting",
}
#: categories of CBC's parameter list whose members take a value (the rest are actions)
PARAMETER_HEADERS = ("Double parameters", "Branch and Cut double parameters", "Integer parameters",
                     "Branch and Cut integer parameters", "Keyword parameters", "Branch and Cut keyword parameters")
#: what CBC prints when it refuses a parameter or a value (it still exits 0)
REFUSALS = re.compile(r"No match for|Possible options for|valid range is|is illegal|[Aa]mbiguous")


def pulp_cbc():
    """PuLP's command object for its bundled CBC (its binary path and solution reader)."""
    import pulp

    with warnings.catch_warnings():
        # PuLP 3.3 announces that PULP_CBC_CMD (the bundled CBC) leaves in 4.0; pinned < 4
        warnings.simplefilter("ignore", DeprecationWarning)
        return pulp.PULP_CBC_CMD(msg=False)


def cbc_path() -> str:
    """The CBC binary PuLP bundles (SolverFailure if PuLP ships none for this platform)."""
    path = pulp_cbc().path
    if not (path and os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SolverFailure(f"milp-cbc: PuLP's bundled CBC binary is missing or not executable ({path})")
    return path


@lru_cache(maxsize=None)
def cbc_parameters() -> dict[str, tuple[str, int]]:
    """CBC's parameters that take a value, from the binary's own list (``cbc -? -quit``):
    lower-cased full name -> (full name, length of its shortest accepted abbreviation).
    The list prints ``dualT(olerance)``: ``dualT`` is the abbreviation."""
    text = subprocess.run([cbc_path(), "-?", "-quit"], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL).stdout
    out: dict[str, tuple[str, int]] = {}
    taking = False
    for line in text.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            taking = line[:-1].strip() in PARAMETER_HEADERS
            continue
        if taking and line.startswith(" "):
            for token in line.split():
                m = re.fullmatch(r"([A-Za-z0-9]+)(?:\(([A-Za-z0-9]+)\))?", token)
                if m:
                    full = m.group(1) + (m.group(2) or "")
                    out[full.lower()] = (full, len(m.group(1)))
    if not out:
        raise SolverFailure("milp-cbc: could not read CBC's parameter list")
    return out


def _refused(name: str, full: str) -> None:
    for table, what in ((RESERVED, "set it with {}, not as a solver option"), (FIXED, "not settable ({})")):
        reason = next((r for k, r in table.items() if k.lower() == full.lower()), None)
        if reason is not None:
            raise InvalidOption(f"option '{name}': {what.format(reason)}")


def cbc_parameter(name: str) -> str:
    """The full name of CBC parameter ``name`` (the full name or CBC's abbreviation, any
    case); InvalidOption for an unknown, reserved or refused one."""
    key = name.lower()
    _refused(name, name)  # also those CBC's list leaves out (threads)
    params = cbc_parameters()
    matches = [full for lower, (full, short) in params.items() if lower == key or (lower.startswith(key) and len(key) >= short)]
    full = next((p[0] for lower, p in params.items() if lower == key), matches[0] if len(matches) == 1 else None)
    if full is None:
        raise InvalidOption(f"option '{cut(name)}': not a CBC parameter that takes a value (see `cbc -?`; portable: "
                            f"mip_gap, mip_gap_abs)")
    _refused(name, full)
    return full


def parse_cbc_log(text: str) -> dict:
    """What CBC's log ``text`` reports: ``result`` (the "Result - ..." line), and where
    printed ``objective`` and ``bound`` (the objective's units, without its constant;
    floats). A log cut short (CBC killed) has no summary: the bound is then the last one
    CBC printed during its search ("best possible"), else the root LP relaxation's value
    ("Continuous objective value is"), each a valid lower bound."""
    out: dict = {}
    m = re.search(r"Result - (.+)", text)
    if m:
        out["result"] = m.group(1).strip()
    for key, pattern in (("objective", r"Objective value:\s+(\S+)"), ("bound", r"Lower bound:\s+(\S+)")):
        m = re.search(pattern, text)
        if m:
            try:
                out[key] = float(m.group(1))
            except ValueError:
                pass
    if "bound" not in out:
        for pattern in (r"best possible (\S+)", r"Continuous objective value is (\S+)"):
            found = re.findall(pattern, text)
            if found:
                try:
                    out["bound"] = float(found[-1])
                    break
                except ValueError:
                    pass
    return out


#: CBC's log lines that report an incumbent and/or a bound while it runs (its
#: "Continuous objective value" is the root LP relaxation, a valid bound)
CBC_PROGRESS = (
    (re.compile(r"Cbc00(?:04|12)I Integer solution of (\S+)"), "incumbent"),
    (re.compile(r"Cbc0010I .*?(\S+) best solution, best possible (\S+)"), "both"),
    (re.compile(r"Cbc0005I Partial search - best objective (\S+) \(best possible (\S+)\)"), "both"),
    (re.compile(r"Cbc0013I At root node, .* to (\S+) in"), "bound"),
    (re.compile(r"Continuous objective value is (\S+)"), "bound"),
)


def progress_in_cbc_line(line: str) -> tuple[float | None, float | None] | None:
    """(incumbent, bound) a line of CBC's log reports (the objective's units, without its
    constant), or None."""
    for pattern, what in CBC_PROGRESS:
        m = pattern.search(line)
        if not m:
            continue
        try:
            values = [float(g) for g in m.groups()]
        except ValueError:
            return None
        if what == "both":
            return values[0], values[1]
        return (values[0], None) if what == "incumbent" else (None, values[0])
    return None


class CbcBackend(MilpBackend):
    name = "milp-cbc"
    description = "MILP, PuLP + CBC 2.10 (bundled with PuLP), a child process under the deadline"
    requires = ("pulp",)
    install_hint = "pip install 'pulp<4'"

    def check_native_options(self, options: Mapping[str, Any]) -> None:
        """Names against CBC's parameter list, then the values by the binary itself (it
        prints a refusal and exits 0 for a bad one)."""
        args = [cbc_path()]
        for key, value in options.items():
            if not isinstance(value, (bool, int, float, str)) or (isinstance(value, str) and not value.strip()):
                raise InvalidOption(f"option '{key}': a CBC parameter takes a number or a word, got {shown(value)}")
            text = solver_option_value(value)
            if text.startswith("-") and not re.fullmatch(r"-[0-9.eE+-]+", text) or any(c.isspace() for c in text):
                raise InvalidOption(f"option '{key}': {shown(value)} is not a value CBC takes")
            args += [f"-{cbc_parameter(key)}", text]
        out = subprocess.run(args + ["-quit"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout
        for line in out.splitlines():
            if REFUSALS.search(line):
                raise InvalidOption(f"option {', '.join(options)}: CBC refuses it: {cut(' '.join(line.split()), 160)}")

    log_includes_constant = False  # PuLP's MPS file leaves the objective's constant out

    def progress_in_line(self, line: str) -> tuple[float | None, float | None] | None:
        return progress_in_cbc_line(line)

    def _solve(self, lp: LinearProgram, options: SolveOptions,
               on_line: Callable[[str], None] | None = None) -> MilpAnswer:
        import pulp

        native = {k: v for k, v in options.solver_options.items() if k not in ("mip_gap", "mip_gap_abs")}
        prob, xs = to_pulp(lp, "splitopt", options)
        with tempfile.TemporaryDirectory(prefix="splitopt-cbc-") as tmp:
            mps, sol, log = (os.path.join(tmp, f) for f in ("model.mps", "model.sol", "cbc.log"))
            vs, var_names, row_names, _ = prob.writeMPS(mps, rename=1)
            check_deadline(options)
            budget = remaining_budget(options)
            # line-buffered output (coreutils' stdbuf, where there is one): a CBC killed in
            # its root still leaves its LP bound in the log, and --verbose streams as it runs
            stdbuf = shutil.which("stdbuf")
            args = ([stdbuf, "-oL"] if stdbuf else []) + [cbc_path(), mps, "-timeMode", "elapsed"]
            if budget is not None:
                args += ["-sec", f"{budget:.3f}"]
            args += ["-threads", "1"]  # see the module docstring
            # an explicit cutoff increment of 0: left unset, CBC chose its own and stopped at
            # 2.176014 where the optimum is 2.176007 (a multiview program whose root LP was
            # the optimum), reporting OPTIMAL with that bound
            args += ["-increment", "0"]
            args += ["-ratioGap", repr(float(options.solver_options.get("mip_gap", 0.0)))]
            if options.solver_options.get("mip_gap_abs") is not None:
                args += ["-allowableGap", repr(float(options.solver_options["mip_gap_abs"]))]
            for key, value in native.items():
                args += [f"-{cbc_parameter(key)}", solver_option_value(value)]
            # "normal" prints the nonzero columns only (the rest are 0): "all" printed every
            # row too, and writing 9 MB took CBC 0.4 s after a stop on a 50,000-row program
            args += ["-solve", "-printingOptions", "normal", "-solution", sol]
            with LogTail(log, options.verbose, on_line):
                child = run_child(args, log, options)
            text = read_text(log)
            solution = None
            if not child.killed and os.path.exists(sol) and os.path.getsize(sol) > 0:
                reader = pulp_cbc()
                status_code, values, _, _, _, sol_status = reader.readsol_MPS(sol, prob, vs, var_names, row_names)
                solution = (status_code, sol_status, values)
        info = parse_cbc_log(text)
        result = re.sub(r"(?i)user ctrl-c.*", "stopped by Ctrl-C", info.get("result", ""))
        stats = {"cbc_result": result, "cbc_returncode": child.returncode, "cbc_wall_s": child.elapsed_s}
        if child.interrupted:
            stats["ctrl_c"] = True  # the user's Ctrl-C, not the deadline (what auto needs to know)
        asked = "interrupted (Ctrl-C)" if child.interrupted else "stopped at the deadline" if child.stopped else ""
        if child.killed:
            return MilpAnswer(Status.NO_SOLUTION_FOUND, bound=info.get("bound"), message=f"CBC: {asked}; it did "
                              f"not stop within the grace period and was killed", interrupted=True, stats=stats)
        if solution is None:
            if asked:
                return MilpAnswer(Status.NO_SOLUTION_FOUND, message=f"CBC: {asked} before any plan",
                                  interrupted=True, stats=stats)
            how = (f"crashed ({signal.Signals(-child.returncode).name})" if child.returncode < 0
                   else f"failed (exit {child.returncode})")
            given = f" with the options {', '.join(f'{k}={v}' for k, v in native.items())}" if native else ""
            return MilpAnswer(Status.ERROR, message=f"CBC {how}{given}: {cut(' '.join(text.split()[-30:]), 200)}",
                              stats=stats)
        status_code, sol_status, values = solution
        # a variable in no row and not in the objective is not in the MPS file: its bounds decide
        xs_values = [float(values[x.name]) if values.get(x.name) is not None else min(max(0.0, v.lb), v.ub)
                     for x, v in zip(xs, lp.variables)]
        # every variable is bounded, so CBC's "infeasible or unbounded" means infeasible;
        # but a time limit or an interrupt can cut CBC's preprocessing short and make it
        # say so wrongly (seen: a 300-layer instance with a feasible plan, limit 0.1 s)
        claims_infeasible = (sol_status == pulp.LpSolutionInfeasible or "infeasible" in result.lower()
                             or (status_code == pulp.LpStatusInfeasible and "infeasible" in text.lower()))
        limited = bool(asked) or (budget is not None and child.elapsed_s >= 0.5 * budget)
        if claims_infeasible and limited:
            return MilpAnswer(Status.NO_SOLUTION_FOUND, message="CBC: stopped by the time limit or an interrupt "
                              "(an infeasibility claim from an interrupted run is not trusted)", interrupted=True,
                              stats=stats)
        if claims_infeasible:
            return MilpAnswer(Status.INFEASIBLE, message="CBC: infeasible", stats=stats)
        stopped = bool(asked) or any(w in result.lower() for w in ("time limit", "stopped", "ctrl-c"))
        if budget is not None and child.elapsed_s >= budget * 0.98:
            stopped = stopped or "optimal" not in result.lower()
        has_plan = sol_status in (pulp.LpSolutionIntegerFeasible, pulp.LpSolutionOptimal)
        if sol_status == pulp.LpSolutionOptimal and not stopped:
            # with a gap option "optimal" means within that gap: only the logged bound is proven
            gap_asked = any(options.solver_options.get(k) for k in ("mip_gap", "mip_gap_abs"))
            bound = info.get("bound") if gap_asked else info.get("objective")
            message = f"CBC: {result or 'optimal'}" if gap_asked else "CBC: optimal"
            return MilpAnswer(Status.OPTIMAL, xs_values, bound, info.get("objective"), message, stats=stats)
        note = f"; {asked}" if asked else ""
        if has_plan:
            return MilpAnswer(Status.FEASIBLE, xs_values, info.get("bound"), info.get("objective"),
                              f"CBC: {result or 'stopped'}{note}", interrupted=stopped, stats=stats)
        return MilpAnswer(Status.NO_SOLUTION_FOUND, bound=info.get("bound"),
                          message=f"CBC: no plan found ({result or pulp.LpStatus[status_code]}){note}",
                          interrupted=stopped, stats=stats)

