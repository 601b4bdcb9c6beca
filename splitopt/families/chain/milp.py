"""The chain program (``formulations/chain_split.md``): one ``LinearProgram`` for the
MILP and CP-SAT backends.

Variables, for layer l and chain position m = 0..M-1 (the last position is implicit):

* ``Y[l,m]`` in {0,1}: layer l runs on a device at position <= m (``Y[l,M-1] = 1``);
  so ``x[l,m] = Y[l,m] - Y[l,m-1]`` says l runs on device m. Monotone in m, and
  ``Y[v,m] <= Y[u,m]`` for a DAG edge u -> v (data flows forward);
* ``Z[t,m]`` in [0,1] (integral at integral Y): link m carries tensor t,
  ``Z[t,m] >= Y[p,m] - Y[c,m]`` for producer p and every consumer c;
* ``U[m]`` in {0,1}: link m sends anything (only where it has a fixed latency);
* ``H[t,m]`` in [0,1]: tensor t occupies device m, ``H[t,m] >= Y[p,m] - Y[c,m-1]``
  (and ``>= x[p,m]``); memory rows ``W[m] + sum_{t live at step k} bits_t H[t,m] <=
  memory_m`` for every step k, with ``W[m]`` the weight bits on m; tensors live for more
  than ``SWEEP_AFTER`` steps enter them through a running sum ``A[m,k]`` (linear size);
* objective "latency": sum of compute and transfer (Eq. 1); "throughput": ``B`` (ms)
  with ``B >= stage time of m`` for every m.

A raw input is produced on position 0 (its Y is the constant 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from splitopt.core.live_spans import split_spans
from splitopt.core.plan import Plan
from splitopt.core.program import LinearProgram, Program
from splitopt.families.chain.data import ChainTensors, chain_links, chain_tensors, compute_table
from splitopt.families.chain.evaluate import evaluate
from splitopt.families.chain.plan import plan_from_indices
from splitopt.families.chain.settings import ChainInstance

Form = dict  # variable index -> coefficient, plus key None for a constant

#: a tensor live for more steps than this enters the memory rows through the swept sum
#: ``A[m,k]`` (row 6), not one row per step
SWEEP_AFTER = 32


def _add(target: dict, form: dict, scale: float = 1.0) -> None:
    for k, v in form.items():
        target[k] = target.get(k, 0.0) + scale * v


def build_milp(inst: ChainInstance, start: Plan | None) -> Program:
    """The program of ``formulations/chain_split.md`` (objective in ms, memory rows in
    bits), its rows in the formulation's order; ``start`` (a plan or None) is its hint."""
    lp = LinearProgram()
    forms = placement_variables(inst, lp)
    flow_rows(inst, forms)
    send_ms = transfer_terms(inst, forms)
    compute_ms = compute_terms(inst, forms)
    memory = memory_rows(inst, forms)
    objective(inst, forms, compute_ms, send_ms)
    lp.meta.update(Y=forms.Y_var, Z=forms.Z_var, U=forms.U_var, H=memory.H_var, W=memory.W_var, A=memory.sweeps,
                   M=forms.M)
    return Program(
        kind="linear", model=lp, decode=lambda values: decode_plan(inst, lp, values),
        hint=None if start is None else encode_plan(inst, lp, start),
        encode=lambda plan: encode_plan(inst, lp, plan),
        stats={"variables": len(lp.variables), "rows": len(lp.rows)},
    )


@dataclass
class ChainForms:
    """The assignment variables and the affine forms every row is written in: ``Y[l,m]``
    (section "Variables"), ``x[l,m] = Y[l,m] - Y[l,m-1]``, and the transfer variables
    ``Z``, ``U`` once :func:`transfer_terms` adds them."""

    lp: LinearProgram
    tensors: ChainTensors
    M: int
    Y_var: dict[tuple[str, int], int]
    Z_var: dict[tuple[str, int], int] = field(default_factory=dict)
    U_var: dict[int, int] = field(default_factory=dict)

    def Y(self, tensor: str, m: int) -> dict:
        """'tensor's producer runs at a position <= m' as an affine form."""
        if m < 0:
            return {}
        producer = self.tensors.producer[tensor]
        if producer is None or m >= self.M - 1:
            return {None: 1.0}
        return {self.Y_var[producer, m]: 1.0}

    def x(self, layer: str, m: int) -> dict:
        """'layer runs on device m' as an affine form."""
        form: dict = {}
        _add(form, self.Y(layer, m))
        _add(form, self.Y(layer, m - 1), -1.0)
        return form

    def row(self, form: dict, sense: str, rhs: float, kind: str, name: str) -> None:
        """Add the row ``form sense rhs``, the form's constant moved to the right."""
        const = form.get(None, 0.0)
        self.lp.add({k: v for k, v in form.items() if k is not None}, sense, rhs - const, kind=kind, name=name)


