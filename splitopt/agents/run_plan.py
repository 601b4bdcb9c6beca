"""``splitopt run INSTANCE PLAN --agents SPEC``: an edge/cloud or chain plan run on device
agents and measured against the evaluator (on the controller).

Steps (:func:`run_on_agents`):

1. before anything is built: the devices the plan runs on, in run order (the family's
   torch side, :meth:`splitopt.torch.layer_graph.LayerGraphSide.tcp_devices`), each with
   an agent of the same name in ``--agents``; the token; every agent connected and
   authenticated (an agent missing, unreachable or holding another token is one line,
   exit 2);
2. the plan's parts exported as ``splitopt export --format onnx`` writes them
   (:func:`splitopt.torch.export_parts.export_plan`, whose manifest's crossing bytes
   must equal the evaluator's), deployed on the agents
   (:func:`splitopt.agents.chain.deploy_export`) and run on ``warmup`` + ``samples``
   synthetic inputs (:func:`splitopt.agents.chain.run_chain`: one sample in flight);
3. the outputs of the measured samples checked: against the same parts chained in this
   process with the same packing (:func:`splitopt.agents.runtime.reference_run`: max
   abs difference within :data:`splitopt.torch.export_parts.ONNX_ATOL` times
   ``max(1, max |output|)``; quantized plans, whose codes a last-bit difference can
   flip, pass on a relative MSE of at most
   :data:`~splitopt.torch.export_parts.ONNX_QUANTIZED_SHARE` of the plan's own error, as
   the export's check does) and, where every crossing tensor travels at 32 bits (float32,
   unchanged), against the unsplit model within the same tolerance; every link's
   payload bytes per sample against the evaluator's (each tensor ``ceil(elements * bits
   / 8)`` against ``elements * bits / 8``: less than one byte apart per tensor);
4. measured against predicted (the evaluator's figures of the plan on the instance:
   :meth:`~splitopt.torch.layer_graph.LayerGraphSide.tcp_predicted`), medians over the
   measured samples: per part its compute (the part's onnxruntime call), per link its
   transfer (the sender's first byte to the receiver's last, estimated without a shared
   clock: :mod:`splitopt.agents.agent_run`), end to end the first device's time from
   taking a sample's input to the last device being done with it (packing and unpacking,
   which the evaluator does not model, included; reported apart).

5. throughput (unless ``pipeline`` is off): the same warm-up and samples run again,
   pipelined (:func:`~splitopt.agents.chain.run_chain` with ``pipelined``: the first
   device takes the next input as soon as it has handed the last one on; see
   :mod:`splitopt.agents.agent_run`), their outputs checked as in step 3. Measured: the
   rate at which the last device that works finishes samples, ``(n - 1) / (t_n - t_1)``
   over the ``n`` measured samples' ``done_s`` on that agent's own clock (its period,
   ``period_ms``, is the inverse); per device its stage, the median of its compute +
   unpack + pack + its wait for the next device's RECEIVED (a device held back by a
   slower next one waits longer: back-pressure). Predicted: the evaluator's stage model
   (compute of the device + the transfer on its outgoing link; chain's bottleneck), the
   rate ``1000 / max stage ms``. With one measured sample there is no interval: the
   report says why instead.

A device that drops mid-run ends it: the report keeps the samples completed before and
carries one line naming the device and the sample (``error``); ``ok`` is then false.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from splitopt.agents.client import DEFAULT_TIMEOUT_S
from splitopt.core.errors import InvalidOption
from splitopt.core.input_text import check_input_options
from splitopt.core.options import MAX_SAMPLES, check_count, check_number

#: what the report says of throughput when it is not measured, per reason
THROUGHPUT_SKIPPED = {
    "off": "not measured: the pipelined run was left out",
    "one sample": "not measurable from one sample: the pipelined run needs two measured samples or more",
    "stopped": "not measured: the run one sample at a time stopped",
}


@dataclass(frozen=True)
class AgentRunOptions:
    """``splitopt run --agents``: the agents (``--agents``, needed; ``token_file``, else the
    environment), the model to rebuild and export (needed), its seed, measured samples
    after ``warmup`` ones, the seconds an agent may stay silent inside an exchange
    (``timeout``), a user model's inputs, and whether the throughput is measured in a
    second, pipelined run (``pipeline``)."""

    agents: str
    model: str
    token_file: Path | None = None
    samples: int = 5
    warmup: int = 1
    seed: int = 0
    timeout: float = DEFAULT_TIMEOUT_S
    input_shape: str | None = None
    input_dtype: str | None = None
    input_high: int | None = None
    pipeline: bool = True

    def __post_init__(self) -> None:
        check_count(self.samples, "--samples", high=MAX_SAMPLES)
        check_count(self.warmup, "--warmup", low=0, high=MAX_SAMPLES)
        check_number(self.timeout, "--timeout", 0.0, 86400.0, low_open=True)
        check_input_options(self.seed, self.input_high, self.input_shape, self.input_dtype)
        from splitopt.agents.addresses import parse_agents

        parse_agents(self.agents)


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def _waited_ms(samples: Sequence[Mapping[str, Any]], device: str) -> float | None:
    """The median time ``device`` waited for a sample's input (None: not known for any
    sample, e.g. only the run's first)."""
    waits = [w for s in samples if (w := s["devices"][device].get("waited_ms")) is not None]
    return _median(waits) if waits else None


