"""Every placement of the peer benchmark that meets the rules, for the brute-force
backend (tiny instances).

* Throughput objective (:func:`enumerate_plans`): colour groups assigned in order,
  devices of a kind numbered in order of first use (identical accelerators and
  identical cores are interchangeable for the max-load, so other numberings give the
  same loads), each candidate kept when ``check_placement`` finds no broken rule.
* Latency objective (:func:`latency_placements`): the latency does not depend on which
  core a CPU node runs on, so each group -> device map (accelerators numbered by first
  use, or "the CPU") is yielded once, with the family's own cores
  (``splitopt.families.maxload.cores.cpu_cores`` with its exhaustive search); a map is
  skipped only when no assignment of its CPU groups to maxCPUs cores keeps rule 5. Far
  fewer candidates than naming every core, and the same optimum (``tests/
  test_maxload_latency.py`` compares both with every assignment of groups to named
  devices).
"""

from __future__ import annotations

from typing import Iterator

from splitopt.core.errors import NotApplicable
from splitopt.families.maxload.contiguity import splitopt_rule_only
from splitopt.families.maxload.cores import CPU, placement_of
from splitopt.families.maxload.evaluate import check_placement
from splitopt.families.maxload.data import groups_of
from splitopt.families.maxload.instance import MaxloadInstance
from splitopt.families.maxload.plan import MaxloadPlacement


def enumerate_plans(inst: MaxloadInstance, limit: int) -> Iterator[MaxloadPlacement]:
    """The placements of the module docstring for the instance's objective; NotApplicable
    when the number of candidates to try exceeds ``limit``."""
    if inst.objective == "latency":
        return latency_placements(inst, limit)
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


def count_latency_candidates(n_groups: int, k: int, cpu: bool) -> int:
    """How many group -> device maps :func:`latency_placements` walks: each group on the
    CPU (if any) or on one of ``k`` accelerators, accelerators numbered by first use."""
    count = {m: 1 for m in range(k + 1)}  # completions with 0 groups left, m accelerators used
    for _ in range(n_groups):
        count = {m: (count[m] if cpu else 0) + m * count[m] + (count[m + 1] if m < k else 0) for m in range(k + 1)}
    return count[0]


def latency_placements(inst: MaxloadInstance, limit: int = 200_000) -> Iterator[MaxloadPlacement]:
    """Every placement that meets every rule of ``check_placement``, once up to the
    symmetries of the latency (see the module docstring). The latency may still be
    undefined for some (calls that wait on each other: the evaluator reports it as a
    violation of the latency objective). NotApplicable (before any work) when more than
    ``limit`` group -> device maps would be walked, or under contiguity "authors" where it
    differs from "splitopt" (the cores are chosen by splitopt's rule)."""
    splitopt_rule_only(inst, "brute-force (latency)")
    gr = groups_of(inst)
    n, k, cpu = len(gr.members), len(inst.fpgas), inst.max_cpus >= 1
    total = count_latency_candidates(n, k, cpu)
    if total > limit:
        raise NotApplicable(f"brute-force: {total:,} group placements of {inst.name or 'the instance'} "
                            f"is too many (limit {limit:,})")
    where: dict[int, int] = {}

    def walk(g: int, used: int) -> Iterator[MaxloadPlacement]:
        if g == n:
            p = placement_of(inst, gr, where, search=True)
            if p is not None and not check_placement(inst, p):
                yield p
            return
        if cpu:
            where[g] = CPU
            yield from walk(g + 1, used)
        for a in range(min(used + 1, k)):
            where[g] = a
            yield from walk(g + 1, max(used, a + 1))

    return walk(0, 0)
