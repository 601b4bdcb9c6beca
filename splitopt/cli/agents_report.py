"""The report of ``splitopt run INSTANCE PLAN --agents SPEC``
(:func:`splitopt.agents.run_plan.run_on_agents`) for people: the agents, per part and
per link the measured medians beside the evaluator's, end to end, the bytes and the
output check."""

from __future__ import annotations

from typing import Any, Mapping


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.3f}"


def print_agents_report(console: Any, report: Mapping[str, Any]) -> None:
    """Print ``report`` on a ``rich`` console."""
    devices = report["devices"]
    console.print(f"[bold]{report['instance']}[/bold] <- {report['model']} (seed {report['seed']}): "
                  f"{'quantized' if report['quantized'] else 'float'} {report['problem']} plan on {len(devices)} "
                  f"agents, {report['completed']} of {report['samples']} sample(s) measured after "
                  f"{report['warmup']} warm-up, one sample at a time", highlight=False)
    for d in devices:
        a = report["agents"][d]
        quota = a["cpu_quota"]
        console.print(f"  agent {d} at {a['address']} (host {a['hostname']}, {a['threads']} thread(s), "
                      f"{'CPU quota ' + format(quota, 'g') if quota is not None else 'no CPU quota'}, "
                      f"onnxruntime {a['onnxruntime']})", highlight=False)
    if report["completed"]:
        console.print(f"  medians of {report['completed']} sample(s), measured (predicted by the evaluator; "
                      f"measured/predicted):", highlight=False)
        for k, p in enumerate(report["parts"]):
            console.print(f"    part {p['device']} ({p['layers']} layers): {p['measured_ms']:.2f} ms "
                          f"({p['predicted_ms']:.2f} ms; {_ratio(p['ratio'])})", highlight=False)
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
    console.print(f"  throughput: {report['throughput']}", highlight=False)
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
    if not report["bytes_match"] or not all(l["bytes_ok"] for l in report["links"]):
        console.print("  [red]bytes differ from the evaluator's[/red]", highlight=False)
    if report["error"]:
        console.print(f"  [red]{report['error']}[/red]", highlight=False)
    console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]" if not report["error"]
                  else "[red]STOPPED[/red]")
