"""The edge/cloud split program (families 1 and 2) as a ``LinearProgram``.

The mathematics, with every symbol, is in ``formulations/edge_cloud_split.md``; this
module follows it section by section. Family 1 (``split``) is the case of one bit-width
pair, the reference precision, where ``x[i,p]`` is ``e[i]`` itself.
"""

from __future__ import annotations

from itertools import product

from splitopt.instance import Instance
from splitopt.latency import layer_latency_ms
from splitopt.plan import Plan
from splitopt.solvers.linear import LinearProgram


def build_split_program(inst: Instance) -> LinearProgram:
    s = inst.settings
    lp = LinearProgram()
    layers = inst.layers
    n = len(layers)
    pos = inst.position
    bits = inst.candidate_bits()
    pairs = list(product(bits, bits))  # (weight bits, activation bits)
    edge_dev, cloud_dev = inst.edge_device, inst.cloud_device
    link = inst.uplink
    ms_per_byte = 1000.0 * 8.0 / link.bandwidth_bits_per_s
    cons = inst.consumers
    # last reader position of each tensor; tensors nobody reads never cross the cut
    last = {t: max(pos[c] for c in readers) for t, readers in cons.items() if readers}

    # ---- variables -------------------------------------------------------------------
    e = {l.name: lp.var(f"e[{l.name}]") for l in layers}
    x: dict[tuple[str, tuple[int, int]], int] = {}
    for l in layers:
        for p in pairs:
            x[l.name, p] = e[l.name] if len(pairs) == 1 else lp.var(f"x[{l.name},w{p[0]}a{p[1]}]")
        if len(pairs) > 1:  # (1) one pair per edge layer
            lp.add({**{x[l.name, p]: 1.0 for p in pairs}, e[l.name]: -1.0}, "==", 0.0, name=f"pair[{l.name}]")
    act_bits = sorted({p[1] for p in pairs})

    def z_terms(t: str, b: int) -> dict[int, float]:
        """Indicator 'layer t is on the edge with activation bits b' as a sum of x."""
        return {x[t, p]: 1.0 for p in pairs if p[1] == b}

    # (2b) layers that must run on the edge (settings.edge_required, with ancestors)
    for name in sorted(inst.required_on_edge):
        lp.add({e[name]: 1.0}, ">=", 1.0, name=f"required[{name}]")

    # (2) closure: a layer on the edge needs its producers on the edge
    for l in layers:
        for src in dict.fromkeys(l.inputs):
            if src in e:
                lp.add({e[l.name]: 1.0, e[src]: -1.0}, "<=", 0.0, name=f"closure[{src}->{l.name}]")

    # (3) cut indicators s[t]: tensor t is produced on the edge and read on the cloud
    sent: dict[str, int] = {}
    for t, readers in cons.items():
        if not readers:
            continue
        sent[t] = lp.var(f"s[{t}]", binary=False)
        produced = e.get(t)  # None for a raw input: always on the edge
        for c in readers:
            row = {sent[t]: 1.0, e[c]: 1.0}
            if produced is not None:
                row[produced] = -1.0
            lp.add(row, ">=", 0.0 if produced is not None else 1.0, name=f"cut[{t}->{c}]")
        # exactness: s = e_t AND (some reader on the cloud)
        if produced is not None:
            lp.add({sent[t]: 1.0, produced: -1.0}, "<=", 0.0, name=f"cut_ub1[{t}]")
        row = {sent[t]: 1.0, **{e[c]: 1.0 for c in readers}}
        lp.add(row, "<=", float(len(readers)), name=f"cut_ub2[{t}]")

    # (4) q[t,b]: layer tensor t is sent and was produced at activation bits b
    q: dict[tuple[str, int], int] = {}
    for t in sent:
        if t in inst.input_by_name:
            continue
        for b in act_bits:
            if len(act_bits) == 1:
                q[t, b] = sent[t]  # s_t <= e_t makes q = s
                continue
            q[t, b] = lp.var(f"q[{t},a{b}]", binary=False)
            zt = z_terms(t, b)
            lp.add({q[t, b]: 1.0, sent[t]: -1.0, **{k: -v for k, v in zt.items()}}, ">=", -1.0, name=f"q_lb[{t},{b}]")
            lp.add({q[t, b]: 1.0, sent[t]: -1.0}, "<=", 0.0, name=f"q_ub1[{t},{b}]")
            lp.add({q[t, b]: 1.0, **{k: -v for k, v in zt.items()}}, "<=", 0.0, name=f"q_ub2[{t},{b}]")

    # (5) a: the edge runs at least one layer; r[t]: raw input t is held for sending
    a = lp.var("a", binary=False)
    for l in layers:
        lp.add({a: 1.0, e[l.name]: -1.0}, ">=", 0.0, name=f"a_lb[{l.name}]")
    lp.add({a: 1.0, **{e[l.name]: -1.0 for l in layers}}, "<=", 0.0, name="a_ub")
    r: dict[str, int] = {}
    for t in inst.input_by_name:
        if t in sent:
            r[t] = lp.var(f"r[{t}]", binary=False)
            lp.add({r[t]: 1.0, a: -1.0, sent[t]: -1.0}, ">=", -1.0, name=f"r_lb[{t}]")
            lp.add({r[t]: 1.0, a: -1.0}, "<=", 0.0, name=f"r_ub1[{t}]")
            lp.add({r[t]: 1.0, sent[t]: -1.0}, "<=", 0.0, name=f"r_ub2[{t}]")

    # ---- objective (ms) ----------------------------------------------------------------
    for l in layers:
        cloud_ms = layer_latency_ms(inst, l, cloud_dev, s.cloud_bits, s.cloud_bits)
        lp.objective_constant += cloud_ms
        lp.add_objective(e[l.name], -cloud_ms)
        for p in pairs:
            lp.add_objective(x[l.name, p], layer_latency_ms(inst, l, edge_dev, p[0], p[1]))

    def bits_of(t: str) -> int:
        return inst.input_by_name[t].bits

    for t in sent:
        if t in inst.input_by_name:
            lp.add_objective(sent[t], ms_per_byte * inst.tensor_elements(t) * bits_of(t) / 8.0)
        else:
            for b in act_bits:
                tx = s.transmit_bits if s.transmit_bits is not None else b
                lp.add_objective(q[t, b], ms_per_byte * inst.tensor_elements(t) * tx / 8.0)
    if link.latency_ms > 0 and sent:
        y = lp.var("y", binary=False)  # (6) anything sent pays the link's fixed latency once
        for t in sent:
            lp.add({y: 1.0, sent[t]: -1.0}, ">=", 0.0, name=f"y_lb[{t}]")
        lp.add({y: 1.0, **{sent[t]: -1.0 for t in sent}}, "<=", 0.0, name="y_ub")
        lp.add_objective(y, link.latency_ms)

    # ---- (7) edge memory: weights + working set at every step, in bits ------------------
    total_w_bits = sum(l.weights * max(bits) for l in layers)
    w = lp.var("W", binary=False, lb=0.0, ub=total_w_bits)
    lp.add({w: -1.0, **{x[l.name, p]: l.weights * p[0] for l in layers for p in pairs}}, "==", 0.0, "bits", "weights")

    def held_terms(t: str) -> dict[int, float]:
        """Bits of tensor t while held for sending (cut case)."""
        if t in inst.input_by_name:
            return {r[t]: float(inst.tensor_elements(t) * bits_of(t))}
        return {q[t, b]: float(inst.tensor_elements(t) * b) for b in act_bits}

    # H[k] = bits held for sending of tensors whose readers all run before step k
    dead_after: dict[int, list[str]] = {}
    for t, k in last.items():
        if t in sent:
            dead_after.setdefault(k, []).append(t)
    total_bits = sum(inst.tensor_elements(t) * (bits_of(t) if t in inst.input_by_name else max(act_bits)) for t in cons)
    held = [None] * n
    for k in range(n):
        newly = [t for t in dead_after.get(k - 1, [])]
        if k == 0:
            held[k] = None
        elif not newly:
            held[k] = held[k - 1]
        else:
            hk = lp.var(f"H[{k}]", binary=False, lb=0.0, ub=total_bits)
            row = {hk: -1.0}
            if held[k - 1] is not None:
                row[held[k - 1]] = 1.0
            for t in newly:
                for idx, c in held_terms(t).items():
                    row[idx] = row.get(idx, 0.0) + c
            lp.add(row, "==", 0.0, "bits", f"held[{k}]")
            held[k] = hk

    # live-by-structure: tensors born at or before k with a reader at or after k
    born = {t.name: -1 for t in inst.inputs}
    born.update({l.name: pos[l.name] for l in layers})
    limit_bits = s.edge_memory_bytes * 8.0
    for k, l in enumerate(layers):
        row: dict[int, float] = {w: 1.0}
        for t, b0 in born.items():
            if b0 > k:
                continue
            if t == l.name or last.get(t, -2) >= k:
                if t in inst.input_by_name:
                    row[a] = row.get(a, 0.0) + inst.tensor_elements(t) * bits_of(t)
                else:
                    for p in pairs:
                        row[x[t, p]] = row.get(x[t, p], 0.0) + inst.tensor_elements(t) * p[1]
        if held[k] is not None:
            row[held[k]] = 1.0
        lp.add(row, "<=", limit_bits, "bits", f"memory[{l.name}]")

    # ---- (8) quantization error ----------------------------------------------------------
    if s.error_budget is not None:
        row = {}
        for l in layers:
            for p in pairs:
                err = 0.0
                if l.weights > 0 and p[0] < s.cloud_bits:
                    err += l.weight_error[p[0]]
                if p[1] < s.cloud_bits:
                    err += l.activation_error[p[1]]
                if err:
                    row[x[l.name, p]] = row.get(x[l.name, p], 0.0) + err
        if s.transmit_bits is not None:
            tb = s.transmit_bits
            for (t, b), idx in q.items():
                if tb < b:
                    base = inst.layer_by_name[t].activation_error[b] if b < s.cloud_bits else 0.0
                    extra = inst.layer_by_name[t].activation_error[tb] - base
                    if extra > 0:
                        row[idx] = row.get(idx, 0.0) + extra
        if s.error_budget > 0:
            lp.add(row, "<=", s.error_budget, "error", "error")
        else:  # a zero budget forbids every choice with positive error, exactly
            for idx, c in row.items():
                if c > 0:
                    lp.add({idx: 1.0}, "<=", 0.0, name="zero_error")

    lp.meta.update(e=e, x=x, pairs=pairs)
    return lp


def decode_split_plan(inst: Instance, lp: LinearProgram, values: list[float]) -> Plan:
    """Plan from solver values (binaries rounded at 0.5)."""
    e, x, pairs = lp.meta["e"], lp.meta["x"], lp.meta["pairs"]
    edge_bits = {}
    for l in inst.layers:
        if values[e[l.name]] > 0.5:
            edge_bits[l.name] = max(pairs, key=lambda p: values[x[l.name, p]])
    return Plan.edge_cloud(inst, edge_bits)
