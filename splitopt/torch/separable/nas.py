"""Training and policy search for the separable ResNeXt
(:mod:`splitopt.torch.separable.model`), the Separable NN paper's Sec. 3.2 scaled down
to a minute of CPU on the digits:

* stage 1 (:func:`train_separable`): train the separable network with a policy drawn
  per mini-batch (Eq. 9 with M = 1; the policy uniform over the G! permutations, the K
  levels and the dtypes, i.e. an untrained controller's), Adam, cosine schedule, a
  random +-1 pixel shift; the unseparated reference is trained the same way with no
  policy;
* stage 2 (:func:`search_controller`): an LSTM controller (the paper's RNN with 100
  cells) emits per step a permutation (one of G!), a level and a dtype, each fed back as
  the next input; REINFORCE with reward = validation accuracy (optionally minus
  ``byte_weight`` times the bytes over the ring all-reduce's), a moving-average
  baseline and an entropy bonus; the network is frozen;
* stage 3: sample policies from the trained controller, keep the best on validation.

Accuracy is a fraction in [0, 1]; bytes per sample; times in seconds. The records
(:func:`accuracy_records`) are the family's ``settings.separable.accuracy`` objects,
measured on the validation split per policy class.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from splitopt.families.separable.data import AccuracyRecord
from splitopt.families.separable.evaluate import meets_record, step_features
from splitopt.torch.separable.model import (DigitsData, PolicyStep, SepConfig, SepResNeXt, accuracy,
                                            identity_policy, intensive_policy, load_digits_split, normalize_policy,
                                            permutations, policy_bytes, random_policy, ring_bytes)


# --------------------------------------------------------------------------- stage 1


def _shift(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Each image moved by up to one pixel each way (zero fill)."""
    n, _, h, w = x.shape
    padded = F.pad(x, (1, 1, 1, 1))
    dx = torch.randint(0, 3, (n, 1, 1), generator=gen)
    dy = torch.randint(0, 3, (n, 1, 1), generator=gen)
    rows = dy + torch.arange(h).view(1, h, 1)
    cols = dx + torch.arange(w).view(1, 1, w)
    moved = padded[torch.arange(n).view(n, 1, 1), :, rows, cols].permute(0, 3, 1, 2)
    # a fresh tensor with standard strides: with one channel, .contiguous() would keep the
    # permuted strides (a size-1 dimension), which crashed oneDNN's conv backward here
    out = torch.empty(x.shape, dtype=x.dtype)
    out.copy_(moved)
    return out


@dataclass
class TrainLog:
    """What a training run did: epochs, seconds, the mean loss of each epoch."""

    epochs: int
    seconds: float
    losses: list[float] = field(default_factory=list)
    policies_sampled: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"epochs": self.epochs, "seconds": self.seconds, "losses": self.losses,
                "policies_sampled": self.policies_sampled}