def _ratio(measured: float, predicted: float) -> float | None:
    return measured / predicted if predicted > 0 and math.isfinite(measured) else None


def connect_plan_agents(devices: Sequence[str], options: AgentRunOptions):
    """``(agents, clients)``: the agents of ``devices`` (each must have one), connected
    and authenticated. InvalidOption (one line) otherwise."""
    from splitopt.agents.addresses import AgentSpec, Agents, parse_agents
    from splitopt.agents.auth import TOKEN_ENV, read_token
    from splitopt.agents.client import connect_agents

    agents = parse_agents(options.agents)
    missing = [d for d in devices if d not in agents.names]
    if missing:
        raise InvalidOption(f"--agents: no agent for device '{missing[0]}' of the plan (agents: "
                            f"{', '.join(agents.names)}; devices: {', '.join(devices)})")
    token = read_token(options.token_file)
    if token is None:
        raise InvalidOption(f"--agents: no token: give --token-file FILE or set ${TOKEN_ENV} (the agents' token)")
    used = Agents({d: AgentSpec(d, agents[d].address, agents[d].peers) for d in devices})
    return agents, connect_agents(used, token, options.timeout)


def run_on_agents(inst: Any, plan: Any, options: AgentRunOptions, plan_path: str | None = None) -> dict[str, Any]:
    """Run ``plan`` of ``inst`` on the agents and measure it (module docstring): a
    JSON-ready report with ``ok``."""
    from splitopt.api import evaluate
    from splitopt.core import progress
    from splitopt.netrun.setup import tcp_side

    side = tcp_side(inst, "run --agents")
    devices, links = side.tcp_devices(inst)
    metrics = evaluate(inst, plan)
    predicted = side.tcp_predicted(inst, metrics)
    evaluator_tensors = side.tcp_sent_bytes(inst, plan, metrics)
    with progress.phase("connecting to the agents"):
        agents, clients = connect_plan_agents(devices, options)
    try:
        infos = {d: clients[d].welcome_info for d in devices}
        with tempfile.TemporaryDirectory(prefix="splitopt_agents_run_") as tmp:
            exported, manifest, files, x, unsplit = _export(inst, plan, options, Path(tmp))
        from splitopt.agents.chain import deploy_export, run_chain

        with progress.phase("deploying the parts"):
            deploy_export(clients, agents, manifest, files)
        total = options.warmup + options.samples

        def show(device: str, report: Mapping[str, Any]) -> None:
            progress.step(f"sample {int(report['sample']) + 1} of {total} done on {device}")

        with progress.phase("running on the agents, one sample at a time"):
            result = run_chain(clients, manifest, x, warmup=options.warmup, on_report=show)
        progress.step("")
        skipped = ("off" if not options.pipeline else "stopped" if not result.ok
                   else "one sample" if options.samples < 2 else None)
        if skipped is None:
            with progress.phase("running on the agents, pipelined"):
                streamed = run_chain(clients, manifest, x, warmup=options.warmup, on_report=show, pipelined=True)
            progress.step("")
    finally:
        for c in clients.values():
            c.close()
    done = len(result.samples)
    check = _check_outputs(manifest, files, x[:done], [u[:done] for u in unsplit], result.outputs,
                           exported["quantized"]) if done else {"ok": False, "samples": 0}
    report: dict[str, Any] = {
        "instance": inst.name, "problem": inst.problem, "model": options.model, "seed": options.seed,
        "plan": plan_path, "devices": devices, "samples": options.samples, "warmup": options.warmup,
        "completed": done, "quantized": exported["quantized"], "bytes_match": exported["bytes_match"],
        "agents": {d: {"address": str(agents[d].address), "hostname": infos[d].get("hostname"),
                       "threads": infos[d].get("threads"), "cpu_quota": infos[d].get("cpu_quota"),
                       "cpus_usable": infos[d].get("cpus_usable"), "memory_bytes": infos[d].get("memory_bytes"),
                       "onnxruntime": (infos[d].get("runtimes") or {}).get("onnxruntime")} for d in devices},
        "throughput": THROUGHPUT_SKIPPED[skipped] if skipped is not None else None,  # else measured below
        "error": result.error, "check": check, "per_sample": result.samples}
    report.update(_measured_vs_predicted(result.samples, devices, links, manifest, predicted, evaluator_tensors))
    report["ok"] = bool(result.ok and check["ok"] and exported["bytes_match"]
                        and all(l["bytes_ok"] for l in report["links"]))
    if skipped is None:
        kept = len(streamed.samples)
        streamed_check = _check_outputs(manifest, files, x[:kept], [u[:kept] for u in unsplit], streamed.outputs,
                                        exported["quantized"]) if kept else {"ok": False, "samples": 0}
        report["throughput"] = throughput_report(streamed, streamed_check, devices, predicted,
                                                 report["end_to_end"]["measured_ms"])
        report["ok"] = bool(report["ok"] and streamed.ok and streamed_check["ok"])
        if streamed.error is not None:
            report["error"] = f"pipelined {streamed.error}"
    return report


