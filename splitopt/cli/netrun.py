"""``splitopt run-tcp INSTANCE PLAN --model NAME``: the former name of ``splitopt run
--transport tcp`` (a hidden alias, as it was: same options, output and exit codes; its
``--timeout`` is the seconds a peer may stay silent): an edge/cloud or chain plan as one
process per device on this host, the crossing tensors quantized, bit-packed and sent over
TCP through a link paced at the instance's bandwidth (bits/s) and latency (ms); measured
ms per part and per link against the evaluator (:mod:`splitopt.netrun.runner`). Also the
printing of a TCP run's report, which ``splitopt run --transport tcp`` shares.
"""

from pathlib import Path
from typing import Optional

import typer

from splitopt.cli.model_options import input_dtype_option, input_high_option, input_shape_option, seed_option


def run_tcp_command(
    instance: Path = typer.Argument(..., help="Instance JSON file: problem split, split_bits or chain (e.g. made by `splitopt profile MODEL --measure`)."),
    plan: Optional[Path] = typer.Argument(None, help="Plan JSON file (or the output of `solve --json`); leave out with --breakpoints."),
    model: str = typer.Option(..., "--model", "-m", help="Model to rebuild in every process: resnet50, mobilenet_v2, googlenet, tiny_gpt2, or a user model PATH.py:FACTORY (the one given to `profile`)."),
    breakpoints: Optional[Path] = typer.Option(None, "--breakpoints", help="A breakpoint table (`splitopt bandwidth INSTANCE --exact -o TABLE`) in place of PLAN: every interval's plan is built at start; the plan in use follows the bandwidth (--bandwidth-schedule)."),
    schedule: Optional[str] = typer.Option(None, "--bandwidth-schedule", help="With --breakpoints: SAMPLE:BITS_PER_S pairs, comma-separated, e.g. 0:20e6,5:2e6; before measured sample SAMPLE the table's link gets that bandwidth (the pacer) and the run switches to that interval's plan. Default: the link's bandwidth in the instance."),
    samples: int = typer.Option(5, "--samples", "-n", help="Measured samples (one at a time, closed loop)."),
    warmup: int = typer.Option(1, "--warmup", help="Samples run before the measured ones (not reported in the medians)."),
    seed: int = seed_option(),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the receiving devices bind to and the senders connect to."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds a connected peer may stay silent before the receiver drops the connection."),
    run_timeout: float = typer.Option(1800.0, "--run-timeout", help="Seconds for the whole run (building the model in every process included); then every process is stopped."),
    max_frame_bytes: int = typer.Option(256 * 1024 * 1024, "--max-frame-bytes", help="Largest frame payload a receiver accepts, bytes; a larger one is refused (one logged line) and the connection dropped."),
    chunk_bytes: int = typer.Option(1448, "--chunk-bytes", help="Bytes the pacer writes at a time (each at the time its last bit would arrive over the link)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Torch threads per process (default: this process's torch default)."),
    check: bool = typer.Option(True, "--check/--no-check", help="Also run the single-process split (same parts, same packing) and compare outputs."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    input_shape: Optional[str] = input_shape_option(),
    input_dtype: Optional[str] = input_dtype_option(),
    input_high: Optional[int] = input_high_option(),
) -> None:
    """Former name of `splitopt run --transport tcp` (kept so that existing commands work)."""
    from splitopt.cli.common import console, errors, print_json, require_torch
    from splitopt.cli.former import former_name_notice
    from splitopt.core.errors import InvalidOption

    former_name_notice("run-tcp", "run --transport tcp")
    with errors():
        from splitopt.netrun.setup import TcpOptions

        options = TcpOptions(model=model, samples=samples, warmup=warmup, seed=seed, host=host, timeout=timeout,
                             run_timeout=run_timeout, max_frame_bytes=max_frame_bytes, chunk_bytes=chunk_bytes,
                             threads=threads, check=check, input_shape=input_shape, input_dtype=input_dtype,
                             input_high=input_high, breakpoints=breakpoints, bandwidth_schedule=schedule)
        if (plan is None) == (breakpoints is None):
            raise InvalidOption("run-tcp: give a PLAN file or --breakpoints TABLE (exactly one)")
        steps = options.schedule()
        from splitopt.api import load_instance
        from splitopt.core.errors import InvalidPlan
        from splitopt.core.jsonfile import read_json
        from splitopt.netrun.runner import run_tcp_options
        from splitopt.netrun.setup import read_table

        inst = load_instance(instance)
        plan_dict = table = None
        if plan is not None:
            plan_dict = read_json(plan, InvalidPlan)
        else:
            assert breakpoints is not None  # exactly one of PLAN and --breakpoints (checked above)
            table = read_table(inst, breakpoints)
        require_torch("run-tcp")
        report = run_tcp_options(instance, plan_dict, table, options, steps)
    if as_json:
        print_json(report)
    else:
        print_tcp_report(console, report)
    if not report["ok"]:
        raise typer.Exit(1)


