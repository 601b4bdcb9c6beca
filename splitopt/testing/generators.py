"""Random instances of every registered family, for the contract suites, tests and
benchmarks.

Each family ships its own examples (``splitopt/families/<family>/examples.py``, reached
through ``Family.random_instance(seed)``), so that registering a family puts it under the
contract suites. The functions below are the named generators tests call with sizes of
their own choosing, each deterministic for a seed; see the families' example modules for
what they draw.
"""

from __future__ import annotations

from typing import Any, Sequence

from splitopt.families.registry import family


def random_family_instance(name: str, seed: int) -> Any:
    """A small random instance of the family registered as ``name`` (small enough for
    brute force)."""
    return family(name).random_instance(seed)


def random_instance(seed: int, n_layers: int, problem: str = "split_bits", bit_widths: Sequence[int] | None = None,
                    cloud_bits: int | None = None, overrides: bool | None = None, n_inputs: int | None = None,
                    edge_required: bool = True) -> Any:
    """A random edge/cloud instance of ``n_layers`` layers
    (``splitopt.families.edge_cloud.examples.random_instance_data``)."""
    from splitopt.families.edge_cloud.examples import random_instance_data

    return family("edge_cloud").instance_from_data(random_instance_data(
        seed, n_layers, problem=problem, bit_widths=bit_widths, cloud_bits=cloud_bits, overrides=overrides,
        n_inputs=n_inputs, edge_required=edge_required))


def random_chain_instance(seed: int, n_layers: int, n_devices: int, objective: str | None = None,
                          linear: bool = False) -> Any:
    """A random chain instance (``splitopt.families.chain.examples.random_chain_data``)."""
    from splitopt.families.chain.examples import random_chain_data

    return family("chain").instance_from_data(random_chain_data(seed, n_layers, n_devices, objective, linear))


def first_chain_instance_for(method: str, n_layers: int, n_devices: int, objective: str,
                             seeds: Sequence[int] = range(40)) -> Any | None:
    """The first random chain instance (``random_chain_instance``, ``seeds`` in order)
    whose ``auto`` exact method (``Family.exact_method``) is ``method``; None if none is."""
    chain = family("chain")
    for seed in seeds:
        inst = random_chain_instance(seed, n_layers, n_devices, objective=objective)
        if chain.exact_method(inst) == method:
            return inst
    return None


def random_chain_plan(inst: Any, rng: Any) -> Any:
    """A random monotone chain plan of ``inst`` (each layer on a device at or after its
    inputs'; ``rng`` a numpy Generator)."""
    from splitopt.families.chain.plan import plan_from_indices

    index: dict[str, int] = {}
    for layer in inst.layers:
        low = max([index[s] for s in layer.inputs if s in index], default=0)
        index[layer.name] = int(rng.integers(low, len(inst.settings.chain)))
    return plan_from_indices(inst, index)


def random_mesh_instance(seed: int, n_layers: int, n_devices: int) -> Any:
    """A random mesh instance (``splitopt.families.mesh.examples.random_mesh_data``)."""
    from splitopt.families.mesh.examples import random_mesh_data

    return family("mesh").instance_from_data(random_mesh_data(seed, n_layers, n_devices))


def random_multiview_instance(seed: int) -> Any:
    """A random small multiview instance (``splitopt.families.multiview.examples``)."""
    return family("multiview").random_instance(seed)


def random_maxload_instance(seed: int, objective: str = "throughput") -> Any:
    """A random small peer file imported with ``objective``
    (``splitopt.families.maxload.examples.random_maxload_data``)."""
    from splitopt.families.maxload.examples import random_maxload_data
    from splitopt.families.maxload.instance import parse_peer_instance

    return parse_peer_instance(random_maxload_data(seed, latency=objective == "latency"),
                               name=f"random-maxload-s{seed}", objective=objective)
