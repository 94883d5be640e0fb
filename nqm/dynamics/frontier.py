"""McCandlish et al.'s steps/examples frontier, fitted to the exact optimal runs of :mod:`nqm.dynamics`."""

from __future__ import annotations

import numpy as np

from ..checks import as_real, check_batch_sizes

__all__ = ["fit_frontier"]


def fit_frontier(batch_sizes, steps) -> tuple[float, float, float]:
    """Fit McCandlish et al.'s frontier S = S_min + E_min/B, i.e. (S/S_min − 1)(E/E_min − 1) = 1 (eq. 2.11).

    Least squares in relative error (each point divided by its S) over the reachable batch sizes. Returns
    (S_min, E_min, the largest relative residual); B_crit = E_min/S_min.

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
    if ok.sum() < 2:
        raise ValueError("fit_frontier needs at least two batch sizes that reach the target")
    x = np.stack([np.ones(ok.sum()), 1 / batch[ok]], axis=1) / steps[ok, None]
    (s_min, e_min), *_ = np.linalg.lstsq(x, np.ones(ok.sum()), rcond=None)
    fitted = s_min + e_min / batch[ok]
    return float(s_min), float(e_min), float(np.max(np.abs(fitted / steps[ok] - 1)))
