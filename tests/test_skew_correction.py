"""The skewness correction of a Monte Carlo cell's z (validation.stats.skew_corrected): what it is, that it is
monotone, and that it brings a skewed mean's tails back to a normal's where the suite's budget lives."""

import numpy as np
import pytest
from scipy import stats

from validation.stats import Check, decide, mean_skewness, skew_corrected


def test_skew_corrected_is_a_shifted_cube():
    """Hall's polynomial written another way: T = ((1 + az)³ − 1)/(3a) + a/2 with a = mean_skew/3, increasing."""
    rng = np.random.default_rng(0)
    z, skew = rng.normal(0, 4, 1000), rng.uniform(-0.6, 0.6, 1000)
    a = skew / 3
    cube = ((1 + a * z) ** 3 - 1) / (3 * a) + a / 2
    # the cube form cancels 1 against 1 before dividing by 3a: its rounding is about 10 ulp / |a|
    assert np.all(np.abs(skew_corrected(z, skew) - cube) <= 1e-14 * (1 + np.abs(cube)) / np.abs(a))
    grid = np.linspace(-30, 30, 6001)
    for s in (-0.5, -0.1, 0.1, 0.5):
        assert np.all(np.diff(skew_corrected(grid, s)) >= 0)  # monotone: a larger error never looks smaller
    assert np.array_equal(skew_corrected(grid, 0.0), grid)
    assert skew_corrected(np.inf, 0.3) == np.inf and skew_corrected(-np.inf, 0.3) == -np.inf


def test_mean_skewness_is_the_skewness_of_the_mean():
    """γ̂/√n with γ̂ scipy's (biased) sample skewness; 0 where the samples do not vary."""
    x = np.random.default_rng(1).exponential(size=(400, 3))
    assert np.allclose(mean_skewness(x), stats.skew(x, axis=0) / np.sqrt(400), rtol=1e-12)
    assert mean_skewness(np.ones((5, 2))).tolist() == [0.0, 0.0]


def _tail_ratios(z, n_values):
    """Counts of z < −3, z > 3 and |z| > 4 over a normal's expectations."""
    p3, p4 = stats.norm.sf(3.0), 2 * stats.norm.sf(4.0)
    return np.sum(z < -3) / (n_values * p3), np.sum(z > 3) / (n_values * p3), np.sum(np.abs(z) > 4) / (n_values * p4)


def test_the_correction_brings_a_chi_square_mean_back_to_a_normal_s_tails():
    """Means of n = 100 χ²₁ samples (V4's quick replicas; a Gaussian model's loss ½Σwᵢθᵢ² is at most this skewed,
    γ ≤ 2√2): Studentized, their z has 9.7× a normal's mass below −3 and 41× beyond |z| = 4 (the negative control);
    corrected, each tail is at most twice a normal's. The bound 2 is the claim (a second-order correction leaves
    O(1/n)); the margin is 5 Poisson SEs of each count (M = 200 000 means: the expected counts are 270 and 13)."""
    m, replicas = 200_000, 100
    x = np.random.default_rng(7).standard_normal((m, replicas)) ** 2
    z = (x.mean(axis=1) - 1.0) / (x.std(axis=1, ddof=1) / np.sqrt(replicas))
    corrected = skew_corrected(z, mean_skewness(x, axis=1))
    expected = np.array([m * stats.norm.sf(3.0)] * 2 + [m * 2 * stats.norm.sf(4.0)])
    slack = 5 * np.sqrt(2 * expected) / expected  # 5 SEs of a count at twice its expectation, as a ratio
    assert np.all(np.array(_tail_ratios(corrected, m)) <= 2 + slack)
    low, _, far = _tail_ratios(z, m)
    assert low > 2 + slack[0] and far > 2 + slack[2]  # uncorrected, the same bound fails


def test_decide_uses_the_corrected_z_and_keeps_the_uncorrected_one():
    """A cell 4 SEs below its prediction fails at z = 3.3 uncorrected; with a right-skewed mean (the left tail of its
    z is heavy) it passes, while 4 SEs above it fails harder; without skew the verdicts are the old ones."""
    kw = dict(name="c", claim="c", family="f", predicted=[1.0, 1.0], se=[0.1, 0.1])
    plain = Check(measured=[0.6, 1.4], **kw)
    skewed = Check(measured=[0.6, 1.4], mean_skew=[0.3, 0.3], **kw)
    assert np.array_equal(skewed.control("k", "k", [2.0, 2.0]).mean_skew, skewed.mean_skew)
    z_crit = decide([plain, skewed, Check(measured=np.ones(1), predicted=[1.0], se=[1.0], name="pad", claim="",
                                          family="f")])  # fmt: skip
    assert z_crit == pytest.approx(stats.norm.isf(1e-3 / 10))
    assert plain.z_uncorrected is None and plain.z.tolist() == pytest.approx([-4.0, 4.0])
    assert skewed.z_uncorrected.tolist() == pytest.approx([-4.0, 4.0])
    assert skewed.z.tolist() == pytest.approx(skew_corrected(np.array([-4.0, 4.0]), 0.3).tolist())
    assert skewed.z[0] > -z_crit and skewed.z[1] > z_crit and not skewed.passed and not plain.passed
    left = Check(measured=[0.6], mean_skew=[0.3], **{**kw, "predicted": [1.0], "se": [0.1]})
    decide([left], alpha=1e-3)
    assert left.passed  # the left cell alone: |T| < z_crit


def test_one_step_results_carry_their_replicas_skewness():
    """``OneStepResult.skew`` is scipy's sample skewness of each cell's replicas (ΔL is quadratic in the noise: its
    skewness is far from 0 at a large step), from the simulator and from the least-squares model alike."""
    from nqm.montecarlo.results import OneStepResult

    samples = np.random.default_rng(2).gamma(2.0, size=(2, 3, 500))
    r = OneStepResult.of_samples(np.ones((2, 3)), np.ones(2), samples)
    assert np.allclose(r.skew, stats.skew(samples, axis=-1), rtol=1e-12)
    assert np.allclose(r.sem, stats.sem(samples, axis=-1), rtol=1e-12) and r.n == 500
    import nqm

    p = nqm.NoisyQuadratic.zhang2019(64)
    sim = nqm.one_step_improvement(p, np.ones(64), [[0.5, 1.9]], [1.0], 4000, seed=1)
    assert sim.skew.shape == (1, 2) and abs(sim.skew[0, 1]) > 0.5
