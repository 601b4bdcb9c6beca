"""The edge/cloud split program (problems ``split`` and ``split_bits``) as a ``LinearProgram``.

The mathematics, with every symbol, is in ``formulations/edge_cloud_split.md``; this
module follows it section by section. Each layer's bit-width choice is encoded by
*selectors*: linear forms ``wsel[i][w]`` ("layer i is on the edge with weight bits w")
and ``asel[i][a]`` ("... with activation bits a"), each summing to ``e[i]``:

* ``split`` (one pair, the reference precision): both selectors are ``e[i]`` itself;
* a layer whose edge latency table is separable, ``Le[w,a] = Lw[w] + La[a]`` (the
  analytical model always is; measured tables may be): binaries ``u[i,w]`` and
  ``v[i,a]``; a weightless layer has no ``u`` (its weight bits change nothing);
* any other layer: pair binaries ``x[i,(w,a)]``, with ``wsel``/``asel`` their sums.

Memory, error and transmission are separable by construction, so only latency decides
between the two encodings; the separable one has the same LP bound with |B| + |B|
instead of |B|^2 binaries per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import Sequence

from splitopt.core.latency import analytical, latency_table, layer_latency_ms
from splitopt.core.live_spans import split_spans
from splitopt.core.plan import Plan
from splitopt.core.program import LinearProgram, Program
from splitopt.families.edge_cloud.dominance import dominated_layers, without_dominated_frontier
from splitopt.families.edge_cloud.evaluate import ERROR_RTOL, MEMORY_RTOL
from splitopt.families.edge_cloud.data import candidate_bits, cloud_device, edge_device, required_on_edge, uplink
from splitopt.families.edge_cloud.plan import edge_cloud_plan
from splitopt.families.edge_cloud.settings import EdgeCloudInstance

Form = dict[int, float]

#: a tensor live for more steps than this enters the memory rows through the swept sum
#: ``L[k]`` (row 7), not one row per step
SWEEP_AFTER = 32


def _add_form(target: Form, form: Form, scale: float) -> None:
    for idx, c in form.items():
        target[idx] = target.get(idx, 0.0) + scale * c


def _separable(table: dict[tuple[int, int], float], bits) -> bool:
    """Le[w,a] == Le[w,a0] + Le[w0,a] - Le[w0,a0] for all w, a (to 1e-12 relative)."""
    w0, a0 = bits[0], bits[0]
    for w in bits:
        for a in bits:
            pred = table[w, a0] + table[w0, a] - table[w0, a0]
            if abs(pred - table[w, a]) > 1e-12 * max(1.0, abs(table[w, a])):
                return False
    return True


def _least_error(layer, bits, cloud_bits: int) -> float:
    """The least quantization error layer ``layer`` can have on the edge."""
    werr = min((layer.weight_error[b] if b < cloud_bits else 0.0) for b in bits) if layer.weights > 0 else 0.0
    aerr = min((layer.activation_error[b] if b < cloud_bits else 0.0) for b in bits)
    return werr + aerr


def build_milp(inst: EdgeCloudInstance, start: Plan | None, *, reductions: bool = True) -> Program:
    """The program of ``formulations/edge_cloud_split.md`` (objective in ms, memory rows in
    bits, the error row dimensionless), its rows in the formulation's order; ``start`` (a
    plan or None) is its hint, with its dominated frontier layers moved to the cloud (no
    worse) so that it meets the dominance rows; ``reductions``: with the dominance rows
    (2c), which keep the optimum and cut off plans no better than one they keep."""
    lp = LinearProgram()
    v = selector_variables(inst, lp)
    closure_rows(inst, lp, v, reductions)
    cut_rows(inst, lp, v)
    width_rows(inst, lp, v)
    edge_use_rows(inst, lp, v)
    objective(inst, lp, v)
    closure_error = weight_rows(inst, lp, v)
    held_sums(inst, lp, v)
    working_set_rows(inst, lp, v)
    error_rows(inst, lp, v, closure_error)
    lp.meta.update(e=v.e, wsel=v.wsel, asel=v.asel, encoding=v.encoding, choice_vars=v.choice_vars, sent=v.sent,
                   q=v.q, a=v.a, r=v.r, held=v.held, live=v.live, W=v.W, Err=v.err, y=v.y, bits=v.bits)
    return Program(
        kind="linear", model=lp, decode=lambda values: decode_plan(inst, lp, values),
        hint=None if start is None else encode_plan(inst, lp, without_dominated_frontier(inst, start)),
        encode=lambda plan: encode_plan(inst, lp, plan),
        stats={"variables": len(lp.variables), "rows": len(lp.rows)},
    )


@dataclass
class SplitVariables:
    """The program's variables and selector forms (sections "Variables" and
    "Selectors") as the steps add them: ``e``, the selectors ``wsel`` (ω) and ``asel``
    (α), each layer's edge latency form, encoding and the binaries each bit pair sets;
    then ``s`` (``sent``), ``q``, ``a``, ``r``, ``y``, ``W``, the swept sums ``H[k]``
    (``held``) and ``L[k]`` (``live``) and ``Err``. ``last``: each read tensor's last
    reader position."""

    bits: list[int]
    e: dict[str, int]
    last: dict[str, int]
    wsel: dict[str, dict[int, Form]] = field(default_factory=dict)
    asel: dict[str, dict[int, Form]] = field(default_factory=dict)
    latency: dict[str, Form] = field(default_factory=dict)  # edge latency (ms) of a layer as a linear form
    encoding: dict[str, str] = field(default_factory=dict)
    choice_vars: dict[str, dict[tuple[int, int], list[int]]] = field(default_factory=dict)  # (w, a) -> binaries at 1
    tables: dict[str, dict[tuple[int, int], float]] = field(default_factory=dict)  # edge latency (ms) per bit pair
    sent: dict[str, int] = field(default_factory=dict)
    q: dict[tuple[str, int], int] = field(default_factory=dict)
    a: int = -1
    r: dict[str, int] = field(default_factory=dict)
    y: int | None = None
    W: int = -1
    held: list[int | None] = field(default_factory=list)
    live: list[int | None] = field(default_factory=list)
    err: int | None = None


def selector_variables(inst: EdgeCloudInstance, lp: LinearProgram) -> SplitVariables:
    """Variables ``e`` and each layer's selectors (section "Selectors"), with row 1 (one
    bit choice per edge layer)."""
    pos = inst.position
    # last reader position of each tensor; tensors nobody reads never cross the cut
    last = {t: max(pos[c] for c in readers) for t, readers in inst.consumers.items() if readers}
    v = SplitVariables(list(candidate_bits(inst)), {l.name: lp.var(f"e[{l.name}]") for l in inst.layers}, last)
    edge_dev = edge_device(inst)
    for l in inst.layers:
        v.tables[l.name] = latency_table(inst, l, edge_dev, v.bits)
        if len(v.bits) == 1:
            single_selectors(v, l)
        elif analytical(l, edge_dev) or _separable(v.tables[l.name], v.bits):
            separable_selectors(lp, v, l)
        else:
            pair_selectors(lp, v, l)
    return v


def single_selectors(v: SplitVariables, l) -> None:
    """``split``: one bit pair, both selectors ``e[i]`` itself."""
    name, b, e = l.name, v.bits[0], v.e[l.name]
    v.wsel[name], v.asel[name] = {b: {e: 1.0}}, {b: {e: 1.0}}
    v.latency[name] = {e: v.tables[name][b, b]}
    v.encoding[name] = "single"
    v.choice_vars[name] = {(b, b): []}


def separable_selectors(lp: LinearProgram, v: SplitVariables, l) -> None:
    """A separable latency table: ``u[i,w]`` and ``v[i,a]``, no ``u`` for a weightless
    layer whose weight bits change no latency."""
    name, bits, table, e = l.name, v.bits, v.tables[l.name], v.e[l.name]
    w0 = a0 = bits[0]
    lw = {w: table[w, a0] - table[w0, a0] for w in bits}
    la = {a: table[w0, a] for a in bits}
    act = {a: lp.var(f"v[{name},a{a}]") for a in bits}
    lp.add({**{act[a]: 1.0 for a in bits}, e: -1.0}, "==", 0.0, name=f"abits[{name}]")
    v.asel[name] = {a: {act[a]: 1.0} for a in bits}
    v.latency[name] = {act[a]: la[a] for a in bits}
    if l.weights > 0 or any(abs(c) > 0 for c in lw.values()):
        u = {w: lp.var(f"u[{name},w{w}]") for w in bits}
        lp.add({**{u[w]: 1.0 for w in bits}, e: -1.0}, "==", 0.0, name=f"wbits[{name}]")
        v.wsel[name] = {w: {u[w]: 1.0} for w in bits}
        _add_form(v.latency[name], {u[w]: lw[w] for w in bits}, 1.0)
        v.encoding[name] = "separable"
        v.choice_vars[name] = {(wb, ab): [u[wb], act[ab]] for wb in bits for ab in bits}
    else:  # weightless and weight bits change no latency: no weight choice to make
        v.wsel[name] = {bits[0]: {e: 1.0}}
        v.encoding[name] = "activation"
        v.choice_vars[name] = {(wb, ab): [act[ab]] for wb in bits for ab in bits}


def pair_selectors(lp: LinearProgram, v: SplitVariables, l) -> None:
    """Any other latency table: one binary ``x[i,p]`` per bit pair."""
    name, bits, table, e = l.name, v.bits, v.tables[l.name], v.e[l.name]
    x = {p: lp.var(f"x[{name},w{p[0]}a{p[1]}]") for p in product(bits, bits)}
    lp.add({**{x[p]: 1.0 for p in x}, e: -1.0}, "==", 0.0, name=f"pair[{name}]")
    v.wsel[name] = {w: {x[p]: 1.0 for p in x if p[0] == w} for w in bits}
    v.asel[name] = {a: {x[p]: 1.0 for p in x if p[1] == a} for a in bits}
    v.latency[name] = {x[p]: table[p] for p in x}
    v.encoding[name] = "pairs"
    v.choice_vars[name] = {p: [x[p]] for p in x}


def closure_rows(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables, reductions: bool) -> None:
    """Rows 2 (closure, and the layers pinned to the edge) and, with ``reductions``, 2c
    (a dominated layer is not the last edge layer of its branch,
    ``splitopt/families/edge_cloud/dominance.py``; with one reader, the two are
    contracted)."""
    e = v.e
    for name in sorted(required_on_edge(inst)):  # settings.edge_required, with ancestors
        lp.add({e[name]: 1.0}, ">=", 1.0, name=f"required[{name}]")
    for l in inst.layers:  # a layer on the edge needs its producers on the edge
        for src in dict.fromkeys(l.inputs):
            if src in e:
                lp.add({e[l.name]: 1.0, e[src]: -1.0}, "<=", 0.0, name=f"closure[{src}->{l.name}]")
    if reductions:
        cons = inst.consumers
        for u in dominated_layers(inst, v.tables):
            lp.add({e[u]: 1.0, **{e[j]: -1.0 for j in cons[u]}}, "<=", 0.0, "dominance", f"dominated[{u}]")


def cut_rows(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables) -> None:
    """Row 3: the cut indicators ``s[t]`` (tensor t is produced on the edge and read on
    the cloud), exact from both sides."""
    e = v.e
    for t, readers in inst.consumers.items():
        if not readers:
            continue
        s = v.sent[t] = lp.var(f"s[{t}]", binary=False)
        produced = e.get(t)  # None for a raw input: always on the edge
        for c in readers:
            row = {s: 1.0, e[c]: 1.0}
            if produced is not None:
                row[produced] = -1.0
            lp.add(row, ">=", 0.0 if produced is not None else 1.0, name=f"cut[{t}->{c}]")
        # exactness: s = e_t AND (some reader on the cloud)
        if produced is not None:
            lp.add({s: 1.0, produced: -1.0}, "<=", 0.0, name=f"cut_ub1[{t}]")
        row = {s: 1.0, **{e[c]: 1.0 for c in readers}}
        lp.add(row, "<=", float(len(readers)), name=f"cut_ub2[{t}]")


def width_rows(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables) -> None:
    """Row 4: ``q[t,b]``, layer tensor t is sent and was produced at activation bits b
    (``s[t]`` itself with one activation width)."""
    act_bits, q = v.bits, v.q
    for t, s in v.sent.items():
        if t in inst.input_by_name:
            continue
        for b in act_bits:
            if len(act_bits) == 1:
                q[t, b] = s  # s_t <= e_t makes q = s
                continue
            q[t, b] = lp.var(f"q[{t},a{b}]", binary=False)
            minus_alpha = {k: -c for k, c in v.asel[t][b].items()}
            # q <= alpha and, below, sum_b q = s: exact with s <= e[t] = sum_b alpha
            lp.add({q[t, b]: 1.0, **minus_alpha}, "<=", 0.0, name=f"q_ub[{t},{b}]")
            # q >= alpha + s - e[t]: implied by those two (q_b = s - the other q's >= s -
            # the other alphas), and it implies the disaggregated q >= alpha - e[c] of every
            # reader c; kept because CBC 2.10.3's preprocessing returns a wrong optimum
            # without it (formulations/edge_cloud_split.md, row 4)
            row = {q[t, b]: 1.0, s: -1.0, v.e[t]: 1.0}
            _add_form(row, minus_alpha, 1.0)
            lp.add(row, ">=", 0.0, name=f"q_lb[{t},{b}]")

        if len(act_bits) > 1:  # a sent tensor is sent at exactly one width
            lp.add({**{q[t, b]: 1.0 for b in act_bits}, s: -1.0}, "==", 0.0, name=f"q_sum[{t}]")


def edge_use_rows(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables) -> None:
    """Row 5: ``a``, the edge runs at least one layer; ``r[t]``, raw input t is held for
    sending."""
    e, layers = v.e, inst.layers
    a = v.a = lp.var("a", binary=False)
    for l in layers:
        lp.add({a: 1.0, e[l.name]: -1.0}, ">=", 0.0, name=f"a_lb[{l.name}]")
    lp.add({a: 1.0, **{e[l.name]: -1.0 for l in layers}}, "<=", 0.0, name="a_ub")
    for t in inst.input_by_name:
        if t in v.sent:
            r = v.r[t] = lp.var(f"r[{t}]", binary=False)
            lp.add({r: 1.0, a: -1.0, v.sent[t]: -1.0}, ">=", -1.0, name=f"r_lb[{t}]")
            lp.add({r: 1.0, a: -1.0}, "<=", 0.0, name=f"r_ub1[{t}]")
            lp.add({r: 1.0, v.sent[t]: -1.0}, "<=", 0.0, name=f"r_ub2[{t}]")


def objective(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables) -> None:
    """Section "Objective (ms)": edge and cloud compute, one transfer of every tensor
    that crosses the cut, and row 6 (``y``: anything sent pays the link's fixed latency
    once)."""
    s, link = inst.settings, uplink(inst)
    cloud_dev = cloud_device(inst)
    ms_per_byte = 1000.0 * 8.0 / link.bandwidth_bits_per_s
    for l in inst.layers:
        cloud_ms = layer_latency_ms(inst, l, cloud_dev, s.cloud_bits, s.cloud_bits)
        lp.objective_constant += cloud_ms
        lp.add_objective(v.e[l.name], -cloud_ms)
        for idx, c in v.latency[l.name].items():
            lp.add_objective(idx, c)
    for t, sent in v.sent.items():
        if t in inst.input_by_name:
            lp.add_objective(sent, ms_per_byte * inst.tensor_elements(t) * inst.input_by_name[t].bits / 8.0)
        else:
            for b in v.bits:
                lp.add_objective(v.q[t, b], ms_per_byte * inst.tensor_elements(t) * inst.sent_bits(t, b) / 8.0)
    if link.latency_ms > 0 and v.sent:
        y = v.y = lp.var("y", binary=False)
        for t, sent in v.sent.items():
            lp.add({y: 1.0, sent: -1.0}, ">=", 0.0, name=f"y_lb[{t}]")
        lp.add({y: 1.0, **{sent: -1.0 for sent in v.sent.values()}}, "<=", 0.0, name="y_ub")
        lp.add_objective(y, link.latency_ms)


def weight_rows(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables):
    """Row 7's ``W`` (edge weight bits) and row 7b (closure bounds: a layer on the edge
    brings all its ancestors, so ``W`` is at least their weights at the fewest bits;
    ``e[i] = 0`` when even that exceeds the limit). Returns the least error of each
    layer's closure (``anc*(i)``, for row 8b)."""
    s, layers, bits = inst.settings, inst.layers, v.bits
    total_w_bits = sum(l.weights * max(bits) for l in layers)
    w = v.W = lp.var("W", binary=False, lb=0.0, ub=total_w_bits)
    row: Form = {w: -1.0}
    for l in layers:
        if l.weights > 0:
            for wb, form in v.wsel[l.name].items():
                _add_form(row, form, l.weights * wb)
    lp.add(row, "==", 0.0, "bits", "weights")

    limit_bits = s.edge_memory_bytes * 8.0
    from splitopt.core.closure import closure_sums  # numpy: imported when a program is built

    pos = inst.position
    preds = [[pos[src] for src in dict.fromkeys(l.inputs) if src in pos] for l in layers]
    least_error = [_least_error(l, bits, s.cloud_bits) for l in layers] if s.error_budget else [0.0] * len(layers)
    # per layer: the weights and the least error of the layer and all its ancestors
    closure_weights, closure_error = closure_sums(preds, [[float(l.weights) for l in layers], least_error]).T
    for i, l in enumerate(layers):
        least = float(closure_weights[i]) * min(bits)
        if least > limit_bits * (1 + MEMORY_RTOL):
            lp.add({v.e[l.name]: 1.0}, "<=", 0.0, name=f"too_heavy[{l.name}]")
        elif least > 0:
            lp.add({w: 1.0, v.e[l.name]: -least}, ">=", 0.0, "bits", f"w_lb[{l.name}]", optional=True)
    return closure_error


