"""Every placement of the peer benchmark that meets the rules, for the brute-force
backend (tiny instances): colour groups assigned in order, devices of a kind numbered in
order of first use (identical accelerators and identical cores are interchangeable for
both objectives, so other numberings give the same loads and latency), each candidate
kept when ``check_placement`` finds no broken rule."""

from __future__ import annotations

from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.families.maxload.evaluate import check_placement
from splitopt.families.maxload.groups import groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement


def enumerate_plans(inst: MaxloadInstance, limit: int) -> Iterator[MaxloadPlacement]:
    """The placements of the module docstring; NotApplicable when the number of device
    labellings to try exceeds ``limit``."""
    gr = groups_of(inst)
    G = len(gr.members)
    k, l = len(inst.fpgas), len(inst.cpus)
    if (k + l) ** G > limit:
        raise NotApplicable(f"brute-force: {k + l}^{G} placements of {G} colour groups is too many (limit {limit:,})")
    fpga_ok = [gr.fpga_ok(inst, g) for g in range(G)]

    def walk(g: int, chosen: list[str], used_f: int, used_c: int) -> Iterator[MaxloadPlacement]:
        if g == G:
            placement = MaxloadPlacement({v: chosen[gr.of[v]] for v in inst.node_by_id})
            if not check_placement(inst, placement):
                yield placement
            return
        options = []
        if fpga_ok[g]:
            options += [(f"fpga{i}", max(used_f, i + 1), used_c) for i in range(min(used_f + 1, k))]
        options += [(f"cpu{i}", used_f, max(used_c, i + 1)) for i in range(min(used_c + 1, l))]
        for device, f, c in options:
            chosen.append(device)
            yield from walk(g + 1, chosen, f, c)
            chosen.pop()

    return walk(0, [], 0, 0)