def throughput_report(run: Any, check: Mapping[str, Any], devices: Sequence[str], predicted: Mapping[str, Any],
                      latency_ms: float) -> dict[str, Any]:
    """The pipelined run ``run`` (a :class:`splitopt.agents.chain.ChainRun`) measured
    against the evaluator's stage model (module docstring, step 5); ``latency_ms``: the
    end-to-end latency one sample at a time (its rate is reported beside)."""
    parts = [float(v) for v in predicted["parts_ms"]]
    links = [float(v) for v in predicted["links_ms"]]
    stage_predicted = [parts[k] + (links[k] if k < len(links) else 0.0) for k in range(len(devices))]
    slowest = max(range(len(devices)), key=lambda k: stage_predicted[k])
    predicted_per_s = 1000.0 / stage_predicted[slowest] if stage_predicted[slowest] > 0 else None
    samples = run.samples
    ends = [d for d in devices if samples and all(s["devices"][d].get("done_s") is not None for s in samples)]
    period_device = ends[-1] if ends else None
    period_ms = measured_per_s = None
    if period_device is not None and len(samples) >= 2:
        first, last = samples[0]["devices"][period_device]["done_s"], samples[-1]["devices"][period_device]["done_s"]
        if last > first:
            period_ms = 1000.0 * (last - first) / (len(samples) - 1)
            measured_per_s = 1000.0 / period_ms

    def wait_ms(sample: Mapping[str, Any], device: str) -> float:
        return float(sum(l["wait_ms"] for l in sample["links"] if l["from"] == device))

    stages = []
    for k, d in enumerate(devices):
        own = [s["devices"][d] for s in samples]
        measured = _median([o["compute_ms"] + o["pack_ms"] + o["unpack_ms"] + wait_ms(s, d)
                            for o, s in zip(own, samples)])
        stages.append({"device": d, "measured_ms": measured, "predicted_ms": stage_predicted[k],
                       "ratio": _ratio(measured, stage_predicted[k]),
                       "compute_ms": _median([o["compute_ms"] for o in own]),
                       "pack_unpack_ms": _median([o["pack_ms"] + o["unpack_ms"] for o in own]),
                       "wait_ms": _median([wait_ms(s, d) for s in samples])})
    return {"measured_per_s": measured_per_s, "predicted_per_s": predicted_per_s,
            "ratio": measured_per_s / predicted_per_s if measured_per_s is not None and predicted_per_s else None,
            "bottleneck_predicted": devices[slowest], "period_ms": period_ms, "period_device": period_device,
            "one_at_a_time_per_s": 1000.0 / latency_ms if latency_ms > 0 and math.isfinite(latency_ms) else None,
            "samples": len(samples), "stages": stages, "check": dict(check), "error": run.error,
            "per_sample": samples}


