import numpy as np
import pytest

import nqm
from nqm import spectra


def test_zhang2019_preset():
    p = nqm.NoisyQuadratic.zhang2019(5)
    np.testing.assert_array_equal(p.h, 1 / np.arange(1, 6))
    np.testing.assert_array_equal(p.c, p.h)
    assert p.is_diagonal and p.d == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(h=[1.0, 0.0], c=[1, 1]), "must be > 0"),
        (dict(h=[1.0, np.inf], c=[1, 1]), "non-finite"),
        (dict(h=[1.0, np.nan], c=[1, 1]), "non-finite"),
        (dict(h=[1.0, 2.0], c=[1, -1]), "noise variances\\) must be >= 0"),
        (dict(h=[1.0, 2.0], c=[1, 1, 1]), "length 3"),
        (dict(h=[1.0, 2.0]), "exactly one"),
        (dict(h=[1.0, 2.0], c=[1, 1], sigma=np.eye(2)), "exactly one"),
        (dict(h=[1.0, 2.0], sigma=[[1, 0.5], [0, 1]]), "symmetric"),
        (dict(h=[1.0, 2.0], sigma=[[1, 2], [2, 1]]), "positive semi-definite"),
        (dict(h=[1.0, 2.0], sigma=[[1 + 1j, 0], [0, 1]]), "sigma must be a real number"),
        (dict(h=[1.0, 2.0], sigma=[[True, False], [False, True]]), "sigma must be a real number"),
        (dict(h=[1.0, 2.0], sigma="eye"), "sigma must be a real number"),
        (dict(h=[1.0, 2.0], c=[1.0, 1.0], basis=[[1 + 0j, 0], [0, 1]]), "basis must be a real number"),
        (dict(h=[1.0, 2.0], c=[1.0, 1.0], basis=[[True, False], [False, True]]), "basis must be a real number"),
        (dict(h=[1.0, 2.0], sigma=np.eye(3)), "shape"),
        (dict(h=[1.0, 2.0], c=[1, 1], basis=[[1, 1], [0, 1]]), "orthogonal"),
        (dict(h=[[1.0]], c=[1]), "1-D"),
        (dict(h=[], c=[]), "empty"),
    ],
)
def test_bad_problems_raise_clear_errors(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        nqm.NoisyQuadratic(**kwargs)


def test_dense_sigma_factor_reproduces_sigma():
    h = spectra.log_uniform(6, 0.1, 1)
    sigma = spectra.misaligned_sigma(h, strength=0.7, seed=3)
    p = nqm.NoisyQuadratic(h, sigma=sigma)
    np.testing.assert_allclose(p.sigma_factor @ p.sigma_factor.T, sigma, atol=1e-14)
    np.testing.assert_allclose(p.c, np.diag(sigma))
    assert p.trace_sigma == pytest.approx(h.sum())


def test_spectra_constructors():
    np.testing.assert_allclose(spectra.power_law(4, 2.0, scale=3.0), 3.0 / np.array([1, 4, 9, 16]))
    assert spectra.uniform(3, 1, 3).tolist() == [3, 2, 1]
    np.testing.assert_allclose(spectra.log_uniform(3, 0.01, 1), [1, 0.1, 0.01])
    b = spectra.bulk_outliers(5, (0.1, 1), [50, 10])
    assert b[:2].tolist() == [50, 10] and b.size == 5
    assert spectra.custom([1, 3, 2]).tolist() == [3, 2, 1]
    np.testing.assert_allclose(spectra.noise_power([4.0, 1.0], 2.0, 0.5), [4.0, 2.0])
    with pytest.raises(ValueError):
        spectra.log_uniform(3, 0, 1)
    with pytest.raises(ValueError):
        spectra.custom([1, -1])
    with pytest.raises(ValueError):
        spectra.bulk_outliers(2, (0.1, 1), [5, 6])


@pytest.mark.parametrize("strength", [0.0, 0.3, 1.0])
def test_random_rotation_is_orthogonal_and_moves_with_strength(strength):
    r = spectra.random_rotation(8, strength, seed=1)
    np.testing.assert_allclose(r @ r.T, np.eye(8), atol=1e-12)
    assert np.linalg.det(r) == pytest.approx(1.0)
    distance = np.linalg.norm(r - np.eye(8))
    assert (distance == 0) == (strength == 0)


def test_rotation_strength_is_a_geodesic():
    # R(s)R(s) = R(2s): the angles scale linearly along the path.
    half = spectra.random_rotation(6, 0.25, seed=4)
    np.testing.assert_allclose(half @ half, spectra.random_rotation(6, 0.5, seed=4), atol=1e-10)


@pytest.mark.parametrize("power", [0.75, 1.5, 3.0])
def test_power_law_bins_sum_like_the_full_spectrum(power):
    """Σ n_k h_k^s over the bins equals Σ_{i ≤ d} i^(−as) within the midpoint rule's bound p(p + 1)(r − 1)²/24
    (p = as, r the bin ratio): the relative error of one bin, and so of their sum."""
    a, d, ratio = 1.5, 10**6, 1.02
    h, n = spectra.power_law_bins(a, d, exact=64, ratio=ratio)
    assert n.sum() == pytest.approx(d, rel=1e-12) and np.all(np.diff(h) < 0)
    full = np.arange(1, d + 1, dtype=np.float64) ** (-power)
    p = power
    assert abs(n @ h ** (power / a) / full.sum() - 1) <= p * (p + 1) * (ratio - 1) ** 2 / 24
    small_h, small_n = spectra.power_law_bins(a, 50)  # d within the exact head: the spectrum itself
    np.testing.assert_array_equal(small_h, spectra.power_law(50, a))
    np.testing.assert_array_equal(small_n, np.ones(50))


def test_a_dense_sigma_is_checked_at_the_stated_tolerance_without_an_eigendecomposition(monkeypatch):
    d = 4
    q = np.linalg.qr(np.random.default_rng(0).normal(size=(d, d)))[0]
    tolerance = 1e-10 * 1.0 * d  # 1e-10 · max|Σ| · d, with max|Σ| = 1 below

    def sigma_with_smallest(lam):
        s = (q * np.array([1.0, 0.5, 0.2, lam])) @ q.T
        return s / np.abs(s).max()

    real_eigh = np.linalg.eigh
    monkeypatch.setattr(np.linalg, "eigh", lambda *a, **k: pytest.fail("eigh while building a problem"))
    p = nqm.NoisyQuadratic(np.ones(d), sigma=sigma_with_smallest(-0.3 * tolerance))  # within the tolerance: accepted
    with pytest.raises(ValueError, match="positive semi-definite; smallest eigenvalue -"):
        nqm.NoisyQuadratic(np.ones(d), sigma=sigma_with_smallest(-3 * tolerance))
    nqm.NoisyQuadratic(np.ones(d), sigma=np.zeros((d, d)))  # Σ = 0 is PSD
    monkeypatch.setattr(np.linalg, "eigh", real_eigh)
    f = p.sigma_factor  # formed on first use
    np.testing.assert_allclose(f @ f.T, p.sigma, atol=1e-9)
    assert p.sigma_factor is f


def test_parameter_noise_refuses_what_the_constructor_refuses():
    with pytest.raises(ValueError, match="sigma_x must be symmetric"):
        nqm.NoisyQuadratic.with_parameter_noise([1.0, 2.0], np.eye(2), [[1.0, 0.5], [0.1, 1.0]])
    with pytest.raises(TypeError, match="sigma_x must be a real number"):
        nqm.NoisyQuadratic.with_parameter_noise([1.0, 2.0], np.eye(2), [1 + 1j, 1.0])
    with pytest.raises(TypeError, match="basis must be a real number"):
        nqm.NoisyQuadratic.with_parameter_noise([1.0, 2.0], np.eye(2, dtype=bool), "hessian_diagonal")