def print_tcp_report(console, report: dict) -> None:
    """A TCP run's report (:func:`splitopt.netrun.runner.run_tcp`) for people: per segment
    of samples the measured ms per part and link beside the evaluator's, per plan the
    bytes per link, and the output check."""
    devices = report["devices"]
    console.print(f"[bold]{report['instance']}[/bold] <- {report['model']} (seed {report['seed']}): "
                  f"{len(devices)} processes ({', '.join(devices)}) over TCP on {report['host']}, "
                  f"{report['samples']} sample(s) after {report['warmup']} warm-up, {report['threads']} torch "
                  f"thread(s) each", highlight=False)
    for l in report["links"]:
        console.print(f"  link {l['source']}->{l['target']}: {l['bandwidth_bits_per_s']:,.0f} bits/s, "
                      f"{l['latency_ms']:g} ms (paced by the sender)", highlight=False)
    for w in report["switches"]:
        console.print(f"  sample {w['sample']}: bandwidth {w['bandwidth']:,.0f} bits/s -> plan {w['to_plan']} "
                      f"(was {w['from_plan']})", highlight=False)
    for seg in report["segments"]:
        p, m = seg["predicted"], seg["measured"]
        bw = "" if seg["bandwidth"] is None else f", {seg['bandwidth']:,.0f} bits/s"
        console.print(f"  samples {seg['first_sample']}..{seg['last_sample']} (plan {seg['plan']}{bw}), medians "
                      f"of {seg['count']}:", highlight=False)
        for k, d in enumerate(devices):
            console.print(f"    part {d}: {m['parts_ms'][k]:.2f} ms (evaluator {p['parts_ms'][k]:.2f} ms)",
                          highlight=False)
            if k < len(devices) - 1:
                console.print(f"    link {d}->{devices[k + 1]}: {m['links_ms'][k]:.2f} ms (evaluator "
                              f"{p['links_ms'][k]:.2f} ms)", highlight=False)
        ratio = "-" if seg["ratio"] is None else f"{seg['ratio']:.3f}"
        console.print(f"    pack {m['pack_ms']:.2f} ms + unpack {m['unpack_ms']:.2f} ms (not in the model); total "
                      f"{m['total_ms']:.2f} ms, evaluator {p['total_ms']:.2f} ms, measured/predicted {ratio}",
                      highlight=False)
    for plan in report["plans"]:
        for l in plan["links"]:
            console.print(f"  plan {plan['index']} {l['source']}->{l['target']}: "
                          f"{[t['tensor'] for t in l['tensors']] or '-'}: payload {l['payload_bytes']:,} B "
                          f"(evaluator {l['evaluator_bytes']:,.1f} B), headers {l['packing_header_bytes']} B packing "
                          f"+ {l['frame_header_bytes']} B frames", highlight=False)
    for line in report["rejected"]:
        console.print(f"  [yellow]{line}[/yellow]", highlight=False)
    if "max_abs_diff" in report:
        console.print(f"  max abs difference vs the single-process split (same packing): "
                      f"{report['max_abs_diff']:.3g} (must be <= {report['float_atol']:g}); relative MSE vs unsplit "
                      f"{report['relative_mse_vs_unsplit']:.3g}", highlight=False)
    console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