def _total_bits(inst: EdgeCloudInstance, v: SplitVariables) -> float:
    """The bits of every read tensor at its widest: the bound of the swept sums."""
    return sum(inst.tensor_elements(t) * (inst.input_by_name[t].bits if t in inst.input_by_name else max(v.bits))
               for t in inst.consumers)


def held_sums(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables) -> None:
    """Row 7's ``H[k]``: the bits held for sending of the tensors whose readers all ran
    before step k (``H[k] = H[k-1]`` where no such tensor is added)."""
    n = len(inst.layers)

    def held_terms(t: str) -> Form:
        """Bits of tensor t while held for sending (cut case)."""
        if t in inst.input_by_name:
            return {v.r[t]: float(inst.tensor_elements(t) * inst.input_by_name[t].bits)}
        return {v.q[t, b]: float(inst.tensor_elements(t) * b) for b in v.bits}

    dead_after: dict[int, list[str]] = {}
    for t, k in v.last.items():
        if t in v.sent:
            dead_after.setdefault(k, []).append(t)
    total_bits = _total_bits(inst, v)
    held: list[int | None] = [None] * n
    for k in range(1, n):
        newly = dead_after.get(k - 1, [])
        if not newly:
            held[k] = held[k - 1]
            continue
        hk = lp.var(f"H[{k}]", binary=False, lb=0.0, ub=total_bits)
        row = {hk: -1.0}
        before = held[k - 1]
        if before is not None:
            row[before] = 1.0
        for t in newly:
            _add_form(row, held_terms(t), 1.0)
        lp.add(row, "==", 0.0, "bits", f"held[{k}]")
        held[k] = hk
    v.held = held


