"""Every claim's seed-dependent choices hold for every seed, checked cheaply over many seeds (no Monte Carlo).

A claim picks points along a simulated run and lays its grids around features of the exact curves there (a peak,
a surge); for some seeds the feature is absent. These tests run those choices for 24 seeds at the quick and the
full budget's sizes and require finite, valid grids.
"""

import numpy as np
import pytest

from validation import v15_sign_descent as v15
from validation.families import Budget

SEEDS = range(24)


@pytest.mark.parametrize("d", sorted({Budget.make(True).d_sign, Budget.make(False).d_sign}))
def test_v15_grids_are_valid_for_every_seed(d):
    no_peak = 0
    for seed in SEEDS:
        probs = v15.problems(d, seed)
        p = probs["independent"]
        points = v15.training_points(p, seed + 15)
        for theta in points.values():
            centre = v15.grid_centre(v15.peak(p, theta)[0])
            assert np.isfinite(centre) and centre >= 1.0, seed
        theta0 = v15.zero_gradient_point(p, points["mid"])[0]
        no_peak += not np.isfinite(v15.peak(p, theta0)[0])
        batches = v15.zero_gradient_batches(p, theta0)
        assert np.all(np.isfinite(batches)) and np.all(batches >= 1), seed
    assert no_peak > 0  # the case the claim must handle does occur among these seeds