def placement_variables(inst: ChainInstance, lp: LinearProgram) -> ChainForms:
    """Section "Variables": ``Y[l,m]`` for every layer and position m < M-1."""
    M = len(inst.settings.chain)
    Y_var: dict[tuple[str, int], int] = {}
    for layer in inst.layers:
        for m in range(M - 1):
            Y_var[layer.name, m] = lp.var(f"Y[{layer.name},{m}]")
    return ChainForms(lp, chain_tensors(inst), M, Y_var)


def flow_rows(inst: ChainInstance, f: ChainForms) -> None:
    """Constraints 1 (cumulative assignment) and 2 (forward flow along every DAG edge)."""
    lp, Y_var = f.lp, f.Y_var
    for layer in inst.layers:
        for m in range(1, f.M - 1):
            lp.add({Y_var[layer.name, m - 1]: 1.0, Y_var[layer.name, m]: -1.0}, "<=", 0.0,
                   name=f"mono[{layer.name},{m}]")
        for src in dict.fromkeys(layer.inputs):
            if f.tensors.producer[src] is None:
                continue
            for m in range(f.M - 1):
                lp.add({Y_var[layer.name, m]: 1.0, Y_var[src, m]: -1.0}, "<=", 0.0, name=f"flow[{src},{layer.name},{m}]")


def transfer_terms(inst: ChainInstance, f: ChainForms) -> list[dict]:
    """Constraints 3 (``Z[t,m]``: link m carries t) and 4 (``U[m]``: link m sends
    anything, where it has a fixed latency); returns each link's time (ms) as an affine
    form (the ``c[t,m] Z[t,m]`` and ``lat_m U[m]`` terms of the objective)."""
    lp, tensors = f.lp, f.tensors
    links = chain_links(inst)
    send_ms: list[dict] = [{} for _ in range(f.M)]
    for m in range(f.M - 1):
        link = links[m]
        rate = inst.link_rate_bits_per_s(link)
        used = lp.var(f"U[{m}]") if link.latency_ms > 0 else None
        if used is not None:
            f.U_var[m] = used
            send_ms[m][used] = link.latency_ms
        for t in tensors.names:
            readers = tensors.consumers[t]
            if not readers or tensors.sent_bytes[t] <= 0:
                continue
            z = lp.var(f"Z[{t},{m}]", binary=False)
            f.Z_var[t, m] = z
            for c in readers:
                form = {z: 1.0}
                _add(form, f.Y(t, m), -1.0)
                _add(form, f.Y(c, m), 1.0)
                f.row(form, ">=", 0.0, "logic", f"carry[{t},{c},{m}]")
            send_ms[m][z] = send_ms[m].get(z, 0.0) + 1000.0 * tensors.sent_bytes[t] * 8.0 / rate
            if used is not None:
                lp.add({used: 1.0, z: -1.0}, ">=", 0.0, name=f"used[{t},{m}]")
    return send_ms


def compute_terms(inst: ChainInstance, f: ChainForms) -> list[dict]:
    """Each device's compute time (ms) as an affine form: ``sum_l tau[l,m] x[l,m]``."""
    table = compute_table(inst)
    compute_ms: list[dict] = [{} for _ in range(f.M)]
    for layer in inst.layers:
        for m in range(f.M):
            _add(compute_ms[m], f.x(layer.name, m), table[layer.name][m])
    return compute_ms