def train_separable(model: SepResNeXt, data: DigitsData, *, epochs: int = 20, batch: int = 64, lr: float = 3e-3,
                    seed: int = 0, sampler: Callable[[np.random.Generator], Any] | None = None,
                    policy: Any = "random", augment: bool = True, time_budget_s: float | None = None) -> TrainLog:
    """Stage 1: train ``model`` on ``data.x_train``. Each mini-batch draws its policy from
    ``sampler(rng)`` (default: :func:`random_policy`, uniform) when ``policy`` is
    "random", else uses ``policy`` fixed (None: no communication; the reference model
    has G = 1, so None is its only policy). Stops after ``epochs`` or ``time_budget_s``."""
    c = model.config
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    steps_per_epoch = math.ceil(len(data.y_train) / batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps_per_epoch,
                                                pct_start=0.15)
    fixed = None if (isinstance(policy, str) and policy == "random") else normalize_policy(policy, c)
    draw = sampler or (lambda r: random_policy(c, r))
    log = TrainLog(0, 0.0)
    t0 = time.perf_counter()
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(data.y_train), generator=gen)
        total, count = 0.0, 0
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            x = data.x_train[idx]
            if augment:
                x = _shift(x, gen)
            steps = fixed if fixed is not None else normalize_policy(draw(rng), c)
            log.policies_sampled += fixed is None
            loss = F.cross_entropy(model(x, steps), data.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
            count += len(idx)
        log.losses.append(total / count)
        log.epochs = epoch + 1
        if time_budget_s is not None and time.perf_counter() - t0 > time_budget_s:
            break
    log.seconds = time.perf_counter() - t0
    model.eval()
    return log


# --------------------------------------------------------------------------- measuring


def accuracy_of_policies(model: SepResNeXt, policies: Iterable[Any], data: DigitsData | None = None,
                         split: str = "test") -> list[float]:
    """Top-1 accuracy (fraction) of ``model`` under each policy (anything
    :func:`~splitopt.torch.separable.model.normalize_policy` reads: a ``SeparablePlan``, a
    list of ``(send_to, level, dtype)``) on ``split`` ("train", "val" or "test") of
    ``data`` (default: the digits split with seed 0)."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"split: must be train, val or test, got {split!r}")
    data = data or load_digits_split()
    x, y = getattr(data, f"x_{split}"), getattr(data, f"y_{split}")
    return [accuracy(model, x, y, p) for p in policies]


def meets(config: SepConfig, steps: Sequence[PolicyStep], record: Mapping[str, Any]) -> bool:
    """Whether a policy meets an accuracy record's requirements (the family's rule,
    :func:`splitopt.families.separable.evaluate.meets_record`)."""
    r = AccuracyRecord(name=str(record.get("name", "")), accuracy=float(record.get("accuracy", 0.0)),
                       mixing=bool(record.get("mixing", False)),
                       min_intensive_steps=int(record.get("min_intensive_steps", 0)),
                       max_float16_steps=record.get("max_float16_steps"), min_level=int(record.get("min_level", 0)),
                       max_level=record.get("max_level"))
    return meets_record(steps, r, *step_features(config.groups, steps))


def sample_in_class(config: SepConfig, record: Mapping[str, Any], rng: np.random.Generator, count: int,
                    tries: int = 20000) -> list[list[PolicyStep]]:
    """``count`` policies drawn uniformly among those meeting ``record`` (rejection
    sampling; fewer if the class is that rare)."""
    out = []
    for _ in range(tries):
        p = random_policy(config, rng)
        if meets(config, p, record):
            out.append(p)
            if len(out) == count:
                break
    return out


def default_classes(config: SepConfig) -> list[dict[str, Any]]:
    """The policy classes measured into records: any policy, mixing, at least k
    intensive steps (k = 1 .. J), mixing at the upper half of levels, mixing without
    float16, and every step intensive at 100 % in float32."""
    c = config
    top = c.levels - 1
    classes: list[dict[str, Any]] = [{"name": "any policy"}, {"name": "mixing", "mixing": True}]
    for k in range(1, c.steps + 1):
        classes.append({"name": f">= {k} intensive steps", "min_intensive_steps": k})
    if c.levels > 1:
        classes.append({"name": f"mixing, levels >= {top // 2}", "mixing": True, "min_level": top // 2})
    if "float16" in c.dtypes:
        classes.append({"name": "mixing, float32 only", "mixing": True, "max_float16_steps": 0})
    classes.append({"name": "all intensive, 100 %, float32", "min_intensive_steps": c.steps, "min_level": top,
                    "max_float16_steps": 0})
    return classes


def cheapest_member(config: SepConfig, policy: Sequence[PolicyStep], record: Mapping[str, Any],
                    rng: np.random.Generator) -> list[PolicyStep]:
    """A cheap member of ``record``'s class derived from ``policy`` (which meets it): its
    steps silenced one by one in random order while the policy still meets the record,
    then every sending step at the record's lowest allowed level and in float16 where the
    record and the dtypes allow it. What a byte-minimising solver picks in a class looks
    like this, not like a uniform member."""
    steps = list(policy)
    silent = PolicyStep(tuple(range(config.groups)), config.levels - 1, "float32")
    for j in rng.permutation(len(steps)):
        trial = steps[:j] + [silent] + steps[j + 1:]
        if meets(config, trial, record):
            steps = trial
    low = int(record.get("min_level", 0))
    f16_left = record.get("max_float16_steps")
    out = []
    for s in steps:
        if not s.senders:
            out.append(s)
            continue
        half = "float16" in config.dtypes and (f16_left is None or f16_left > 0)
        if half and f16_left is not None:
            f16_left -= 1
        out.append(PolicyStep(s.send_to, low, "float16" if half else ("float32" if "float32" in config.dtypes
                                                                      else s.dtype)))
    return out if meets(config, out, record) else list(policy)


def accuracy_records(model: SepResNeXt, data: DigitsData, classes: Sequence[Mapping[str, Any]] | None = None, *,
                     samples: int = 8, statistic: str = "min", split: str = "val", seed: int = 0,
                     cheapest: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Measured accuracy records (``settings.separable.accuracy``) and their details.

    For each class, ``samples`` policies drawn uniformly in the class (the "any policy"
    class also gets the no-communication policy, the "all intensive" class the cyclic
    shift) and, with ``cheapest``, each one's :func:`cheapest_member` are measured on
    ``split``; the record's accuracy is their ``statistic`` ("min": a conservative credit
    for every member, the default; "mean": a typical member's). Uniform members alone
    overstate what the cheapest members of a class reach, and a solver that minimises
    bytes picks exactly those. Details: per class the count, min, mean and max, and the
    min over the uniform members alone."""
    if statistic not in ("min", "mean"):
        raise ValueError(f"statistic: must be min or mean, got {statistic!r}")
    c = model.config
    rng = np.random.default_rng(seed)
    records, details = [], []
    for cls in classes or default_classes(c):
        req = {k: v for k, v in cls.items() if k != "name"}
        pols = sample_in_class(c, req, rng, samples)
        if not req:
            pols.append(identity_policy(c))
        if req.get("min_intensive_steps") == c.steps and req.get("min_level") == c.levels - 1:
            pols.append(intensive_policy(c))
        if not pols:
            continue
        uniform = len(pols)
        if cheapest:
            seen = {tuple(p) for p in pols}
            for p in pols[:uniform]:
                q = cheapest_member(c, p, req, rng)
                if tuple(q) not in seen:
                    seen.add(tuple(q))
                    pols.append(q)
        accs = accuracy_of_policies(model, pols, data, split)
        value = min(accs) if statistic == "min" else float(np.mean(accs))
        name = f"{cls.get('name', 'class')} ({statistic} of {len(accs)} policies, {split})"
        records.append({"name": name, "accuracy": round(float(value), 6), **req})
        details.append({"name": cls.get("name"), "requirements": req, "policies": len(accs), "min": min(accs),
                        "mean": float(np.mean(accs)), "max": max(accs), "min_uniform": min(accs[:uniform]),
                        "uniform_policies": uniform})
    return records, details


