"""Golden-section search, vectorised over rows."""

from __future__ import annotations

import numpy as np

__all__ = ["golden_min"]


def golden_min(objective, lo, hi, iterations: int, guess=None):
    """Vectorised golden-section search: per row, the z in [lo, hi] minimising ``objective(z, guess)``.

    ``guess`` is the best value so far (objectives that solve for a step count use it as a warm start; the first
    evaluation gets the caller's). Returns (z, value) at the best point seen. Assumes a unimodal objective on the
    interval.
    """
    g = (np.sqrt(5) - 1) / 2
    a, c = hi - g * (hi - lo), lo + g * (hi - lo)
    fa = objective(a, guess)
    fc = objective(c, fa)
    for _ in range(iterations):
        left = fa < fc
        hi = np.where(left, c, hi)
        lo = np.where(left, lo, a)
        new_a, new_c = hi - g * (hi - lo), lo + g * (hi - lo)
        a_next, c_next = np.where(left, new_a, c), np.where(left, a, new_c)
        f_new = objective(np.where(left, new_a, new_c), np.where(left, fa, fc))
        fc, fa = np.where(left, fa, f_new), np.where(left, f_new, fc)
        a, c = a_next, c_next
    best = fa < fc
    return np.where(best, a, c), np.where(best, fa, fc)
