"""Closed-form quantities against hand-worked cases."""

import numpy as np
import pytest

import nqm
from nqm import theory


@pytest.fixture
def p():
    # H = diag(1, 2), Σ = diag(9, 27); at θ = (1, 1): G = (1, 2), |G|² = 5, GᵀHG = 9, tr Σ = 36, tr(HΣ) = 63.
    return nqm.NoisyQuadratic([1.0, 2.0], c=[9.0, 27.0])


def test_hand_worked_values(p):
    th = [1.0, 1.0]
    assert theory.gradient(p, th).tolist() == [1.0, 2.0]
    assert float(theory.noise_scale(p, th)) == pytest.approx(7.0)
    assert float(theory.simple_noise_scale(p, th)) == pytest.approx(36 / 5)
    assert float(theory.max_step(p, th)) == pytest.approx(5 / 9)
    assert float(theory.max_improvement(p, th)) == pytest.approx(0.5 * 25 / 9)
    assert float(theory.optimal_step(p, th, 7)) == pytest.approx(5 / 18)  # half of ε_max at B = B_noise
    assert float(theory.optimal_improvement(p, th, 7)) == pytest.approx(25 / 36)
    # ε|G|² − ½ε²(GᵀHG + tr(HΣ)/B) at ε = 0.1, B = 2: 0.5 − 0.005·(9 + 31.5)
    assert float(theory.expected_improvement(p, th, 0.1, 2)) == pytest.approx(0.5 - 0.005 * 40.5)


def test_preconditioned_hand_worked(p):
    # P = diag(2, 1): GᵀPG = 2 + 4 = 6, PHP = diag(4, 2): GᵀPHPG = 4 + 8 = 12, tr(PHPΣ) = 36 + 54 = 90.
    th, pre = [1.0, 1.0], [2.0, 1.0]
    assert float(theory.max_step(p, th, pre)) == pytest.approx(0.5)
    assert float(theory.noise_scale(p, th, pre)) == pytest.approx(90 / 12)
    assert float(theory.max_improvement(p, th, pre)) == pytest.approx(0.5 * 36 / 12)
    assert float(theory.optimal_step(p, th, 4, pre)) == pytest.approx(6 / (12 + 22.5))


def test_batch_sizes_broadcast(p):
    b = np.array([[1.0, 2.0, np.inf]])
    eps = theory.optimal_step(p, [1.0, 1.0], b)
    assert eps.shape == (1, 3)
    assert eps[0, -1] == pytest.approx(float(theory.max_step(p, [1.0, 1.0])))  # B → ∞: noiseless step
    gains = theory.expected_improvement(p, [1.0, 1.0], np.array([[0.1], [0.2]]), np.array([1.0, 4.0]))
    assert gains.shape == (2, 2)


def test_many_points_at_once(p):
    thetas = np.array([[1.0, 1.0], [2.0, 0.0], [0.0, 1.0]])
    bn = theory.noise_scale(p, thetas)
    assert bn.shape == (3,)
    assert bn[1] == pytest.approx(float(theory.noise_scale(p, thetas[1])))


def test_at_the_optimum_quantities_are_defined_without_warnings(p):
    zero = [0.0, 0.0]
    assert np.isnan(theory.max_step(p, zero))
    assert np.isinf(theory.noise_scale(p, zero)) and np.isinf(theory.simple_noise_scale(p, zero))
    assert theory.optimal_step(p, zero, 10) == 0.0
    assert theory.max_improvement(p, zero) == 0.0 and theory.optimal_improvement(p, zero, 10) == 0.0
    assert float(theory.expected_improvement(p, zero, 0.1, 2)) == pytest.approx(-0.005 * 31.5)
    quiet = nqm.NoisyQuadratic([1.0, 2.0], c=[0.0, 0.0])
    assert np.isnan(theory.noise_scale(quiet, zero)) and np.isnan(theory.optimal_step(quiet, zero, 1))


@pytest.mark.parametrize("bad", [0.5, 0, -1, np.nan])
def test_batch_size_below_one_raises(p, bad):
    with pytest.raises(ValueError, match="batch size"):
        theory.optimal_step(p, [1.0, 1.0], bad)


@pytest.mark.parametrize("bad", [0.0, -0.1, np.inf])
def test_non_positive_step_raises(p, bad):
    with pytest.raises(ValueError, match="step size"):
        theory.expected_improvement(p, [1.0, 1.0], bad, 1)


def test_wrong_theta_shape_and_bad_precond_raise(p):
    with pytest.raises(ValueError, match="theta"):
        theory.noise_scale(p, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="precond"):
        theory.noise_scale(p, [1.0, 1.0], precond=[1.0, -1.0])
