"""The edge/cloud family's evaluator: the single source of truth for latency, memory and
quantization error of an edge/cloud plan. Every plan any solver or baseline returns is
re-evaluated here, and the solver's own objective must agree.

It simulates the plan instead of reusing any formulation's algebra:

* latency (ms) = edge compute (sum over edge layers) + transmission (one transfer of every
  tensor that crosses the cut, each sent once however many cloud layers read it; raw
  inputs included when a cloud layer reads them) + cloud compute (sum over cloud layers);
* edge memory (bytes) = weight bytes of edge layers + the peak activation working set of
  the live-range sweep over the edge execution order (``splitopt.core.memory``); a plan
  with no edge layer uses no edge memory (the input streams to the uplink);
* quantization error = sum over edge layers of weight_error[weight bits] +
  activation_error[bits the output reaches the next consumer at] (zero at or above the
  reference precision; a cut tensor sent at ``transmit_bits`` below its activation bits
  counts at ``transmit_bits``).
"""

from __future__ import annotations

from dataclasses import dataclass

from splitopt.core.latency import layer_latency_ms
from splitopt.core.memory import edge_set_use
from splitopt.core.metrics import FamilyMetrics
from splitopt.core.plan import Plan
from splitopt.families.edge_cloud.plan import check_plan
from splitopt.core.jsonfile import byte_count
from splitopt.families.edge_cloud.data import cloud_device, edge_device, uplink
from splitopt.families.edge_cloud.settings import EdgeCloudInstance


@dataclass(frozen=True)
class Metrics(FamilyMetrics):
    """What a plan costs. Times in ms, sizes in bytes, error dimensionless."""

    edge_compute_ms: float
    transmit_ms: float
    cloud_compute_ms: float
    total_ms: float
    transmitted_bytes: float
    sent_tensors: tuple[tuple[str, float], ...]
    edge_weight_bytes: float
    edge_peak_activation_bytes: float
    edge_memory_bytes: float
    edge_memory_limit: float
    peak_layer: str | None
    error: float
    error_budget: float | None
    edge_layer_count: int

    @property
    def objective_ms(self) -> float:
        """What the solvers minimise: the end-to-end latency (ms)."""
        return self.total_ms

    def to_dict(self) -> dict:
        return {
            "edge_compute_ms": self.edge_compute_ms,
            "transmit_ms": self.transmit_ms,
            "cloud_compute_ms": self.cloud_compute_ms,
            "total_ms": self.total_ms,
            "transmitted_bytes": self.transmitted_bytes,
            "sent_tensors": [{"tensor": t, "bytes": b} for t, b in self.sent_tensors],
            "edge_weight_bytes": self.edge_weight_bytes,
            "edge_peak_activation_bytes": self.edge_peak_activation_bytes,
            "edge_memory_bytes": self.edge_memory_bytes,
            "edge_memory_limit": self.edge_memory_limit,
            "peak_layer": self.peak_layer,
            "error": self.error,
            "error_budget": self.error_budget,
            "edge_layer_count": self.edge_layer_count,
            **self.verdict(),
        }


#: relative tolerances of the budget checks. Every backend meets the budgets within them:
#: memory rows are exact integers in bits (CP-SAT) or solved to 1e-7 bits (MILP); the
#: error row is solved to 1e-7 relative (MILP, scaled by the budget) or rounded within
#: 5e-7 relative (CP-SAT). A zero error budget is enforced exactly.
MEMORY_RTOL = 1e-9
ERROR_RTOL = 1e-6


def transfer_ms(inst: EdgeCloudInstance, total_bytes: float) -> float:
    """Time (ms) to send ``total_bytes`` over the edge->cloud uplink in one transfer;
    zero when nothing is sent."""
    if total_bytes <= 0:
        return 0.0
    link = uplink(inst)
    return link.latency_ms + 1000.0 * total_bytes * 8.0 / link.bandwidth_bits_per_s


def layer_error_terms(inst: EdgeCloudInstance, name: str, weight_bits: int, activation_bits: int,
                      sent: bool) -> tuple[float, float]:
    """The quantization error (weight term, activation term) of edge layer ``name`` at the
    given bits: zero at or above the reference precision; an output that crosses the cut
    counts at ``transmit_bits`` when that is lower (see the module docstring)."""
    s, layer = inst.settings, inst.layer_by_name[name]
    weight = layer.weight_error[weight_bits] if layer.weights > 0 and weight_bits < s.cloud_bits else 0.0
    effective = min(activation_bits, s.transmit_bits) if sent and s.transmit_bits is not None else activation_bits
    return weight, (layer.activation_error[effective] if effective < s.cloud_bits else 0.0)


def evaluate(inst: EdgeCloudInstance, plan: Plan) -> Metrics:
    """Evaluate an edge/cloud plan; raises InvalidPlan if it is malformed, and lists
    budget violations (memory, error) in ``Metrics.violations``."""
    check_plan(inst, plan)
    s = inst.settings
    edge, cloud = edge_device(inst), cloud_device(inst)
    on_edge = {l.name for l in inst.layers if plan.device[l.name] == s.edge}

    # --- compute --------------------------------------------------------------------
    edge_ms = cloud_ms = 0.0
    for layer in inst.layers:
        n = layer.name
        if n in on_edge:
            edge_ms += layer_latency_ms(inst, layer, edge, plan.weight_bits[n], plan.activation_bits[n])
        else:
            cloud_ms += layer_latency_ms(inst, layer, cloud, s.cloud_bits, s.cloud_bits)

    # --- what crosses the cut, and edge memory (splitopt.core.memory) -------------------
    use = edge_set_use(inst, on_edge, plan.weight_bits, plan.activation_bits)
    sent = list(use.sent)
    sent_names = {t for t, _ in sent}
    transmitted = use.sent_bytes
    transmit = transfer_ms(inst, transmitted)
    weight_bytes, peak, peak_layer = use.weight_bytes, use.peak_activation_bytes, use.peak_layer

    # --- quantization error --------------------------------------------------------------
    error = 0.0
    for n in on_edge:
        weight, activation = layer_error_terms(inst, n, plan.weight_bits[n], plan.activation_bits[n], n in sent_names)
        error += weight
        error += activation

    memory = weight_bytes + peak
    violations = []
    if memory > s.edge_memory_bytes * (1 + MEMORY_RTOL):
        violations.append(
            f"edge memory {byte_count(memory)} B (weights {byte_count(weight_bytes)} + activations {byte_count(peak)}) "
            f"exceeds limit {byte_count(s.edge_memory_bytes)} B"
        )
    missing = [n for n in s.edge_required if n not in on_edge]
    if missing:
        violations.append(f"layer '{missing[0]}' must run on the edge (settings.edge_required)")
    if s.error_budget is not None and error > s.error_budget * (1 + ERROR_RTOL):
        violations.append(f"quantization error {error:.6g} exceeds budget {s.error_budget:.6g}")

    return Metrics(
        edge_compute_ms=edge_ms,
        transmit_ms=transmit,
        cloud_compute_ms=cloud_ms,
        total_ms=edge_ms + transmit + cloud_ms,
        transmitted_bytes=transmitted,
        sent_tensors=tuple(sent),
        edge_weight_bytes=weight_bytes,
        edge_peak_activation_bytes=peak,
        edge_memory_bytes=memory,
        edge_memory_limit=s.edge_memory_bytes,
        peak_layer=peak_layer,
        error=error,
        error_budget=s.error_budget,
        edge_layer_count=len(on_edge),
        violations=tuple(violations),
    )
