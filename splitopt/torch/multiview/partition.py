"""Cut a captured backbone by a ``multiview`` plan into per-sensor, per-view and fusion
parts and run them (the multiview counterpart of :mod:`splitopt.torch.partition`).

Plans of problem ``multiview`` (:mod:`splitopt.families.multiview`,
``formulations/multiview_bus.md``): the module is the backbone of ONE view; V sensors run
it on their own views. :func:`partition_multiview` builds, per view, the sensor's part
(the prefix up to the view's cut point, Conv-Reduce included when the cut is
``mv.reduce``), the one tensor it sends, the aggregator's per-view part (the rest of the
pipeline to the fusion tensor ``f``, then Conv-Reduce when the plan has a width ``d``),
and the aggregator's fusion part: View-Pool (element-wise max over the views) without
``d``, View-Fuse (interlaced concatenation, then a 1x1 conv ``V*d -> c``) with ``d``,
then the post-fusion layers once. All views share the backbone's weights; Conv-Reduce and
the ``V*d -> c`` conv come from given modules or a seeded split-aware init.
:meth:`MultiviewSplitModel.reference` computes the same multi-view network without the
split (the exported program run whole per view, the fusion written out separately);
:func:`compare_multiview` checks equality (max abs difference <= ``FLOAT_ATOL``) and each
view's sent tensor and bytes against :func:`splitopt.families.multiview.evaluate.evaluate`
(``views[i].sent``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from splitopt.core.errors import InvalidModel
from splitopt.torch.capture import INPUT_NAME, Capture
from splitopt.torch.part_builder import PartBuilder, PartContext, model_outputs
from splitopt.torch.partition import capture_module
from splitopt.torch.quant_error import placeholder_values, relative_mse, run_layers
from splitopt.torch.split_compare import FLOAT_ATOL, bytes_close
from splitopt.torch.split_model import Crossing, Part, RunStats, stack_outputs
from splitopt.torch.transmission import Transmit, identity_transmit


@dataclass
class ViewSplit:
    """One view of a multiview split: what its sensor runs (``sensor_part``: the view's
    prefix up to its cut point, Conv-Reduce included when the cut is ``mv.reduce``;
    module None when the cut is the raw input), the one tensor it sends (``crossing``,
    sensor -> aggregator; empty when nothing on the aggregator reads it) and what the
    aggregator runs for the view before fusion (``aggregator_part``: the rest of the
    pre-fusion pipeline; module None when there is nothing left)."""

    sensor: str
    cut: str
    sensor_part: Part
    crossing: Crossing
    aggregator_part: Part


class _ViewStep(torch.nn.Module):
    """A pre-fusion piece: an fx part (one input, one output) then, optionally,
    Conv-Reduce; returns a 1-tuple like the fx parts."""

    def __init__(self, gm: torch.nn.Module | None, reduce: torch.nn.Module | None):
        super().__init__()
        self.gm = gm
        self.reduce = reduce

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        y = x if self.gm is None else self.gm(x)[0]
        return (y if self.reduce is None else self.reduce(y),)


def view_pool(views: Sequence[torch.Tensor]) -> torch.Tensor:
    """View-Pool (MVCNN): element-wise max over the views."""
    return torch.stack(list(views), dim=0).amax(dim=0)


class _FusionTail(torch.nn.Module):
    """The aggregator's last part: the fusion layer (View-Pool, View-Fuse + the 1x1 conv
    ``restore`` V*d -> c, or nothing for one view without a width), then the post-fusion
    fx part; takes the V pre-fusion tensors, returns the model outputs as a tuple."""

    def __init__(self, kind: str, views: int, restore: torch.nn.Module | None, post: torch.nn.Module | None):
        super().__init__()
        from splitopt.torch.multiview.splitting import ViewFuse

        self.kind = kind
        self.fuse = ViewFuse(views)
        self.restore = restore
        self.post = post

    def fused(self, views: Sequence[torch.Tensor]) -> torch.Tensor:
        if self.kind == "pool":
            return view_pool(views)
        if self.kind == "fuse":
            assert self.restore is not None  # partition_multiview gives a "fuse" tail its restore conv
            return self.restore(self.fuse(list(views)))
        return views[0]

    def forward(self, *views: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z = self.fused(views)
        return (z,) if self.post is None else tuple(self.post(z))


def pointwise_conv(cin: int, cout: int, shape: Sequence[int], seed: int = 0) -> torch.nn.Module:
    """A 1x1 convolution ``cin -> cout`` over the channel dimension (the first one after
    the batch) of a tensor of per-sample ``shape`` (channels first), with bias, drawn by
    SplitNets' split-aware initialisation (:func:`splitopt.torch.multiview.splitting.init_conv_`)
    from a generator seeded with ``seed``: Conv2d for (c, h, w) (:class:`ConvReduce`),
    Conv1d for (c, l), Linear for (c,)."""
    from splitopt.core.errors import NotApplicable
    from splitopt.torch.multiview.splitting import ConvReduce, init_conv_

    g = torch.Generator().manual_seed(seed)
    if len(shape) == 3:
        return ConvReduce(cin, cout, generator=g)
    if len(shape) == 2:
        return init_conv_(torch.nn.Conv1d(cin, cout, 1), generator=g)
    if len(shape) == 1:
        lin = torch.nn.Linear(cin, cout)
        with torch.no_grad():
            torch.nn.init.normal_(lin.weight, 0.0, math.sqrt(2.0 / math.sqrt(cin * cout)), generator=g)
            lin.bias.zero_()
        return lin
    raise NotApplicable(f"multiview: no 1x1 convolution for a fusion tensor of shape {list(shape)} "
                        "(channels first, at most 2 spatial dimensions)")


class MultiviewSplitModel:
    """A partitioned multiview plan (see :func:`partition_multiview`): ``views`` (one
    :class:`ViewSplit` per sensor), the aggregator's fusion part ``fusion_part``, the
    Conv-Reduce and restore modules, and how to run the split and the same multi-view
    network without splitting (:meth:`reference`)."""

    kind = "multiview"

    def __init__(self, capture: Capture, plan, inst, views: list[ViewSplit], fusion_part: Part, tail: _FusionTail,
                 reduce: torch.nn.Module | None, restore: torch.nn.Module | None, example_input: torch.Tensor,
                 output_names: tuple[str, ...]):
        self.capture = capture
        self.plan = plan
        self.inst = inst
        self.views = views
        self.fusion_part = fusion_part
        self.tail = tail
        self.reduce = reduce
        self.restore = restore
        self.example_input = example_input
        self.output_names = output_names
        self.quantized = False
        self.last_run = RunStats()

    @property
    def parts(self) -> list[Part]:
        """Every sensor part, then every per-view aggregator part, then the fusion part."""
        return [v.sensor_part for v in self.views] + [v.aggregator_part for v in self.views] + [self.fusion_part]

    @property
    def crossings(self) -> list[Crossing]:
        """One per view, sensor -> aggregator, in sensor order."""
        return [v.crossing for v in self.views]

    @property
    def sent_bytes(self) -> list[float]:
        return [c.bytes for c in self.crossings]

    @property
    def transmitted_bytes(self) -> float:
        return sum(self.sent_bytes)

    def _views(self, views) -> list[torch.Tensor]:
        """The V view batches: a tensor (n, V, *shape) or a sequence of V tensors (n, *shape)."""
        V = len(self.views)
        if isinstance(views, torch.Tensor):
            if views.dim() < 2 or views.shape[1] != V:
                raise InvalidModel(f"multiview input shape {tuple(views.shape)}: expected (n, {V}, ...), one entry "
                                   f"per view")
            views = [views[:, v] for v in range(V)]
        views = list(views)
        if len(views) != V:
            raise InvalidModel(f"multiview input: {len(views)} views given, the plan has {V}")
        want = tuple(self.example_input.shape[1:])
        n = views[0].shape[0] if views[0].dim() else 0
        for v, x in enumerate(views):
            if x.dim() != self.example_input.dim() or tuple(x.shape[1:]) != want or x.shape[0] != n:
                raise InvalidModel(f"view {v} input shape {tuple(x.shape)} does not match the captured input shape "
                                   f"({n}, {', '.join(map(str, want))})")
        return views

    def run(self, views, transmit: Transmit | None = None):
        """Run the split on ``views`` ((n, V, *shape) or V tensors (n, *shape)), one sample
        at a time: each sensor part on its view, ``transmit(name, tensor, bits)`` (default
        identity) on the tensor it sends, the view's aggregator part, then the fusion
        part. Returns the outputs stacked on dim 0."""
        views = self._views(views)
        hook = identity_transmit if transmit is None else transmit
        n = views[0].shape[0]
        V = len(self.views)
        stats = RunStats(samples=n, part_seconds=[0.0] * (2 * V + 1), crossing_bytes=[0.0] * V)
        outs = []
        with torch.no_grad():
            for i in range(n):
                pre = []
                for v, view in enumerate(self.views):
                    t = views[v][i:i + 1]
                    for k, part in ((v, view.sensor_part), (V + v, view.aggregator_part)):
                        if k == V + v and view.crossing.tensors:
                            name, _, bits = view.crossing.tensors[0]
                            stats.crossing_bytes[v] = t.numel() * bits / 8.0
                            t = hook(name, t, bits)
                        if part.module is not None:
                            t0 = time.perf_counter()
                            t = part.module(t)[0]
                            stats.part_seconds[k] += time.perf_counter() - t0
                    pre.append(t)
                t0 = time.perf_counter()
                outs.append(self.tail(*pre))
                stats.part_seconds[-1] += time.perf_counter() - t0
        self.last_run = stats
        return stack_outputs(outs, len(outs[0]))

    def reference(self, views: torch.Tensor | Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...] | torch.Tensor:
        """The same multi-view network computed without the split: for every view the
        captured (exported) program is run whole on the view and the fusion tensor is read
        off it (``splitopt.torch.quant_error.run_layers``); then Conv-Reduce (the same
        module), the fusion written out independently of the split's code (View-Pool: a
        running ``torch.maximum``; View-Fuse: ``torch.cat`` of the views with the channels
        permuted so that fused channel ``j*V + v`` is channel ``j`` of view ``v``, then the
        same ``restore`` module), then the program is run once more with the fusion
        tensor's node replaced by the fused tensor, which gives the post-fusion output."""
        views = self._views(views)
        fusion = self.plan.fusion
        program = self.capture.program
        layer = {l.name: l for l in self.capture.layers}
        outs = []
        with torch.no_grad():
            for i in range(views[0].shape[0]):
                pre = []
                for x in views:
                    got: dict[str, torch.Tensor] = {}
                    x = x[i:i + 1]
                    if fusion == INPUT_NAME:
                        got[fusion] = x
                    else:
                        run_layers(self.capture, x, lambda name, t: got.setdefault(name, t) if name == fusion else None)
                    f = got[fusion]
                    pre.append(f if self.reduce is None else self.reduce(f))
                fused = _reference_fusion(self.tail.kind, pre, self.restore)
                if fusion == INPUT_NAME:
                    args = placeholder_values(program, fused)
                    out = torch.fx.Interpreter(program.graph_module).run(*args)
                else:
                    args = placeholder_values(program, views[0][i:i + 1])
                    out = _Override(program.graph_module, layer[fusion].out_node, fused).run(*args)
                outs.append(tuple(out) if isinstance(out, (tuple, list)) else (out,))
        return stack_outputs(outs, len(outs[0]))

    def summary(self) -> list[dict[str, Any]]:
        rows = []
        for p in self.parts:
            rows.append({"device": p.device, "layers": len(p.layers), "inputs": list(p.inputs),
                         "outputs": list(p.outputs)})
        return rows


