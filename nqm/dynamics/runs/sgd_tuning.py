"""SGD's tuner: the fewest steps per batch size over ε, by Newton's method on the optimum's two smooth equations,
the cusps ε = 1/κ crossed exactly, and exact first hits where some coordinate rises."""

from __future__ import annotations

import numpy as np

from ...problem import NoisyQuadratic, check_precond
from .crossing import CROSS_ELEMENTS
from .golden import golden_min
from .optimal_runs import OptimalRuns
from .sgd import SGDLoss, crossing_time, first_hit_two_sided, first_integer_step, sgd_feasible_lr

__all__ = ["optimal_sgd"]

RISING_GRID = 48  # log-spaced ε per batch size over RISING_DECADES below the feasible step, then as many again
RISING_DECADES = 4  # around the best
CUSPS = 64  # the largest distinct curvatures whose one-step solution ε = 1/κ is tried per batch size


def optimal_sgd(p: NoisyQuadratic, target: float, b: np.ndarray, init_var, precond) -> OptimalRuns:
    """SGD's fewest steps per batch size (``b`` checked, the start above ``target``): Newton's method on the two
    smooth equations of the optimum, L(t, ε) = target and ∂L/∂ε = 0, in (log t, ε) with analytic derivatives from
    10 golden-section steps on log ε, then the cusps ε = 1/κ (:func:`solved_coordinates`); rows with a coordinate
    that starts below its stationary level within reach are tuned on exact first hits instead
    (:func:`optimal_with_rising_coordinates`). The method is :func:`~nqm.dynamics.optimal_steps_to_target`'s."""
    n = b.size
    loss = SGDLoss(p, b, init_var, precond)
    # Search where every coordinate relaxes downwards (V₀ ≥ V∞, i.e. ε ≤ 2V₀κ/(q + V₀κ²)): there t(ε) is
    # smooth and L(t) decreasing. Beyond, some coordinate's loss only grows; an optimum on that edge is
    # reported as not interior.
    with np.errstate(divide="ignore", invalid="ignore"):
        eps_cap = np.min(2 * loss.v0 * loss.kappa / (loss.noise + loss.v0 * loss.kappa**2), axis=1)
    feasible = sgd_feasible_lr(loss, target)
    below = eps_cap < feasible * (1 - 1e-9)  # some coordinate starts below its stationary level in reach
    if np.any(below):
        return optimal_with_rising_coordinates(p, target, b, init_var, precond, feasible, below)
    eps_hi = np.minimum(feasible, eps_cap * (1 - 1e-9))
    lo, hi = np.log(eps_hi) - np.log(1e6), np.log(eps_hi)
    # golden-section search on log ε for a starting point
    z, t = golden_min(lambda z, guess: crossing_time(loss, np.exp(z), target, guess), lo, hi, 10)
    eps = np.exp(z)
    # Newton on (log t, ε): F = L − target, G = ∂L/∂ε; rows leave once converged
    active = np.arange(n)
    for _ in range(30):
        eps_a, ta, part = eps[active], t[active], loss.subset(active)
        val, ls, lx, lsx, lxx = part.at(eps_a).derivatives(ta)
        f, gx = val - target, lx
        det = ls * lxx - lx * lsx
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # near a cusp: not finite, not taken
            ds = (-f * lxx + gx * lx) / det
            dx = (-gx * ls + f * lsx) / det
        step_ok = np.isfinite(ds) & np.isfinite(dx)
        dx = np.clip(np.where(step_ok, dx, 0), -0.5 * eps_a, np.maximum(0.5 * (eps_hi[active] - eps_a), 0))
        ds = np.clip(np.where(step_ok, ds, 0), -1, 1)
        eps[active], t[active] = eps_a + dx, ta * np.exp(ds)
        active = active[(np.abs(dx) > 1e-12 * eps_a) | (np.abs(ds) > 1e-12)]
        if active.size == 0:
            break
    # re-solve t exactly at the final ε (Newton's t satisfies F = 0 only to its tolerance)
    t = crossing_time(loss, eps, target, t)
    steps = first_integer_step(loss, eps, target, t)
    eps, t, steps = solved_coordinates(loss, target, eps_hi, eps, t, steps)
    interior = eps < eps_hi * (1 - 1e-6)
    pre = None if precond is None else check_precond(p, precond)
    return OptimalRuns(b, steps, b * steps, eps, t, interior, precond=pre)


