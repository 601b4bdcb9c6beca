"""``splitopt run INSTANCE PLAN`` of an llm plan: one process per stage on this host, the
hidden states passed token by token over loopback TCP, greedy generation checked against
the unsplit model and timed against the evaluator.

Processes. One ``spawn`` process per stage of the plan, in pipeline order; each rebuilds
the decoder from the instance's ``source.hf_model`` with its seed (the same weights in every
process), keeps its own parts (:func:`splitopt.torch.llm.models.decoder_parts`), each block
with its own KV cache, at the profile's torch threads. Every stage listens on ``host``
(port 0, the system's choice) and connects to the next stage, the last to the first (the
sampled token goes back to the first stage, which feeds it to the next step: a ring).
The parent hands the ports around, waits for one report per stage with a deadline
(``run_timeout``), and on a failure, the deadline, Ctrl-C or SIGTERM stops every stage
(:mod:`splitopt.core.child_processes`); every stage exits when the parent is gone. Reads
on a socket time out after ``timeout`` seconds. Frames only (:mod:`splitopt.torch.llm.wire`),
no pickle; the reports go back on multiprocessing's pipe.

One generation: the first stage embeds the prompt (``P`` ids drawn from the model's
seed) and the stages prefill it in turn, each sending its hidden states ``(1, P, hidden)``
to the next; the last stage samples the first token (greedy) and sends it to the first;
then ``G - 1`` decode steps, one token through every stage and back. ``warmup`` untimed
generations, then ``repeats`` timed ones, every KV cache emptied before each.

Measured (CLOCK_MONOTONIC, shared by the processes of one host; ms; medians over the timed
generations): per stage its prefill compute and its mean decode step, each also as the
stage process's CPU time (``time.process_time``; beside the profile's CPU times of the
same parts where it holds them: CPU times that agree while wall times do not say the
stage waited for a core, not that it did more work); per link the
prefill transfer and the mean decode transfer (sender's start before packing to the
tensor unpacked); time to first token (the first stage starts the prefill until the
token is sampled, and until it is back at the first stage in a ring); the mean decode
step of one stream (a token from the first stage to the next sampled token, and back
in a ring) and tokens/s as the stream sees them (``G - 1`` steps from the first token
back at the first stage to the last, the return included whatever the topology). The
unsplit model (:func:`splitopt.torch.llm.models.reference_tokens`) runs in this process
afterwards at the same threads; ``ok``: every generation's tokens equal its tokens.
"""

from __future__ import annotations

import os
import statistics
import time
import traceback
from typing import Any, Mapping, Sequence

from splitopt.core.child_processes import ChildFailure, run_spawned
from splitopt.core.errors import SplitoptError


class LlmRunError(SplitoptError):
    """A stage process failed or the run passed its deadline (one line)."""


def stage_main(rank: int, spec: Mapping[str, Any], ports: Sequence[Any], results: Any) -> None:
    """One stage's process (module docstring); its report goes to ``results``."""
    from splitopt.core.child_processes import exit_with_parent

    exit_with_parent()
    try:
        results.put((rank, _stage(rank, spec, ports)))
    except BaseException as e:  # every failure goes back to the parent in one line
        results.put((rank, {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}))


def _stage(rank: int, spec: Mapping[str, Any], ports: Sequence[Any]) -> dict[str, Any]:
    import torch

    from splitopt.netrun.service import FrameService, connect
    from splitopt.torch.llm.models import build_model, decoder_parts, prompt_ids
    from splitopt.torch.llm.options import DecoderSpec
    from splitopt.torch.llm.wire import recv_tensor, send_tensor

    torch.set_num_threads(int(spec["threads"]))
    model_spec = DecoderSpec(**spec["model"])
    model = build_model(model_spec, int(spec["seed"]))
    first, end = spec["stages"][rank]
    parts = [p for _, p in decoder_parts(model, model_spec)[first:end]]
    world = len(spec["stages"])
    last = rank == world - 1
    P, G = int(spec["prompt_tokens"]), int(spec["generated_tokens"])
    prompt = prompt_ids(model_spec, P, int(spec["seed"]))
    host, timeout = spec["host"], float(spec["timeout_s"])
    up = down = service = None
    if world > 1:
        service = FrameService(host, 0, timeout_s=timeout)
        ports[rank].put(service.port)
        down = connect(host, int(ports[(rank + 1) % world].get(timeout=timeout)), timeout_s=timeout)
        up = service.accept()
    generations = []
    try:
        with torch.no_grad():
            for gen in range(int(spec["warmup"]) + int(spec["repeats"])):
                for part in parts:
                    part.reset()
                steps, tokens = [], []
                token: Any = None
                for step in range(G):
                    rec: dict[str, Any] = {}
                    x: Any
                    if rank == 0:
                        x = prompt if step == 0 else token
                    else:
                        _, _, rec["sent_ns"], x = recv_tensor(up, torch.float32)
                        rec["received_ns"] = time.monotonic_ns()
                    rec["start_ns"], rec["start_cpu_s"] = time.monotonic_ns(), time.process_time()
                    for part in parts:
                        x = part(x)
                    rec["end_ns"], rec["end_cpu_s"] = time.monotonic_ns(), time.process_time()
                    if last:
                        tokens.append(int(x.reshape(-1)[0]))
                    if down is not None:
                        send_tensor(down, step, gen, x if not last else x.to(torch.int64))
                    if rank == 0:
                        if world > 1:
                            _, _, rec["return_sent_ns"], back = recv_tensor(up, torch.int64)
                            rec["return_received_ns"] = time.monotonic_ns()
                            token = back.reshape(1, 1)
                        else:
                            token = x.reshape(1, 1)
                            rec["return_sent_ns"] = rec["return_received_ns"] = rec["end_ns"]
                    steps.append(rec)
                generations.append({"steps": steps, "tokens": tokens})
    finally:
        for conn in (up, down, service):
            if conn is not None:
                conn.close()
    return {"generations": generations, "parts": end - first}


