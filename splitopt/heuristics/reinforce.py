"""REINFORCE (backend ``reinforce``, needs the torch extra): a recurrent policy over the
decisions of any family's search space, trained by policy gradient, as the Separable NN
paper's controller (an LSTM of 100 cells that emits one decision per step, each decision
fed back as the next input, trained by REINFORCE on the reward of the sampled model).

* Policy: at decision t the input is the embedding of the previous action plus that of
  the step; an ``LSTMCell`` (``hidden`` cells) and a linear layer give logits over the
  widest step's actions, masked to the actions valid at t
  (``splitopt.heuristics.decisions``).
* Reward: minus the plan's cost (``decisions.cost``: objective / the best seed's objective
  for a plan meeting every limit, 10 + broken limits otherwise), by the family's
  evaluator; the paper's reward is validation accuracy, which splitopt's families do not
  model.
* Update, after each generation of ``episodes`` sampled plans:
  ``loss = -mean((R - b) * sum_t log pi(a_t)) - entropy * H``, Adam (``lr``); the
  baseline ``b`` is a moving average of the rewards (decay 0.9), as in Zoph and Le's
  controller. The seed plans are not replayed (REINFORCE learns on policy).

torch is imported when this runs, never by the core; the torch generator is seeded from
the search's seed, so the same seed gives the same plan.
"""

from __future__ import annotations

import importlib
import math
import random
from typing import Any, Mapping, Sequence

from splitopt.heuristics.base import Heuristic, Setting
from splitopt.heuristics.decisions import Decisions, cost
from splitopt.heuristics.search import Search
from splitopt.search.space import Genome


class Reinforce(Heuristic):
    name = "reinforce"
    description = "REINFORCE with an LSTM policy over the genes (the Separable NN paper's controller); torch extra"
    requires = ("torch",)
    settings = (
        Setting("hidden", int, 100, "LSTM cells (the paper: 100)", low=1, high=4096),
        Setting("lr", float, 0.01, "Adam learning rate", low=1e-7, high=10.0),
        Setting("episodes", int, 32, "plans sampled per policy update", low=1, high=100_000),
        Setting("entropy", float, 0.001, "weight of the entropy bonus", low=0.0, high=10.0),
    )

    import_s = 3.0  # torch

    @classmethod
    def import_dependencies(cls) -> None:
        importlib.import_module("torch")  # 2 s here: inside the budget, before the seeding's share

    def run(self, search: Search, rng: random.Random, seeds: Sequence[Genome], config: Mapping[str, Any]) -> None:
        import torch

        dec = Decisions(search.space)
        scored_seeds = search.score(seeds)
        search.end_generation()
        if not dec.steps:
            search.score([{}])
            return
        feasible = [s.objective for s in scored_seeds if s.feasible]
        reference = min(feasible) if feasible else math.nan
        generator = torch.Generator().manual_seed(rng.randrange(2**31))
        torch.manual_seed(rng.randrange(2**31))  # the policy's initial weights
        threads = torch.get_num_threads()
        # one intra-op thread: the policy's tensors are tiny, and torch's OpenMP threads
        # spin on a loaded machine (a 2-core machine with a solver beside it ran 100x slower)
        torch.set_num_threads(1)
        try:
            self._train(search, dec, reference, config, generator)
        finally:
            torch.set_num_threads(threads)

    @staticmethod
    def _train(search: Search, dec: Decisions, reference: float, config: Mapping[str, Any], generator) -> None:
        import torch

        policy = build_policy(len(dec.steps), dec.width, config["hidden"])
        optimizer = Adam(list(policy.parameters()), lr=config["lr"])
        masks = _masks(dec)
        baseline = None
        while not search.done:
            sampled = policy.sample(dec, masks, config["episodes"], generator, stop=search.options.out_of_time)
            if sampled is None:  # the deadline passed while sampling (10,000 steps take seconds)
                break
            actions, log_prob, entropy = sampled
            scored = search.score_each([dec.genome(a) for a in actions])
            judged = [i for i, s in enumerate(scored) if s is not None]
            if not judged:
                search.end_generation()
                continue
            for one in scored:
                if one is not None and math.isnan(reference) and one.feasible:
                    reference = one.objective
            if search.options.out_of_time():  # no update the search would use
                break
            rewards = torch.tensor([-cost(scored[i], reference) for i in judged])
            mean = float(rewards.mean())
            baseline = mean if baseline is None else 0.9 * baseline + 0.1 * mean
            index = torch.tensor(judged)
            loss = -((rewards - baseline) * log_prob[index]).mean() - config["entropy"] * entropy[index].mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            search.end_generation()


