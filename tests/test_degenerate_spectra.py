"""SGD's tuner on degenerate spectra: one coordinate, an isotropic H, repeated curvatures.

There t(ε) has a cusp at ε = 1/h (that coordinate solved in one step) that a smooth search cannot see; an
outside audit found `optimal_steps_to_target(NoisyQuadratic([1.], [1.]), 0.01, [64, 8192])` giving 3 and 256
steps where ε = 1 takes one. The reference is the plain moment recursion of tests/test_rising_coordinates.py on
a fine grid of ε that contains every 1/h_j.
"""

from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rising_coordinates import first_hits

import nqm
from nqm import dynamics

BATCHES = [1, 8, 64, 256, 8192]


def brute_force(h, c, init_var, batch_size, target):
    cusps = 1 / np.unique(h)
    grid = np.concatenate([np.geomspace(1e-4, 2 / h.max() * (1 - 1e-9), 2000), cusps[cusps < 2 / h.max()]])
    return first_hits(h, c, init_var, batch_size, target, grid).min()


@pytest.mark.parametrize("d", [1, 50])
def test_an_isotropic_problem_is_solved_in_one_step_where_the_noise_allows(d):
    p = nqm.NoisyQuadratic(np.ones(d), np.ones(d))
    r = dynamics.optimal_steps_to_target(p, 0.01 * d, [64, 256, 8192])
    np.testing.assert_array_equal(r.steps, [1, 1, 1])  # ε = 1: E[L₁] = ½·d/B ≤ 0.01·d for B ≥ 50
    np.testing.assert_array_equal(r.lr, [1.0, 1.0, 1.0])


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.sampled_from([1.0, 0.5, 0.25, 0.1]), min_size=1, max_size=4),
    st.floats(0.1, 4.0),
    st.floats(0.002, 0.2),
)
def test_tuned_steps_on_repeated_curvatures_equal_brute_force(h, noise, fraction):
    h = np.array(h)
    c = noise * h
    p = nqm.NoisyQuadratic(h, c)
    # off exact ties: where the target equals the stationary loss of the step that solves a coordinate
    # (h = c = 1, B = 8, target 1/16), the search, which stays 1e-12 inside the largest step whose stationary
    # loss is below the target, does not reach the tie
    target = fraction * 0.5 * h.sum() * (1 + 1e-7)
    r = dynamics.optimal_steps_to_target(p, target, BATCHES)
    for i, b in enumerate(BATCHES):
        brute = brute_force(h, c, np.ones(h.size), b, target)
        if not np.isfinite(brute):
            continue
        at_tuned = first_hits(h, c, np.ones(h.size), b, target, np.array([r.lr[i]]))[0]
        assert r.steps[i] == at_tuned  # the reported step reaches the target in the reported steps
        assert r.steps[i] <= brute, (list(h), b, r.steps[i], brute)


@pytest.mark.parametrize("family", ["sgd", "heavy_ball", "nesterov", "ema"])
def test_a_target_at_or_above_the_starting_loss_takes_no_step_for_every_family(family):
    """E[L(θ₀)] = ½Σh·v = 0.75 here: at or above it no step is needed (the momentum tuners divided by zero); just
    below it at least one."""
    p = nqm.NoisyQuadratic([1.0, 0.5], [1.0, 1.0])
    for target in (0.75, 2.0):
        r = dynamics.optimal_steps_to_target(p, target, [1, 64], family=family)
        assert np.all(r.steps == 0) and np.all(np.isnan(r.lr)) and r.family == family
    below = dynamics.optimal_steps_to_target(p, 0.74, [1, 64], family=family)
    assert np.all(below.steps >= 1) and np.all(np.isfinite(below.steps))


def heavy_ball_first_hit(h, c, init_var, batch_size, target, eps, beta, max_steps=20_000):
    """First t with ½Σh E[x_t²] ≤ target for heavy ball x_{t+1} = (1 + β − εh)x_t − βx_{t−1} − εξ, x_{−1} = x₀
    (v₀ = 0), E[ξ²] = c/B: the moments (E[x_t²], E[x_t x_{t−1}], E[x_{t−1}²]) stepped one by one in 40-digit decimal
    arithmetic from the exact floats given. (In float64 the recursion drifts: at β = 0.99959, εh = 1e-7 it hit the
    target 2 of 9072 steps early, where a 60-digit recursion and nqm's closed form agree.)"""
    with localcontext() as ctx:
        ctx.prec = 40
        dec = [[Decimal(float(x)) for x in np.broadcast_to(v, np.shape(h))] for v in (h, c, init_var)]
        hs, cs, v0 = dec
        e_, b_, B_, goal = Decimal(float(eps)), Decimal(float(beta)), Decimal(float(batch_size)), Decimal(float(target))
        alpha = [1 + b_ - e_ * hi for hi in hs]
        inject = [e_ * e_ * ci / B_ for ci in cs]
        a, b, e = list(v0), list(v0), list(v0)
        half = Decimal(1) / 2
        for t in range(max_steps + 1):
            if half * sum(hi * ai for hi, ai in zip(hs, a)) <= goal:
                return t
            a, b, e = (
                [al * al * x - 2 * al * b_ * y + b_ * b_ * z + q for al, x, y, z, q in zip(alpha, a, b, e, inject)],
                [al * x - b_ * y for al, x, y in zip(alpha, a, b)],
                a,
            )
    return np.inf


@pytest.mark.parametrize("family", ["heavy_ball", "nesterov", "ema"])
@pytest.mark.parametrize("d", [1, 50])
def test_momentum_families_solve_an_isotropic_problem_in_one_step_too(family, d):
    """With h → 0 (β or γ) each family is SGD, so ε = 1 solves H = I in one step where the noise allows; the smooth
    (ε, h) search alone found 6 steps for heavy ball at B = 64."""
    p = nqm.NoisyQuadratic(np.ones(d), np.ones(d))
    r = dynamics.optimal_steps_to_target(p, 0.01 * d, [64, 256, 8192], family=family)
    np.testing.assert_array_equal(r.steps, [1, 1, 1])


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.sampled_from([1.0, 0.5, 0.25, 0.1]), min_size=1, max_size=4),
    st.floats(0.1, 4.0),
    st.floats(0.002, 0.2),
)
def test_tuned_heavy_ball_is_no_slower_than_tuned_sgd_and_hits_where_it_says(h, noise, fraction):
    """Tuned SGD is held to brute force above; heavy ball must do at least as well, and its reported steps must be
    the first hit of a recursion written here at its reported (ε, β)."""
    h = np.array(h)
    c = noise * h
    p = nqm.NoisyQuadratic(h, c)
    target = fraction * 0.5 * h.sum() * (1 + 1e-7)  # off exact ties, as above
    r = dynamics.optimal_steps_to_target(p, target, BATCHES, family="heavy_ball")
    sgd = dynamics.optimal_steps_to_target(p, target, BATCHES)
    for i, b in enumerate(BATCHES):
        at_tuned = heavy_ball_first_hit(h, c, np.ones(h.size), b, target, r.lr[i], r.momentum[i])
        assert r.steps[i] == at_tuned, (list(h), b, r.lr[i], r.momentum[i])
        assert r.steps[i] <= sgd.steps[i], (list(h), b, r.steps[i], sgd.steps[i])