def launch(spec: Mapping[str, Any], timeout_s: float) -> dict[int, dict[str, Any]]:
    """Start one spawn process per stage, collect one report each within ``timeout_s``;
    every process is ended whatever happens (LlmRunError on a failure or the deadline)."""
    world = len(spec["stages"])
    try:
        return run_spawned(stage_main, spec, [f"splitopt-llm-stage-{rank}" for rank in range(world)], world, timeout_s)
    except ChildFailure as f:
        device = spec["devices"][f.rank] if f.rank is not None else ""
        if f.kind == "timeout":
            raise LlmRunError(f"run: timed out after {timeout_s:g} s with {f.done} of {world} stage processes "
                              "done (--run-timeout)") from None
        if f.kind == "died":
            raise LlmRunError(f"run: stage '{device}' process died (exit code {f.exitcode})") from None
        raise LlmRunError(f"run: stage '{device}': {f.error}") from None


def _ms(a: int, b: int) -> float:
    return (b - a) / 1e6


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def generation_times(reports: Mapping[int, dict[str, Any]], gen: int, ring: bool) -> dict[str, Any]:
    """The times of generation ``gen`` (module docstring), ms."""
    world = len(reports)
    steps = [reports[r]["generations"][gen]["steps"] for r in range(world)]
    G = len(steps[0])
    last = world - 1

    def token_at(j: int) -> int:  # the token of step j is known: sampled (chain) or back at the first stage (ring)
        return steps[0][j]["return_received_ns"] if ring else steps[last][j]["end_ns"]

    decode = range(1, G)
    def cpu_ms(rec: Mapping[str, Any]) -> float:
        return 1000.0 * (rec["end_cpu_s"] - rec["start_cpu_s"])

    stages = [{"prefill_ms": _ms(steps[r][0]["start_ns"], steps[r][0]["end_ns"]),
               "decode_ms": _mean([_ms(steps[r][j]["start_ns"], steps[r][j]["end_ns"]) for j in decode]),
               "prefill_cpu_ms": cpu_ms(steps[r][0]), "decode_cpu_ms": _mean([cpu_ms(steps[r][j]) for j in decode])}
              for r in range(world)]
    links = []
    for r in range(world - 1):
        links.append({"prefill_ms": _ms(steps[r + 1][0]["sent_ns"], steps[r + 1][0]["received_ns"]),
                      "decode_ms": _mean([_ms(steps[r + 1][j]["sent_ns"], steps[r + 1][j]["received_ns"])
                                          for j in decode])})
    if world > 1:
        links.append({"prefill_ms": _ms(steps[0][0]["return_sent_ns"], steps[0][0]["return_received_ns"]),
                      "decode_ms": _mean([_ms(steps[0][j]["return_sent_ns"], steps[0][j]["return_received_ns"])
                                          for j in decode])})
    cycle = _ms(steps[0][0]["return_received_ns"], steps[0][G - 1]["return_received_ns"]) / (G - 1) if G > 1 else 0.0
    return {"ttft_ms": _ms(steps[0][0]["start_ns"], token_at(0)),
            "token_latency_ms": _mean([_ms(steps[0][j]["start_ns"], token_at(j)) for j in decode]),
            "cycle_ms": cycle, "stages": stages, "links": links}


