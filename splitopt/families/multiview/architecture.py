"""The single-view network of an architecture (fusion point, Conv-Reduce width): the
pre-fusion backbone, ``mv.reduce`` and ``mv.fuse`` as layers, and the latency of every
layer of it (``formulations/multiview_bus.md``)."""

from __future__ import annotations

from dataclasses import replace

from splitopt.core.instance import Instance, Layer, Link
from splitopt.core.latency import layer_latency_ms
from splitopt.families.edge_cloud.settings import EdgeCloudInstance, EdgeCloudSettings
from splitopt.families.multiview.data import FUSE, REDUCE, data, derived
from splitopt.families.multiview.settings import MultiviewInstance


def arch_layers(inst: MultiviewInstance, fusion: str, width: int | None) -> tuple[Layer, ...]:
    """One view's network for (fusion, width): the pre-fusion backbone layers, then
    ``mv.reduce`` (with a width), then ``mv.fuse`` (when V > 1 or a width is set), then the
    post-fusion layers, which read ``mv.fuse`` where they read ``fusion``."""
    def build():
        d = data(inst)
        pre = set(d.prefix[fusion])
        c, sp, V = d.channels[fusion], d.spatial[fusion], d.views
        out = [l for l in inst.layers if l.name in pre]
        last = fusion
        if width is not None:
            op = "conv" if _ndim(inst, fusion) > 1 else "linear"
            out.append(Layer(REDUCE, op, (fusion,), float(sp * c * width), float(c * width + width),
                             (width,) + _shape(inst, fusion)[1:]))
            last = REDUCE
        if d.has_fuse(width):
            if width is not None:
                fuse = Layer(FUSE, "view_fuse", (last,), float(sp * V * width * c), float(V * width * c + c),
                             _shape(inst, fusion))
            else:
                fuse = Layer(FUSE, "view_pool", (last,), float((V - 1) * c * sp), 0.0, _shape(inst, fusion))
            out.append(fuse)
            last = FUSE
        for l in inst.layers:
            if l.name not in pre:
                out.append(replace(l, inputs=tuple(last if x == fusion else x for x in l.inputs)))
        return tuple(out)

    return derived(inst, ("arch", fusion, width), build)


def _shape(inst: MultiviewInstance, tensor: str) -> tuple[int, ...]:
    if tensor in inst.input_by_name:
        return tuple(inst.input_by_name[tensor].shape)
    return tuple(inst.layer_by_name[tensor].output_shape)


def _ndim(inst: MultiviewInstance, tensor: str) -> int:
    return len(_shape(inst, tensor))


def edge_cloud_view(inst: MultiviewInstance, fusion: str, width: int | None, sensor: str) -> EdgeCloudInstance:
    """The single-view network of (fusion, width) as a edge/cloud ``split`` instance between
    ``sensor`` and the aggregator, over a private link at the rate the sensor's transfers
    get on the bus (``Instance.link_rate_bits_per_s``). Used for the sensor memory walk
    (``splitopt.core.memory``, SplitNets App. G) and the sent tensors."""
    def build():
        d = data(inst)
        s = inst.settings
        link = d.links[sensor]
        private = Link(sensor, d.aggregator, inst.link_rate_bits_per_s(link), link.latency_ms)
        settings = EdgeCloudSettings(edge=sensor, cloud=d.aggregator, edge_memory_bytes=d.limits[sensor],
                                     error_budget=None, bit_widths=(d.bits,), cloud_bits=d.bits,
                                     transmit_bits=s.transmit_bits)
        devices = (inst.device_by_name[sensor], inst.device_by_name[d.aggregator])
        return Instance(name=f"{inst.name}[{sensor}]", inputs=inst.inputs, layers=arch_layers(inst, fusion, width),
                        devices=devices, links=(private,), problem="split", settings=settings)

    return derived(inst, ("view", fusion, width, sensor), build)


def layer_ms(inst: MultiviewInstance, fusion: str, width: int | None, name: str, device: str) -> float:
    """Latency (ms) of layer ``name`` on ``device`` at ``cloud_bits``. A backbone layer is
    timed on the backbone graph (``splitopt.core.latency``, as in the edge/cloud family), so its
    latency does not depend on the fusion point; ``mv.reduce``/``mv.fuse`` on the
    architecture graph of (fusion, width)."""
    d = data(inst)
    dev = inst.device_by_name[device]
    if name in (REDUCE, FUSE):
        view = edge_cloud_view(inst, fusion, width, d.sensors[0])
        return layer_latency_ms(view, view.layer_by_name[name], dev, d.bits, d.bits)
    return layer_latency_ms(inst, inst.layer_by_name[name], dev, d.bits, d.bits)
