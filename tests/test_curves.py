"""One loss-curve type from every engine: exact curves carry sem = 0, simulated ones their standard errors."""

import numpy as np

import nqm
from nqm import dynamics, optim


def test_every_engine_returns_a_loss_curve():
    p = nqm.NoisyQuadratic.zhang2019(30)
    opt = optim.nesterov(0.3, 0.5)
    at = [0, 3, 20]
    exact = dynamics.expected_loss(p, opt, 4, 20, at=at)
    sim = nqm.simulate(p, opt, 4, 20, 50, at=at)
    ls = nqm.LeastSquares(p.h, 0.1).expected_loss(opt, 4, 20)
    for curve in (exact, sim, ls):
        assert isinstance(curve, nqm.LossCurve)
    assert exact.exact and exact.n is None and np.all(exact.sem == 0) and exact.steps.tolist() == at
    assert not sim.exact and sim.n == 50 and np.all(sim.sem > 0) and sim.steps.tolist() == at
    assert ls.steps.tolist() == list(range(21))


def test_a_curve_is_array_like_over_its_mean():
    p = nqm.NoisyQuadratic.zhang2019(30)
    curve = dynamics.expected_loss(p, 0.5, 4, 10)
    m = curve.mean
    assert curve[3] == m[3] and np.array_equal(curve[[1, 2]], m[[1, 2]]) and len(curve) == 11
    np.testing.assert_array_equal(np.asarray(curve), m)
    np.testing.assert_array_equal(2 * curve - 1, 2 * m - 1)
    np.testing.assert_array_equal(np.log(curve), np.log(m))
    assert isinstance(2 * curve, np.ndarray)  # arithmetic gives plain arrays, not curves
    assert curve.tolist() == m.tolist() and curve.shape == m.shape
    assert "exact" in repr(curve)