def _median_of(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The median of every number across ``runs`` (same structure)."""
    first = runs[0]
    if isinstance(first, dict):
        return {k: _median_of([r[k] for r in runs]) for k in first}
    if isinstance(first, list):
        return [_median_of([r[i] for r in runs]) for i in range(len(first))]  # type: ignore[return-value]
    return statistics.median(runs)  # type: ignore[return-value]


def _ratio(measured: float, predicted: float) -> float | None:
    return measured / predicted if predicted > 0 else None


def profiled_cpu_ms(inst: Any, device: str, parts: Sequence[str]) -> dict[str, float] | None:
    """The profile's CPU times of ``parts`` on ``device`` summed: the prefill at the
    scenario's prompt and the decode step at its mean context (ms); None where the
    profile holds none."""
    from splitopt.families.llm.data import decode_contexts

    s = inst.settings
    measured = s.measured.get(device)
    if measured is None:
        return None
    first, last = decode_contexts(s)
    times = [measured.cpu_ms(name, s.prompt_tokens, (first + last) / 2.0) for name in parts]
    if any(t is None for t in times):
        return None
    return {"prefill_cpu_ms": sum(t[0] for t in times if t), "decode_cpu_ms": sum(t[1] for t in times if t)}


def run_plan(inst: Any, plan: Any, *, repeats: int = 3, warmup: int = 1, threads: int = 1, host: str = "127.0.0.1",
             timeout_s: float = 60.0, run_timeout_s: float = 900.0) -> dict[str, Any]:
    """Run ``plan`` of ``inst`` (module docstring): the JSON-ready report with measured and
    predicted figures per generation, stage and link, the tokens and ``ok``."""
    import torch

    from splitopt.families.llm.evaluate import evaluate
    from splitopt.torch.llm.models import prompt_ids, reference_tokens
    from splitopt.torch.llm.options import DecoderSpec

    raw = dict(inst.source["hf_model"])
    seed = int(raw.pop("seed"))
    model = DecoderSpec(**raw)
    s = inst.settings
    ring = s.topology == "ring"
    spec = {"model": model.to_json(), "seed": seed, "stages": [(st.start, st.end) for st in plan.stages],
            "devices": [st.device for st in plan.stages], "prompt_tokens": s.prompt_tokens,
            "generated_tokens": s.generated_tokens, "warmup": warmup, "repeats": repeats, "threads": threads,
            "host": host, "timeout_s": timeout_s}
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    reports = launch(spec, run_timeout_s)
    wall = time.perf_counter() - t0
    load_after = os.getloadavg()
    runs = [generation_times(reports, warmup + k, ring) for k in range(repeats)]
    last = len(plan.stages) - 1
    split_tokens = [reports[last]["generations"][g]["tokens"] for g in range(warmup + repeats)]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        reference = reference_tokens(model, seed, prompt_ids(model, s.prompt_tokens, seed), s.generated_tokens)
    finally:
        torch.set_num_threads(before)
    metrics = evaluate(inst, plan)
    measured = _median_of(runs)
    stages = []
    for k, (st, load) in enumerate(zip(plan.stages, metrics.stages)):
        stages.append({"device": st.device, "first": load.first, "last": load.last, "parts": load.parts,
                       "measured": measured["stages"][k],
                       "predicted": {"prefill_ms": load.prefill_ms, "decode_ms": load.decode_ms},
                       "profiled_cpu": profiled_cpu_ms(inst, st.device,
                                                       [inst.layers[i].name for i in range(st.start, st.end)])})
    links = []
    for k, load in enumerate(metrics.stages):
        if k < len(measured["links"]):
            modelled = k < last or ring
            links.append({"source": load.device, "target": plan.stages[(k + 1) % len(plan.stages)].device,
                          "carries": "the sampled token" if k == last else "hidden states",
                          "in_model": modelled, "measured": measured["links"][k],
                          "predicted": {"prefill_ms": load.send_prefill_ms, "decode_ms": load.send_decode_ms}
                          if modelled else None})
    predicted = {"ttft_ms": metrics.ttft_ms, "token_latency_ms": metrics.token_latency_ms,
                 "tokens_per_s": 1000.0 / metrics.token_latency_ms if metrics.token_latency_ms > 0 else None}
    tokens_per_s = 1000.0 / measured["cycle_ms"] if measured["cycle_ms"] > 0 else None
    same = all(t == reference for t in split_tokens)
    return {"instance": inst.name, "model": model.name, "seed": seed, "topology": s.topology,
            "prompt_tokens": s.prompt_tokens, "generated_tokens": s.generated_tokens, "processes": len(plan.stages),
            "threads": threads, "host": host, "warmup": warmup, "repeats": repeats, "wall_s": wall,
            "load_average": {"before": list(load_before), "after": list(load_after)},
            "measured": {"ttft_ms": measured["ttft_ms"], "token_latency_ms": measured["token_latency_ms"],
                         "cycle_ms": measured["cycle_ms"], "tokens_per_s": tokens_per_s},
            "predicted": predicted,
            "ratios": {"ttft": _ratio(measured["ttft_ms"], metrics.ttft_ms),
                       "tokens_per_s": (tokens_per_s / predicted["tokens_per_s"]
                                        if tokens_per_s and predicted["tokens_per_s"] else None)},
            "runs": [{"ttft_ms": r["ttft_ms"], "token_latency_ms": r["token_latency_ms"], "cycle_ms": r["cycle_ms"]}
                     for r in runs],
            "stages": stages, "links": links, "tokens": split_tokens[-1], "reference_tokens": reference,
            "tokens_equal": same, "ok": same}