def _reference_fusion(kind: str, views: list[torch.Tensor], restore: torch.nn.Module | None) -> torch.Tensor:
    if kind == "none":
        return views[0]
    if kind == "pool":
        out = views[0]
        for v in views[1:]:
            out = torch.maximum(out, v)
        return out
    assert restore is not None  # a "fuse" fusion has its restore conv (partition_multiview)
    V, d = len(views), views[0].shape[1]
    perm = [v * d + j for j in range(d) for v in range(V)]
    return restore(torch.cat(views, dim=1)[:, perm])


class _Override(torch.fx.Interpreter):
    """Runs a graph with one node's value replaced."""

    def __init__(self, gm: torch.fx.GraphModule, node: str, value: torch.Tensor):
        super().__init__(gm)
        self.node, self.value = node, value

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.name == self.node:
            return self.value
        return super().run_node(n)


def partition_multiview(module: torch.nn.Module, example_input: torch.Tensor, plan, inst, *,
                        capture: Capture | None = None, rename=None, reduce: torch.nn.Module | None = None,
                        restore: torch.nn.Module | None = None, seed: int = 0) -> MultiviewSplitModel:
    """Cut ``module`` (the backbone of ONE view, as captured for the multiview instance
    ``inst``) by the multiview plan ``plan`` (:class:`splitopt.families.multiview.plan.MultiviewPlan`).

    The network (``formulations/multiview_bus.md``): per view, the backbone up to the
    fusion tensor ``f``, then Conv-Reduce ``c -> d`` when the plan has a width ``d``;
    the fusion layer: View-Fuse (interlaced concatenation of the V reduced views,
    :class:`splitopt.torch.multiview.splitting.ViewFuse`, then the 1x1 conv ``restore`` ``V*d -> c``)
    with ``d``, View-Pool (element-wise max over the views) without ``d`` and V > 1,
    nothing for one view without ``d``; then the backbone's post-fusion layers, once. All
    views share the backbone's weights. ``reduce``/``restore``: the Conv-Reduce and
    restore modules (mapping (1, c, ...) -> (1, d, ...) and (1, V*d, ...) -> (1, c, ...));
    None: fresh :func:`pointwise_conv` modules, split-aware init seeded with ``seed`` and
    ``seed + 1``.

    Parts: per view, the sensor's (``prefix(cut)``; with cut ``mv.reduce`` the whole
    pipeline, Conv-Reduce included) and the aggregator's per-view part (the rest of the
    pipeline), and the aggregator's fusion part. Each view sends its cut tensor (the raw
    view at its bits, a layer output or ``mv.reduce`` at ``Instance.sent_bits(t,
    cloud_bits)``), unless nothing on the aggregator reads it (one view, no width, the
    cut at a fusion tensor that is the model output). Everything runs in float
    (multiview plans run every layer at ``cloud_bits``, the reference precision).
    Raises InvalidModel / InvalidPlan / NotApplicable, each one line."""
    from splitopt.core.errors import NotApplicable
    from splitopt.families.multiview.data import REDUCE
    from splitopt.families.multiview.data import data as mv_data
    from splitopt.families.multiview.plan import check_plan as check_mv_plan

    if inst is None or inst.problem != "multiview":
        raise NotApplicable("partition_multiview: needs a multiview instance (problem 'multiview')")
    if tuple(example_input.shape) != (1, *inst.inputs[0].shape):
        raise InvalidModel(f"example input shape {tuple(example_input.shape)} does not match instance "
                           f"'{inst.name}' input '{inst.inputs[0].name}' (expected {(1, *inst.inputs[0].shape)})")
    if inst.inputs[0].name != INPUT_NAME:
        raise InvalidModel(f"instance '{inst.name}': the graph input must be named '{INPUT_NAME}'")
    check_mv_plan(inst, plan)
    d = mv_data(inst)
    if capture is None:
        capture = capture_module(module, example_input, rename=rename, input_bits=int(inst.inputs[0].bits))
    names = [l.name for l in capture.layers]
    inst_names = [l.name for l in inst.layers]
    for n in inst_names:
        if n not in set(names):
            raise InvalidModel(f"instance '{inst.name}' layer '{n}' is not a layer of the captured module "
                               f"(the module has {len(names)} layers, the instance {len(inst_names)})")
    for n in names:
        if n not in set(inst_names):
            raise InvalidModel(f"captured layer '{n}' is not in instance '{inst.name}'")
    fusion, width, V = plan.fusion, plan.width, d.views
    shape = list(inst.inputs[0].shape) if fusion == INPUT_NAME else list(inst.layer_by_name[fusion].output_shape)
    c = int(shape[0]) if shape else 1
    if width is not None:
        reduce = pointwise_conv(c, width, shape, seed) if reduce is None else reduce
        restore = pointwise_conv(V * width, c, shape, seed + 1) if restore is None else restore
        reduce.eval()
        restore.eval()
        kind = "fuse"
    else:
        reduce = restore = None
        kind = "pool" if V > 1 else "none"
    ref_bits = int(inst.settings.cloud_bits)
    bits = {n: ref_bits for n in names}
    pre = set(d.prefix[fusion])
    agg = inst.settings.cloud

    def context(cut_layers: set[str]) -> PartContext:
        dev = {n: 0 if n in cut_layers else 1 if n in pre else 2 for n in names}
        return PartContext(capture, plan, ["sensor", agg, agg], dev, ref_bits, {}, part_device=["sensor", agg, agg],
                        wbits=bits, abits=bits)

    # fusion part: the post-fusion layers read the fused tensor where they read f
    ctx = context(set())
    output_names, out_at = model_outputs(ctx)
    post_layers = tuple(n for n in names if n not in pre)
    for home, name, _ in out_at:
        if home != 2 and not (name == fusion and not post_layers):
            raise InvalidModel(f"multiview: module output '{name}' is computed before the fusion point '{fusion}'")
    post_gm = None
    if post_layers:
        post = PartBuilder(ctx, 2).build([(name, a) for _, name, a in out_at])
        if list(post.inputs) != [fusion]:
            raise InvalidModel(f"multiview: the post-fusion layers read {list(post.inputs)}, not only the fusion "
                               f"tensor '{fusion}'")
        post_gm = post.module
    tail = _FusionTail(kind, V, restore, post_gm)
    fuse_layers = ("mv.fuse",) if kind != "none" else ()
    fused_input = REDUCE if width is not None else fusion
    fusion_part = Part(agg, fuse_layers + post_layers, tuple(f"{fused_input}@{s}" for s in d.sensors),
                       tuple(output_names), tail if (fuse_layers or post_layers) else None)

    elements_f = math.prod(shape) if shape else 1
    built: dict[str, tuple[_ViewStep | None, _ViewStep | None, tuple]] = {}
    views = []
    for s in d.sensors:
        cut = plan.cuts[s]
        if cut not in built:
            cut_layers = set(d.prefix[fusion]) if cut == REDUCE else set(d.prefix[cut])
            cctx = context(cut_layers)
            sensor_gm = agg_gm = None
            if cut_layers:
                head = fusion if cut == REDUCE else cut
                sensor_gm = PartBuilder(cctx, 0).build([(head, cctx.nodes[cctx.layer[head].out_node])]).module
            rest = [n for n in names if n in pre and n not in cut_layers]
            if rest:
                agg_gm = PartBuilder(cctx, 1).build([(fusion, cctx.nodes[cctx.layer[fusion].out_node])]).module
            on_sensor = tuple(n for n in names if n in cut_layers) + ((REDUCE,) if cut == REDUCE else ())
            on_agg = tuple(rest) + ((REDUCE,) if width is not None and cut != REDUCE else ())
            sent_name = cut
            if cut == REDUCE:
                elements, sbits = elements_f // c * width, int(inst.sent_bits(REDUCE, ref_bits))
            elif cut == INPUT_NAME:
                elements, sbits = math.prod(inst.inputs[0].shape), int(inst.inputs[0].bits)
            else:
                elements = math.prod(inst.layer_by_name[cut].output_shape)
                sbits = int(inst.sent_bits(cut, ref_bits))
            read = bool(on_agg) or kind != "none" or bool(post_layers)
            sensor_mod = _ViewStep(sensor_gm, reduce if cut == REDUCE else None) if on_sensor else None
            agg_mod = _ViewStep(agg_gm, reduce if width is not None and cut != REDUCE else None) if on_agg else None
            last = REDUCE if width is not None else fusion
            built[cut] = (sensor_mod, agg_mod, (on_sensor, on_agg, sent_name, elements, sbits, read, last))
        sensor_mod, agg_mod, (on_sensor, on_agg, sent_name, elements, sbits, read, last) = built[cut]
        crossing = Crossing(s, agg, ((sent_name, elements, sbits),) if read else ())
        views.append(ViewSplit(
            s, cut,
            Part(s, on_sensor, (INPUT_NAME,) if on_sensor else (), (sent_name,) if on_sensor else (), sensor_mod),
            crossing,
            Part(agg, on_agg, (sent_name,) if on_agg else (), (last,) if on_agg else (), agg_mod)))
    return MultiviewSplitModel(capture, plan, inst, views, fusion_part, tail, reduce, restore, example_input,
                               tuple(output_names))


