"""Noise-scale estimators: hand-worked values, exact identities (hypothesis), unbiasedness (statistical)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import problem_and_point

import nqm
from nqm import estimators, noise, theory
from validation.stats import critical_z

ALPHA_TEST = 1e-4


def test_hand_worked_two_batch():
    # E|G_B|² = |G|² + trΣ/B with |G|² = 1, trΣ = 2: B = 1 → 3, B = 10 → 1.2
    g2, s = estimators.two_batch_estimates(3.0, 1.2, 1, 10)
    assert float(g2) == pytest.approx(1.0) and float(s) == pytest.approx(2.0)
    assert float(estimators.simple_noise_scale_estimate(3.0, 1.2, 1, 10)) == pytest.approx(2.0)


@pytest.mark.parametrize(("b_small", "b_big"), [(0, 4), (4, 4), (8, 4)])
def test_bad_batch_pairs_raise(b_small, b_big):
    with pytest.raises(ValueError, match="B_small < B_big"):
        estimators.two_batch_estimates(1.0, 1.0, b_small, b_big)


@given(hnp.arrays(np.float64, 5, elements=st.floats(-10, 10)), st.integers(1, 50), st.integers(1, 50))
def test_noiseless_gradients_give_exact_norm_and_zero_trace(g, b_small, extra):
    """With no noise every batch gradient equals G: |𝒢|² = |G|² and 𝒮 = 0 exactly (up to rounding)."""
    sq = float(g @ g)
    g2, s = estimators.two_batch_estimates(sq, sq, b_small, b_small + extra)
    assert float(g2) == pytest.approx(sq, rel=1e-12, abs=1e-12)
    assert abs(float(s)) <= 1e-9 * max(sq, 1.0)


@given(
    st.integers(2, 4),
    st.integers(1, 3),
    st.integers(1, 3),
    st.sampled_from(["mean", "sum"]),
    st.booleans(),
    st.floats(0.5, 4096.0),
    st.integers(0, 1000),
)
def test_data_parallel_rescaling_equals_plain_two_batch_estimate(k, b, a, reduction, acc_mean, scale, seed):
    """Whatever the reduction, accumulation and loss scale, the rescaled estimate is the plain two-batch
    estimate on the same examples with (B_small, B_big) = (b·A, K·b·A), averaged over the K workers."""
    cfg = estimators.DataParallel(k, b, a, reduction, acc_mean, scale)
    grads = np.random.default_rng(seed).standard_normal((k * a * b, 3))
    got = cfg.estimates(*cfg.raw_gradients(grads))
    per_worker = grads.reshape(k, a * b, 3).mean(axis=1)
    small_sq = np.mean(np.sum(per_worker**2, axis=1))
    big = grads.mean(axis=0)
    want = estimators.two_batch_estimates(small_sq, big @ big, *cfg.implied_batches())
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert cfg.implied_batches() == (b * a, k * b * a)


def test_per_example_and_consecutive_forms_match_two_batch():
    g = np.random.default_rng(1).standard_normal((6, 4))
    sq_small = np.mean(np.sum(g**2, axis=1))
    np.testing.assert_allclose(
        estimators.per_example_estimates(g), estimators.two_batch_estimates(sq_small, np.sum(g.mean(0) ** 2), 1, 6)
    )
    a, b = g[0], g[1]
    np.testing.assert_allclose(
        estimators.consecutive_step_estimates(a, b, 3),
        estimators.two_batch_estimates(0.5 * (a @ a + b @ b), np.sum((a + b) ** 2) / 4, 3, 6),
    )


def test_tracker_equals_ratio_of_averages():
    rng = np.random.default_rng(2)
    small, big = 3 + rng.random(50), 1 + rng.random(50)
    tracker = estimators.NoiseScaleTracker(beta=0.9)
    for s_, b_ in zip(small, big):
        last = tracker.update(s_, b_, 2, 16)
    assert last == pytest.approx(float(estimators.ratio_of_averages(small, big, 2, 16, 0.9)[-1]), rel=1e-12)
    g2, s = estimators.two_batch_estimates(small, big, 2, 16)
    assert tracker.gradient_sq == pytest.approx(float(estimators.ema(g2, 0.9)[-1]), rel=1e-12)
    assert tracker.trace_sigma == pytest.approx(float(estimators.ema(s, 0.9)[-1]), rel=1e-12)


def test_ema_bias_correction_makes_a_constant_exact():
    np.testing.assert_allclose(estimators.ema(np.full(20, 3.0), 0.99), 3.0, rtol=1e-12)
    assert estimators.ema(np.full(3, 3.0), 0.5, bias_correction=False)[0] == pytest.approx(1.5)
    with pytest.raises(ValueError):
        estimators.ema([1.0], 1.0)


@given(problem_and_point(min_d=2, max_d=8))
def test_nested_noise_big_batch_contains_small_batch(pp):
    """ξ_big = (B_s ξ_small + (B_b − B_s) ξ_rest)/B_b: with B_b − B_s examples of zero noise... the mean
    of the pair equals the example-weighted mean — checked through per-example draws of the same stream."""
    p, _ = pp
    rng = np.random.default_rng(0)
    small, big = noise.nested_minibatch_noise(rng, p, 2, 6, 3, per_example="gaussian")
    rng = np.random.default_rng(0)
    first = noise.minibatch_noise(rng, p, 2, 3, "gaussian")
    rest = noise.minibatch_noise(rng, p, 4, 3, "gaussian")
    np.testing.assert_allclose(small, first)
    np.testing.assert_allclose(big, (2 * first + 4 * rest) / 6, rtol=1e-12)


@pytest.mark.parametrize(("b_small", "b_big", "per_example"), [(1, 8, None), (16, 256, None), (2, 10, "laplace")])
def test_two_batch_estimates_are_unbiased(b_small, b_big, per_example):
    p = nqm.NoisyQuadratic.zhang2019(200)
    theta = np.linspace(1, -1, 200) * 0.1
    grad = theory.gradient(p, theta)
    small, big = noise.nested_minibatch_noise(np.random.default_rng(3), p, b_small, b_big, 20_000, per_example)
    g2, s = estimators.two_batch_estimates(np.sum((grad + small) ** 2, 1), np.sum((grad + big) ** 2, 1), b_small, b_big)
    measured = np.array([g2.mean(), s.mean()])
    se = np.array([g2.std(ddof=1), s.std(ddof=1)]) / np.sqrt(g2.size)
    truth = np.array([grad @ grad, p.trace_sigma])
    planted = np.array([grad @ grad + p.trace_sigma / b_big, p.trace_sigma])  # |G_big|² taken for |G|²
    z = critical_z(2, ALPHA_TEST)
    assert np.all(np.abs(measured - truth) <= z * se)
    assert np.any(np.abs(measured - planted) > z * se)


def test_gradient_norm_trace_is_consistent_with_exact_dynamics():
    p = nqm.NoisyQuadratic.zhang2019(100)
    tr = nqm.gradient_norm_trace(p, 1.0, 4, 32, 50, 400, seed=4)
    assert tr.sq_small.shape == (400, 50) and np.isnan(tr.sq_consecutive[:, 0]).all()
    # E|G_t|² = Σ h² E θ_t² with E θ_t² from the exact SGD recursion at batch 32
    v = np.stack([nqm.dynamics.coordinate_variance(p, 1.0, 32, t) for t in (0, 10, 49)])
    exact = v @ p.h**2
    measured = tr.sq_true[:, [0, 10, 49]]
    z = critical_z(3, ALPHA_TEST)
    se = measured.std(axis=0, ddof=1) / np.sqrt(400)
    assert np.all(np.abs(measured.mean(0) - exact) <= z * se)
    assert np.any(np.abs(measured.mean(0) - 2 * exact) > z * se)
    with pytest.raises(ValueError):
        nqm.gradient_norm_trace(p, 1.0, 8, 8, 10, 4)
