r"""McCandlish et al.'s steps/examples frontier S = S_min + E_min/B, fitted to steps against batch size.

One fitting function serves both sides: the exact optimal runs of :mod:`nqm.dynamics` and measured sweeps
(:mod:`nqm.real_sweeps`), whose bootstrap fits many resampled sweeps at once through
:func:`~nqm.dynamics.fit_frontiers`.
"""

from __future__ import annotations

import numpy as np

from ...checks import as_real, check_batch_sizes

__all__ = ["fit_frontier", "fit_frontiers"]

_GRID = 241  # points of the coarse scan over log B_crit; the Gauss–Newton polish does the rest
_POLISH = 60


def fit_frontier(batch_sizes, steps) -> tuple[float, float, float]:
    r"""Fit McCandlish et al.'s frontier S = S_min + E_min/B, i.e. (S/S_min − 1)(E/E_min − 1) = 1 (eq. 2.11).

    Least squares on log S over the batch sizes that reach the target (inf elsewhere), with S_min, E_min ≥ 0:

    .. math:: \min_{S_\min, E_\min \ge 0} \sum_i \bigl(\log(S_\min + E_\min/B_i) - \log S_i\bigr)^2,

    so every point weighs by its relative error whatever its size (a sweep spans decades of steps). Several
    entries may share a batch size (seeds). Returns (S_min, E_min, the largest relative residual ``|fit/S − 1|``);
    B_crit = E_min/S_min. See :func:`fit_frontiers` for the method.

    Example:
        >>> b = np.array([1.0, 10.0, 100.0])
        >>> s_min, e_min, residual = fit_frontier(b, 50 + 1000 / b)
        >>> round(s_min, 9), round(e_min, 9), residual < 1e-12
        (50.0, 1000.0, True)
    """
    batch, steps = check_batch_sizes(batch_sizes), as_real("steps", steps)
    if batch.shape != steps.shape or not np.all(np.isfinite(batch)):
        raise ValueError(f"batch_sizes must be finite, one per entry of steps; got {batch_sizes!r}")
    if np.any(np.isnan(steps) | (steps <= 0)):
        raise ValueError("steps must be > 0 (inf where the target is not reached), not NaN")
    ok = np.isfinite(steps)
    s_min, e_min = fit_frontiers(batch[ok], steps[ok][None, :])
    fitted = s_min[0] + e_min[0] / batch[ok]
    return float(s_min[0]), float(e_min[0]), float(np.max(np.abs(fitted / steps[ok] - 1)))


def fit_frontiers(batch_sizes, steps) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`fit_frontier` for many sweeps on the same batch sizes at once: ``steps`` is (sweeps, n), finite
    and > 0. Returns (S_min, E_min), one per sweep.

    For a fixed B_crit = c the best log S_min is the mean of log S_i − log(1 + c/B_i), so the fit is a
    one-dimensional search for u = log c minimising the spread f(u) = Σ(r_i − r̄)² of those residuals: a scan
    of u over the batch sizes' range widened by e¹⁰ each way, then safeguarded Gauss–Newton steps
    δ = Σ(r − r̄)(w − w̄)/Σ(w − w̄)² with w_i = c/(B_i + c) = −∂r_i/∂u. The edges are closed forms: c = 0
    (E_min = 0, S_min the geometric mean of S) and c = ∞ (S_min = 0, E_min the geometric mean of S·B), taken
    when no interior point does better.
    """
    b = check_batch_sizes(batch_sizes)
    log_s = np.log(as_real("steps", steps))
    if log_s.ndim != 2 or log_s.shape[1] != b.size or not np.all(np.isfinite(log_s)):
        raise ValueError(f"steps must be (sweeps, {b.size}), finite and > 0; got shape {np.shape(steps)}")
    if np.unique(b).size < 2:
        raise ValueError("fit_frontier needs at least two batch sizes that reach the target")
    log_b = np.log(b)

    def spread(rows, u):  # the spread f at u (len(rows), k) for the sweeps ``rows``
        r = log_s[rows, None, :] - np.logaddexp(0.0, u[..., None] - log_b)
        return np.sum((r - r.mean(axis=-1, keepdims=True)) ** 2, axis=-1)

    every = np.arange(log_s.shape[0])
    grid = np.linspace(log_b.min() - 10, log_b.max() + 10, _GRID)
    scan = spread(every, np.broadcast_to(grid, (every.size, _GRID)))
    u, f = grid[np.argmin(scan, axis=1)], scan.min(axis=1)
    active = every
    for _ in range(_POLISH):
        ua = u[active]
        w = 1 / (1 + np.exp(log_b - ua[:, None]))
        r = log_s[active] - np.logaddexp(0.0, ua[:, None] - log_b)
        dr, dw = r - r.mean(axis=1, keepdims=True), w - w.mean(axis=1, keepdims=True)
        delta = np.clip(np.sum(dr * dw, axis=1) / np.maximum(np.sum(dw**2, axis=1), 1e-300), -1.0, 1.0)
        for _ in range(40):  # halve until the spread does not grow
            trial = spread(active, (ua + delta)[:, None])[:, 0]
            better = trial <= f[active]
            u[active], f[active] = np.where(better, ua + delta, ua), np.where(better, trial, f[active])
            if np.all(better):
                break
            delta = np.where(better, delta, delta / 2)
        moved = np.abs(delta) > 1e-12 * np.maximum(1.0, np.abs(ua))
        active = active[moved]
        if not active.size:
            break
    s_min = np.exp(np.mean(log_s - np.logaddexp(0.0, u[:, None] - log_b), axis=1))
    e_min = s_min * np.exp(u)
    plateau = np.sum((log_s - log_s.mean(axis=1, keepdims=True)) ** 2, axis=1)
    hyperbola_r = log_s + log_b
    hyperbola = np.sum((hyperbola_r - hyperbola_r.mean(axis=1, keepdims=True)) ** 2, axis=1)
    # At an edge the interior search only approaches the optimum: equal but for the last digits, the edge is exact.
    on_plateau = (plateau <= f * (1 + 1e-9)) & (plateau <= hyperbola)
    on_hyperbola = (hyperbola <= f * (1 + 1e-9)) & ~on_plateau
    s_min = np.where(on_plateau, np.exp(log_s.mean(axis=1)), np.where(on_hyperbola, 0.0, s_min))
    e_min = np.where(on_plateau, 0.0, np.where(on_hyperbola, np.exp(hyperbola_r.mean(axis=1)), e_min))
    return s_min, e_min