class Adam:
    """Adam (Kingma and Ba, 2015) with torch.optim.Adam's defaults and update, written out
    here because torch.optim's optimizers import torch._dynamo when the first one is made:
    1.9 s of every time-limited REINFORCE solve on this machine, for a policy of a few
    thousand weights. ``lr``: the step size; betas 0.9 and 0.999, eps 1e-8."""

    def __init__(self, params: list, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        import torch

        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.mean = [torch.zeros_like(p) for p in params]
        self.square = [torch.zeros_like(p) for p in params]
        self.steps = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """One update, as torch.optim.Adam's single-tensor path computes it."""
        import torch

        self.steps += 1
        beta1, beta2 = self.betas
        correction1, correction2 = 1 - beta1 ** self.steps, 1 - beta2 ** self.steps
        with torch.no_grad():
            for p, m, v in zip(self.params, self.mean, self.square):
                if p.grad is None:
                    continue
                m.lerp_(p.grad, 1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad.conj(), value=1 - beta2)
                denom = (v.sqrt() / math.sqrt(correction2)).add_(self.eps)
                p.addcdiv_(m, denom, value=-self.lr / correction1)


def _masks(dec: Decisions):
    """Per step, the actions that exist (a step narrower than the widest has fewer)."""
    import torch

    mask = torch.zeros(len(dec.steps), dec.width, dtype=torch.bool)
    for t, step in enumerate(dec.steps):
        mask[t, : len(step.options)] = True
    return mask


def build_policy(steps: int, width: int, hidden: int):
    """The controller (built here so that torch is imported only when REINFORCE runs)."""
    import torch
    from torch import nn

    class Policy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.action = nn.Embedding(width + 1, hidden)  # index width: "no previous action"
            self.step = nn.Embedding(steps, hidden)
            self.cell = nn.LSTMCell(hidden, hidden)
            self.out = nn.Linear(hidden, width)

        def sample(self, dec: Decisions, masks, batch: int, generator, stop=None):
            """``batch`` decision sequences; their summed log-probabilities and entropies;
            None where ``stop()`` (asked every 64 steps) says to stop."""
            h = torch.zeros(batch, hidden)
            c = torch.zeros(batch, hidden)
            prev = torch.full((batch,), width, dtype=torch.long)
            taken = []
            placed = None
            log_prob = torch.zeros(batch)
            entropy = torch.zeros(batch)
            for t, step in enumerate(dec.steps):
                if stop is not None and t % 64 == 63 and stop():
                    return None
                x = self.action(prev) + self.step.weight[t]
                h, c = self.cell(x, (h, c))
                logits = self.out(h).masked_fill(~masks[t], float("-inf"))
                if step.position == 0:  # a permutation begins: nothing placed yet
                    placed = torch.zeros(batch, width, dtype=torch.bool)
                if step.position >= 0:  # a permutation's next item: not one placed already
                    assert placed is not None  # its first item (position 0) came before
                    logits = logits.masked_fill(placed, float("-inf"))
                probs = torch.softmax(logits, dim=-1)
                action = torch.multinomial(probs.detach(), 1, generator=generator).squeeze(1)
                logp = torch.log_softmax(logits, dim=-1)
                log_prob = log_prob + logp.gather(1, action[:, None]).squeeze(1)
                entropy = entropy - (probs * logp.masked_fill(probs == 0, 0.0)).sum(-1)
                if placed is not None and step.position >= 0:
                    placed = placed.scatter(1, action[:, None], True)
                taken.append(action)
                prev = action
            chosen = torch.stack(taken, dim=1).tolist() if taken else [[] for _ in range(batch)]
            return chosen, log_prob, entropy

    return Policy()
