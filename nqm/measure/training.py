r"""Whole runs on a real model: steps to a target training loss, the step tuned per batch size, over seeds.

Each step draws B distinct examples afresh (independent batches, the sampling whose noise is
Σ(N − B)/(B(N − 1))) and applies heavy ball in PyTorch's form, ``v ← βv + ĝ_B``, ``θ ← θ − εv`` (β = 0 is plain
SGD). The full training loss is evaluated after every step, so the first step with L ≤ target is exact for that
run. :func:`nqm.measure.tuned_steps` takes, per batch size, the step size of a grid with the fewest steps
averaged over seeds (McCandlish et al. 2018, arXiv:1812.06162, §3: the steps to a target at the best constant
step), each run cut off once it needs more than the best mean so far allows; the per-seed counts at the chosen
step come back for bootstrap errors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import check_count
from .model import Model

__all__ = ["TunedSteps", "steps_to_loss", "tuned_steps"]


def steps_to_loss(
    model: Model, theta0, lr: float, batch_size: int, target: float, *, momentum: float = 0.0, max_steps: int, seed=0
) -> float:
    """The first step t (≤ ``max_steps``) whose full training loss is ≤ ``target`` on one real run; inf if none."""
    theta = model.check_point(theta0).copy()
    if float(model.loss(theta, model.everything)) <= target:
        return 0.0
    if not 1 <= int(batch_size) <= model.n:
        raise ValueError(f"batch_size must be in [1, N = {model.n}], got {batch_size}")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"momentum must be in [0, 1), got {momentum}")
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    velocity = np.zeros_like(theta)
    for t in range(1, check_count("max_steps", max_steps) + 1):
        g = model.gradients(theta, rng.choice(model.n, size=int(batch_size), replace=False)[None, :])[0]
        velocity = momentum * velocity + g
        theta -= lr * velocity
        loss = float(model.losses(theta[None, :])[0])
        if loss <= target:
            return float(t)
        if not np.isfinite(loss):
            return float("inf")
    return float("inf")


@dataclass(frozen=True, eq=False)
class TunedSteps:
    """Per batch size: ``lr`` (the chosen step), ``steps`` (the mean over seeds there; inf if some seed missed) and
    ``per_seed`` (batch sizes × seeds)."""

    batch_sizes: np.ndarray
    lr: np.ndarray
    steps: np.ndarray
    per_seed: np.ndarray
    momentum: float


def tuned_steps(
    model: Model, theta0, target: float, batch_sizes, lrs, *, momentum: float = 0.0, seeds=(0, 1, 2), max_steps=10_000
) -> TunedSteps:
    """The fewest mean steps to ``target`` over the step sizes ``lrs`` per batch size (module docstring)."""
    b = np.asarray(batch_sizes, dtype=int)
    lrs = np.asarray(lrs, dtype=np.float64)
    best_lr, best_steps = np.full(b.size, np.nan), np.full(b.size, np.inf)
    per_seed = np.full((b.size, len(seeds)), np.inf)
    for j, size in enumerate(b):
        for lr in lrs:
            cap = int(min(max_steps, best_steps[j] * len(seeds))) if np.isfinite(best_steps[j]) else max_steps
            counts = np.array(
                [
                    steps_to_loss(model, theta0, lr, size, target, momentum=momentum, max_steps=cap, seed=[s, j])
                    for s in seeds
                ]
            )
            if counts.mean() < best_steps[j]:
                best_lr[j], best_steps[j], per_seed[j] = lr, counts.mean(), counts
    return TunedSteps(b, best_lr, best_steps, per_seed, float(momentum))
