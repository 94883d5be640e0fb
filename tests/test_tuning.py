"""Whole runs by Monte Carlo (``nqm.montecarlo.tuning``): steps to target and the tuned step, held against SGD's
exact dynamics, which the tuner never uses. Statistical assertions: Bonferroni z at α = 1e-4 per test, fixed
seeds, and a planted error (the noise doubled) that must be rejected."""

import numpy as np
import pytest
from scipy import optimize

import nqm
from nqm import dynamics, optim
from nqm.montecarlo.tuning import first_crossing, steps_to_target, tune_lr, window_average
from validation.stats import critical_z

ALPHA_TEST = 1e-4
P = nqm.NoisyQuadratic.zhang2019(100)
NOISIER = nqm.NoisyQuadratic(P.h, 2 * P.c)
TARGET, BATCH = 0.1, 4


def test_crossing_is_exact_for_an_exponential():
    """ln L is linear between steps of L_t = L₀e^{−kt}, so the interpolated crossing is ln(L₀/target)/k exactly."""
    k, l0 = 0.013, 3.0
    curve = l0 * np.exp(-k * np.arange(400))
    assert first_crossing(curve, 0.7) == pytest.approx(np.log(l0 / 0.7) / k, rel=1e-12)
    assert first_crossing(curve, 5.0) == 0.0
    assert first_crossing(curve, 1e-9) == np.inf


def test_window_average_is_the_plain_average():
    x = np.random.default_rng(0).normal(size=(3, 50))
    for w in (1, 4, 60):
        expected = np.array([[row[max(0, t - w) : t + w + 1].mean() for t in range(50)] for row in x])
        np.testing.assert_allclose(window_average(x, w), expected, rtol=1e-12)


def _exact_crossing(p, lr):
    return first_crossing(dynamics.expected_loss(p, lr, BATCH, 2000, at=np.arange(2001)).mean, TARGET)


def test_simulated_steps_to_target_match_exact_dynamics():
    lr = 0.2
    r = steps_to_target(P, optim.sgd(lr), BATCH, TARGET, 400, max_steps=1500, seed=7)
    z = critical_z(1, ALPHA_TEST)
    assert abs(r.steps - _exact_crossing(P, lr)) <= z * r.se
    assert abs(r.steps - _exact_crossing(NOISIER, lr)) > z * r.se, "2× noise not rejected: no power"


def _exact_optimum(p):
    """The ε minimising the exact (interpolated) crossing, by bounded minimisation in ln ε."""
    best = optimize.minimize_scalar(
        lambda u: _exact_crossing(p, np.exp(u)),
        bounds=(np.log(0.1), np.log(0.3)),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return float(np.exp(best.x)), float(best.fun)


def test_tuned_step_matches_the_exact_optimum():
    """SGD's tuned ε* and S* from simulation against the exact optimum of the same criterion (E[L_t] ≤ target)."""
    lr_exact, steps_exact = _exact_optimum(P)
    lr_noisier, _ = _exact_optimum(NOISIER)
    tuned = tune_lr(P, optim.sgd, BATCH, TARGET, 0.2 * 2.0 ** np.arange(-2, 1.6, 0.5), 200, max_steps=1500, seed=3)
    assert tuned.bracketed
    z = critical_z(2, ALPHA_TEST)
    assert abs(tuned.lr - lr_exact) <= z * tuned.lr_se
    assert abs(tuned.steps - steps_exact) <= z * tuned.steps_se
    assert abs(tuned.lr - lr_noisier) > z * tuned.lr_se, "2× noise's optimum not rejected: no power"


def test_tuning_arguments_are_checked():
    with pytest.raises(ValueError, match="target"):
        steps_to_target(P, optim.sgd(0.1), 4, -1.0, 10, max_steps=10)
    with pytest.raises(ValueError, match="max_steps"):
        steps_to_target(P, optim.sgd(0.1), 4, 0.1, 10, max_steps=0)
    with pytest.raises(ValueError, match="at least 3"):
        tune_lr(P, optim.sgd, 4, 0.1, [0.1, 0.2], 10, max_steps=10)
    with pytest.raises(ValueError, match="no step size reaches"):
        tune_lr(P, optim.sgd, 4, 1e-6, [0.1, 0.2, 0.4], 4, max_steps=5)
    unreached = steps_to_target(P, optim.sgd(0.1), 4, 1e-6, 4, max_steps=5)
    assert unreached.steps == np.inf and unreached.se == np.inf