def fewest_steps_scanned(loss: SGDLoss, target, eps_top):
    """(steps, ε) with the fewest exact steps over a log grid of ε in [eps_top·10⁻⁴, eps_top], then a finer grid
    between the best point's neighbours; each run's first hit by :func:`first_hit_two_sided`, cut off at the best
    count so far."""
    best_steps, best_eps = float("inf"), float("nan")

    def scan(grid):
        nonlocal best_steps, best_eps
        counts = np.full(grid.size, np.inf)
        for k in range(grid.size - 1, -1, -1):
            cap = best_steps if np.isfinite(best_steps) else 10**9
            counts[k] = first_hit_two_sided(loss.at(np.array([grid[k]])), target, cap)
            if counts[k] < best_steps or (counts[k] == best_steps and grid[k] < best_eps):
                best_steps, best_eps = counts[k], grid[k]
        return counts

    grid = np.geomspace(eps_top * 10.0**-RISING_DECADES, eps_top, RISING_GRID)
    counts = scan(grid)
    if np.isfinite(best_steps):
        k = int(np.argmin(counts))
        scan(np.geomspace(grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)], RISING_GRID))
    return best_steps, best_eps


def optimal_with_rising_coordinates(p, target, b, init_var, precond, feasible, below):
    r"""SGD's tuner where some coordinate starts below its stationary level V∞(ε) = εq/(κ(2 − εκ)) within reach.

    Such a coordinate's loss only rises, so L(t) need not decrease and the Newton search on the smooth crossing
    (which needs every coordinate to relax downwards) would be confined to ε below the first such level — for a
    coordinate that starts at 0 with noise, to ε = 0. These rows are instead tuned on exact first hits of the
    closed form (:func:`first_hit_two_sided`) over a log grid of ε below the feasible step and a finer grid
    around its best point; the others by the search, as before.
    """
    steps, eps, t = np.empty(b.size), np.empty(b.size), np.empty(b.size)
    interior = np.zeros(b.size, dtype=bool)
    if not np.all(below):  # the other rows by the search (they have no such coordinate within reach)
        rest = optimal_sgd(p, target, b[~below], init_var, precond)
        steps[~below], eps[~below], t[~below] = rest.steps, rest.lr, rest.steps_continuous
        interior[~below] = rest.interior
    loss = SGDLoss(p, b, init_var, precond)
    for j in np.nonzero(below)[0]:
        steps[j], eps[j] = fewest_steps_scanned(loss.subset([j]), target, feasible[j])
        t[j] = steps[j]
        interior[j] = np.isfinite(steps[j]) and eps[j] < feasible[j] * (1 - 1e-6)
    pre = None if precond is None else check_precond(p, precond)
    return OptimalRuns(b, steps, b * steps, eps, t, interior, precond=pre)


def solved_coordinates(loss: SGDLoss, target, eps_hi, eps, t, steps):
    """The fewest steps over the smooth optimum and the cusps of t(ε): (ε, t, steps) per row.

    t(ε) has a downward cusp at every ε = 1/κ_j, where coordinate j is solved in one step ((1 − εκ_j)² = 0),
    and the smooth search above cannot see one: with one coordinate, an isotropic H, or a few dominant top
    curvatures the deepest cusp is the optimum (H = I, c = 1, B = 8192, target 0.01: ε = 1 reaches it in one
    step; the smooth search returned 256). Between cusps t(ε) is smooth, so its minimum over ε ≤ ε_hi is the
    smooth optimum or a cusp; the cusps within reach are ε = 1/κ_j ≤ ε_hi, i.e. κ_j ≥ κ_max/2 at most. Each is
    crossed exactly (:func:`crossing_time`, :func:`first_integer_step`) and the fewest integer steps win
    (ties keep the smooth optimum).
    """
    kappa = np.unique(loss.kappa)[::-1][:CUSPS]
    row, cusp = np.nonzero(kappa[None, :] > 1.0 / eps_hi[:, None])  # the (batch size, cusp) pairs within reach
    if not row.size:
        return eps, t, steps
    cusp_eps, cusp_t, cusp_steps = 1.0 / kappa[cusp], np.empty(row.size), np.empty(row.size)
    chunk = max(1, CROSS_ELEMENTS // loss.kappa.size)  # pairs × coordinates held at once
    for at in range(0, row.size, chunk):
        part, pick = loss.subset(row[at : at + chunk]), slice(at, at + chunk)
        cusp_t[pick] = crossing_time(part, cusp_eps[pick], target)
        cusp_steps[pick] = first_integer_step(part, cusp_eps[pick], target, cusp_t[pick])
    eps, t, steps = eps.copy(), t.copy(), steps.copy()
    for i in np.argsort(cusp_steps)[::-1]:  # the fewest steps written last; ties keep the smooth optimum
        if cusp_steps[i] < steps[row[i]]:
            eps[row[i]], t[row[i]], steps[row[i]] = cusp_eps[i], cusp_t[i], cusp_steps[i]
    return eps, t, steps
