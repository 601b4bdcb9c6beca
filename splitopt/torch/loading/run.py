"""The torch bridge of the loading family (the RL modularization paper): measure a block
model into a ``loading`` instance, write a plan's child models, load and run them as the
plan says and compare with the family's evaluator.

* :func:`splitopt.torch.loading.profile.profile_loading`: the instance, measured here;
* :func:`splitopt.torch.loading.children.write_children`: one checkpoint file per child;
* :func:`run_loading` (here): write the plan's children and the monolithic model (k = 1),
  load and run both ``repeats`` times (:mod:`splitopt.torch.loading.execution`: threads or
  processes, the page cache warm or cold), check the output against the unsplit model
  and report the measured schedule beside the evaluator's prediction;
* :func:`splitopt.torch.loading.finetune.fine_tune_last_child`: the trainable tail.

Both the plan and the monolithic model are run once before the timed runs (not counted:
the first call of an operator on a new shape builds its kernels), then alternately, so
that a slow moment of a shared host falls on both.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch

from splitopt.core.errors import InvalidModel
from splitopt.torch.loading.cache import prepare_cache, resident_fraction
from splitopt.torch.loading.children import write_children
from splitopt.torch.loading.finetune import fine_tune_last_child
from splitopt.torch.loading.execution import LoadingRun, ProcessLoaderPool, run_with_threads
from splitopt.torch.loading.options import MODES
from splitopt.torch.loading.models import BlockModelConfig, BlockSequence, build_block_model, synthetic_input
from splitopt.torch.loading.profile import profile_loading

__all__ = ["profile_loading", "write_children", "run_loading", "fine_tune_last_child"]

#: outputs must match the unsplit model within this, relative to the output's largest magnitude (at least 1)
OUTPUT_RTOL = 1e-5


def model_config_of(inst: Any) -> tuple[BlockModelConfig, int]:
    """The block model configuration and seed an instance was profiled from
    (``source.block_model``, written by :func:`profile_loading`); InvalidModel if absent."""
    raw = (inst.source or {}).get("block_model") if isinstance(inst.source, dict) else None
    if not isinstance(raw, dict):
        raise InvalidModel(f"instance '{inst.name}': no source.block_model (it was not made by "
                           f"`splitopt profile-loading`); cannot rebuild its model")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise InvalidModel(f"instance '{inst.name}': source.block_model.seed: must be an integer in [0, 2^63), "
                           f"got {seed!r}")
    try:
        return BlockModelConfig.from_dict(raw), seed
    except (KeyError, TypeError, ValueError, OverflowError) as e:
        raise InvalidModel(f"instance '{inst.name}': source.block_model is not a model configuration ({e})") from None


def check_model_matches(model: BlockSequence, inst: Any) -> None:
    """InvalidModel unless the model's blocks are the instance's layers, in order."""
    names = [layer.name for layer in inst.layers]
    if model.block_names != names:
        diff = next((i for i, (a, b) in enumerate(zip(model.block_names, names)) if a != b),
                    min(len(names), len(model.block_names)))
        raise InvalidModel(f"the model's blocks differ from instance '{inst.name}' layers at index {diff} "
                           f"({len(model.block_names)} blocks, {len(names)} layers)")


def _summary(runs: list[LoadingRun]) -> dict[str, Any]:
    times = [r.first_response_ms for r in runs]
    median_run = sorted(runs, key=lambda r: r.first_response_ms)[len(runs) // 2]
    return {"first_response_ms": statistics.median(times), "runs_ms": times,
            "loads_done_ms": median_run.loads_done_ms, "children": [c.to_dict() for c in median_run.children]}


def run_loading(inst: Any, plan: Any, *, model: BlockSequence | None = None, mode: str = "threads",
                cache: str = "warm", repeats: int = 3, workdir: Path | None = None,
                pool: ProcessLoaderPool | None = None, monolithic: bool = True,
                x: torch.Tensor | None = None, keep_children: bool = False, warmup: bool = True) -> dict[str, Any]:
    """Measure ``plan`` (a ``LoadingPlan`` of ``inst``) on this host; see the module
    docstring. ``model``: the unsplit model (default: rebuilt from the instance's
    ``source.block_model``); ``pool``: loader processes to reuse in ``processes`` mode (one
    per plan thread at least; default: started here, and closed); ``workdir``: where the
    child files go (default: a temporary directory, removed). The report (ms): predicted
    (the evaluator) and measured first response of the plan and of the monolithic model,
    their ratio and speedups, the median run's per-child schedule, the largest output
    difference and ``ok``. ``warmup``: one untimed run of each first. ``keep_children``: also return the last run's child models
    (key ``child_models``, not JSON) for fine-tuning."""
    from splitopt.families.loading.evaluate import evaluate

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    config, seed = model_config_of(inst)
    model = model if model is not None else build_block_model(config, seed)
    check_model_matches(model, inst)
    x = synthetic_input(config) if x is None else x
    predicted = evaluate(inst, plan)
    tail = int(inst.settings.loading.get("trainable_tail", 0))
    with torch.no_grad():
        reference = model(x)
    scale = max(1.0, float(reference.abs().max()))
    with tempfile.TemporaryDirectory(prefix="splitopt-loading-run-", dir=workdir) as tmp:
        directory = Path(tmp)
        children = write_children(model, config, plan.starts, directory, tail)
        paths = [c.path for c in children]
        mono = write_children(model, config, [0], directory, tail, prefix="monolithic")[0] if monolithic else None
        own_pool = None
        if mode == "processes" and pool is None:
            own_pool = pool = ProcessLoaderPool(max(1, len(plan.threads)), warm_file=paths[0])
        try:
            def run_once(files: list[Path], threads) -> LoadingRun:
                prepare_cache(files, cache)
                if mode == "threads":
                    return run_with_threads(files, threads, x)
                assert pool is not None  # mode "processes": the caller's pool, or started above
                return pool.run(files, threads, x)

            if warmup:
                run_once(paths, plan.threads)
                if mono is not None:
                    run_once([mono.path], [[0]])
            planned, whole = [], []
            for _ in range(repeats):
                planned.append(run_once(paths, plan.threads))
                if mono is not None:
                    whole.append(run_once([mono.path], [[0]]))
            prepare_cache(paths, cache)
            residency = resident_fraction(paths[0])
        finally:
            if own_pool is not None:
                own_pool.close()
    diffs = [float((r.output - reference).abs().max()) for r in planned + whole]
    max_diff = max(diffs)
    measured = _summary(planned)
    report: dict[str, Any] = {
        "instance": inst.name, "model": config.model, "mode": mode, "cache": cache, "repeats": repeats,
        "torch_threads": torch.get_num_threads(), "resident_fraction_before_load": residency,
        "k": plan.k, "threads": len(plan.threads), "case": predicted.case,
        "children": [inst.layers[s].name for s in plan.starts], "plan_threads": [list(t) for t in plan.threads],
        "child_bytes": [c.bytes for c in children],
        "predicted": {"first_response_ms": predicted.first_response_ms, "monolithic_ms": predicted.monolithic_ms,
                      "speedup": predicted.speedup,
                      "children": [{k: c.to_dict()[k] for k in ("index", "thread", "load_start_ms", "load_end_ms",
                                                                 "infer_start_ms", "infer_end_ms")}
                                   for c in predicted.children]},
        "measured": measured,
        "ratio": measured["first_response_ms"] / predicted.first_response_ms if predicted.first_response_ms else None,
        "max_abs_diff": max_diff, "tolerance": OUTPUT_RTOL * scale, "ok": max_diff <= OUTPUT_RTOL * scale,
    }
    if mode == "processes" and pool is not None:
        report["pool_start_s"] = pool.start_s
    if whole:
        mono_summary = _summary(whole)
        report["measured_monolithic"] = mono_summary
        report["speedup"] = mono_summary["first_response_ms"] / measured["first_response_ms"]
        report["monolithic_ratio"] = mono_summary["first_response_ms"] / predicted.monolithic_ms
    if keep_children:
        report["child_models"] = planned[-1].models
    return report