def _export(inst: Any, plan: Any, options: AgentRunOptions, directory: Path):
    """The plan exported in ``directory`` (its report, manifest and part files), the
    synthetic inputs of the run (numpy) and the unsplit model's outputs on them."""
    import numpy as np
    import torch

    from splitopt.agents.chain import export_parts
    from splitopt.core import progress
    from splitopt.torch.export_parts import export_plan
    from splitopt.torch.models import build_model

    with progress.phase("exporting the plan's parts"):
        exported = export_plan(inst, plan, model=options.model, fmt="onnx", directory=directory, seed=options.seed,
                               samples=0, input_shape=options.input_shape, input_dtype=options.input_dtype,
                               input_high=options.input_high)
        manifest, files = export_parts(directory)
    with progress.phase("the unsplit model's outputs"):
        module, _, _, inputs, _ = build_model(options.model, options.seed, inst, input_shape=options.input_shape,
                                              input_dtype=options.input_dtype, input_high=options.input_high)
        x = inputs(options.samples)
        with torch.no_grad():
            out = module(x)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return exported, manifest, files, np.ascontiguousarray(x.numpy()), [o.detach().numpy() for o in outs]


def _check_outputs(manifest: Mapping[str, Any], files: Mapping[str, bytes | None], x, unsplit, got,
                   quantized: bool) -> dict[str, Any]:
    """The agents' outputs against the one-process reference and, where every crossing
    travels at 32 bits, the unsplit model (module docstring)."""
    import numpy as np

    from splitopt.agents.runtime import reference_run
    from splitopt.torch.export_parts import ONNX_ATOL, ONNX_QUANTIZED_SHARE

    def max_diff(a, b) -> float:
        return max(float(np.abs(np.asarray(p, np.float64) - np.asarray(q, np.float64)).max()) if np.size(p) else 0.0
                   for p, q in zip(a, b))

    def rel_mse(a, b) -> float:
        out = 0.0
        for p, q in zip(a, b):
            p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
            out = max(out, float(((p - q) ** 2).mean() / max((q ** 2).mean(), 1e-30)))
        return out

    reference = reference_run(dict(manifest), files, x)
    magnitude = max([1.0] + [float(np.abs(r).max()) for r in reference if np.size(r)])
    tol = ONNX_ATOL * magnitude
    exact = all(int(t["bits"]) == 32 for c in manifest["crossings"] for t in c["tensors"])
    out: dict[str, Any] = {"samples": int(x.shape[0]), "tolerance": tol, "float32_crossings": exact,
                           "max_abs_diff_reference": max_diff(got, reference),
                           "relative_mse_unsplit": rel_mse(got, unsplit)}
    ok = out["max_abs_diff_reference"] <= tol
    if quantized:
        out["relative_mse_reference"] = rel_mse(got, reference)
        out["relative_mse_limit"] = ONNX_QUANTIZED_SHARE * rel_mse(reference, unsplit)
        ok = ok or out["relative_mse_reference"] <= out["relative_mse_limit"]
    if exact:
        out["max_abs_diff_unsplit"] = max_diff(got, unsplit)
        ok = ok and out["max_abs_diff_unsplit"] <= tol
    out["ok"] = bool(ok)
    return out


