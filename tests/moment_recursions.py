"""Second moments by brute force, for the tests: a linear recursion's covariance iterated one step at a time."""

import numpy as np


def iterate_covariance(a, n, v0, steps):
    """E[s₀²] of ``s' = A s + n z`` (z standard normal) at steps 0 … ``steps``, from S₀ = diag(v0, 0, …): the
    covariance S ← ASAᵀ + nnᵀ, one step at a time."""
    s = np.zeros_like(a, dtype=np.float64)
    s[0, 0] = v0
    out = []
    for _ in range(steps + 1):
        out.append(s[0, 0])
        s = a @ s @ a.T + np.outer(n, n)
    return np.array(out)
