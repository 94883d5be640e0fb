"""Closed-form momentum and EMA second moments against the step-by-step moment recursion."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nqm.dynamics import _linear_second_moments
from nqm.moments import ema_variance, heavy_ball_variance

STEPS = np.array([0, 1, 2, 3, 7, 50, 400, 3000])


def heavy_ball_loop(lam, q, v0, beta, steps):
    """E[x_t²] by iterating the exact recursion of (E x_t², E x_t x_{t−1}, E x_{t−1}²)."""
    a = 1 + beta - lam
    x, c, y, out = v0, v0, v0, [v0]
    for _ in range(steps):
        x, c, y = a * a * x - 2 * a * beta * c + beta * beta * y + q, a * x - beta * c, x
        out.append(x)
    return np.array(out)


def ema_loop(lam, q, v0, gamma, steps):
    """E[y_t²] by iterating (E x², E x y, E y²) with x ← ux − n, y ← γy + (1 − γ)x."""
    u = 1 - lam
    x, c, y, out = v0, v0, v0, [v0]
    for _ in range(steps):
        x_new = u * u * x + q
        c_new = gamma * u * c + (1 - gamma) * x_new
        y = gamma**2 * y + 2 * gamma * (1 - gamma) * u * c + (1 - gamma) ** 2 * x_new
        x, c = x_new, c_new
        out.append(y)
    return np.array(out)


@given(
    beta=st.floats(0.01, 0.995),
    frac=st.floats(1e-3, 0.999),
    q=st.floats(0.0, 10.0),
    v0=st.floats(0.0, 10.0),
)
def test_heavy_ball_closed_form_matches_recursion(beta, frac, q, v0):
    lam = frac * 2 * (1 + beta)  # every stable step, over- and underdamped
    ref = heavy_ball_loop(lam, q, v0, beta, STEPS[-1])[STEPS]
    got = heavy_ball_variance(lam, q, v0, beta, STEPS.astype(float))
    # absolute scale: the terms of the closed form are of size X∞ + V0 (cancellation is bounded by it)
    x_inf = (1 + beta) * q / ((1 - beta) * lam * (2 * (1 + beta) - lam))
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12 * (x_inf + v0) + 1e-300)


@pytest.mark.parametrize("beta", [0.3, 0.9, 0.999])
def test_heavy_ball_critical_damping_and_edges(beta):
    rho = np.sqrt(beta)
    for lam in [(1 - rho) ** 2, (1 - rho) ** 2 * (1 + 1e-12), (1 + rho) ** 2, 1 + beta]:
        ref = heavy_ball_loop(lam, 0.3, 1.0, beta, STEPS[-1])[STEPS]
        got = heavy_ball_variance(lam, 0.3, 1.0, beta, STEPS.astype(float))
        np.testing.assert_allclose(got, ref, rtol=1e-6)


@given(
    gamma=st.floats(0.01, 0.999),
    lam=st.floats(1e-3, 1.999),
    q=st.floats(0.0, 10.0),
    v0=st.floats(0.0, 10.0),
)
def test_ema_closed_form_matches_recursion(gamma, lam, q, v0):
    ref = ema_loop(lam, q, v0, gamma, STEPS[-1])[STEPS]
    got = ema_variance(lam, q, v0, gamma, STEPS.astype(float))
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12 * (q / (lam * (2 - lam)) + v0) + 1e-300)


def test_ema_at_unit_step():
    """λ = 1 (u = 0) solves the coordinate in one step; u^t must be 1 at t = 0 (not 0·∞)."""
    ref = ema_loop(1.0, 0.5, 1.0, 0.9, STEPS[-1])[STEPS]
    np.testing.assert_allclose(ema_variance(1.0, 0.5, 1.0, 0.9, STEPS.astype(float)), ref, rtol=1e-12)


def test_ema_at_u_equal_gamma():
    """u = γ is the removable singularity of (u^t − γ^t)/(u − γ); the closed form is smooth through it."""
    gamma = 0.9
    for lam in [0.1, 0.1 * (1 + 1e-13), 0.1 * (1 - 1e-9)]:
        ref = ema_loop(lam, 0.5, 1.0, gamma, STEPS[-1])[STEPS]
        np.testing.assert_allclose(ema_variance(lam, 0.5, 1.0, gamma, STEPS.astype(float)), ref, rtol=1e-9)


def test_closed_forms_agree_with_the_moment_map():
    """The powered moment map (the general engine) and the closed forms are two derivations of one thing."""
    rng = np.random.default_rng(1)
    lam, q, v0 = rng.uniform(0.01, 1.9, 50), rng.uniform(0, 1, 50), rng.uniform(0, 2, 50)
    for beta, gamma, fn, par in [(0.7, 0.0, heavy_ball_variance, 0.7), (0.0, 0.8, ema_variance, 0.8)]:
        ref = _linear_second_moments(lam, np.sqrt(q), v0, beta, gamma, STEPS)
        np.testing.assert_allclose(fn(lam, q, v0, par, STEPS[:, None].astype(float)), ref, rtol=1e-9)


def test_expected_loss_is_accurate_for_heavy_momentum():
    """β = 0.999, λ near the stability edge: repeated squaring of the moment map had lost every digit here
    (relative error 56 at t = 12345); expected_loss now uses the closed form."""
    import nqm

    beta, lam = 0.999, (1 + np.sqrt(0.999)) ** 2
    p = nqm.NoisyQuadratic([lam], c=[0.3])
    got = nqm.dynamics.expected_loss(p, 1.0, 1, 12345, momentum=beta, at=[12345])[0]
    assert got == pytest.approx(0.5 * lam * heavy_ball_loop(lam, 0.3, 1.0, beta, 12345)[-1], rel=1e-6)