@dataclass
class MemoryVariables:
    """The variables of constraints 5-6: ``H[t,m]``, ``W[m]`` and, per device, its swept
    sums ``A[m,k]`` as (step, variable, long tensors from k, long tensors ended at k-1)."""

    H_var: dict[tuple[str, int], int] = field(default_factory=dict)
    W_var: dict[int, int] = field(default_factory=dict)
    sweeps: dict[int, list] = field(default_factory=dict)


def memory_rows(inst: ChainInstance, f: ChainForms) -> MemoryVariables:
    """Constraints 5-6 for every device whose memory can bind (smaller than all weights
    and tensors together)."""
    tensors, bits = f.tensors, inst.settings.cloud_bits
    spans = split_spans({t: (tensors.first_step[t], tensors.last_step[t]) for t in tensors.names}, SWEEP_AFTER)
    total_bits = sum(l.weights * bits for l in inst.layers) + sum(8.0 * b for b in tensors.held_bytes.values())
    out = MemoryVariables()
    for m, device in enumerate(inst.settings.chain):
        limit_bits = 8.0 * inst.device_by_name[device].memory_bytes
        if total_bits <= limit_bits:
            continue  # everything fits on this device at once
        W = weight_row(inst, f, m, out)
        out.sweeps[m] = working_set_rows(inst, f, m, W, spans, total_bits, limit_bits, out)
    return out


def weight_row(inst: ChainInstance, f: ChainForms, m: int, out: MemoryVariables) -> dict:
    """Constraint 6, its first part: ``W[m] = sum_l w_l x[l,m]``; returns ``W[m]`` as a form."""
    device, bits = inst.settings.chain[m], inst.settings.cloud_bits
    weight_bits = sum(l.weights * bits for l in inst.layers)
    Wm = f.lp.var(f"W[{device}]", binary=False, ub=weight_bits)
    out.W_var[m] = Wm
    form = {Wm: 1.0}
    for layer in inst.layers:
        if layer.weights > 0:
            _add(form, f.x(layer.name, m), -layer.weights * bits)
    f.row(form, "==", 0.0, "bits", f"weights[{device}]")
    return {Wm: 1.0}


def occupancy(f: ChainForms, m: int, t: str, H: dict[str, int], out: MemoryVariables) -> int:
    """Constraint 5: ``H[t,m]`` (t occupies device m), added with its rows on first use."""
    if t not in H:
        tensors = f.tensors
        h = f.lp.var(f"H[{t},{m}]", binary=False)
        H[t] = h
        out.H_var[t, m] = h
        for c in tensors.consumers[t] or ():
            form = {h: 1.0}
            _add(form, f.Y(t, m), -1.0)
            _add(form, f.Y(c, m - 1), 1.0)
            f.row(form, ">=", 0.0, "logic", f"occupy[{t},{c},{m}]")
        if tensors.producer[t] is not None:
            form = {h: 1.0}
            _add(form, f.x(t, m), -1.0)
            f.row(form, ">=", 0.0, "logic", f"occupy[{t},{m}]")
        elif m == 0:
            f.lp.add({h: 1.0}, ">=", 1.0, name=f"occupy[{t},0]")
    return H[t]


def working_set_rows(inst: ChainInstance, f: ChainForms, m: int, W: dict, spans, total_bits: float, limit_bits: float,
                     out: MemoryVariables) -> list:
    """Constraint 6, the working set of device m at every step, swept as in the
    edge/cloud program: a tensor live for at most ``SWEEP_AFTER`` steps enters its steps'
    rows itself; longer ones through the running sum ``A[m,k] = A[m,k-1] + (long ones
    from k) - (long ones ended at k-1)``, so the rows total O(steps * SWEEP_AFTER +
    tensors) terms however long the skips. One row per distinct live set; returns the
    device's swept sums."""
    device, held_bytes = inst.settings.chain[m], f.tensors.held_bytes
    H: dict[str, int] = {}
    A: dict | None = None  # the current running sum's form
    sweep: list[tuple[int, int, tuple[str, ...], tuple[str, ...]]] = []
    seen: set = set()
    for k in range(len(inst.layers)):
        came, went = spans.long_from.get(k, ()), spans.long_ended.get(k - 1, ())
        if came or went:
            a = f.lp.var(f"A[{device},{k}]", binary=False, lb=0.0, ub=total_bits)
            form = {a: -1.0}
            if A is not None:
                _add(form, A)
            for t in came:
                _add(form, {occupancy(f, m, t, H, out): 8.0 * held_bytes[t]})
            for t in went:
                _add(form, {occupancy(f, m, t, H, out): -8.0 * held_bytes[t]})
            f.row(form, "==", 0.0, "bits", f"sweep[{device},{k}]")
            sweep.append((k, a, tuple(came), tuple(went)))
            A = {a: 1.0}
        key = (None if A is None else next(iter(A)), frozenset(spans.short_at.get(k, ())))
        if key in seen:
            continue
        seen.add(key)
        form = dict(W)
        if A is not None:
            _add(form, A)
        for t in spans.short_at.get(k, ()):
            _add(form, {occupancy(f, m, t, H, out): 8.0 * held_bytes[t]})
        f.row(form, "<=", limit_bits, "bits", f"memory[{device},{k}]")
    return sweep


