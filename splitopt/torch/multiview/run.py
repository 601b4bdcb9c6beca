"""Run a multiview plan (``splitopt run`` on a multiview instance): V views as the
sensors' inputs, one part per sensor, per-view aggregator parts and the fusion part
(:func:`splitopt.torch.multiview.partition.partition_multiview`), compared with the
unsplit multi-view network and, per view, the evaluator's sent bytes
(:func:`splitopt.torch.multiview.partition.compare_multiview`). ``digits_cnn`` runs on
scikit-learn's test digits, each view masked to its column band; with weights retrained
by ``splitopt retrain --save DIR`` for the plan's width, the accuracy of the split run
(sent tensors packed at their bits) is reported beside the instance's."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from splitopt.torch.seeds import DIGITS


def view_inputs(model: str, inputs, samples: int, views: int):
    """(samples, views, ...) inputs of a multiview run: for ``digits_cnn`` every view sees
    the same test digit through its column band (as ``splitopt retrain --views`` trains);
    otherwise each view gets its own synthetic input."""
    if model == DIGITS:
        from splitopt.torch.multiview.retrain_views import view_masks

        return inputs(samples)[:, None] * view_masks(views)[None]
    batch = inputs(samples * views)
    return batch.reshape(samples, views, *batch.shape[1:])


def retrained(directory: Path, model: str, module, inst, plan):
    """The weights retrained for ``plan``'s width: (module with the backbone loaded, the
    loaded file, Conv-Reduce, restore conv); InvalidModel (one line) for a file that does
    not belong to this model, number of views or fusion point."""
    from splitopt.core.errors import InvalidModel
    from splitopt.families.multiview.data import data as mv_data
    from splitopt.torch.multiview import weights as split_weights
    from splitopt.torch.multiview.width_instance import split_tensor

    loaded = split_weights.load(split_weights.weights_file(directory, plan.width))
    meta, views = loaded.meta, mv_data(inst).views
    if meta.get("model") != model:
        raise InvalidModel(f"--weights {loaded.path}: weights of model '{meta.get('model')}', not '{model}'")
    if meta.get("views") != views:
        raise InvalidModel(f"--weights {loaded.path}: retrained for {meta.get('views')} view(s), the instance has {views}")
    at = split_tensor([l.name for l in inst.layers], meta["split"])
    if at != plan.fusion:
        raise InvalidModel(f"--weights {loaded.path}: retrained after {meta['split']} ('{at}'), but the plan fuses at "
                           f"'{plan.fusion}'")
    module = loaded.load_into(module)
    if plan.width is None:
        return module, loaded, None, None
    c = int(inst.layer_by_name[plan.fusion].output_shape[0])
    reduce, restore = loaded.splitting_modules(c, views)
    return module, loaded, reduce, restore


def run_multiview(inst, plan, *, model: str, seed: int = 0, samples: int = 2, weights: Path | None = None,
                  input_shape: str | None = None, input_dtype: str | None = None,
                  input_high: int | None = None) -> dict[str, Any]:
    """Rebuild ``model`` (:func:`splitopt.torch.models.build_model`), cut it by the
    multiview ``plan`` (with ``weights``: the backbone and splitting module retrained for
    the plan's width) and run ``samples`` inputs of every view; the report of
    :func:`splitopt.torch.multiview.partition.compare_multiview` with the instance, the
    model, its seed, the seconds spent building and partitioning and, with ``weights``,
    the accuracy of the split run on the test digits (``accuracy``,
    ``accuracy_samples``), the instance's (``instance_accuracy``) and the one retraining
    measured (``retrain_accuracy``)."""
    from splitopt.torch.models import build_model
    from splitopt.torch.multiview.partition import compare_multiview, partition_multiview

    t0 = time.perf_counter()
    module, rename, example, inputs, _ = build_model(model, seed, inst, input_shape=input_shape,
                                                     input_dtype=input_dtype, input_high=input_high)
    loaded, reduce, restore = None, None, None
    if weights is not None:
        module, loaded, reduce, restore = retrained(weights, model, module, inst, plan)
    split = partition_multiview(module, example, plan, inst, rename=rename, seed=seed, reduce=reduce, restore=restore)
    build_s = time.perf_counter() - t0
    view_batch = view_inputs(model, inputs, samples, len(split.views))
    report = compare_multiview(split, view_batch)
    if loaded is not None:
        from splitopt.families.multiview.data import data as mv_data
        from splitopt.torch.architectures import digits_data
        from splitopt.torch.multiview.weights import packed_accuracy

        labels = digits_data()[3][:view_batch.shape[0]]
        report.update({"weights": str(loaded.path), "accuracy": packed_accuracy(split, view_batch, labels),
                       "accuracy_samples": int(view_batch.shape[0]),
                       "instance_accuracy": mv_data(inst).accuracy.get((plan.fusion, plan.width)),
                       "retrain_accuracy": loaded.meta.get("accuracy_after_packed")})
    report.update({"instance": inst.name, "model": model, "seed": seed, "build_seconds": build_s})
    return report


def fusion_text(width: int | None, views: int) -> str:
    """How the views meet: View-Pool, nothing (one view), Conv-Reduce + View-Fuse/Recover."""
    if width is None:
        return "View-Pool" if views > 1 else "no fusion layer"
    return f"Conv-Reduce d={width} + {'View-Fuse' if views > 1 else 'Conv-Recover'}"
