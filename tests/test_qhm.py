"""Quasi-hyperbolic momentum (one class and one family in nqm.optim): its closed form against a recursion of its
update written in other units, its stability edge against the eigenvalues of its transition, its limits, Monte
Carlo against the exact moments, and its tuned runs.

The statistical test uses a Bonferroni z over its cells at α = 1e-4, fixed seeds, and a planted error that must be
rejected."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moment_recursions import iterate_covariance

import nqm
from nqm import dynamics, optim
from nqm.dynamics.moments import forms
from nqm.dynamics.moments.expected import powered_second_moments
from validation.stats import critical_z

STEPS = np.array([0, 1, 2, 3, 7, 50, 400, 3000])


def qhm_loop(lr, lam, sigma, v0, beta, nu, steps):
    """E[θ_t²] by the covariance of (θ, m) with m in the units of the preconditioned gradient Pg (the transition
    uses εm): Pg = (λθ + σz)/ε, ``m' = βm + (1 − β)Pg``, ``θ' = θ − ε[(1 − ν)Pg + νm']``."""
    a_g = np.array([lam / lr, 0.0])  # Pg's dependence on (θ, m)
    n_g = sigma / lr  # and its noise
    m_row, m_noise = beta * np.array([0.0, 1.0]) + (1 - beta) * a_g, (1 - beta) * n_g
    theta_row = np.array([1.0, 0.0]) - lr * ((1 - nu) * a_g + nu * m_row)
    theta_noise = -lr * ((1 - nu) * n_g + nu * m_noise)
    return iterate_covariance(np.array([theta_row, m_row]), np.array([theta_noise, m_noise]), v0, steps)


@given(
    beta=st.floats(0.01, 0.995),
    nu=st.floats(0.05, 1.0),
    frac=st.floats(1e-3, 0.999),
    sigma=st.floats(0.0, 3.0),
    v0=st.floats(0.0, 10.0),
)
def test_qhm_closed_form_matches_a_recursion_of_its_update(beta, nu, frac, sigma, v0):
    """Every stable step, under- and overdamped: the two-state closed form the value picks, and its powered moment
    map, against the covariance recursion written on (θ, m) rather than (θ, εm)."""
    lam = frac * optim.qhm_family(nu).stable_lr_bound(beta)
    opt = optim.qhm(0.37, beta, nu)
    ref = qhm_loop(opt.lr, lam, sigma, v0, beta, nu, STEPS[-1])[STEPS]
    form = opt.closed_form(forms, np.array([lam]), np.array([sigma]), np.array([v0]))
    got = form(STEPS[:, None].astype(float))[:, 0]
    scale = v0 + sigma**2 / (lam * (2 - min(lam, 1.0)) * (1 - beta) ** 2)  # bounds the terms of the closed form
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-10 * scale + 1e-300)
    powered = powered_second_moments(opt, np.array([lam]), np.array([sigma]), np.array([v0]), STEPS)[:, 0]
    np.testing.assert_allclose(powered, ref, rtol=1e-6, atol=1e-9 * scale + 1e-300)


def test_the_recursion_tells_qhm_from_heavy_ball():
    """The recursion above has the power to tell QHM's law from heavy ball's at the same (ε, β)."""
    lam, beta = 0.4, 0.8
    hb = forms.HeavyBallMoments(lam, 0.09, 1.0, beta).at(STEPS.astype(float))
    ref = qhm_loop(0.5, lam, 0.3, 1.0, beta, 0.7, STEPS[-1])[STEPS]
    assert np.max(np.abs(hb[1:] / ref[1:] - 1)) > 0.05


@pytest.mark.parametrize("nu", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9, 0.999])
def test_the_stability_edge_is_where_the_transition_s_spectral_radius_reaches_one(beta, nu):
    """λ < 2(1 + β)/(1 + β(1 − 2ν)): the largest |eigenvalue| of F is below 1 just under the bound and above 1 just
    over it (the edge is a root at −1)."""
    edge = optim.qhm_family(nu).stable_lr_bound(beta)
    f, _ = optim.Qhm(1.0, beta, nu).transition(np.array([edge * (1 - 1e-7), edge * (1 + 1e-7)]))
    radius = [np.max(np.abs(np.linalg.eigvals(m))) for m in f]
    assert radius[0] < 1 < radius[1]


def test_its_limits_are_heavy_ball_and_sgd():
    """ν = 1 is heavy ball at the step ε(1 − β) (the 'normalised' momentum): the same expected losses through the
    two-state closed form and heavy ball's own; ν = 0 and β = 0 are SGD."""
    p = nqm.NoisyQuadratic.zhang2019(60)
    at = [0, 1, 10, 200, 3000]
    got = dynamics.expected_loss(p, optim.qhm(0.5, 0.9, 1.0), 8, 3000, at=at)
    want = dynamics.expected_loss(p, optim.heavy_ball(0.5 * (1 - 0.9), 0.9), 8, 3000, at=at)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert isinstance(optim.qhm(0.5, 0.9, 0.0), optim.Sgd)
    assert isinstance(optim.qhm(0.5, 0.0, 0.7), optim.Sgd)
    with pytest.raises(ValueError, match="nu"):
        optim.qhm(0.5, 0.9, 1.5)