def _measured_vs_predicted(samples: Sequence[Mapping[str, Any]], devices: Sequence[str], links: Sequence[Any],
                           manifest: Mapping[str, Any], predicted: Mapping[str, Any],
                           evaluator_tensors: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """Per part, per link and end to end: the medians over ``samples`` beside the
    evaluator's figures (module docstring)."""
    layers = {p["device"]: len(p["layers"]) for p in manifest["parts"]}
    parts: list[dict[str, Any]] = []
    for k, d in enumerate(devices):
        measured = _median([s["devices"][d]["compute_ms"] for s in samples])
        parts.append({"device": d, "layers": layers.get(d, 0), "measured_ms": measured,
                      "predicted_ms": float(predicted["parts_ms"][k]),
                      "ratio": _ratio(measured, float(predicted["parts_ms"][k])),
                      "pack_ms": _median([s["devices"][d]["pack_ms"] for s in samples]),
                      "unpack_ms": _median([s["devices"][d]["unpack_ms"] for s in samples]),
                      "waited_ms": _waited_ms(samples, d)})
    out_links: list[dict[str, Any]] = []
    crossings = list(manifest["crossings"])
    for k, (source, target) in enumerate(zip(devices, devices[1:])):
        # a link nothing crosses (e.g. an edge-only plan) reports no transfer: 0 ms, 0 bytes
        idle: dict[str, Any] = {"payload_bytes": 0, "bytes": 0, "transfer_ms": 0.0, "receive_ms": 0.0, "rtt_ms": 0.0}
        mine: list[Mapping[str, Any]] = [next((l for l in s["links"] if l["from"] == source), idle) for s in samples]
        evaluator = float(sum(evaluator_tensors[k].values()))
        tensors = [t["name"] for t in crossings[k]["tensors"]] if k < len(crossings) else []
        payload = _median([l["payload_bytes"] for l in mine])
        measured = _median([l["transfer_ms"] for l in mine])
        link = links[k]
        out_links.append({
            "source": source, "target": target, "tensors": tensors, "payload_bytes": payload,
            "wire_bytes": _median([l["bytes"] for l in mine]), "evaluator_bytes": evaluator,
            "bytes_ok": (not mine) or abs(payload - evaluator) < max(1, len(evaluator_tensors[k])),
            "bandwidth_bits_per_s": float(link.bandwidth_bits_per_s), "latency_ms": float(link.latency_ms),
            "measured_ms": measured, "predicted_ms": float(predicted["links_ms"][k]),
            "ratio": _ratio(measured, float(predicted["links_ms"][k])),
            "receive_ms": _median([l["receive_ms"] for l in mine]), "rtt_ms": _median([l["rtt_ms"] for l in mine])})
    first = devices[0]
    end = _median([s["devices"][first]["sample_ms"] for s in samples if s["devices"][first].get("sample_ms")
                   is not None])
    pieces = _median([sum(s["devices"][d]["compute_ms"] + s["devices"][d]["pack_ms"] + s["devices"][d]["unpack_ms"]
                          for d in devices) + sum(l["transfer_ms"] for l in s["links"]) for s in samples])
    total = float(predicted["total_ms"])
    return {"parts": parts, "links": out_links,
            "end_to_end": {"measured_ms": end, "sum_of_pieces_ms": pieces, "predicted_ms": total,
                           "ratio": _ratio(end, total),
                           "pack_unpack_ms": sum(p["pack_ms"] + p["unpack_ms"] for p in parts)}}