def evaluator_view_bytes(inst, plan) -> list[tuple[str, tuple[tuple[str, float], ...]]]:
    """Multiview plans: per sensor, the tensors it sends with their bytes per sample as
    :func:`splitopt.families.multiview.evaluate.evaluate` counts them (``metrics.views[i].sent``)."""
    from splitopt.families.multiview.evaluate import evaluate as mv_evaluate

    return [(v.sensor, tuple((t, float(b)) for t, b in v.sent)) for v in mv_evaluate(inst, plan).views]


def compare_multiview(split: MultiviewSplitModel, views, transmit: Transmit | None = None) -> dict[str, Any]:
    """Run the multiview ``split`` and its unsplit :meth:`~MultiviewSplitModel.reference`
    on ``views`` and report (JSON-ready): per view its sensor, cut point, the sent tensor
    and bytes per sample (from the shapes, measured, and the evaluator's), per part its
    device, layers and seconds; ``max_abs_diff``/``relative_mse`` against the reference;
    ``ok``: the sent tensors and bytes equal the evaluator's and ``max_abs_diff <=
    FLOAT_ATOL``."""
    ref = split.reference(views)
    out = split.run(views, transmit)
    ref_t = ref if isinstance(ref, torch.Tensor) else ref[0]
    out_t = out if isinstance(out, torch.Tensor) else out[0]
    diff = float((out_t.double() - ref_t.double()).abs().max()) if out_t.numel() else 0.0
    evaluator = dict(evaluator_view_bytes(split.inst, split.plan))
    rows = []
    bytes_ok = True
    for k, v in enumerate(split.views):
        ev = evaluator[v.sensor]
        ours = tuple((n, e * b / 8.0) for n, e, b in v.crossing.tensors)
        ok = [n for n, _ in ours] == [n for n, _ in ev] and all(bytes_close(a[1], b[1]) for a, b in zip(ours, ev))
        ok &= bytes_close(v.crossing.bytes, split.last_run.crossing_bytes[k])
        bytes_ok &= ok
        rows.append({"sensor": v.sensor, "cut": v.cut, "sensor_layers": list(v.sensor_part.layers),
                     "aggregator_layers": list(v.aggregator_part.layers),
                     "tensors": [{"tensor": n, "elements": e, "bits": b, "bytes": e * b / 8.0}
                                 for n, e, b in v.crossing.tensors],
                     "bytes": v.crossing.bytes, "measured_bytes": split.last_run.crossing_bytes[k],
                     "evaluator_bytes": sum(b for _, b in ev), "evaluator_tensors": [t for t, _ in ev]})
    parts = [{"device": p.device, "layers": list(p.layers), "inputs": list(p.inputs), "outputs": list(p.outputs),
              "seconds": split.last_run.part_seconds[m]} for m, p in enumerate(split.parts)]
    return {"samples": int(out_t.shape[0]), "kind": "multiview", "fusion": split.plan.fusion,
            "width": split.plan.width, "views": rows, "parts": parts, "transmitted_bytes": split.transmitted_bytes,
            "max_abs_diff": diff, "relative_mse": relative_mse(out_t, ref_t), "float_atol": FLOAT_ATOL,
            "bytes_match": bool(bytes_ok), "ok": bool(bytes_ok and diff <= FLOAT_ATOL)}
