"""The llm family's report: one row per stage in pipeline order (its parts, bit-width,
prefill and decode times, what it sends), the dry-run memory of each device before
anything loads (weights, KV cache, activations, the KV cache tokens that would fit), the
three objectives, and the plan as runtimes take it."""

from __future__ import annotations

from splitopt.core.instance import Instance
from splitopt.families.llm.evaluate import LlmMetrics, size_text
from splitopt.families.llm.plan import LlmPlan, runtime_assignment
from splitopt.families.llm.settings import LlmSettings


def report(console, inst: Instance[LlmSettings], plan: LlmPlan, m: LlmMetrics, show_layers: bool = True) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    s = inst.settings
    table = Table(title=esc(f"{s.topology.capitalize()} of {len(m.stages)} device(s): prompt {s.prompt_tokens:,} "
                            f"tokens, {s.generated_tokens:,} generated, context {s.context_limit:,}, "
                            f"{s.streams} stream(s), KV cache at {s.kv_bits} bits"))
    for col in ("device", "layers", "bits", "prefill ms", "decode ms", "sends to", "send ms (prefill/decode)"):
        table.add_column(col, justify="left" if col in ("device", "layers", "sends to") else "right")
    for st in m.stages:
        layers = f"{st.first}..{st.last} ({st.parts})" if show_layers else str(st.parts)
        table.add_row(esc(st.device), esc(layers), str(st.bits), f"{st.prefill_ms:.3f}",
                      f"{st.decode_ms:.4f}", esc(st.send_to or ""),
                      f"{st.send_prefill_ms:.3f} / {st.send_decode_ms:.4f}" if st.send_to else "")
    console.print(table)
    memory = Table(title="Memory per device (dry run, before loading)")
    for col in ("device", "weights", "KV cache", "activations", "total", "memory", "KV tokens that fit"):
        memory.add_column(col, justify="left" if col == "device" else "right")
    for st in m.stages:
        fit = "-" if st.kv_tokens_fit is None else f"{st.kv_tokens_fit:,}"
        memory.add_row(esc(st.device), size_text(st.weight_bytes), size_text(st.kv_bytes), size_text(st.activation_bytes),
                       size_text(st.memory_bytes), size_text(st.memory_limit), fit)
    console.print(memory)
    stream = 1000.0 / m.token_latency_ms if m.token_latency_ms > 0 else float("inf")
    console.print(f"[bold]Time to first token[/bold] {m.ttft_ms:.3f} ms   [bold]Per token[/bold] "
                  f"{m.token_latency_ms:.4f} ms ({stream:.2f} tokens/s, one stream)   [bold]Pipeline[/bold] "
                  f"{m.ms_per_token:.4f} ms per token ({m.tokens_per_s:.2f} tokens/s over {m.streams} stream(s); "
                  f"limited by {esc(m.bottleneck)})")
    if s.error_budget is not None:
        console.print(f"[bold]Error[/bold] {m.error:.6g} (budget {s.error_budget:.6g})")
    if s.has_time_limits:
        console.print(f"[bold]Limits[/bold] {esc(', '.join(s.limit_texts()))}")
    runtime = runtime_assignment(inst, plan)
    console.print("[bold]Runtime layers[/bold] " + "; ".join(
        esc(f"{r['device']}: blocks [{r['first_block']}, {r['end_block']})"
            + (" + embedding" if r["embedding"] else "") + (" + head" if r["head"] else "")
            + f", {r['weight_bits']}-bit, KV cache {r['kv_cache_tokens']:,} tokens") for r in runtime))
    for v in m.violations:
        console.print(f"[red]VIOLATION[/red] {esc(v)}")