@pytest.mark.parametrize("rotated", [False, True])
def test_monte_carlo_of_qhm_matches_its_exact_moments(rotated):
    """The fused two-state loop (diagonal) and the update with matrix products (rotated basis) against the exact
    expected loss, cell by cell within z standard errors; heavy ball at the same (ε, β), the planted error, is
    rejected."""
    p = nqm.NoisyQuadratic.zhang2019(30)
    if rotated:
        p = nqm.NoisyQuadratic(p.h, p.c, basis=nqm.spectra.random_rotation(p.d, seed=4))
    opt, at = optim.qhm(0.3, 0.9, 0.7), [5, 20, 80, 300]
    sim = nqm.simulate(p, opt, 4, 300, 4000, at=at, seed=11)
    z = critical_z(2 * len(at), 1e-4)
    exact = dynamics.expected_loss(p, opt, 4, 300, at=at)
    planted = dynamics.expected_loss(p, optim.heavy_ball(0.3, 0.9), 4, 300, at=at)
    assert np.max(np.abs(sim.mean - exact.mean) / sim.sem) <= z
    assert np.max(np.abs(sim.mean - planted.mean) / sim.sem) > z


def test_the_tuned_family_gives_exact_first_hits_by_value_or_name():
    """``family=optim.QHM`` and ``family="qhm"`` are the same search; its steps are the exact first hits of the
    returned (ε, β), checked step by step; another ν is another family."""
    p = nqm.NoisyQuadratic.zhang2019(100)
    b = [4.0, 256.0, 16384.0]
    runs = dynamics.optimal_steps_to_target(p, 0.02, b, family=optim.QHM)
    again = dynamics.optimal_steps_to_target(p, 0.02, b, family="qhm")
    np.testing.assert_array_equal(runs.steps, again.steps)
    assert runs.family == "qhm" and runs.family is optim.QHM
    for i, size in enumerate(b):
        opt = runs.optimizer(i)
        assert isinstance(opt, optim.Qhm) and opt.nu == 0.7
        assert dynamics.steps_to_target(p, opt, size, 0.02) == runs.steps[i]
    other = dynamics.optimal_steps_to_target(p, 0.02, b[:1], family=optim.qhm_family(0.3))
    assert other.optimizer(0).nu == 0.3


def test_families_are_values_that_equal_their_names():
    assert optim.tuned_family("heavy_ball") is optim.HEAVY_BALL and optim.HEAVY_BALL == "heavy_ball"
    assert optim.HEAVY_BALL != "nesterov" and optim.qhm_family(0.3) != optim.QHM
    assert optim.stable_lr_bound("nesterov", 0.5) == optim.NESTEROV.stable_lr_bound(0.5) == 1.5
    with pytest.raises(ValueError, match="family"):
        optim.tuned_family("adam")
    with pytest.raises(ValueError, match="family"):
        dynamics.optimal_steps_to_target(nqm.NoisyQuadratic.zhang2019(10), 0.1, [1.0], family="adam")


@pytest.mark.parametrize("family", [optim.SGD, optim.HEAVY_BALL, optim.NESTEROV, optim.EMA, optim.QHM])
def test_every_family_s_closed_form_is_its_optimiser_s_expected_loss(family):
    """A family's rows of E[L_t] and its stationary loss (what the search evaluates) against expected_loss and
    steady_state_loss of the optimiser it builds, at two (ε, h) rows: the two are assembled apart (the family from
    the forms, expected_loss from the value's own closed form or its powered moment map)."""
    from nqm.dynamics.runs.tuned_losses import TunedLoss

    p = nqm.NoisyQuadratic.zhang2019(40)
    loss = TunedLoss(p, np.array([4.0, 4.0]), 1.0, None, family)
    eps, hp = np.array([0.2, 0.05]), np.array([0.5, 0.9])
    steps = np.array([0.0, 1.0, 7.0, 300.0])
    curve = loss.curve(eps, hp)
    got = np.array([curve(np.full(2, t)) for t in steps])
    for i in range(2):
        opt = family.optimizer(eps[i], None if family.hyper is None else hp[i])
        want = dynamics.expected_loss(p, opt, 4.0, 300, at=steps.astype(int))
        np.testing.assert_allclose(got[:, i], want, rtol=1e-9)
        assert loss.stationary(eps, hp)[i] == pytest.approx(dynamics.steady_state_loss(p, opt, 4.0), rel=1e-9)
