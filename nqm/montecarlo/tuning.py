r"""Whole runs by Monte Carlo: steps to a target loss, and the step size tuned per batch size, with standard errors.

The simulated counterparts of :func:`nqm.dynamics.steps_to_target` and of the tuning in
:func:`nqm.dynamics.optimal_steps_to_target`, for optimisers without exact dynamics (sign-based, adaptive):

* **steps to target**: where the mean loss over R replicas reaches the target — E[L_t] ≤ target, the criterion of
  the exact engines. The raw mean curve jitters from step to step (its stiff coordinates decorrelate within a few
  steps), and its *first* dip below the target comes early: on SGD runs whose exact answer is known the raw first
  crossing was early by 1–2 of its own standard errors. So the curve is first averaged over a window of ±5% of
  the crossing step (that moves a smooth, convex curve's crossing by about kw²/6 steps for a decay rate k, a
  fraction of a step here), then crossed, interpolated in ln L. Its standard error is the delta method's:
  SE of the windowed mean at the crossing (from the replicas' own windowed losses) over the curve's slope.
* **the tuned step**: steps to target on a geometric grid of ε, each cell on its own stream, and a weighted
  parabola in (ln ε, ln S) through the best cell and its neighbours: ε* is its vertex and S* its minimum, with
  delta-method standard errors from the fit's covariance (McCandlish et al. 2018, arXiv:1812.06162, App. A.2,
  tune ε per batch size the same way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..checks import check_count, check_lr
from .simulation import simulate

__all__ = ["SimulatedSteps", "TunedStep", "steps_to_target", "tune_lr", "first_crossing", "window_average"]

FIT_SIDE = 1  # cells on each side of the best one in the final parabola
_VERTEX_KEY, _RERUN_KEY = 2**31 - 1, 2**31 - 2  # streams apart from the grid's cells (0, 1, …)
VERTEX_DRAWS = 400  # redraws of the cells for the vertex's standard error
SMOOTHING = 0.05  # the half-width of the averaging window, as a fraction of the crossing step


@dataclass(frozen=True)
class SimulatedSteps:
    """Steps to target from R simulated replicas: ``steps`` (inf when not reached within ``max_steps``), its
    standard error ``se`` (delta method) and the replica count ``n``."""

    steps: float
    se: float
    n: int


@dataclass(frozen=True)
class TunedStep:
    """ε tuned for steps to target at one batch size.

    Attributes:
        lr, lr_se: ε* = the vertex of the weighted parabola in (ln ε, ln S), and its standard error.
        steps, steps_se: S* = the parabola's minimum, and its standard error.
        lrs, grid_steps, grid_se: the grid and what each cell measured (:class:`SimulatedSteps`).
        bracketed: False when the best cell is at an end of the grid (ε* then is that cell, its SE nan).
    """

    lr: float
    lr_se: float
    steps: float
    steps_se: float
    lrs: np.ndarray
    grid_steps: np.ndarray
    grid_se: np.ndarray
    bracketed: bool


def first_crossing(mean, target: float) -> float:
    """The first step at which the curve ``mean`` (one value per step 0, 1, …) reaches ``target``, interpolated
    in ln L between the step before and the step at the crossing; inf when it never does."""
    mean = np.asarray(mean, dtype=np.float64)
    below = np.flatnonzero(mean <= target)
    if below.size == 0:
        return float("inf")
    t = int(below[0])
    if t == 0:
        return 0.0
    hi, lo = np.log(mean[t - 1]), np.log(max(mean[t], np.finfo(float).tiny))
    return float(t - 1 + (hi - np.log(target)) / (hi - lo))


def window_average(values, half_width: int):
    """The average of ``values`` (..., T) over steps [t − w, t + w] ∩ [0, T − 1] at every t (running sums)."""
    values = np.asarray(values, dtype=np.float64)
    sums = np.concatenate([np.zeros(values.shape[:-1] + (1,)), np.cumsum(values, axis=-1)], axis=-1)
    t = np.arange(values.shape[-1])
    lo, hi = np.maximum(0, t - half_width), np.minimum(values.shape[-1] - 1, t + half_width)
    return (sums[..., hi + 1] - sums[..., lo]) / (hi - lo + 1)


def _child_seed(seed, k: int):
    """Entropy for cell ``k`` of a grid seeded by ``seed`` (an int or a sequence of ints)."""
    return [*np.atleast_1d(seed).tolist(), k]


def steps_to_target(
    p,
    opt,
    batch_size,
    target: float,
    replicas: int,
    *,
    max_steps: int,
    seed=0,
    init_var=1.0,
    **simulate_kwargs,
) -> SimulatedSteps:
    """Steps until the mean loss of ``replicas`` simulated runs reaches ``target``, with a standard error.

    Args:
        p, opt, batch_size: as :func:`nqm.simulate`; ``opt`` may be any optimiser (this is what the exact
            :func:`nqm.dynamics.steps_to_target` cannot do for sign-based and adaptive ones).
        target: the loss to reach (> 0). replicas: R ≥ 2 (about 100 or more for a calibrated standard error).
        max_steps: the longest run simulated.
        simulate_kwargs: passed to :func:`nqm.simulate` (``dtype``, ``threads``, ``generator`` …).

    Example:
        >>> import nqm
        >>> p = nqm.NoisyQuadratic.zhang2019(50)
        >>> r = steps_to_target(p, nqm.optim.adam(0.05), 8, 0.5, 32, max_steps=400, seed=1)
        >>> bool(0 < r.steps < 400 and r.se < r.steps)
        True
    """
    target = float(target)
    if not (np.isfinite(target) and target > 0):
        raise ValueError(f"target must be a finite loss > 0, got {target!r}")
    max_steps = check_count("max_steps", max_steps, 1)
    run = simulate(
        p,
        opt,
        batch_size,
        max_steps,
        replicas,
        seed=seed,
        init_var=init_var,
        at=np.arange(max_steps + 1),
        keep_losses=True,
        **simulate_kwargs,
    )
    raw = first_crossing(run.mean, target)
    if not np.isfinite(raw):
        return SimulatedSteps(raw, float("inf"), run.n)
    w = max(1, int(round(SMOOTHING * raw)))
    per_replica = window_average(run.losses, w)
    mean = per_replica.mean(axis=0)
    steps = first_crossing(mean, target)
    if not np.isfinite(steps):  # the window lifted the last dip above the target
        return SimulatedSteps(steps, float("inf"), run.n)
    k = min(int(np.ceil(steps)), max_steps)
    lo, hi = max(k - w, 0), min(k + w, max_steps)
    slope = (mean[hi] - mean[lo]) / max(hi - lo, 1)
    se = per_replica[:, k].std(ddof=1) / np.sqrt(run.n) / abs(slope) if slope < 0 else float("inf")
    return SimulatedSteps(steps, float(se), run.n)


def tune_lr(
    p,
    optimizer: Callable[[float], object],
    batch_size,
    target: float,
    lrs,
    replicas: int,
    *,
    max_steps: int,
    seed=0,
    init_var=1.0,
    refine: int = 2,
    **kwargs,
) -> TunedStep:
    r"""The step ε that minimises simulated steps to ``target`` at one batch size, with its standard error.

    ``optimizer(ε)`` builds the optimiser at step ε (e.g. ``lambda e: nqm.optim.adam(e, 0.9, 0.999)``). The
    geometric grid ``lrs`` is simulated first, every cell on its own stream (:func:`steps_to_target`); then
    ``refine`` times the cells halfway (in ln ε) to the best cell's neighbours are added. Steps to target rise
    steeply on the large-ε side (towards the ε whose noise floor is the target), so the fit is local: the
    parabola ``ln S = a + b u + c u²`` in ``u = ln ε`` through the best cell and its two neighbours gives

    .. math:: \ln\epsilon^* = -b/(2c), \qquad \ln S^* = a - b^2/(4c),

    with delta-method standard errors from the cells' (weights 1/SE(ln S)², independent cells).
    """
    lrs = np.unique(np.atleast_1d(check_lr(lrs)).astype(np.float64))
    if lrs.size < 3:
        raise ValueError("lrs must hold at least 3 step sizes (a grid around the optimum)")
    refine = check_count("refine", refine)
    cells: dict[float, SimulatedSteps] = {}

    def run(values):
        for e in values:
            if float(e) not in cells:
                cells[float(e)] = steps_to_target(
                    p,
                    optimizer(float(e)),
                    batch_size,
                    target,
                    replicas,
                    max_steps=max_steps,
                    seed=_child_seed(seed, len(cells)),
                    init_var=init_var,
                    **kwargs,
                )

    def table():
        grid = np.array(sorted(cells))
        return grid, np.array([cells[e].steps for e in grid]), np.array([cells[e].se for e in grid])

    run(lrs)
    for _ in range(refine):
        grid, steps, _ = table()
        if not np.any(np.isfinite(steps)):
            break
        best = int(np.argmin(steps))
        run([np.sqrt(grid[best] * grid[j]) for j in (best - 1, best + 1) if 0 <= j < grid.size])
    grid, steps, se = table()
    if not np.any(np.isfinite(steps)):
        raise ValueError(f"no step size reaches the target {target} within {max_steps} steps")
    best = int(np.argmin(steps))
    if 0 < best < grid.size - 1:
        trio = np.arange(max(0, best - FIT_SIDE), min(grid.size, best + FIT_SIDE + 1))
        trio = trio[np.isfinite(se[trio]) & (se[trio] > 0)]
        if trio.size >= 3 and trio[0] < best < trio[-1]:
            u, y, y_se = np.log(grid[trio]), np.log(steps[trio]), se[trio] / steps[trio]
            fit = _parabola_minimum(u, y, y_se)
            if fit is not None and u[0] <= fit[0] <= u[-1]:
                # the vertex is a ratio of fitted coefficients: its spread from redrawing the cells (a parametric
                # bootstrap) follows that nonlinearity, where the delta method understated it
                rng = np.random.default_rng(np.random.SeedSequence(_child_seed(seed, _VERTEX_KEY)))
                draws = [
                    _parabola_minimum(u, y + y_se * rng.standard_normal(u.size), y_se) for _ in range(VERTEX_DRAWS)
                ]
                vertices = np.array([d[0] if d is not None else np.nan for d in draws])
                vertices = np.clip(vertices, u[0], u[-1])  # no minimum, or one outside: the window's edge
                u_se = float(np.nanstd(np.where(np.isnan(vertices), u[0], vertices), ddof=1))
                lr = float(np.exp(fit[0]))
                again = steps_to_target(  # a fresh run at ε*: S free of the winner's curse of the grid
                    p,
                    optimizer(lr),
                    batch_size,
                    target,
                    replicas,
                    max_steps=max_steps,
                    seed=_child_seed(seed, _RERUN_KEY),
                    init_var=init_var,
                    **kwargs,
                )
                return TunedStep(lr, lr * u_se, again.steps, again.se, grid, steps, se, True)
    return TunedStep(float(grid[best]), float("nan"), float(steps[best]), float(se[best]), grid, steps, se, False)


def _parabola_minimum(u, y, se):
    """(u*, SE(u*), y*, SE(y*)) of the weighted fit y = a + bu + cu²; None without a minimum (c ≤ 0, < 3 points)."""
    if u.size < 3:
        return None
    x = np.stack([np.ones_like(u), u, u * u], axis=1) / se[:, None]
    cov = np.linalg.pinv(x.T @ x)
    a, b, c = cov @ (x.T @ (y / se))
    if not c > 0:
        return None
    u_star, y_star = -b / (2 * c), a - b * b / (4 * c)
    du = np.array([0.0, -1 / (2 * c), b / (2 * c * c)])
    dy = np.array([1.0, -b / (2 * c), b * b / (4 * c * c)])
    return float(u_star), float(np.sqrt(du @ cov @ du)), float(y_star), float(np.sqrt(dy @ cov @ dy))