# --------------------------------------------------------------------------- stages 2-3


class Controller(nn.Module):
    """The LSTM controller: per step it emits a permutation id (G! choices, Table 3
    order), then a level (K), then a dtype, each sampled from a softmax over the LSTM's
    output and fed back (embedded) as the next input."""

    def __init__(self, config: SepConfig, hidden: int = 100):
        super().__init__()
        self.config = config
        self.perms = permutations(config.groups)
        self.sizes = [len(self.perms), config.levels, len(config.dtypes)]
        self.offsets = [0, self.sizes[0], self.sizes[0] + self.sizes[1]]
        self.embed = nn.Embedding(sum(self.sizes) + 1, hidden)
        self.cell = nn.LSTMCell(hidden, hidden)
        self.heads = nn.ModuleList(nn.Linear(hidden, n) for n in self.sizes)
        self.hidden = hidden

    def sample(self, greedy: bool = False, gen: torch.Generator | None = None
               ) -> tuple[list[PolicyStep], torch.Tensor, torch.Tensor]:
        """A policy, its log-probability and its entropy (summed over decisions)."""
        h = torch.zeros(1, self.hidden)
        cst = torch.zeros(1, self.hidden)
        token = torch.tensor([sum(self.sizes)])
        logp = torch.zeros(())
        ent = torch.zeros(())
        steps = []
        for _ in range(self.config.steps):
            picks = []
            for kind, n in enumerate(self.sizes):
                h, cst = self.cell(self.embed(token), (h, cst))
                logits = self.heads[kind](h)[0]
                probs = torch.softmax(logits, -1)
                if n == 1:
                    k = 0
                elif greedy:
                    k = int(probs.argmax())
                else:
                    k = int(torch.multinomial(probs, 1, generator=gen))
                lp = torch.log_softmax(logits, -1)
                logp = logp + lp[k]
                ent = ent - (probs * lp).sum()
                picks.append(k)
                token = torch.tensor([self.offsets[kind] + k])
            steps.append(PolicyStep(self.perms[picks[0]], picks[1], self.config.dtypes[picks[2]]))
        return steps, logp, ent


@dataclass
class SearchResult:
    """The controller search: its budget (controller updates, policies evaluated, seconds),
    the reward curve, the best policy found (by validation accuracy; ties: fewer bytes) and
    its validation accuracy."""

    best: list[PolicyStep]
    best_val: float
    controller_steps: int
    stage3_samples: int
    evaluations: int
    seconds: float
    rewards: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"best_policy": [{"send_to": list(s.send_to), "level": s.level, "dtype": s.dtype} for s in self.best],
                "best_val_accuracy": self.best_val, "controller_steps": self.controller_steps,
                "stage3_samples": self.stage3_samples, "evaluations": self.evaluations, "seconds": self.seconds,
                "mean_reward_first_20": float(np.mean(self.rewards[:20])) if self.rewards else None,
                "mean_reward_last_20": float(np.mean(self.rewards[-20:])) if self.rewards else None}