def working_set_rows(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables) -> None:
    """Row 7, the edge memory at every step: ``W`` + the short live tensors + ``L[k]`` +
    ``H[k]`` within the limit. Live by structure: tensor t is live at the steps
    [first(t), end(t)], a layer's output from its own step to its last reader, a raw input
    from step 0 to its last reader (never, unread). A tensor live for at most
    ``SWEEP_AFTER`` steps enters those steps' rows itself; longer ones through ``L[k] =
    L[k-1] + (long ones from k) - (long ones ended at k-1)``, so the rows total
    O(n * SWEEP_AFTER) terms however long the skips."""
    layers, pos, last = inst.layers, inst.position, v.last
    limit_bits = inst.settings.edge_memory_bytes * 8.0
    span: dict[str, tuple[int, int]] = {t: (0, last[t]) for t in inst.input_by_name if last.get(t, -1) >= 0}
    span.update({l.name: (pos[l.name], max(pos[l.name], last.get(l.name, -1))) for l in layers})
    spans = split_spans(span, SWEEP_AFTER)
    short_at, long_from, long_ended = spans.short_at, spans.long_from, spans.long_ended
    total_bits = _total_bits(inst, v)
    live_forms: dict[str, Form] = {}  # a short tensor enters the rows of up to SWEEP_AFTER steps

    def live_terms(t: str) -> Form:
        """Bits of tensor t while live on the edge."""
        out = live_forms.get(t)
        if out is not None:
            return out
        if t in inst.input_by_name:
            out = {v.a: float(inst.tensor_elements(t) * inst.input_by_name[t].bits)}
        else:
            out = {}
            elements = inst.tensor_elements(t)
            for ab, form in v.asel[t].items():
                _add_form(out, form, elements * ab)
        live_forms[t] = out
        return out

    live: list[int | None] = [None] * len(layers)
    for k, l in enumerate(layers):
        came, went = long_from.get(k, ()), long_ended.get(k - 1, ())
        before = live[k - 1] if k > 0 else None
        live[k] = before
        if came or went:
            lk = lp.var(f"L[{k}]", binary=False, lb=0.0, ub=total_bits)
            row = {lk: -1.0}
            if before is not None:
                row[before] = 1.0
            for t in came:
                _add_form(row, live_terms(t), 1.0)
            for t in went:
                _add_form(row, live_terms(t), -1.0)
            lp.add(row, "==", 0.0, "bits", f"live[{k}]")
            live[k] = lk
        row = {v.W: 1.0}
        for t in short_at.get(k, ()):
            _add_form(row, live_terms(t), 1.0)
        live_k, held_k = live[k], v.held[k]
        if live_k is not None:
            row[live_k] = 1.0
        if held_k is not None:
            row[held_k] = 1.0
        lp.add(row, "<=", limit_bits, "bits", f"memory[{l.name}]")
    v.live = live


