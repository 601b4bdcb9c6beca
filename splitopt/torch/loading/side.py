"""The loading family's torch side: ``splitopt profile`` measures a block model on this
host into a loading instance (:func:`splitopt.torch.loading.profile.profile_loading`);
``splitopt run`` writes a plan's child models, loads them as the plan says and compares
the first response with the evaluator and the monolithic model
(:func:`splitopt.torch.loading.run.run_loading`), optionally fine-tuning the last child.
Imports no torch."""

from __future__ import annotations

from typing import Any, Mapping

from splitopt.core.errors import InvalidOption, NotApplicable
from splitopt.torch.loading.options import MODEL_NAMES, LoadingProfileOptions, LoadingRunOptions, check_block_model
from splitopt.torch.side import Profiled, TorchSide


def profiled_torch_threads(inst: Any, where: str) -> int:
    """The torch intra-op threads ``inst`` was profiled with (``source.torch_threads``,
    default 1); InvalidOption (one line) for another value."""
    source = inst.source if isinstance(inst.source, dict) else {}
    threads = source.get("torch_threads", 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 256:
        raise InvalidOption(f"{where}: source.torch_threads: must be an integer in [1, 256] (the intra-op "
                            f"threads it was profiled with), got {threads!r}")
    return threads


class LoadingSide(TorchSide):
    family = "loading"
    former_verbs = ("profile-loading", "run-loading")
    run_options = LoadingRunOptions
    profile_models = MODEL_NAMES
    profile_options = LoadingProfileOptions

    # ----- profile -------------------------------------------------------------------------------
    def check_profile_model(self, model: str, option: str = "MODEL") -> None:
        check_block_model(model, option)

    def profile(self, model: str, options: LoadingProfileOptions) -> Profiled:
        """Measure ``model`` on this host: per block its inference time, MACs, weights and
        load time from its own checkpoint file; the per-file fixed cost, one thread's rate
        and what ``options.threads`` threads get together."""
        import torch

        from splitopt.torch.loading.models import BlockModelConfig
        from splitopt.torch.loading.profile import profile_loading

        try:
            config = BlockModelConfig(model, width=options.width, depth=options.depth, image_size=options.image_size)
        except ValueError as e:
            raise InvalidOption(str(e)) from None
        torch.set_num_threads(options.torch_threads)
        result = profile_loading(config, options.threads, seed=options.seed, cache=options.cache,
                                 repeats=options.repeats, children_max=options.children_max, name=options.name,
                                 objective=options.objective)
        inst = result.instance
        m = result.measurements
        o = inst.settings.loading
        summary = (f"{len(inst.layers)} blocks, {sum(l.weights for l in inst.layers) / 1e6:.3f} M weights, inference "
                   f"{m['inference_ms']:.1f} ms, monolithic load {m['monolithic_load_ms']:.1f} ms ({options.cache} "
                   f"cache), child fixed cost {o['child_fixed_ms']:.2f} ms, one thread "
                   f"{o['thread_bytes_per_s'] / 1e6:.0f} MB/s")
        return Profiled(inst, summary)

    # ----- run -----------------------------------------------------------------------------------
    def check_run(self, inst: Any, options: LoadingRunOptions, where: str) -> None:
        """The instance was profiled from ``options.model`` (``source.block_model``), with a
        valid number of torch threads."""
        source = inst.source if isinstance(inst.source, dict) else {}
        block_model = source.get("block_model")
        made_from = block_model.get("model") if isinstance(block_model, dict) else None
        if made_from is None:
            raise InvalidOption(f"{where}: no source.block_model (not made by `splitopt profile` of a block model)")
        if made_from != options.model:
            raise InvalidOption(f"--model {options.model}: instance '{inst.name}' was profiled from '{made_from}'")
        profiled_torch_threads(inst, where)

    def run(self, inst: Any, plan: Any, options: LoadingRunOptions, plan_path: str | None = None) -> dict[str, Any]:
        """Write the plan's child models, load them as the plan says (each thread its
        children in order) while the main thread runs each child as soon as it and the
        one before are loaded; compare with the evaluator's prediction and the
        monolithic model (:func:`splitopt.torch.loading.run.run_loading`); then
        ``options.fine_tune`` SGD steps on the last child's trainable tail."""
        import torch

        from splitopt.torch.loading.finetune import fine_tune_last_child, synthetic_labels
        from splitopt.torch.loading.models import synthetic_input
        from splitopt.torch.loading.run import model_config_of, run_loading

        torch.set_num_threads(options.torch_threads or profiled_torch_threads(inst, inst.name))
        report = run_loading(inst, plan, mode=options.mode, cache=options.cache, repeats=options.repeats,
                             workdir=options.workdir, keep_children=options.fine_tune > 0)
        children = report.pop("child_models", None)
        if options.fine_tune > 0:
            config, _ = model_config_of(inst)
            try:
                report["fine_tune"] = fine_tune_last_child(children, synthetic_input(config, 4, seed=11),
                                                           synthetic_labels(4, config.num_classes),
                                                           steps=options.fine_tune)
            except ValueError as e:
                raise NotApplicable(f"--fine-tune: {e}") from None
        return report

    def print_run(self, console: Any, report: Mapping[str, Any]) -> None:
        """Per child its measured load and inference times beside the predicted ones, the
        first response, the monolithic model, the fine-tuning and the output difference."""
        p, m = report["predicted"], report["measured"]
        console.print(f"[bold]{report['instance']}[/bold] <- {report['model']}: {report['k']} children on "
                      f"{report['threads']} thread(s) (case {report['case']}), {report['mode']}, {report['cache']} "
                      f"cache, {report['repeats']} run(s), torch {report['torch_threads']} thread(s)", highlight=False)
        for c, pc in zip(m["children"], p["children"]):
            console.print(f"  child {c['index']} ({report['children'][c['index']]}, "
                          f"{report['child_bytes'][c['index']] / 1e6:.2f} MB) thread {c['thread']}: "
                          f"load {c['load_start_ms']:.1f}-{c['load_end_ms']:.1f} ms "
                          f"(predicted {pc['load_start_ms']:.1f}-{pc['load_end_ms']:.1f}), inference "
                          f"{c['infer_start_ms']:.1f}-{c['infer_end_ms']:.1f} ms "
                          f"(predicted {pc['infer_start_ms']:.1f}-{pc['infer_end_ms']:.1f})", highlight=False)
        console.print(f"  first response: measured {m['first_response_ms']:.1f} ms, predicted "
                      f"{p['first_response_ms']:.1f} ms (ratio {report['ratio']:.2f})", highlight=False)
        if "measured_monolithic" in report:
            mm = report["measured_monolithic"]
            console.print(f"  monolithic: measured {mm['first_response_ms']:.1f} ms, predicted "
                          f"{p['monolithic_ms']:.1f} ms; speedup measured {report['speedup']:.2f}x, predicted "
                          f"{p['speedup']:.2f}x", highlight=False)
        if "fine_tune" in report:
            ft = report["fine_tune"]
            console.print(f"  fine-tuned {ft['trainable_blocks']} ({ft['trainable_parameters']:,} parameters) "
                          f"{ft['steps']} steps: loss {ft['losses'][0]:.3f} -> {ft['losses'][-1]:.3f}",
                          highlight=False)
        console.print(f"  max abs difference vs the unsplit model: {report['max_abs_diff']:.3g} "
                      f"(must be <= {report['tolerance']:.3g})", highlight=False)
        console.print("[green]OK[/green]" if report["ok"] else "[red]MISMATCH[/red]")
