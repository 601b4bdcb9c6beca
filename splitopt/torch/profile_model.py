"""``splitopt profile MODEL`` of a layer-graph model: the model by its name or file, the
hardware from presets, into an instance of the family whose topology the presets form.

MODEL by its suffix: ``MODEL.onnx`` goes to the ONNX bridge (:mod:`splitopt.onnx`: onnx +
onnxruntime, no torch), ``MODEL.pt2`` (a ``torch.export.save`` file) to the torch capture
of the saved program (:mod:`splitopt.torch.saved_program`); anything else is a built-in
name or a user factory spec (:func:`splitopt.torch.models.build_model`), profiled by
:func:`splitopt.torch.profile.profile`. The hardware: ``--preset`` and ``--topology``
(:func:`splitopt.families.topologies.preset_hardware`), with ``--measure --edge-host``
the host in the edge's role (:meth:`splitopt.families.base.Family.host_as_edge`); or,
with ``--agents``, the devices and links device agents measure
(:mod:`splitopt.agents.hardware`: the agents are connected and the links probed before
the model is built; the model goes to every agent as one ONNX file and each layer's
latency on each device is the agent's median). The family completes the profiled
instance (:meth:`~splitopt.families.base.Family.complete_profiled`: edge/cloud
``split_bits``: the whole network's W8A8 error as the budget).

Importing this module imports no torch; the options are checked without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from splitopt.core.errors import NotApplicable
from splitopt.core.input_text import check_input_options
from splitopt.core.options import check_count
from splitopt.torch.side import Profiled

#: the bits of the error tables (:data:`splitopt.torch.profile.DEFAULT_BITS`, kept off torch here)
ERROR_TABLE_BITS = (2, 4, 6, 8)
#: link bandwidth (bits/s) of topologies built from device presets
DEFAULT_PRESET_BANDWIDTH = 1e7
#: the name of the host's device when its latencies are measured
HOST = "host"


def is_factory_spec(model: str) -> bool:
    """``PATH.py:FACTORY`` or ``package.module:FACTORY`` (not a model file)."""
    return ":" in Path(model).name


def model_suffix(model: str) -> str:
    """The file suffix that decides how MODEL is read (``.onnx``, ``.pt2``), or ``""`` for
    a built-in name or a user factory spec."""
    return "" if is_factory_spec(model) else Path(model).suffix.lower()


def model_file(model: str) -> Path:
    """The file MODEL names (``.onnx``, ``.pt2``); InvalidModel (one line) where there is
    none."""
    from splitopt.core.errors import InvalidModel

    path = Path(model).expanduser()
    if not path.is_file():
        raise InvalidModel(f"model file '{model}' not found" if not path.exists() else f"model file '{model}' is not a file")
    return path


def model_sources(model: str) -> list[Path]:
    """The files MODEL reads (a user model's source, an ``.onnx``/``.pt2`` file): an output
    must not be one of them."""
    where = model.rpartition(":")[0] if ":" in model else model
    return [Path(where)] if where.endswith((".py", ".onnx", ".pt2")) else []


@dataclass(frozen=True)
class LayerGraphProfileOptions:
    """``splitopt profile MODEL`` of a layer-graph model: the hardware (``preset``: a
    scenario or device presets in order; ``topology``: what they form, None: the
    scenario's, or edge-cloud for two devices and a chain for more; ``bandwidth``: every
    link's bits/s), calibration inputs for the error tables (0: none, the float
    problem), whether to measure every layer's latency on this host (``repeats`` runs
    each, median) and make the host the edge (``edge_host``), the weights' seed, a user
    model's inputs, and the instance's name. ``agents`` (``--agents SPEC``, with
    ``token_file``, ``edge``, ``cloud``): the hardware is measured by device agents
    instead (:mod:`splitopt.agents.hardware`); ``preset`` None: ``eyeriss``."""

    preset: str | None = None
    topology: str | None = None
    bandwidth: float | None = None
    calibration_images: int = 8
    measure: bool = False
    edge_host: bool = False
    repeats: int = 5
    seed: int = 0
    input_shape: str | None = None
    input_dtype: str | None = None
    input_high: int | None = None
    name: str | None = None
    agents: str | None = None
    token_file: Path | None = None
    edge: str | None = None
    cloud: str | None = None

    def __post_init__(self) -> None:
        check_count(self.repeats, "--repeats", high=10_000)
        check_count(self.calibration_images, "--calibration-images", low=0, high=10_000)
        check_input_options(self.seed, self.input_high, self.input_shape, self.input_dtype)
        if self.edge_host and not self.measure:
            raise NotApplicable("--edge-host: needs --measure (the host's latencies are measured)")
        if self.agents is None:
            for option, value in (("--token-file", self.token_file), ("--edge", self.edge), ("--cloud", self.cloud)):
                if value is not None:
                    raise NotApplicable(f"{option}: applies with --agents (the devices are measured by agents)")
            self.hardware()
            return
        for option, given in (("--preset", self.preset is not None), ("--bandwidth", self.bandwidth is not None),
                              ("--measure", self.measure), ("--edge-host", self.edge_host)):
            if given:
                raise NotApplicable(f"{option}: not with --agents (the agents measure the devices and links)")
        from splitopt.agents.addresses import parse_agents
        from splitopt.agents.hardware import agent_names, topology_of

        agents = parse_agents(self.agents)
        agent_names(agents, topology_of(agents, self.topology), self.edge, self.cloud)

    @property
    def preset_name(self) -> str:
        """``--preset`` or its default, ``eyeriss``."""
        return self.preset if self.preset is not None else "eyeriss"

    def hardware(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        """Devices, links and settings of the preset and topology (the host in the edge's
        role with ``edge_host``); InvalidOption / NotApplicable, one line, where they do
        not fit."""
        from splitopt.families.registry import family_for_problem
        from splitopt.families.topologies import preset_hardware

        bandwidth = self.bandwidth if self.bandwidth is not None else DEFAULT_PRESET_BANDWIDTH
        devices, links, settings = preset_hardware(self.preset_name, self.topology, bandwidth, ERROR_TABLE_BITS,
                                                   self.calibration_images > 0)
        if self.edge_host:
            links, settings = family_for_problem(settings["problem"]).host_as_edge(links, settings, HOST)
        return devices, links, settings


def needs_torch(model: str) -> bool:
    """Whether profiling MODEL needs torch (everything but an ONNX file)."""
    return model_suffix(model) != ".onnx"


def profile_model(model: str, options: LayerGraphProfileOptions) -> Profiled:
    """The instance of MODEL on the hardware of ``options`` (see the module docstring),
    completed by its family, with a line describing it. With ``--agents`` the agents are
    connected and the links probed first: an agent that cannot be used is one line
    before the model is built."""
    from splitopt.families.registry import family_of

    suffix = model_suffix(model)
    agents = None
    if options.agents is not None:
        if suffix == ".pt2":
            raise NotApplicable("--agents: a .pt2 program is not measured on agents; give a built-in model, "
                                "PATH.py:FACTORY or an .onnx file")
        from splitopt.agents.hardware import open_agents
        from splitopt.core import progress

        with progress.phase("connecting to the agents"):
            agents = open_agents(options.agents, options.token_file, options.topology, edge=options.edge,
                                 cloud=options.cloud)
    try:
        if agents is not None:
            with progress.phase("probing the links"):
                agents.probe()
        if suffix == ".onnx":
            inst = _profile_onnx(model, options, agents)
        else:
            inst = _profile_torch(model, suffix, options, agents)
    finally:
        if agents is not None:
            agents.close()
    inst = family_of(inst).complete_profiled(inst)
    summary = (f"{len(inst.layers)} layers, {sum(l.macs for l in inst.layers) / 1e9:.3f} GMAC, "
               f"{sum(l.weights for l in inst.layers) / 1e6:.3f} M weights, problem {inst.problem}")
    if agents is not None:
        summary += f", devices measured by agents {', '.join(agents.names)}"
    return Profiled(inst, summary)


def _hardware(options: LayerGraphProfileOptions, agents: Any, model_onnx: Callable[[], Any]
              ) -> tuple[list, list, dict, dict[str, dict[str, float]] | None, dict[str, Any] | None]:
    """Devices, links and settings; with agents also every device's measured layer
    latencies (``model_onnx()``: the model as one ONNX file with its layer name map) and
    the instance's ``source`` entries saying how they were measured."""
    if agents is None:
        devices, links, settings = options.hardware()
        return devices, links, settings, None, None
    from splitopt.core import progress

    with progress.phase("exporting the model to ONNX for the agents"):
        m = model_onnx()
    with progress.phase("measuring layer latency on the agents"):
        measured = agents.measure(m.data, m.layer_names, repeats=options.repeats, input_shape=options.input_shape,
                                  input_high=options.input_high)
    devices, links, settings = agents.parts(m.total_macs, ERROR_TABLE_BITS, options.calibration_images > 0)
    return devices, links, settings, measured, {"agents": agents.provenance()}


