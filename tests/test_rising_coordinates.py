"""SGD's tuner where a coordinate starts below its stationary level (its loss only rises).

The local NQM of a real network has such coordinates (noise in directions the gradient does not reach), and a
coordinate started between ½× and 1× its stationary level is the common case late in training. The reference is
a plain loop of the SGD moment recursion written here, m ← (1 − εh)²m + ε²c/B, L = ½Σhm, on a fine grid of ε.
"""

import numpy as np
import pytest

import nqm
from nqm import dynamics


def first_hits(h, c, init_var, batch_size, target, eps, max_steps=20_000):
    """First t with ½Σh m_t ≤ target for every ε of the grid, by the plain recursion (inf if none)."""
    m = np.tile(np.asarray(init_var, dtype=np.float64), (eps.size, 1))
    hits = np.full(eps.size, np.inf)
    decay, inject = (1 - eps[:, None] * h) ** 2, eps[:, None] ** 2 * c / batch_size
    for t in range(max_steps + 1):
        done = np.isinf(hits) & (0.5 * m @ h <= target)
        hits[done] = t
        if np.all(np.isfinite(hits)):
            break
        m = decay * m + inject
    return hits


CASES = {
    "noise-only coordinate": (np.array([1.0, 0.5, 0.2]), np.array([0.0, 1.0, 0.5]), np.array([1.0, 0.0, 1.0]), 0.05),
    "start at 0.7× stationary": (
        np.array([1.0, 0.3, 0.05]),
        np.array([0.5, 2.0, 0.1]),
        np.array([4.0, 0.7 * 0.5 * 2.0 / (16 * 0.3 * (2 - 0.5 * 0.3)), 20.0]),  # 0.7 V∞ at ε = 0.5, B = 16
        0.08,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_tuned_sgd_steps_equal_brute_force(case):
    h, c, init_var, target = CASES[case]
    p = nqm.NoisyQuadratic(h, c)
    batches = [4, 16, 64]
    r = dynamics.optimal_steps_to_target(p, target, batches, init_var=init_var)
    grid = np.geomspace(1e-4, 2 / h.max() * (1 - 1e-9), 3000)
    for i, b in enumerate(batches):
        brute = first_hits(h, c, init_var, b, target, grid)
        assert np.isfinite(r.steps[i])
        at_tuned = first_hits(h, c, init_var, b, target, np.array([r.lr[i]]))[0]
        assert r.steps[i] == at_tuned  # an exact first hit at the reported step
        assert r.steps[i] <= brute.min(), (b, r.steps[i], brute.min())
