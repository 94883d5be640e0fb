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

_CHUNK = 32  # steps per call of a fused run: one compiled shape per batch size


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
    max_steps = check_count("max_steps", max_steps)
    done = 0
    while done < max_steps:
        # the batches of the next steps, drawn in order (the same stream whichever path runs them)
        rows = np.stack([rng.choice(model.n, size=int(batch_size), replace=False) for _ in range(_CHUNK)])
        if model.heavy_ball_run is not None:
            theta, velocity, losses = model.heavy_ball_run(theta, velocity, lr, momentum, rows)
        else:
            losses = np.empty(_CHUNK)
            for k, row in enumerate(rows):
                velocity = momentum * velocity + model.gradients(theta, row[None, :])[0]
                theta = theta - lr * velocity
                losses[k] = float(model.losses(theta[None, :])[0])
        below = np.nonzero((losses <= target) | ~np.isfinite(losses))[0]
        if below.size:
            t = done + int(below[0]) + 1
            return float(t) if np.isfinite(losses[below[0]]) and t <= max_steps else float("inf")
        done += _CHUNK
    return float("inf")


@dataclass(frozen=True, eq=False)
class TunedSteps:
    """Per batch size: ``lr`` (the chosen step), ``steps`` (the mean over seeds there; inf if some seed missed) and
    ``per_seed`` (batch sizes × seeds; the confirming seeds' where there are some)."""

    batch_sizes: np.ndarray
    lr: np.ndarray
    steps: np.ndarray
    per_seed: np.ndarray
    momentum: float


def tuned_steps(
    model: Model,
    theta0,
    target: float,
    batch_sizes,
    lrs,
    *,
    momentum: float = 0.0,
    seeds=(0, 1, 2),
    confirm_seeds=None,
    max_steps=10_000,
) -> TunedSteps:
    """The fewest mean steps to ``target`` over the step sizes ``lrs`` per batch size (module docstring).

    The minimum over a grid of noisy means is biased low (the winner's curse: a lucky fluctuation across the
    target wins), most where the noise is large (small B). With ``confirm_seeds`` the step is chosen on ``seeds``
    and the reported counts come from fresh runs at the chosen step with ``confirm_seeds``, which removes that bias.
    """
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
    if confirm_seeds is not None:
        per_seed = np.full((b.size, len(confirm_seeds)), np.inf)
        for j, size in enumerate(b):
            if np.isfinite(best_lr[j]):
                per_seed[j] = [
                    steps_to_loss(model, theta0, best_lr[j], size, target, momentum=momentum, max_steps=max_steps,
                                  seed=[s, j, 1])
                    for s in confirm_seeds
                ]  # fmt: skip
        best_steps = per_seed.mean(axis=1)
    return TunedSteps(b, best_lr, best_steps, per_seed, float(momentum))
