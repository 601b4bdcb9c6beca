"""How the optimal split moves with one link's bandwidth: a sweep over log-spaced
bandwidths (:func:`bandwidth_sweep`, AUTO-SPLIT Table 8 style) and the exact
breakpoints (:func:`bandwidth_breakpoints`): the bandwidths at which the optimal plan
changes, each interval's plan proven optimal, as a table an edge runtime can look up.

The model
---------
Write ``x = 1 / bandwidth`` (seconds per bit). For the supported objectives a plan P's
objective is an **affine function of x**, ``f_P(x) = a_P + b_P x``:

* edge/cloud (``split``, ``split_bits``; the uplink): latency = edge compute + cloud
  compute + (if anything is sent) the link's fixed latency + 1000 * 8 * bytes / bandwidth
  (``splitopt.families.edge_cloud.evaluate``), so ``b_P = 1000 * bits sent`` (ms * bit/s)
  and ``a_P`` is the rest;
* chain, objective ``latency`` (JMSNAS Eq. 1, a sum of stage times; any link of the
  chain): the same with the bits the plan sends over that link.

Nothing else in a plan depends on the bandwidth: memory, error budgets and so the set of
feasible plans are the same at every bandwidth. ``a_P`` and ``b_P`` are never taken from
these formulas: they come from the family's evaluator, run on the plan at the two ends of
the range, and a third evaluation (at the geometric mean) checks that the plan's
objective is affine; a plan that is not is refused (NotApplicable).

Refused for ``--exact``: chain ``throughput`` (the bottleneck stage, a *max* of affine
functions of x per plan: the value function below is then not concave and bisection on
intersections can miss breakpoints), mesh (the makespan of a schedule is a max over
paths, likewise), multiview (bus schedules, and its links take their rate from a bus),
and the families without such links. The sweep (:func:`bandwidth_sweep`) only re-solves,
so it takes every problem whose link has its own bandwidth.

The exact parametric method
---------------------------
The optimum ``V(x) = min_P f_P(x)`` over the finitely many feasible plans is the lower
envelope of finitely many lines, so it is **concave and piecewise linear**; its
breakpoints are where the optimal plan changes. :func:`bandwidth_breakpoints` finds all
of them in ``[1/high, 1/low]`` by the classic recursive intersection method (Eisner and
Severance's method for parametric programs):

1. solve at both ends ``x_1 < x_2``; let ``L_1``, ``L_2`` be the lines of the optimal
   plans found there (from the evaluator);
2. on ``[x_l, x_r]`` with lines ``L_l`` (optimal at ``x_l``) and ``L_r`` (optimal at
   ``x_r``): if the lines are equal, the interval is done; else solve at their
   intersection ``x*``. If ``V(x*) = L_l(x*) = L_r(x*)`` (within the tolerance),
   ``x*`` is a breakpoint and the interval is done; otherwise the optimal plan at ``x*``
   is strictly better there: a new line ``L*``; recurse on ``[x_l, x*]`` with
   ``(L_l, L*)`` and on ``[x*, x_r]`` with ``(L*, L_r)``.

Proof sketch.

* *The intersection lies inside.* Optimality gives ``L_l(x_l) <= L_r(x_l)`` and
  ``L_r(x_r) <= L_l(x_r)``: ``L_l - L_r`` goes from ``<= 0`` to ``>= 0``, so either the
  lines are equal or ``b_l > b_r`` and they cross once in ``[x_l, x_r]``.
* *A finished interval is exact.* Every plan's line lies above ``V`` (``V`` is their
  minimum), and ``V`` is concave, so on ``[x_l, x_r]`` ``V`` lies above the chord of any
  points where it is known. Equal lines: the chord from ``(x_l, V(x_l))`` to
  ``(x_r, V(x_r))`` *is* ``L_l``, so ``L_l <= V <= L_l``: ``V = L_l`` on the interval,
  no breakpoint inside. Certified ``x*``: the chords from ``x_l`` to ``x*`` and from
  ``x*`` to ``x_r`` are ``L_l`` and ``L_r``, so ``V = min(L_l, L_r)`` on the
  interval: exactly one breakpoint, ``x*``, with ``P_l`` optimal left of it and ``P_r``
  right of it. The finished intervals tile ``[x_1, x_2]``, and on each ``V`` is known
  exactly, so every breakpoint of ``V`` is found: inside an interval (its ``x*``) or at
  a tile boundary where the two lines differ (reported as the boundary between adjacent
  intervals with different plans).
* *It terminates.* A plan optimal at ``x*`` has a line that touches ``V`` at ``x*``
  (a supporting line of the concave ``V``). A line that supports ``V`` at two points
  ``p < q`` equals ``V`` on ``[p, q]`` (chord argument again). A new line ``L*`` found
  at ``x*`` is strictly below ``L_l`` and ``L_r`` at ``x*``; every line found later in
  the left sub-interval is strictly below ``L*`` somewhere in it (so differs from
  ``L*``) and supports ``V`` only left of ``x*``, every line found in the right one only
  right of it (were one line found on both sides it would equal ``V`` on a neighbourhood
  of ``x*``, so equal ``L*``). So no line is discovered twice, and there are finitely
  many plans: at most ``m`` solves discover a line, where ``m`` is the number of distinct
  lines that support ``V`` (at most the number of plans), and the solves form a binary
  tree whose leaves are the certifying solves: at most ``2m + 1`` solves after the two
  at the ends.

In floating point and with solvers that prove optimality only to a tolerance, the
implementation uses each solve's proven **bound** ``beta(x) <= V(x)``: ``x*`` is
certified when the bound reaches ``min(L_l, L_r)(x*)`` within ``tol = rtol * |value| +
atol_ms``, and a new line is taken only when the plan found is better than that by more
than ``tol``. Each reported interval carries ``gap_ms``, the most by which its plan's
line exceeds the bound at the interval's two ends; because ``V`` is concave and the
plan's objective affine on the interval, the plan is within ``gap_ms`` of the optimum at
**every** bandwidth of the interval. An interval is ``proven`` only when every solve at
its ends ended OPTIMAL and ``gap_ms <= tol`` there; a solve that is not proven (time
limit), an undecided intersection (a bound too loose to certify, a plan not better by
more than the tolerance) or ``max_solves`` reached leave the interval unproven, never
claimed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from splitopt.core.errors import InvalidOption, NotApplicable
from splitopt.core.instance import Instance, Link, checked_elsewhere
from splitopt.core.result import SolveResult, Status
from splitopt.families.registry import families, family_of
from splitopt.solve import solve

#: the rates an instance may hold (``splitopt/core/ranges.py``, the schema's ``rate``)
MIN_BANDWIDTH, MAX_BANDWIDTH = 1.0, 1e21
#: relative tolerance of "equal" objectives (certifying a breakpoint, equal lines); above
#: the CP-SAT rounding (about 1.5e-7 relative on the shipped instances), below any
#: difference that matters to a runtime
DEFAULT_RTOL = 1e-6
#: absolute tolerance (ms) added to it
DEFAULT_ATOL_MS = 1e-9
#: the most solves :func:`bandwidth_breakpoints` runs (each interval it could not finish
#: within them is reported unproven)
DEFAULT_MAX_SOLVES = 200
#: relative tolerance of the affinity check of a plan's objective in 1/bandwidth
AFFINE_RTOL = 1e-9
#: the format tag of the breakpoint table's JSON
TABLE_FORMAT = "splitopt-bandwidth-breakpoints/1"
SWEEP_FORMAT = "splitopt-bandwidth-sweep/1"
#: the sweep table's key (and the printed tables' column) of which layers run where
PLAN_COLUMN = "split"  # not a family: the column of plan descriptions (which layers run where)


# ----- the link ------------------------------------------------------------------------

def parse_link(text: str, option: str = "--link") -> tuple[str, str]:
    """``"SRC->DST"`` -> ``("SRC", "DST")``; InvalidOption naming ``option`` otherwise."""
    source, sep, target = str(text).partition("->")
    if not sep or not source.strip() or not target.strip() or "->" in target:
        raise InvalidOption(f"{option} {text}: must be SOURCE->TARGET, e.g. {option} 'eyeriss->tpu'")
    return source.strip(), target.strip()


def _links_listing(inst: Instance) -> str:
    names = [f"{l.source}->{l.target}" for l in getattr(inst, "links", ())]
    if not names:
        return "none"
    return ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")


def resolve_link(inst: Any, link: str | tuple[str, str] | None, option: str = "--link") -> Link:
    """The instance's link named by ``link`` (``"SRC->DST"`` or a pair); None: the one
    link the problem's objective depends on when there is exactly one
    (``Family.bandwidth_links``: the uplink of an edge/cloud instance, the only link of a
    two-device chain). InvalidOption (one line, listing the links) when there is no such
    link, or None is ambiguous; NotApplicable for an instance without links of its own
    (peer files) or a link on a shared bus."""
    fam = family_of(inst)
    if not fam.core_instance:
        raise NotApplicable(f"{option}: problem '{inst.problem}' has no links with a bandwidth of their own")
    links = inst.links
    if link is None:
        used = fam.bandwidth_links(inst)
        if len(used) == 1:
            return used[0]
        raise InvalidOption(f"{option}: give the link to vary, SOURCE->TARGET; problem '{inst.problem}' has "
                            f"{len(links)} links: {_links_listing(inst)}")
    source, target = parse_link(link, option) if isinstance(link, str) else link
    found = inst.link_between.get((source, target))
    if found is None:
        raise InvalidOption(f"{option} {source}->{target}: no such link in instance '{inst.name}' (links: "
                            f"{_links_listing(inst)})")
    if found.bus is not None:
        raise NotApplicable(f"{option} {source}->{target}: the link is on bus '{found.bus}' and takes its rate "
                            "from the bus; vary the bus instead (--set buses[NAME].bandwidth_bits_per_s=...)")
    return found


def affine(inst: Any) -> bool:
    """Whether every plan's objective is an affine function of 1/bandwidth of the links
    the problem uses (its family's ``affine_objectives``)."""
    return inst.objective in family_of(inst).affine_objectives


def check_exact_applies(inst: Instance, link: Link, option: str = "--link") -> None:
    """NotApplicable (one line, saying why) unless the instance's objective is an affine
    function of 1/bandwidth of ``link`` for every plan (the module's docstring), and
    InvalidOption when the objective does not use ``link`` at all."""
    fam = family_of(inst)
    objective = inst.objective
    if not affine(inst):
        raise NotApplicable(f"--exact: problem '{inst.problem}' objective '{objective}': {fam.not_affine_reason(inst)}; "
                            f"exact breakpoints are defined for {_exact_listing()}; the sweep without --exact works")
    used = fam.bandwidth_links(inst)
    if all(l is not link for l in used):
        names = ", ".join(f"{l.source}->{l.target}" for l in used)
        raise InvalidOption(f"{option} {link.source}->{link.target}: problem '{inst.problem}' sends nothing over this "
                            f"link (it uses {names})")


def _exact_listing() -> str:
    return "; ".join(f"{', '.join(fam.problems)} objective {', '.join(fam.affine_objectives)}" for fam in families()
                     if fam.affine_objectives)


def plan_text(inst: Any, plan: Any, limit: int = 60) -> str:
    """Which layers run where, in one line of at most ``limit`` characters (and "..."):
    the family's description of the plan (``Family.describe_plan``)."""
    text = family_of(inst).describe_plan(inst, plan)
    return text[:limit] + ("..." if len(text) > limit else "")


def check_range(low: float, high: float, low_option: str = "--from", high_option: str = "--to") -> None:
    """InvalidOption (one line naming the option and value) unless
    ``1 <= low < high <= 1e21`` (bits/s, finite)."""
    for value, option in ((low, low_option), (high, high_option)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            shown = f"{value:g}" if isinstance(value, (int, float)) else repr(value)
            raise InvalidOption(f"{option} {shown}: a bandwidth must be a positive finite number of bits/s")
        if not MIN_BANDWIDTH <= value <= MAX_BANDWIDTH:
            raise InvalidOption(f"{option} {value:g}: a bandwidth must be in [{MIN_BANDWIDTH:g}, {MAX_BANDWIDTH:g}] "
                                "bits/s")
    if not low < high:
        raise InvalidOption(f"{low_option} {low:g}: must be below {high_option} {high:g}")


def with_bandwidth(inst: Instance, link: Link, bandwidth: float) -> Instance:
    """A copy of ``inst`` whose ``link`` has ``bandwidth`` bits/s (what ``--set
    'links[SRC->DST].bandwidth_bits_per_s=B'`` makes; the rest of the instance was checked
    already, and ``bandwidth`` must be in the rate range)."""
    key = (link.source, link.target)
    links = tuple(dataclasses.replace(l, bandwidth_bits_per_s=float(bandwidth)) if (l.source, l.target) == key
                  else l for l in inst.links)
    with checked_elsewhere():
        return dataclasses.replace(inst, links=links)


# ----- a plan's line ---------------------------------------------------------------------

@dataclass(frozen=True)
class Line:
    """A plan's objective as a function of the bandwidth B: ``a_ms + b / B`` ms, that is
    ``a_ms + b * x`` with ``x = 1/B``; ``b`` in ms * bit/s (1000 x the bits the plan
    sends over the link)."""

    a_ms: float
    b: float

    def at(self, x: float) -> float:
        """The objective at ``x = 1/bandwidth``."""
        return self.a_ms + self.b * x

    def at_bandwidth(self, bandwidth: float) -> float:
        return self.a_ms + self.b / bandwidth


def plan_line(inst: Instance, link: Link, plan: Any, low: float, high: float) -> Line:
    """The line of ``plan`` on ``[low, high]`` bits/s from the family's evaluator: its
    objective at ``high`` and ``low`` give ``a`` and ``b``, and at the geometric mean it
    must lie on that line (1e-9 relative), else NotApplicable (the objective is not
    affine in 1/bandwidth)."""
    fam = family_of(inst)

    def value(bandwidth: float) -> float:
        return float(fam.evaluate(with_bandwidth(inst, link, bandwidth), plan).objective_ms)

    x_lo, x_hi = 1.0 / high, 1.0 / low
    f_lo, f_hi = value(high), value(low)
    b = (f_hi - f_lo) / (x_hi - x_lo)
    line = Line(f_lo - b * x_lo, b)
    mid = math.sqrt(low * high)
    f_mid = value(mid)
    if abs(f_mid - line.at_bandwidth(mid)) > AFFINE_RTOL * max(abs(f_mid), abs(f_lo), abs(f_hi)) + 1e-12:
        raise NotApplicable(f"problem '{inst.problem}': a plan's objective is not affine in 1/bandwidth of "
                            f"{link.source}->{link.target} ({f_hi:.9g} ms at {low:g}, {f_mid:.9g} ms at {mid:g}, "
                            f"{f_lo:.9g} ms at {high:g} bits/s); exact breakpoints need it")
    return line


# ----- the sweep ---------------------------------------------------------------------------

def log_points(low: float, high: float, points: int) -> list[float]:
    """``points`` bandwidths from ``low`` to ``high``, log-spaced, both ends exact."""
    if points < 2:
        return [low]
    ratio = math.log(high / low)
    out = [low * math.exp(ratio * k / (points - 1)) for k in range(points)]
    out[0], out[-1] = low, high
    return out


@dataclass
class SweepPoint:
    """One bandwidth of a sweep and its solve; ``moved``: the plan differs from the
    previous point's."""

    bandwidth: float
    result: SolveResult
    moved: bool = False


def _solve_at(inst: Instance, link: Link, bandwidth: float, solver: str | None, time_limit: float | None,
              threads: int, seed: int, options: Any) -> SolveResult:
    return solve(with_bandwidth(inst, link, bandwidth), solver, time_limit, threads, seed, diagnose=False,
                 options=options)


def bandwidth_sweep(inst: Instance, link: str | tuple[str, str] | Link | None, low: float, high: float,
                    points: int = 12, solver: str | None = None, time_limit: float | None = None,
                    threads: int = 2, seed: int = 0, options: Any = None) -> list[SweepPoint]:
    """Solve ``inst`` at ``points`` log-spaced bandwidths of ``link`` from ``low`` to
    ``high`` bits/s (``link``: ``"SRC->DST"``, a pair, a Link, or None for the one link
    the problem uses, see :func:`resolve_link`). Each point is a fresh solve
    (``time_limit`` seconds each); ``moved`` marks where the plan changes. Proves
    nothing between the points: :func:`bandwidth_breakpoints` does."""
    check_range(low, high)
    if not 2 <= points <= 10_000:
        raise InvalidOption(f"--points: must be an integer in [2, 10000], got {points}")
    link = link if isinstance(link, Link) else resolve_link(inst, link)
    out: list[SweepPoint] = []
    for bandwidth in log_points(low, high, points):
        res = _solve_at(inst, link, bandwidth, solver, time_limit, threads, seed, options)
        prev = out[-1].result.plan if out else None
        moved = bool(out) and res.plan is not None and prev is not None and res.plan.key() != prev.key()
        out.append(SweepPoint(bandwidth, res, moved))
    return out


def sweep_table(inst: Instance, link: Link, sweep: Sequence[SweepPoint], low: float, high: float,
                solver: str | None) -> dict[str, Any]:
    """The JSON table of a sweep over ``[low, high]`` bits/s of ``link`` (``splitopt
    bandwidth -o``): metadata, and per point its bandwidth, the solve's status, objective,
    bound and gap, whether the plan moved, the bytes the plan sends over ``link`` (where
    the objective is affine in 1/bandwidth, else None), which layers run where
    (:func:`plan_text`, key :data:`PLAN_COLUMN`) and the plan."""
    fam = family_of(inst)
    sends = affine(inst)
    rows = []
    for p in sweep:
        res, plan = p.result, p.result.plan
        rows.append({"bandwidth": p.bandwidth, "status": res.status.value, "objective": res.objective,
                     "bound": res.bound, "gap": res.gap, "moved": p.moved,
                     "bytes_sent": plan_line(inst, link, plan, low, high).b / 8000.0 if sends and plan is not None
                     else None,
                     PLAN_COLUMN: None if plan is None else plan_text(inst, plan),
                     "plan": None if plan is None else fam.plan_to_dict(inst, plan)})
    return {"format": SWEEP_FORMAT, "instance": inst.name, "problem": inst.problem,
            "link": {"source": link.source, "target": link.target}, "bandwidth_unit": "bits/s",
            "objective_unit": fam.objective_unit(inst), "solver": solver or "auto", "points": rows}


# ----- exact breakpoints --------------------------------------------------------------------

@dataclass
class Probe:
    """One solve of the parametric method: at ``bandwidth`` (``x = 1/bandwidth``), its
    result, the line of its plan (None without a plan) and its proven lower bound on the
    optimum (-inf when the solve proved none)."""

    bandwidth: float
    x: float
    result: SolveResult
    line: Line | None
    bound: float

    @property
    def proven(self) -> bool:
        return self.result.status is Status.OPTIMAL


@dataclass
class Interval:
    """A bandwidth interval ``[bandwidth_from, bandwidth_to]`` (bits/s) and the plan used
    on it: its objective is ``line.a_ms + line.b / bandwidth`` there. ``gap_ms``: the most
    the plan can exceed the optimum anywhere in the interval (from the solves' bounds at
    its ends, see the module's docstring); ``proven``: every solve at the ends OPTIMAL and
    ``gap_ms`` within the tolerance."""

    bandwidth_from: float
    bandwidth_to: float
    plan: Any
    line: Line
    gap_ms: float
    proven: bool
    ends: tuple[Probe, Probe]

    @property
    def objective_at_ends(self) -> tuple[float, float]:
        """The plan's objective (ms) at ``bandwidth_from`` and at ``bandwidth_to``."""
        return self.line.at_bandwidth(self.bandwidth_from), self.line.at_bandwidth(self.bandwidth_to)


@dataclass
class BreakpointTable:
    """The result of :func:`bandwidth_breakpoints`: intervals by increasing bandwidth,
    adjacent ones with different plans; ``breakpoints``: the bandwidths between them."""

    instance: str
    problem: str
    link: tuple[str, str]
    low: float
    high: float
    solver: str
    rtol: float
    atol_ms: float
    intervals: list[Interval]
    probes: list[Probe]
    wall_s: float
    message: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def breakpoints(self) -> list[float]:
        return [iv.bandwidth_to for iv in self.intervals[:-1]]

    @property
    def proven(self) -> bool:
        """Every interval proven (and at least one)."""
        return bool(self.intervals) and all(iv.proven for iv in self.intervals)

    @property
    def solves(self) -> int:
        return len(self.probes)

    def lookup(self, bandwidth: float) -> Interval:
        """The interval holding ``bandwidth`` (the higher one at a breakpoint);
        ValueError outside ``[low, high]``."""
        if not self.low <= bandwidth <= self.high or not self.intervals:
            raise ValueError(f"bandwidth {bandwidth:g} is outside [{self.low:g}, {self.high:g}]")
        for iv in reversed(self.intervals):
            if bandwidth >= iv.bandwidth_from:
                return iv
        return self.intervals[0]

    def to_dict(self, inst: Any) -> dict[str, Any]:
        """The JSON table (``splitopt bandwidth --exact -o``): metadata and per interval
        its bandwidths, the plan (as ``splitopt.save_plan`` writes it), its objective at
        both ends and its line."""
        fam = family_of(inst)
        return {
            "format": TABLE_FORMAT,
            "instance": self.instance,
            "problem": self.problem,
            "link": {"source": self.link[0], "target": self.link[1]},
            "bandwidth_unit": "bits/s",
            "objective_unit": fam.objective_unit(inst),
            "range": {"bandwidth_from": self.low, "bandwidth_to": self.high},
            "solver": self.solver,
            "tolerance": {"rtol": self.rtol, "atol_ms": self.atol_ms},
            "proven": self.proven,
            "message": self.message,
            "notes": list(self.notes),
            "solves": self.solves,
            "wall_s": self.wall_s,
            "breakpoints": self.breakpoints,
            "intervals": [{
                "bandwidth_from": iv.bandwidth_from,
                "bandwidth_to": iv.bandwidth_to,
                "objective_at_ends": list(iv.objective_at_ends),
                "objective": {"a_ms": iv.line.a_ms, "b_ms_bits_per_s": iv.line.b,
                              "formula": "a_ms + b_ms_bits_per_s / bandwidth"},
                "bits_sent": iv.line.b / 1000.0,
                "gap_ms": iv.gap_ms if math.isfinite(iv.gap_ms) else None,
                "proven": iv.proven,
                "plan": fam.plan_to_dict(inst, iv.plan),
            } for iv in self.intervals],
            "probes": [{"bandwidth": p.bandwidth, "status": p.result.status.value, "objective": p.result.objective,
                        "bound": p.result.bound} for p in sorted(self.probes, key=lambda p: p.bandwidth)],
        }


def bandwidth_breakpoints(inst: Instance, link: str | tuple[str, str] | Link | None, low: float, high: float,
                          solver: str | None = None, time_limit: float | None = None, threads: int = 2,
                          seed: int = 0, rtol: float = DEFAULT_RTOL, atol_ms: float = DEFAULT_ATOL_MS,
                          max_solves: int = DEFAULT_MAX_SOLVES, options: Any = None) -> BreakpointTable:
    """The bandwidths in ``[low, high]`` (bits/s) of ``link`` at which the optimal plan of
    ``inst`` changes, and each interval's plan, by the exact parametric method of the
    module's docstring (each solve: ``solve(..., solver, time_limit)``, None: ``auto``).
    ``link`` as in :func:`bandwidth_sweep`. Raises NotApplicable where the objective is
    not affine in 1/bandwidth (throughput, mesh, multiview), InvalidOption for a bad
    range or link. A table without intervals (``message`` says why) when no plan was
    found at an end."""
    check_range(low, high)
    if not (math.isfinite(rtol) and 0 <= rtol < 1 and math.isfinite(atol_ms) and atol_ms >= 0):
        raise InvalidOption(f"tolerance: rtol must be in [0, 1) and atol_ms >= 0, got {rtol}, {atol_ms}")
    link = link if isinstance(link, Link) else resolve_link(inst, link)
    check_exact_applies(inst, link)
    started = time.perf_counter()
    probes: list[Probe] = []
    lines: dict[Any, Line] = {}
    notes: list[str] = []

    def tol(value: float) -> float:
        return rtol * abs(value) + atol_ms

    def probe(bandwidth: float) -> Probe:
        res = _solve_at(inst, link, bandwidth, solver, time_limit, threads, seed, options)
        line = None
        if res.status.has_plan and res.plan is not None:
            key = res.plan.key()
            if key not in lines:
                lines[key] = plan_line(inst, link, res.plan, low, high)
            line = lines[key]
        bound = res.bound if res.bound is not None else -math.inf
        if res.status is Status.OPTIMAL and res.objective is not None:
            bound = res.bound if res.bound is not None else res.objective
        p = Probe(bandwidth, 1.0 / bandwidth, res, line, bound)
        probes.append(p)
        return p

    right, left = probe(low), probe(high)  # x = 1/bandwidth: ``left`` has the smaller x
    table = BreakpointTable(inst.name, inst.problem, (link.source, link.target), low, high, solver or "auto", rtol,
                            atol_ms, [], probes, 0.0, notes=notes)
    if left.line is None or right.line is None:
        bad = left if left.line is None else right
        table.message = (f"no plan at {bad.bandwidth:g} bits/s: {bad.result.status.value}"
                         f"{': ' + bad.result.message if bad.result.message else ''}")
        table.wall_s = time.perf_counter() - started
        return table

    def same_line(l1: Line, l2: Line, xa: float, xb: float) -> bool:
        return all(abs(l1.at(x) - l2.at(x)) <= tol(min(l1.at(x), l2.at(x))) for x in (xa, xb))

    # segments in x order: (x_a, x_b, plan probe, end probes, certified)
    segments: list[tuple[Probe, Probe, Probe, bool]] = []
    stack: list[tuple[Probe, Probe]] = [(left, right)]
    while stack:
        lp, rp = stack.pop()
        assert lp.line is not None and rp.line is not None
        if same_line(lp.line, rp.line, lp.x, rp.x):
            segments.append((lp, rp, lp, True))
            continue
        db = lp.line.b - rp.line.b
        xs = (rp.line.a_ms - lp.line.a_ms) / db if db > 0 else math.nan
        if not (lp.x < xs < rp.x) or not (xs - lp.x > 1e-12 * rp.x and rp.x - xs > 1e-12 * rp.x):
            # only an inexact solve at an end can put the crossing outside (or on top of it)
            notes.append(f"lines of the plans at {lp.bandwidth:g} and {rp.bandwidth:g} bits/s do not cross inside "
                         "(a solve not exact): bisected instead")
            xs = 0.5 * (lp.x + rp.x)
            if len(probes) >= max_solves or not (lp.x < xs < rp.x):
                segments += [(lp, rp, lp, False)]
                continue
        if len(probes) >= max_solves:
            mid = Probe(1.0 / xs, xs, lp.result, None, -math.inf)
            segments += [(lp, mid, lp, False), (mid, rp, rp, False)]
            if not any("max_solves" in n for n in notes):
                notes.append(f"stopped at max_solves={max_solves}: intervals after it unproven")
            continue
        mp = probe(1.0 / xs)
        value = min(lp.line.at(xs), rp.line.at(xs))
        if mp.line is not None and mp.result.objective is not None and mp.line.at(xs) < value - tol(value):
            stack.append((mp, rp))  # a new line: recurse on both sides (left side first)
            stack.append((lp, mp))
            continue
        certified = mp.proven and mp.bound >= value - tol(value)
        if not certified:
            notes.append(f"intersection at {1.0 / xs:g} bits/s not certified ({mp.result.status.value}, bound "
                         f"{mp.bound:.9g} ms against {value:.9g} ms)")
        segments += [(lp, mp, lp, certified), (mp, rp, rp, certified)]

    table.intervals = _intervals(segments, tol, same_line)
    table.wall_s = time.perf_counter() - started
    return table


def _plan_key(probe: Probe) -> Any:
    """The identity of a probe's plan (None: it found none)."""
    return None if probe.result.plan is None else probe.result.plan.key()


def _intervals(segments: Sequence[tuple[Probe, Probe, Probe, bool]], tol: Any, same_line: Any) -> list[Interval]:
    """Intervals by increasing bandwidth from the method's segments (in increasing x),
    adjacent segments with the same plan (or line) merged."""
    merged: list[list[Any]] = []  # [start probe, end probe, plan probe, certified]
    for a, b, owner, certified in segments:
        if merged:
            last = merged[-1]
            owner_last = last[2]
            if _plan_key(owner_last) == _plan_key(owner) or \
                    same_line(owner_last.line, owner.line, last[0].x, b.x):
                last[1] = b
                last[3] = last[3] and certified
                continue
        merged.append([a, b, owner, certified])
    out: list[Interval] = []
    for a, b, owner, certified in merged:
        line = owner.line
        gaps, proven = [], certified
        for end in (a, b):
            gap = line.at(end.x) - end.bound
            gaps.append(gap)
            proven = proven and end.proven and gap <= tol(line.at(end.x))
        out.append(Interval(b.bandwidth, a.bandwidth, owner.result.plan, line, max(0.0, *gaps), proven, (b, a)))
    return out[::-1]
