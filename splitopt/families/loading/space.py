"""The loading search space: the number of children ``k``, ``children.max - 1`` cut genes
(block indices; the first ``k - 1`` are used), the thread of each child slot, and one load
priority order over the slots (each thread loads its children in that order). Repair
sorts the used cuts and spreads equal ones apart so that every child holds a block. The
limits (bounds on k, the trainable tail) are left to the evaluator."""

from __future__ import annotations

from splitopt.families.loading.data import data
from splitopt.families.loading.plan import LoadingPlan, canonical_threads
from splitopt.families.loading.settings import LoadingInstance
from splitopt.search.space import ChoiceGene, Genome, IntegerGene, PermutationGene, SearchSpace

K = "children"
ORDER = "load_order"


def cut_gene(j: int) -> str:
    return f"cut[{j}]"


def thread_gene(i: int) -> str:
    return f"thread[{i}]"


def loading_space(inst: LoadingInstance) -> SearchSpace:
    d = data(inst)
    k_high = min(d.k_max, d.n)
    counts = list(d.child_counts())
    k_low = min(counts) if counts else 1
    genes: list = [IntegerGene(K, k_low, max(k_low, max(counts) if counts else k_high))]
    genes += [IntegerGene(cut_gene(j), 1, max(1, d.n - 1)) for j in range(1, k_high)]
    lanes = tuple(range(min(d.threads, k_high)))
    genes += [ChoiceGene(thread_gene(i), lanes) for i in range(k_high)]
    genes.append(PermutationGene(ORDER, tuple(range(k_high))))

    def repair(genome: Genome) -> Genome:
        out = dict(genome)
        k = min(max(out[K], 1), k_high)
        out[K] = k
        cuts = sorted(out[cut_gene(j)] for j in range(1, k))
        for j in range(len(cuts)):  # strictly increasing within [1, N - 1]
            cuts[j] = max(cuts[j], (cuts[j - 1] + 1) if j else 1)
        for j in range(len(cuts) - 1, -1, -1):
            cuts[j] = min(cuts[j], d.n - 1 - (len(cuts) - 1 - j))
        for j, c in enumerate(cuts, start=1):
            out[cut_gene(j)] = c
        return out

    def to_plan(genome: Genome) -> LoadingPlan:
        k = genome[K]
        starts = (0,) + tuple(genome[cut_gene(j)] for j in range(1, k))
        lists: dict[int, list[int]] = {}
        for slot in genome[ORDER]:
            if slot < k:
                lists.setdefault(genome[thread_gene(slot)], []).append(slot)
        return LoadingPlan(starts, canonical_threads(list(lists.values())))

    def from_plan(plan: LoadingPlan) -> Genome:
        genome: Genome = {K: plan.k}
        for j in range(1, k_high):
            genome[cut_gene(j)] = plan.starts[j] if j < plan.k else max(1, d.n - 1)
        thread_of = {c: t for t, children in enumerate(plan.threads) for c in children}
        for i in range(k_high):
            genome[thread_gene(i)] = thread_of.get(i, 0)
        order = [c for children in plan.threads for c in children]
        genome[ORDER] = tuple(order + [i for i in range(k_high) if i >= plan.k])
        return genome

    return SearchSpace(tuple(genes), to_plan, from_plan, repair,
                       notes="k; cut positions; a thread per child; one load priority order",
                       meta={"represents_every_plan": False, "represents_every_feasible_plan": True})
