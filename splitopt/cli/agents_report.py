"""The report of ``splitopt run INSTANCE PLAN --agents SPEC``
(:func:`splitopt.agents.run_plan.run_on_agents`) for people: the agents, per part and
per link the measured medians beside the evaluator's, end to end, the throughput of the
pipelined run, the bytes and the output check."""

from __future__ import annotations

from typing import Any, Mapping


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.3f}"


def _rate(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}"


def _print_throughput(console: Any, t: Any) -> None:
    """The pipelined run's line and its stages (or why the throughput is not measured)."""
    if isinstance(t, str):
        console.print(f"  throughput: {t}", highlight=False)
        return
    period = "-" if t["period_ms"] is None else f"{t['period_ms']:.2f} ms"
    console.print(f"  throughput, pipelined ({t['samples']} sample(s)): {_rate(t['measured_per_s'])} samples/s "
                  f"({_rate(t['predicted_per_s'])} predicted; {_ratio(t['ratio'])}), a sample every {period} on "
                  f"{t['period_device']}; bottleneck (predicted) {t['bottleneck_predicted']}; one sample at a time "
                  f"{_rate(t['one_at_a_time_per_s'])} samples/s", highlight=False)
    stages = ", ".join(f"{s['device']} {s['measured_ms']:.2f} ms ({s['predicted_ms']:.2f})" for s in t["stages"])
    console.print(f"    stages, compute + pack/unpack + wait for the next device (predicted): {stages}",
                  highlight=False)
    c = t["check"]
    if c.get("samples"):
        colour = "green" if c["ok"] else "red"
        console.print(f"    outputs vs the same parts in one process: max abs difference "
                      f"{c['max_abs_diff_reference']:.3g} ([{colour}]{'ok' if c['ok'] else 'differ'}[/{colour}])",
                      highlight=False)


def print_agents_report(console: Any, report: Mapping[str, Any]) -> None:
    """Print ``report`` on a ``rich`` console."""
    devices = report["devices"]
    console.print(f"[bold]{report['instance']}[/bold] <- {report['model']} (seed {report['seed']}): "
                  f"{'quantized' if report['quantized'] else 'float'} {report['problem']} plan on {len(devices)} "
                  f"agents, {report['completed']} of {report['samples']} sample(s) measured after "
                  f"{report['warmup']} warm-up", highlight=False)
    for d in devices:
        a = report["agents"][d]
        quota = a["cpu_quota"]
        console.print(f"  agent {d} at {a['address']} (host {a['hostname']}, {a['threads']} thread(s), "
                      f"{'CPU quota ' + format(quota, 'g') if quota is not None else 'no CPU quota'}, "
                      f"onnxruntime {a['onnxruntime']})", highlight=False)
    if report["completed"]:
        console.print(f"  one sample at a time, medians of {report['completed']} sample(s), measured (predicted "
                      f"by the evaluator; measured/predicted):", highlight=False)
        for k, p in enumerate(report["parts"]):
            waited = p.get("waited_ms")
            after = f", after {waited:.1f} ms waiting for its input" if p["layers"] and waited is not None else ""
            console.print(f"    part {p['device']} ({p['layers']} layers): {p['measured_ms']:.2f} ms "
                          f"({p['predicted_ms']:.2f} ms; {_ratio(p['ratio'])}{after})", highlight=False)
            if k < len(report["links"]):
                l = report["links"][k]
                console.print(f"    link {l['source']}->{l['target']}: {l['measured_ms']:.2f} ms "
                              f"({l['predicted_ms']:.2f} ms at {l['bandwidth_bits_per_s']:,.0f} bits/s + "
                              f"{l['latency_ms']:.3g} ms; {_ratio(l['ratio'])}); payload {l['payload_bytes']:,.0f} B "
                              f"(evaluator {l['evaluator_bytes']:,.1f} B), {l['wire_bytes']:,.0f} B on the wire",
                              highlight=False)
        e = report["end_to_end"]
        console.print(f"    end to end: {e['measured_ms']:.2f} ms ({e['predicted_ms']:.2f} ms; {_ratio(e['ratio'])}); "
                      f"pack + unpack {e['pack_unpack_ms']:.2f} ms (not in the evaluator's model)", highlight=False)
    c = report["check"]
    if c.get("samples"):
        line = (f"  outputs vs the same parts in one process: max abs difference {c['max_abs_diff_reference']:.3g} "
                f"(must be <= {c['tolerance']:.3g})")
        if "relative_mse_reference" in c:
            line += (f", relative MSE {c['relative_mse_reference']:.3g} (or <= {c['relative_mse_limit']:.3g}, a share "
                     f"of the plan's quantization error)")
        if "max_abs_diff_unsplit" in c:
            line += f"; vs the unsplit model {c['max_abs_diff_unsplit']:.3g}"
        else:
            line += f"; relative MSE vs the unsplit model {c['relative_mse_unsplit']:.3g} (crossings below 32 bits)"
        console.print(line, highlight=False)
    _print_throughput(console, report["throughput"])
    if not report["bytes_match"] or not all(l["bytes_ok"] for l in report["links"]):
        console.print("  [red]bytes differ from the evaluator's[/red]", highlight=False)
    if report["error"]:
        console.print(f"  [red]{report['error']}[/red]", highlight=False)
    console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]" if not report["error"]
                  else "[red]STOPPED[/red]")
