"""The llm family's torch side: ``splitopt profile MODEL`` builds a Hugging Face decoder from
its config (``gpt2``, ``gpt2-l..``, ``llama-l..``: :mod:`splitopt.torch.llm.options`) and
measures it on this host into an llm instance (:mod:`splitopt.torch.llm.profile`);
``splitopt run INSTANCE PLAN`` runs a plan of such an instance as one process per stage
and compares its greedy tokens with the unsplit model's and its times with the evaluator's
(:mod:`splitopt.torch.llm.run`). Imports no torch."""

from __future__ import annotations

from typing import Any, Mapping

from splitopt.core.errors import InvalidOption, InvalidPlan, NotApplicable
from splitopt.torch.llm.options import (LlmProfileOptions, LlmRunOptions, is_model_name, parse_devices,
                                        parse_lengths, parse_model)
from splitopt.torch.side import Profiled, TorchSide


def profiled_model(inst: Any, where: str) -> dict[str, Any]:
    """The decoder an instance was profiled from (``source.hf_model``) and its threads;
    NotApplicable (one line) for an instance ``splitopt profile`` did not make."""
    source = inst.source if isinstance(inst.source, dict) else {}
    raw = source.get("hf_model")
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise NotApplicable(f"{where}: no source.hf_model (runs need an instance made by `splitopt profile` of a "
                            "decoder, e.g. `splitopt profile llama-l6-h384-a6-kv2-i1024-v4096 -o INSTANCE`)")
    spec = parse_model(raw["name"], f"{where}: source.hf_model.name")
    if spec.to_json() != {k: raw.get(k) for k in spec.to_json()}:
        raise InvalidOption(f"{where}: source.hf_model: the sizes differ from those of the name '{spec.name}'")
    seed = raw.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise InvalidOption(f"{where}: source.hf_model.seed: must be an integer in [0, 2^32), got {seed!r}")
    threads = source.get("torch_threads", 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 256:
        raise InvalidOption(f"{where}: source.torch_threads: must be an integer in [1, 256], got {threads!r}")
    hosts = source.get("host_devices")
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise InvalidOption(f"{where}: source.host_devices: must list the devices that are processes of this host")
    return {"spec": spec, "seed": seed, "threads": threads, "host_devices": hosts}


class LlmSide(TorchSide):
    family = "llm"
    run_options = LlmRunOptions
    profile_options = LlmProfileOptions
    profile_models = ("gpt2", "gpt2-l4-h256-a4-v4096", "llama-l6-h384-a6-kv2-i1024-v4096")

    # ----- profile -------------------------------------------------------------------------------
    def builds_model(self, model: str) -> bool:
        return is_model_name(model)

    def check_profile_model(self, model: str, option: str = "MODEL") -> None:
        parse_model(model, option)

    def profile(self, model: str, options: LlmProfileOptions) -> Profiled:
        """Build ``model`` from its config and measure it here (:func:`splitopt.torch.llm.profile.profile_decoder`)."""
        from splitopt.torch.llm.profile import default_grids, profile_decoder

        spec = parse_model(model)
        P, G = options.prompt_tokens, options.generated_tokens
        if P + G > spec.max_context:
            raise InvalidOption(f"--prompt-tokens {P} + --generated-tokens {G}: longer than {model}'s "
                                f"{spec.max_context} positions")
        lengths, contexts = default_grids(P, G, spec.max_context)
        lengths = parse_lengths(options.prompt_lengths, "--prompt-lengths") or lengths
        contexts = parse_lengths(options.contexts, "--contexts") or contexts
        for option, values in (("--prompt-lengths", lengths), ("--contexts", contexts)):
            if values[-1] > spec.max_context:
                raise InvalidOption(f"{option}: {values[-1]} is longer than {model}'s {spec.max_context} positions")
        devices = parse_devices(options.devices)
        name = options.name or f"llm_{model.replace('-', '_')}_{len(devices)}proc"
        inst, rates = profile_decoder(spec, devices, P, G, lengths, contexts, options.repeats,
                                      options.torch_threads, options.seed, name)
        link = rates["link"]
        link_text = (f"; loopback {link['latency_ms']:.3f} ms + {link['bandwidth_bits_per_s'] / 1e9:.2f} Gbit/s"
                     if link else "")
        summary = (f"{len(inst.layers)} parts, {sum(l.weights for l in inst.layers) / 1e6:.2f} M weights, "
                   f"{len(devices)} device(s) ({', '.join(devices)}) measured here: prefill at {list(lengths)} tokens, "
                   f"decode at contexts {list(contexts)}; {rates['mac_per_s'] / 1e9:.1f} GMAC/s, "
                   f"{rates['offchip_bytes_per_s'] / 1e9:.1f} GB/s{link_text}")
        return Profiled(inst, summary)

    # ----- run -----------------------------------------------------------------------------------
    def check_run(self, inst: Any, options: LlmRunOptions, where: str) -> None:
        profiled_model(inst, where)

    def check_run_plan(self, inst: Any, plan: Any, options: LlmRunOptions, where: str) -> None:
        """Every stage's device is a process of this host and runs the model's precision."""
        from splitopt.torch.llm.models import MODEL_BITS

        hosts = profiled_model(inst, where)["host_devices"]
        for st in plan.stages:
            if st.device not in hosts:
                raise InvalidPlan(f"{where}: device '{st.device}' is not a process of this host (the run starts one "
                                  f"process per stage on this host: {', '.join(hosts)})")
            if st.bits != MODEL_BITS:
                raise InvalidPlan(f"{where}: device '{st.device}' at {st.bits}-bit weights; the run runs the model "
                                  f"in float32 ({MODEL_BITS} bits)")

    def run(self, inst: Any, plan: Any, options: LlmRunOptions, plan_path: str | None = None) -> dict[str, Any]:
        from splitopt.torch.llm.run import run_plan

        threads = options.torch_threads or profiled_model(inst, inst.name)["threads"]
        report = run_plan(inst, plan, repeats=options.repeats, warmup=options.warmup, threads=threads,
                          host=options.host, timeout_s=options.timeout, run_timeout_s=options.run_timeout)
        report["plan"] = plan_path
        return report

    def print_run(self, console: Any, report: Mapping[str, Any]) -> None:
        """Time to first token and tokens/s measured beside the evaluator's, per stage and
        per link, and the greedy tokens against the unsplit model's."""
        m, p, r = report["measured"], report["predicted"], report["ratios"]
        console.print(f"[bold]{report['instance']}[/bold] <- {report['plan']}: {report['model']}, "
                      f"{report['processes']} process(es) ({report['topology']}), prompt {report['prompt_tokens']} + "
                      f"{report['generated_tokens']} tokens, {report['threads']} thread(s) each, median of "
                      f"{report['repeats']} generation(s)", highlight=False)
        console.print(f"  time to first token: measured {m['ttft_ms']:.2f} ms, predicted {p['ttft_ms']:.2f} ms "
                      f"(ratio {r['ttft']:.2f})", highlight=False)
        console.print(f"  tokens/s (one stream): measured {m['tokens_per_s']:.1f}, predicted {p['tokens_per_s']:.1f} "
                      f"(ratio {r['tokens_per_s']:.2f}); decode step {m['token_latency_ms']:.2f} ms, predicted "
                      f"{p['token_latency_ms']:.2f} ms", highlight=False)
        for st in report["stages"]:
            sm, sp = st["measured"], st["predicted"]
            console.print(f"  stage {st['device']} ({st['first']}..{st['last']}): prefill {sm['prefill_ms']:.2f} ms "
                          f"(predicted {sp['prefill_ms']:.2f}), decode step {sm['decode_ms']:.3f} ms (predicted "
                          f"{sp['decode_ms']:.3f})", highlight=False)
            pc = st.get("profiled_cpu")
            profiled = (f" (profiled {pc['prefill_cpu_ms']:.2f} / {pc['decode_cpu_ms']:.3f})" if pc else "")
            console.print(f"    CPU time: prefill {sm['prefill_cpu_ms']:.2f} ms, decode step {sm['decode_cpu_ms']:.3f} "
                          f"ms{profiled}", highlight=False)
        for link in report["links"]:
            lm, lp = link["measured"], link["predicted"]
            pred = (f" (predicted {lp['prefill_ms']:.3f} / {lp['decode_ms']:.3f})" if lp is not None
                    else " (not in a chain's model)")
            console.print(f"  link {link['source']}->{link['target']} ({link['carries']}): prefill "
                          f"{lm['prefill_ms']:.3f} ms, decode {lm['decode_ms']:.3f} ms{pred}", highlight=False)
        load = report["load_average"]
        console.print(f"  load average (1/5/15 min): before {'/'.join(f'{x:.2f}' for x in load['before'])}, after "
                      f"{'/'.join(f'{x:.2f}' for x in load['after'])}", highlight=False)
        console.print(f"  greedy tokens: {report['tokens'][:12]}{' ...' if len(report['tokens']) > 12 else ''}",
                      highlight=False)
        console.print("[green]OK[/green]: the same greedy tokens as the unsplit model" if report["ok"]
                      else f"[red]MISMATCH[/red]: the unsplit model gives {report['reference_tokens'][:12]}")