def _profile_onnx(model: str, options: LayerGraphProfileOptions, agents: Any):
    """The instance of an ONNX file (the onnx extra; no torch)."""
    from splitopt.onnx.deps import require_onnx

    if options.input_dtype is not None:
        raise NotApplicable("--input-dtype: an ONNX model declares its input types; not applicable to .onnx files")
    path = model_file(model)
    require_onnx("splitopt profile MODEL.onnx")
    from splitopt.agents.model_onnx import model_onnx_file
    from splitopt.onnx.profile import profile_onnx

    devices, links, settings, measured, provenance = _hardware(
        options, agents, lambda: model_onnx_file(path, options.input_shape, options.input_high))
    return profile_onnx(path, devices, links, settings, name=options.name or path.stem,
                        input_shape=options.input_shape, input_high=options.input_high,
                        calibration=options.calibration_images, measure_latency=options.measure,
                        repeats=options.repeats, device_latency=measured, provenance=provenance)


def _profile_torch(model: str, suffix: str, options: LayerGraphProfileOptions, agents: Any):
    """The instance of a built-in model, a user factory or a saved program (torch)."""
    from splitopt.torch.profile import profile

    name = options.name
    if suffix == ".pt2":
        from splitopt.torch.saved_program import saved_program

        module, example, calibration_fn, guard = saved_program(model_file(model), model, options.input_shape,
                                                               options.input_dtype, options.input_high)
        rename, name = None, name or Path(model).stem
    else:
        from splitopt.torch.models import build_model
        from splitopt.torch.user_model import capture_errors as guard
        from splitopt.torch.user_model import factory_name, is_spec

        module, rename, example, _, calibration_fn = build_model(
            model, options.seed, input_shape=options.input_shape, input_dtype=options.input_dtype,
            input_high=options.input_high)
        if name is None:
            where = "_".join(agents.names) if agents is not None else options.preset_name.replace(",", "_")
            name = factory_name(model) if is_spec(model) else f"{model}_{where}"
    # the first 8 are those of the shipped instances; more are drawn on request
    count = options.calibration_images
    calibration = calibration_fn(max(count, 8))[:count] if count > 0 else None
    with guard(module, example, what=f"profiling '{model}'"):
        from splitopt.agents.model_onnx import model_onnx

        devices, links, settings, measured, provenance = _hardware(
            options, agents, lambda: model_onnx(module, example, rename))
        return profile(module, example, devices, links, settings, name=name, input_high=options.input_high,
                       calibration=calibration, measure_latency=options.measure, repeats=options.repeats,
                       rename=rename, device_latency=measured, provenance=provenance)