def objective(inst: ChainInstance, f: ChainForms, compute_ms: list[dict], send_ms: list[dict]) -> None:
    """Section "Objective": latency, the sum of every device's compute and every link's
    time; throughput, ``B`` with constraint 7 (``B`` at least every stage's time)."""
    lp = f.lp
    if inst.objective == "throughput":
        upper = sum(sum(abs(v) for v in form.values()) for form in compute_ms + send_ms)
        B = lp.var("B", binary=False, lb=0.0, ub=upper, implied_integer=False, unit="ms")
        for m, device in enumerate(inst.settings.chain):
            form = {B: 1.0}
            _add(form, compute_ms[m], -1.0)
            _add(form, send_ms[m], -1.0)
            f.row(form, ">=", 0.0, "time", f"stage[{device}]")
        lp.add_objective(B, 1.0)
    else:
        for form in compute_ms + send_ms:
            for k, v in form.items():
                if k is None:
                    lp.objective_constant += v
                else:
                    lp.add_objective(k, v)


def decode_plan(inst: ChainInstance, lp: LinearProgram, values: Sequence[float]) -> Plan:
    """Layer l runs at the first position m with ``Y[l,m] = 1`` (rounded at 0.5)."""
    M, Yvar = lp.meta["M"], lp.meta["Y"]
    index = {}
    for layer in inst.layers:
        index[layer.name] = next((m for m in range(M - 1) if values[Yvar[layer.name, m]] > 0.5), M - 1)
    return plan_from_indices(inst, index)


def encode_plan(inst: ChainInstance, lp: LinearProgram, plan: Plan) -> list[float]:
    """The program's variable values for ``plan``: Y from the placement, every other
    variable at the least value its rows allow (so the objective equals the plan's)."""
    index = {name: i for i, name in enumerate(inst.settings.chain)}
    dev = {n: index[d] for n, d in plan.device.items()}
    tensors = chain_tensors(inst)
    src = {t: 0 if tensors.producer[t] is None else dev[t] for t in tensors.names}
    far = {t: max([dev[c] for c in tensors.consumers[t]], default=src[t]) for t in tensors.names}
    metrics = evaluate(inst, plan)
    values = [0.0] * len(lp.variables)
    for (layer, m), i in lp.meta["Y"].items():
        values[i] = 1.0 if dev[layer] <= m else 0.0
    for (t, m), i in lp.meta["Z"].items():
        values[i] = 1.0 if src[t] <= m < far[t] else 0.0
    for m, i in lp.meta["U"].items():
        values[i] = 1.0 if metrics.devices[m].sent_bytes > 0 else 0.0
    for (t, m), i in lp.meta["H"].items():
        values[i] = 1.0 if src[t] <= m <= far[t] else 0.0
    for m, i in lp.meta["W"].items():
        values[i] = 8.0 * metrics.devices[m].weight_bytes
    for m, sweep in lp.meta["A"].items():
        running = 0.0
        for _, i, came, went in sweep:
            running += sum(8.0 * tensors.held_bytes[t] for t in came if src[t] <= m <= far[t])
            running -= sum(8.0 * tensors.held_bytes[t] for t in went if src[t] <= m <= far[t])
            values[i] = running
    for i, v in enumerate(lp.variables):
        if v.name == "B":
            values[i] = metrics.bottleneck_ms
    return values