def search_controller(model: SepResNeXt, data: DigitsData, *, steps: int = 150, samples: int = 50,
                      val_batch: int | None = None, lr: float = 3.5e-3, baseline_decay: float = 0.9,
                      entropy_weight: float = 1e-3, byte_weight: float = 0.0, seed: int = 0) -> SearchResult:
    """Stages 2 and 3: train a :class:`Controller` for ``steps`` REINFORCE updates (one
    sampled policy each, reward = its accuracy on the validation split, or on a random
    ``val_batch`` of it, minus ``byte_weight * bytes / ring bytes``), then sample
    ``samples`` policies and keep the best on the whole validation split."""
    c = model.config
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    ctrl = Controller(c)
    opt = torch.optim.Adam(ctrl.parameters(), lr=lr)
    ring = ring_bytes(c)
    baseline = None
    rewards = []
    evals = 0
    t0 = time.perf_counter()
    cache: dict[tuple, float] = {}

    def val_acc(pol: list[PolicyStep], x: torch.Tensor, y: torch.Tensor, key: Any) -> float:
        nonlocal evals
        k = (tuple((s.send_to, s.level, s.dtype) for s in pol), key)
        if k not in cache:
            evals += 1
            cache[k] = accuracy(model, x, y, pol)
        return cache[k]

    for i in range(steps):
        pol, logp, ent = ctrl.sample(gen=gen)
        if val_batch:
            idx = torch.randint(0, len(data.y_val), (val_batch,), generator=gen)
            acc = val_acc(pol, data.x_val[idx], data.y_val[idx], ("batch", i))
        else:
            acc = val_acc(pol, data.x_val, data.y_val, "val")
        r = acc - byte_weight * policy_bytes(c, pol) / ring
        rewards.append(r)
        baseline = r if baseline is None else baseline_decay * baseline + (1 - baseline_decay) * r
        loss = -(r - baseline) * logp - entropy_weight * ent
        opt.zero_grad()
        loss.backward()
        opt.step()
    best, best_val = None, -1.0
    with torch.no_grad():
        candidates = [ctrl.sample(gen=gen)[0] for _ in range(samples)] + [ctrl.sample(greedy=True)[0]]
    for pol in candidates:
        acc = val_acc(pol, data.x_val, data.y_val, "val")
        better = acc > best_val + 1e-12 or (abs(acc - best_val) <= 1e-12 and best is not None
                                             and policy_bytes(c, pol) < policy_bytes(c, best))
        if better:
            best, best_val = pol, acc
    assert best is not None
    return SearchResult(best, best_val, steps, len(candidates), evals, time.perf_counter() - t0, rewards)


# --------------------------------------------------------------------------- the study


def random_policies(config: SepConfig, count: int, seed: int = 0) -> list[list[PolicyStep]]:
    """``count`` uniform random policies."""
    rng = np.random.default_rng(seed)
    return [random_policy(config, rng) for _ in range(count)]


def save_models(path: Any, model: SepResNeXt, reference: SepResNeXt | None = None,
                extra: Mapping | None = None) -> None:
    """Write both networks' weights and the configuration to one checkpoint file."""
    torch.save({"config": model.config.to_dict(), "model": model.state_dict(),
                "reference": None if reference is None else reference.state_dict(), "extra": dict(extra or {})},
               path)


def load_models(path: Any) -> tuple[SepResNeXt, SepResNeXt | None, dict]:
    """The networks :func:`save_models` wrote (eval mode); ValueError naming the file where
    it is not such a checkpoint. Read with ``weights_only=True``: tensors and plain
    containers only, no code from the file runs."""
    from splitopt.torch.separable.model import build_model, build_reference

    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 -- pickle, zip and format errors alike: not a torch file of tensors
        raise ValueError(f"checkpoint {path}: not a torch checkpoint of tensors (write one with "
                         "profile-separable --checkpoint)") from None
    try:
        if not isinstance(raw, dict) or not isinstance(raw.get("config"), dict):
            raise ValueError("no 'config' entry")
        config = SepConfig.from_dict(raw["config"])
        model = build_model(config)
        model.load_state_dict(raw["model"])
        model.eval()
        ref = None
        if raw.get("reference") is not None:
            ref = build_reference(config)
            ref.load_state_dict(raw["reference"])
            ref.eval()
        return model, ref, dict(raw.get("extra") or {})
    except Exception as e:  # noqa: BLE001 -- torch raises many types for a foreign file (pickle, zip, key, shape)
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"checkpoint {path}: not a Sep-ResNeXt checkpoint written by profile-separable "
                         f"--checkpoint ({type(e).__name__}: {why[:200]})") from None