def error_rows(inst: EdgeCloudInstance, lp: LinearProgram, v: SplitVariables, closure_error) -> None:
    """Rows 8 (the quantization error within the budget; a zero budget forbids every
    choice with positive error, exactly) and 8b (closure bounds: the least error of a
    layer's ancestors and itself), when the instance has an error budget."""
    s = inst.settings
    if s.error_budget is None:
        return
    row = error_terms(inst, v)
    if s.error_budget > 0:
        lp.add(row, "<=", s.error_budget, "error", "error")
        least_err = {l.name: float(closure_error[i]) for i, l in enumerate(inst.layers)}
        err = v.err = lp.var("Err", binary=False, lb=0.0, ub=max(sum(row.values()), s.error_budget),
                             implied_integer=False)
        lp.add({**row, err: -1.0}, "==", 0.0, "error", "error_total", optional=True)
        for l in inst.layers:
            if least_err[l.name] > s.error_budget * (1 + ERROR_RTOL):
                lp.add({v.e[l.name]: 1.0}, "<=", 0.0, name=f"too_lossy[{l.name}]")
            elif least_err[l.name] > 0:
                lp.add({err: 1.0, v.e[l.name]: -least_err[l.name]}, ">=", 0.0, "error", f"err_lb[{l.name}]",
                       optional=True)
    else:
        for idx, c in row.items():
            if c > 0:
                lp.add({idx: 1.0}, "<=", 0.0, name="zero_error")


