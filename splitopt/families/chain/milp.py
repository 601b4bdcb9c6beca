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

from splitopt.core.instance import Instance
from splitopt.core.live_spans import split_spans
from splitopt.core.plan import Plan
from splitopt.core.program import LinearProgram
from splitopt.families.chain.data import chain_links, chain_tensors, compute_table
from splitopt.families.chain.evaluate import evaluate
from splitopt.families.chain.plan import plan_from_indices

Form = dict  # variable index -> coefficient, plus key None for a constant

#: a tensor live for more steps than this enters the memory rows through the swept sum
#: ``A[m,k]`` (row 6), not one row per step
SWEEP_AFTER = 32


def _add(target: dict, form: dict, scale: float = 1.0) -> None:
    for k, v in form.items():
        target[k] = target.get(k, 0.0) + scale * v


def build_chain_program(inst: Instance) -> LinearProgram:
    s = inst.settings
    chain = s.chain
    M = len(chain)
    lp = LinearProgram()
    tensors = chain_tensors(inst)
    table = compute_table(inst)
    links = chain_links(inst)
    bits = s.cloud_bits

    # Y as affine forms: {var: coeff, None: constant}
    Yvar: dict[tuple[str, int], int] = {}
    for layer in inst.layers:
        for m in range(M - 1):
            Yvar[layer.name, m] = lp.var(f"Y[{layer.name},{m}]")

    def Y(tensor: str, m: int) -> dict:
        """'tensor's producer runs at a position <= m' as an affine form."""
        if m < 0:
            return {}
        producer = tensors.producer[tensor]
        if producer is None or m >= M - 1:
            return {None: 1.0}
        return {Yvar[producer, m]: 1.0}

    def x(layer: str, m: int) -> dict:
        form: dict = {}
        _add(form, Y(layer, m))
        _add(form, Y(layer, m - 1), -1.0)
        return form

    def row(form: dict, sense: str, rhs: float, kind: str, name: str) -> None:
        const = form.get(None, 0.0)
        lp.add({k: v for k, v in form.items() if k is not None}, sense, rhs - const, kind=kind, name=name)

    for layer in inst.layers:
        for m in range(1, M - 1):
            lp.add({Yvar[layer.name, m - 1]: 1.0, Yvar[layer.name, m]: -1.0}, "<=", 0.0, name=f"mono[{layer.name},{m}]")
        for src in dict.fromkeys(layer.inputs):
            if tensors.producer[src] is None:
                continue
            for m in range(M - 1):
                lp.add({Yvar[layer.name, m]: 1.0, Yvar[src, m]: -1.0}, "<=", 0.0, name=f"flow[{src},{layer.name},{m}]")

    # ----- transfers ------------------------------------------------------------------
    send_ms: list[dict] = [{} for _ in range(M)]  # affine form of each link's time (ms)
    Zvar: dict[tuple[str, int], int] = {}
    Uvar: dict[int, int] = {}
    Hvar: dict[tuple[str, int], int] = {}
    Wvar: dict[int, int] = {}
    for m in range(M - 1):
        link = links[m]
        rate = inst.link_rate_bits_per_s(link)
        used = lp.var(f"U[{m}]") if link.latency_ms > 0 else None
        if used is not None:
            Uvar[m] = used
        if used is not None:
            send_ms[m][used] = link.latency_ms
        for t in tensors.names:
            readers = tensors.consumers[t]
            if not readers or tensors.sent_bytes[t] <= 0:
                continue
            z = lp.var(f"Z[{t},{m}]", binary=False)
            Zvar[t, m] = z
            for c in readers:
                form = {z: 1.0}
                _add(form, Y(t, m), -1.0)
                _add(form, Y(c, m), 1.0)
                row(form, ">=", 0.0, "logic", f"carry[{t},{c},{m}]")
            send_ms[m][z] = send_ms[m].get(z, 0.0) + 1000.0 * tensors.sent_bytes[t] * 8.0 / rate
            if used is not None:
                lp.add({used: 1.0, z: -1.0}, ">=", 0.0, name=f"used[{t},{m}]")

    compute_ms: list[dict] = [{} for _ in range(M)]
    for layer in inst.layers:
        for m in range(M):
            _add(compute_ms[m], x(layer.name, m), table[layer.name][m])

    # ----- memory ----------------------------------------------------------------------
    spans = split_spans({t: (tensors.first_step[t], tensors.last_step[t]) for t in tensors.names}, SWEEP_AFTER)
    short_at, long_from, long_ended = spans.short_at, spans.long_from, spans.long_ended
    Asweep: dict[int, list] = {}
    total_bits = sum(l.weights * bits for l in inst.layers) + sum(8.0 * b for b in tensors.held_bytes.values())
    for m in range(M):
        limit_bits = 8.0 * inst.device_by_name[chain[m]].memory_bytes
        if total_bits <= limit_bits:
            continue  # everything fits on this device at once
        weight_bits = sum(l.weights * bits for l in inst.layers)
        Wm = lp.var(f"W[{chain[m]}]", binary=False, ub=weight_bits)
        Wvar[m] = Wm
        form = {Wm: 1.0}
        for layer in inst.layers:
            if layer.weights > 0:
                _add(form, x(layer.name, m), -layer.weights * bits)
        row(form, "==", 0.0, "bits", f"weights[{chain[m]}]")
        W = {Wm: 1.0}
        H: dict[str, int] = {}

        def occupies(t: str) -> int:
            if t not in H:
                h = lp.var(f"H[{t},{m}]", binary=False)
                H[t] = h
                Hvar[t, m] = h
                readers = tensors.consumers[t] or ()
                for c in readers:
                    form = {h: 1.0}
                    _add(form, Y(t, m), -1.0)
                    _add(form, Y(c, m - 1), 1.0)
                    row(form, ">=", 0.0, "logic", f"occupy[{t},{c},{m}]")
                if tensors.producer[t] is not None:
                    form = {h: 1.0}
                    _add(form, x(t, m), -1.0)
                    row(form, ">=", 0.0, "logic", f"occupy[{t},{m}]")
                elif m == 0:
                    lp.add({h: 1.0}, ">=", 1.0, name=f"occupy[{t},0]")
            return H[t]

        # live-by-structure, swept as in the edge/cloud program: a tensor live for at most
        # SWEEP_AFTER steps enters its steps' rows itself; longer ones through the running sum
        # A[m,k] = A[m,k-1] + (long ones from k) - (long ones ended at k-1), so the rows total
        # O(steps * SWEEP_AFTER + tensors) terms however long the skips
        A: dict | None = None  # the current running sum's form
        sweep: list[tuple[int, int, tuple[str, ...], tuple[str, ...]]] = []
        seen: set = set()
        for k in range(len(inst.layers)):
            came, went = long_from.get(k, ()), long_ended.get(k - 1, ())
            if came or went:
                a = lp.var(f"A[{chain[m]},{k}]", binary=False, lb=0.0, ub=total_bits)
                form = {a: -1.0}
                if A is not None:
                    _add(form, A)
                for t in came:
                    _add(form, {occupies(t): 8.0 * tensors.held_bytes[t]})
                for t in went:
                    _add(form, {occupies(t): -8.0 * tensors.held_bytes[t]})
                row(form, "==", 0.0, "bits", f"sweep[{chain[m]},{k}]")
                sweep.append((k, a, tuple(came), tuple(went)))
                A = {a: 1.0}
            key = (None if A is None else next(iter(A)), frozenset(short_at.get(k, ())))
            if key in seen:
                continue
            seen.add(key)
            form = dict(W)
            if A is not None:
                _add(form, A)
            for t in short_at.get(k, ()):
                _add(form, {occupies(t): 8.0 * tensors.held_bytes[t]})
            row(form, "<=", limit_bits, "bits", f"memory[{chain[m]},{k}]")
        Asweep[m] = sweep

    # ----- objective ---------------------------------------------------------------------
    if inst.objective == "throughput":
        upper = sum(sum(abs(v) for v in f.values()) for f in compute_ms + send_ms)
        B = lp.var("B", binary=False, lb=0.0, ub=upper, implied_integer=False, unit="ms")
        for m in range(M):
            form = {B: 1.0}
            _add(form, compute_ms[m], -1.0)
            _add(form, send_ms[m], -1.0)
            row(form, ">=", 0.0, "time", f"stage[{chain[m]}]")
        lp.add_objective(B, 1.0)
    else:
        for form in compute_ms + send_ms:
            for k, v in form.items():
                if k is None:
                    lp.objective_constant += v
                else:
                    lp.add_objective(k, v)
    lp.meta.update(Y=Yvar, Z=Zvar, U=Uvar, H=Hvar, W=Wvar, A=Asweep, M=M)
    return lp


def decode_chain_plan(inst: Instance, lp: LinearProgram, values: list[float]) -> Plan:
    """Layer l runs at the first position m with ``Y[l,m] = 1`` (rounded at 0.5)."""
    M, Yvar = lp.meta["M"], lp.meta["Y"]
    index = {}
    for layer in inst.layers:
        index[layer.name] = next((m for m in range(M - 1) if values[Yvar[layer.name, m]] > 0.5), M - 1)
    return plan_from_indices(inst, index)


def encode_chain_plan(inst: Instance, lp: LinearProgram, plan: Plan) -> list[float]:
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
