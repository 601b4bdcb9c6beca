"""``splitopt profile MODEL`` of a decoder: the llm instance of a Hugging Face decoder built
from its config (:mod:`splitopt.torch.llm.models`), with times measured on this host.

* **Parts**: embedding, one part per block, head, with the weights, MACs and output shapes
  of :func:`splitopt.families.llm.examples.decoder_layers` (the function that writes the
  public configs' instances) and the decoder's shape in ``settings.model``.
* **Times** (``settings.measured``, :mod:`splitopt.families.llm.measured`): the whole model
  runs part by part in this process, each part's call timed on its own
  (``time.perf_counter``, and its CPU time, ``time.process_time``), so that every part
  runs between the others as it does in a stage; per prompt length, a prefill of a fresh
  prompt (fresh KV caches); per context ``c``, one decode step with every KV cache holding
  ``c - 1`` positions (filled by an untimed prefill; the step's entry is dropped again
  after each run). Each pass starts after the process has slept :data:`WAIT_MS`, as a
  stage of a run computes right after it waited for its input: a step after a wait takes
  longer (caches and the core's state gone cold; on this 2-core host about twice the CPU
  time of back-to-back steps of a small model) and a profile of back-to-back steps
  predicts a run too fast. Each measurement: :data:`WARMUP` untimed runs, then the median
  of ``repeats`` (the rule of ``profile --measure``), at ``torch_threads`` intra-op
  threads, float32.
* **Devices**: one per name of ``--devices``, each a process on this host with the same
  measured times; its ``mac_per_s`` (a 512 x 512 float32 matrix product) and
  ``offchip_bytes_per_s`` (a copy of 256 MB) measured at the same thread count, for the
  roofline where no time is measured; its memory this host's divided among them.
* **Links** between every pair: measured on loopback TCP between two processes of this
  host with the frames a run sends (:mod:`splitopt.torch.llm.wire`), as a run hands over:
  before each transfer the sender computes for :data:`WAIT_MS` (matrix products of the
  model's hidden size, as a stage computes its parts) while the receiver waits in its
  read; a transfer right after computing takes longer than one after a sleep (on this
  host about twice, under load). The median transfer time of the hidden states of one token and of each measured
  prompt length, a least-squares line in the bits sent giving the latency (its intercept)
  and the rate.
* **Scenario**: ``--prompt-tokens``, ``--generated-tokens``, the context their sum, a ring
  (the last stage sends the sampled token back to the first, as a run does), float32
  weights, KV cache and hidden states (32 bits), objective ``token_latency``.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
from typing import Any, Sequence

import torch

from splitopt.core import progress
from splitopt.torch.llm.models import MODEL_BITS, build_model, decoder_parts, prompt_ids
from splitopt.torch.llm.options import DecoderSpec

#: untimed runs before each measurement
WARMUP = 2
#: the elements of the host-rate probes: a 512 x 512 matrix product, a 256 MB copy
MATMUL_SIDE, COPY_ELEMENTS = 512, 64 * 1024 * 1024
#: the least slope of a link's fit (ms per bit: 1 Tbit/s), where the bits' time is below the noise
MIN_MS_PER_BIT = 1e-9
#: ms the process sleeps before each timed pass over the parts, and the sender of a link
#: measurement computes before each transfer: in a run a stage waits for its input while
#: the other stages compute, and its compute after the wait and a transfer from a stage
#: that has just computed to a waiting one take longer than back-to-back runs
WAIT_MS = 10.0


def default_grids(prompt: int, generated: int, max_context: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The prompt lengths and contexts measured unless given: ``P/4, P/2, P, 2P`` and
    ``P/2, P + 1, P + G/2, P + G`` (within the model's context)."""
    lengths = sorted({max(1, prompt // 4), max(1, prompt // 2), prompt, min(2 * prompt, max_context)})
    last = min(prompt + generated, max_context)
    contexts = sorted({max(2, prompt // 2), min(prompt + 1, last), min(prompt + max(1, generated // 2), last), last})
    if len(contexts) < 2:
        contexts = [max(1, last - 1), last]
    return tuple(lengths), tuple(contexts)


def machine_text() -> str:
    """This host's processor and cores (``/proc/cpuinfo``'s model name)."""
    model = "unknown processor"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical cores"


def _median_ms(times: Sequence[float]) -> float:
    return 1000.0 * statistics.median(times)


def measure_parts(parts: Sequence[tuple[str, Any]], spec: DecoderSpec, prompt_lengths: Sequence[int],
                  contexts: Sequence[int], repeats: int, seed: int) -> dict[str, dict[str, list[float]]]:
    """Per part its ``prefill_ms``, ``prefill_cpu_ms`` (per prompt length) and ``decode_ms``,
    ``decode_cpu_ms`` (per context), medians (module docstring)."""
    names = [n for n, _ in parts]
    out: dict[str, dict[str, list[float]]] = {n: {"prefill_ms": [], "decode_ms": [], "prefill_cpu_ms": [],
                                                  "decode_cpu_ms": []} for n in names}

    def timed_pass(x: Any, wall: dict[str, list[float]], cpu: dict[str, list[float]], keep: bool) -> None:
        time.sleep(WAIT_MS / 1000.0)
        for name, part in parts:
            t0, c0 = time.perf_counter(), time.process_time()
            x = part(x)
            t1, c1 = time.perf_counter(), time.process_time()
            if keep:
                wall[name].append(t1 - t0)
                cpu[name].append(c1 - c0)

    with torch.no_grad():
        for P in prompt_lengths:
            progress.step(f"prefill of {P} tokens")
            ids = prompt_ids(spec, P, seed)
            wall: dict[str, list[float]] = {n: [] for n in names}
            cpu: dict[str, list[float]] = {n: [] for n in names}
            for r in range(WARMUP + repeats):
                for _, part in parts:
                    part.reset()
                timed_pass(ids, wall, cpu, r >= WARMUP)
            for n in names:
                out[n]["prefill_ms"].append(_median_ms(wall[n]))
                out[n]["prefill_cpu_ms"].append(_median_ms(cpu[n]))
        for c in contexts:
            progress.step(f"decode step at context {c}")
            for _, part in parts:
                part.reset()
            token = prompt_ids(spec, c, seed)
            x = token[:, :c - 1]
            if c > 1:
                for _, part in parts:
                    x = part(x)
            wall, cpu = {n: [] for n in names}, {n: [] for n in names}
            for r in range(WARMUP + repeats):
                timed_pass(token[:, c - 1:], wall, cpu, r >= WARMUP)
                for _, part in parts:
                    part.drop_last()
            for n in names:
                out[n]["decode_ms"].append(_median_ms(wall[n]))
                out[n]["decode_cpu_ms"].append(_median_ms(cpu[n]))
    progress.step("")
    return out


def host_rates(repeats: int = 5) -> tuple[float, float]:
    """``(MAC/s, bytes/s)`` of this host at torch's current threads: a float32 matrix
    product and a copy (median of ``repeats``)."""
    a = torch.randn(MATMUL_SIDE, MATMUL_SIDE)
    b = torch.randn(MATMUL_SIDE, MATMUL_SIDE)
    src = torch.ones(COPY_ELEMENTS)
    dst = torch.empty_like(src)
    mm, cp = [], []
    for r in range(1 + repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        t1 = time.perf_counter()
        dst.copy_(src)
        t2 = time.perf_counter()
        if r:
            mm.append(t1 - t0)
            cp.append(t2 - t1)
    return MATMUL_SIDE ** 3 / statistics.median(mm), 2 * 4 * COPY_ELEMENTS / statistics.median(cp)


def _link_receiver(host: str, ports: Any, results: Any, transfers: int, threads: int, timeout_s: float) -> None:
    """The receiving process of :func:`measure_link`: one connection, ``transfers``
    tensors, each acknowledged; its receive times go back on ``results``."""
    import traceback

    from splitopt.core.child_processes import exit_with_parent
    from splitopt.netrun.frames import ack_frame
    from splitopt.netrun.service import FrameService
    from splitopt.torch.llm.wire import recv_tensor

    exit_with_parent()
    torch.set_num_threads(threads)
    try:
        with FrameService(host, 0, timeout_s=timeout_s) as service:
            ports.put(service.port)
            conn = service.accept()
            times = []
            for _ in range(transfers):
                step, _, start, _ = recv_tensor(conn, torch.float32)
                times.append((step, (time.monotonic_ns() - start) / 1e6))
                conn.sendall(ack_frame(step))
            conn.close()
        results.put((0, {"times": times}))
    except Exception as e:  # the parent reports it in one line
        results.put((0, {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}))


def queue_get(queue: Any, procs: Sequence[Any], timeout_s: float, what: str) -> Any:
    """The next item of ``queue`` within ``timeout_s``; SplitoptError (one line naming
    ``what``) when one of ``procs`` ends first or the time passes."""
    import queue as queue_mod

    from splitopt.core.errors import SplitoptError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return queue.get(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
        except queue_mod.Empty:
            dead = [p for p in procs if not p.is_alive()]
            if dead:
                raise SplitoptError(f"{what} ended (exit code {dead[0].exitcode}) before it was ready") from None
            if time.monotonic() >= deadline:
                raise SplitoptError(f"{what} was not ready within {timeout_s:g} s") from None


def compute_for(seconds: float, a: torch.Tensor, b: torch.Tensor) -> None:
    """Matrix products ``a @ b`` for ``seconds`` (the sender's compute before a hand-over)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        torch.mm(a, b)


def measure_link(hidden: int, lengths: Sequence[int], repeats: int, threads: int, host: str = "127.0.0.1",
                 timeout_s: float = 60.0) -> tuple[float, float, list[dict[str, float]]]:
    """``(latency ms, bits/s, points)`` of loopback TCP between two processes of this host
    (module docstring); ``points``: per size the bits and the median ms."""
    import multiprocessing as mp

    from splitopt.core.child_processes import ChildFailure, collect_reports, stop_processes
    from splitopt.core.errors import SplitoptError
    from splitopt.families.llm.measured import affine_fit
    from splitopt.netrun.frames import ACK, Kind
    from splitopt.netrun.service import connect
    from splitopt.torch.llm.wire import send_tensor

    sizes = sorted({1, *lengths})
    ctx = mp.get_context("spawn")
    ports, results = ctx.Queue(), ctx.Queue()
    count = len(sizes) * (WARMUP + repeats)
    proc = ctx.Process(target=_link_receiver, args=(host, ports, results, count, threads, timeout_s), daemon=True,
                       name="splitopt-llm-link")
    proc.start()
    try:
        conn = connect(host, int(queue_get(ports, [proc], timeout_s, "the link's receiving process")),
                       timeout_s=timeout_s)
        step = 0
        work = (torch.randn(16, hidden), torch.randn(hidden, 4 * hidden))
        for T in sizes:
            x = torch.randn(1, T, hidden)
            for _ in range(WARMUP + repeats):
                compute_for(WAIT_MS / 1000.0, *work)
                send_tensor(conn, step, 0, x)
                ack = conn.read()
                if ack.kind is not Kind.ACK or ACK.unpack(ack.payload)[0] != step:
                    raise SplitoptError(f"profile: link measurement: expected the ACK of transfer {step}")
                step += 1
        conn.close()
        try:
            times = dict(collect_reports([proc], results, timeout_s)[0]["times"])
        except ChildFailure as f:
            raise SplitoptError(f"profile: link measurement: receiving process failed ({f.kind} {f.error})") from None
    finally:
        stop_processes([proc])
        for q in (ports, results):
            q.close()
            q.cancel_join_thread()
    points, k = [], 0
    for T in sizes:
        runs = [times[k + WARMUP + r] for r in range(repeats)]
        points.append({"bits": float(T * hidden * 32), "ms": statistics.median(runs)})
        k += WARMUP + repeats
    alpha, beta = affine_fit([p["bits"] for p in points], [p["ms"] for p in points])
    return max(alpha, 0.0), 1000.0 / max(beta, MIN_MS_PER_BIT), points


def memory_bytes() -> float:
    """This host's memory (bytes), from ``sysconf``."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError):
        return 8e9


def profile_decoder(spec: DecoderSpec, devices: Sequence[str], prompt: int, generated: int,
                    prompt_lengths: Sequence[int], contexts: Sequence[int], repeats: int, threads: int, seed: int,
                    name: str) -> tuple[Any, dict[str, Any]]:
    """The validated instance (module docstring) and what was measured besides the
    parts (host rates, link points)."""
    from splitopt.api import parse_instance
    from splitopt.core import presets
    from splitopt.families.llm.examples import decoder_instance_data

    torch.set_num_threads(threads)
    with progress.phase(f"building {spec.name}"):
        model = build_model(spec, seed)
        parts = decoder_parts(model, spec)
    with progress.phase("measuring the parts"):
        times = measure_parts(parts, spec, prompt_lengths, contexts, repeats, seed)
    with progress.phase("measuring this host's rates"):
        mac_rate, bandwidth = host_rates()
    links: list[dict[str, Any]] = []
    link_info: dict[str, Any] = {}
    if len(devices) > 1:
        with progress.phase("measuring loopback TCP between two processes"):
            latency, rate, points = measure_link(spec.hidden, prompt_lengths, repeats, threads)
        links = [presets.link(a, b, rate, latency) for a in devices for b in devices if a != b]
        link_info = {"latency_ms": latency, "bandwidth_bits_per_s": rate, "points": points}
    where, when = machine_text(), datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    how = (f"median of {repeats} runs after {WARMUP} warm-up runs, the whole model run part by part in one process, "
           f"each pass after a {WAIT_MS:g} ms sleep (as a stage computes after waiting for its input), "
           f"torch {torch.__version__}, {threads} intra-op thread(s), float32")
    measured = {"weight_bits": MODEL_BITS, "prompt_tokens": list(prompt_lengths), "contexts": list(contexts),
                "parts": times,
                "how": how, "where": where, "when": when}
    memory = memory_bytes() / len(devices)
    devs = [{"name": d, "description": f"a process on this host ({where}); rates measured by splitopt profile",
             "mac_per_s": mac_rate, "offchip_bytes_per_s": bandwidth, "onchip_bytes": 0, "memory_bytes": memory,
             "bit_widths": [MODEL_BITS]} for d in devices]
    import transformers

    source = {"generator": "splitopt.torch.llm.profile", "hf_model": dict(spec.to_json(), seed=seed),
              "hf_source": "openai-community/gpt2 (config only)" if spec.name == "gpt2" else "built from its name",
              "torch": torch.__version__, "transformers": transformers.__version__, "torch_threads": threads,
              "host_devices": list(devices), "machine": where, "measured_at": when,
              "links": ("loopback TCP between two processes of this host, measured (latency: intercept, rate: slope "
                        "of the median transfer time against the bits sent)") if links else "none",
              "device_rates": "mac_per_s: a 512 x 512 float32 matrix product; offchip_bytes_per_s: a 256 MB copy"}
    data = decoder_instance_data(
        name, spec.config(), devs, links,
        description=f"{spec.name} ({spec.arch} architecture, random weights) over {len(devices)} process(es) of "
                    f"this host, times measured here",
        source=source, objective="token_latency", prompt_tokens=prompt, generated_tokens=generated,
        context_limit=prompt + generated, topology="ring", bit_widths=[MODEL_BITS], kv_bits=MODEL_BITS,
        activation_bits=MODEL_BITS, measured={d: measured for d in devices})
    return parse_instance(data), {"mac_per_s": mac_rate, "offchip_bytes_per_s": bandwidth, "link": link_info}