def error_terms(inst: EdgeCloudInstance, v: SplitVariables) -> Form:
    """Row 8's left-hand side: every selector's quantization error, and where
    ``transmit_bits`` is set the extra error of each tensor sent at it."""
    s = inst.settings
    row: Form = {}
    for l in inst.layers:
        if l.weights > 0:
            for wb, form in v.wsel[l.name].items():
                if wb < s.cloud_bits:
                    _add_form(row, form, l.weight_error[wb])
        for ab, form in v.asel[l.name].items():
            if ab < s.cloud_bits:
                _add_form(row, form, l.activation_error[ab])
    if s.transmit_bits is not None:
        tb = s.transmit_bits
        for (t, b), idx in v.q.items():
            if tb < b:
                base = inst.layer_by_name[t].activation_error[b] if b < s.cloud_bits else 0.0
                extra = inst.layer_by_name[t].activation_error[tb] - base
                if extra > 0:
                    row[idx] = row.get(idx, 0.0) + extra
    return {k: c for k, c in row.items() if c != 0}


def encode_plan(inst: EdgeCloudInstance, lp: LinearProgram, plan: Plan) -> list[float]:
    """The program's variable values for ``plan`` (a warm start, and the check that the
    program and the evaluator agree on every plan). Weight bits of a layer whose
    encoding has no weight choice are ignored."""
    m = lp.meta
    s = inst.settings
    values = [0.0] * len(lp.variables)
    on_edge = {l.name for l in inst.layers if plan.device[l.name] == s.edge}
    for l in inst.layers:
        if l.name not in on_edge:
            continue
        values[m["e"][l.name]] = 1.0
        options = m["choice_vars"][l.name]
        key = (plan.weight_bits[l.name], plan.activation_bits[l.name])
        if key not in options:  # no weight choice: any weight bits with this activation
            key = next(k for k in options if k[1] == key[1])
        for idx in options[key]:
            values[idx] = 1.0
    sent = {t for t in m["sent"] if (t in inst.input_by_name or t in on_edge)
            and any(c not in on_edge for c in inst.consumers[t])}
    for t, idx in m["sent"].items():
        values[idx] = 1.0 if t in sent else 0.0
    for (t, b), idx in m["q"].items():
        if t in sent and plan.activation_bits[t] == b:
            values[idx] = 1.0
    values[m["a"]] = 1.0 if on_edge else 0.0
    for t, idx in m["r"].items():
        values[idx] = 1.0 if (on_edge and t in sent) else 0.0
    if m["y"] is not None:
        values[m["y"]] = 1.0 if sent else 0.0
    # auxiliary sums follow from their defining rows
    for row in lp.rows:
        if row.name == "weights":
            values[m["W"]] = sum(c * values[i] for i, c in row.coeffs.items() if i != m["W"])
        elif row.name.startswith("held[") or row.name.startswith("live["):
            prefix = "H[" if row.name.startswith("held[") else "L["
            target = next(i for i, c in row.coeffs.items() if c == -1.0 and lp.variables[i].name.startswith(prefix))
            values[target] = sum(c * values[i] for i, c in row.coeffs.items() if i != target)
        elif row.name == "error_total" and m["Err"] is not None:
            values[m["Err"]] = sum(c * values[i] for i, c in row.coeffs.items() if i != m["Err"])
    return values


def decode_plan(inst: EdgeCloudInstance, lp: LinearProgram, values: Sequence[float]) -> Plan:
    """Plan from solver values (binaries rounded at 0.5)."""
    e, wsel, asel = lp.meta["e"], lp.meta["wsel"], lp.meta["asel"]

    def chosen(selectors: dict[int, Form]) -> int:
        return max(selectors, key=lambda b: sum(c * values[i] for i, c in selectors[b].items()))

    edge_bits = {}
    for l in inst.layers:
        if values[e[l.name]] > 0.5:
            edge_bits[l.name] = (chosen(wsel[l.name]), chosen(asel[l.name]))
    return edge_cloud_plan(inst, edge_bits)
