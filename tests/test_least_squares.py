"""State-dependent noise (least squares with Gaussian features): covariance, recursion, simulation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import problem_and_point

import nqm
from nqm import theory
from validation.stats import critical_z

ALPHA_TEST = 1e-4


@pytest.fixture
def ls():
    return nqm.LeastSquares(nqm.spectra.log_uniform(12, 0.05, 1.0), noise_var=0.1)


def test_covariance_matches_sampled_examples(ls):
    """Σ(θ) = HθθᵀH + (θᵀHθ + σ²)H against 400k real examples (entrywise, Bonferroni over the d² cells)."""
    th = np.linspace(1, -0.5, ls.d)
    g = ls.example_gradients(np.random.default_rng(0), np.tile(th, (400_000, 1)), 1)
    dev = g - ls.h * th
    products = dev[:, :, None] * dev[:, None, :]
    measured, se = products.mean(0), products.std(0, ddof=1) / np.sqrt(g.shape[0])
    z = critical_z(ls.d**2, ALPHA_TEST)
    assert np.all(np.abs(measured - ls.sigma(th)) <= z * se)
    additive = np.diag(ls.noise_var * ls.h)  # planted: ignore the state dependence
    assert np.any(np.abs(measured - additive) > z * se)


@given(problem_and_point(min_d=2, max_d=6), st.floats(0.0, 2.0))
def test_noise_scale_closed_form_equals_theory_at_theta(pp, noise_var):
    p, th = pp
    ls = nqm.LeastSquares(p.h, noise_var)
    assert ls.noise_scale(th) == pytest.approx(float(theory.noise_scale(ls.at(th), th)), rel=1e-10)


def test_recursion_is_exact_for_one_step(ls):
    """One step of the recursion equals E[L_1] computed from the moments of θ₀ ~ N(0, I) by hand."""
    e, b = 0.3, 5
    m1 = (1 - e * ls.h) ** 2 + e**2 / b * (ls.h**2 + ls.h * ls.h.sum() + ls.noise_var * ls.h)
    assert ls.expected_loss(e, b, 1)[1] == pytest.approx(0.5 * ls.h @ m1, rel=1e-14)


@pytest.mark.parametrize("batch", [1, 8])
def test_simulation_matches_the_recursion(ls, batch):
    sim = ls.simulate(0.25, batch, 150, 1500, seed=3)  # mean-square stable at B = 1 too
    exact = ls.expected_loss(0.25, batch, 150)[sim.steps]
    z = critical_z(sim.steps.size, ALPHA_TEST)
    assert np.all(np.abs(sim.mean - exact) <= z * sim.sem)
    additive = nqm.dynamics.expected_loss(
        nqm.NoisyQuadratic(ls.h, ls.noise_var * ls.h), 0.5, batch, 150, at=sim.steps
    )  # planted: noise independent of θ
    assert np.any(np.abs(sim.mean - additive) > z * sim.sem)


def test_the_transition_recursion_equals_sgd_s_closed_recursion(ls):
    """Two derivations of one thing: SGD through the generic recursion of its transition (a preconditioner of
    ones takes that path) and through the one-state formula."""
    generic = ls.expected_loss(nqm.optim.sgd(0.3, np.ones(ls.d)), 5, 60)
    np.testing.assert_allclose(generic, ls.expected_loss(0.3, 5, 60), rtol=1e-12)


OPTIMISERS = {
    "heavy_ball": nqm.optim.heavy_ball(0.08, 0.7),
    "nesterov": nqm.optim.nesterov(0.08, 0.7),
    "nesterov+ema": nqm.optim.ema(nqm.optim.nesterov(0.1, 0.5), 0.8),
    "precond": nqm.optim.sgd(0.2, np.linspace(0.5, 1.5, 12)),
}


@pytest.mark.parametrize("opt", list(OPTIMISERS.values()), ids=list(OPTIMISERS))
def test_any_linear_optimiser_on_real_examples_matches_its_recursion(ls, opt):
    """Momentum, Nesterov, an EMA and a preconditioner on real (x, y) examples against the exact recursion of
    their transitions with state-dependent noise; planted: the additive model (noise fixed at σ²H)."""
    sim = ls.simulate(opt, 2, 120, 1500, seed=5)
    exact = ls.expected_loss(opt, 2, 120)[sim.steps]
    z = critical_z(sim.steps.size, ALPHA_TEST)
    assert np.all(np.abs(sim.mean - exact) <= z * sim.sem)
    additive = nqm.dynamics.expected_loss(nqm.NoisyQuadratic(ls.h, ls.noise_var * ls.h), opt, 2, 120, at=sim.steps)
    assert np.any(np.abs(sim.mean - additive) > z * sim.sem)


def test_one_step_law_holds_with_state_dependent_noise(ls):
    th = np.linspace(1.0, 0.3, ls.d)
    b = np.array([1, 4, 16])
    eps = theory.optimal_step(ls.at(th), th, b) * 1.5
    r = ls.one_step_improvement(th, eps, b, 20_000, seed=4)
    z = critical_z(b.size, ALPHA_TEST)
    assert np.all(np.abs(r.mean - theory.expected_improvement(ls.at(th), th, eps, b)) <= z * r.sem)
    planted = theory.expected_improvement(nqm.NoisyQuadratic(ls.h, ls.noise_var * ls.h), th, eps, b)
    assert np.any(np.abs(r.mean - planted) > z * r.sem)


def test_bad_inputs(ls):
    with pytest.raises(ValueError, match="noise_var"):
        nqm.LeastSquares([1.0, 2.0], noise_var=-1)
    with pytest.raises(ValueError, match="> 0"):
        nqm.LeastSquares([1.0, 0.0])
    with pytest.raises(ValueError, match="batch_size"):
        ls.simulate(0.1, 0, 10, 4)
