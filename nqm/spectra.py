"""Constructors for Hessian spectra, noise spectra and misaligned noise covariances.

Hessian spectra are returned in decreasing order (largest curvature first), as in
Zhang et al. 2019 (arXiv:1907.04164) where ``h_i = 1/i``.
"""

from __future__ import annotations

import numpy as np

from .checks import as_real, as_vector, check_count, check_positive_vector, check_real

__all__ = [
    "power_law",
    "uniform",
    "log_uniform",
    "bulk_outliers",
    "custom",
    "noise_power",
    "random_rotation",
    "misaligned_sigma",
    "geometric_bins",
    "power_law_bins",
]


def _check_d(d) -> int:
    return check_count("d", d, 1)


def _check_range(low, high) -> tuple[float, float]:
    low = check_real("low", low, low=0.0, low_open=True)
    high = check_real("high", high, low=low)
    return low, high


def power_law(d: int, exponent: float, scale: float = 1.0) -> np.ndarray:
    """``h_i = scale · i^(−exponent)``, i = 1..d, exponent ≥ 0 (decreasing; 0 is isotropic).

    Example:
        >>> power_law(3, 1.0)
        array([1.        , 0.5       , 0.33333333])
    """
    d = _check_d(d)
    exponent = check_real("exponent", exponent, low=0.0)
    scale = check_real("scale", scale, low=0.0, low_open=True)
    return scale * np.arange(1, d + 1, dtype=np.float64) ** (-exponent)


def uniform(d: int, low: float, high: float) -> np.ndarray:
    """d eigenvalues evenly spaced in [low, high], decreasing."""
    low, high = _check_range(low, high)
    return np.linspace(high, low, _check_d(d))


def log_uniform(d: int, low: float, high: float) -> np.ndarray:
    """d eigenvalues evenly spaced in log between low and high, decreasing."""
    low, high = _check_range(low, high)
    return np.geomspace(high, low, _check_d(d))


def bulk_outliers(d: int, bulk: tuple[float, float], outliers) -> np.ndarray:
    """A few large ``outliers`` on top of a log-uniform bulk in ``bulk = (low, high)``.

    This is the shape of neural-network Hessians reported by Ghorbani et al. 2019 (arXiv:1901.10159).
    """
    d = _check_d(d)
    out = np.sort(np.atleast_1d(np.asarray(outliers, dtype=np.float64)))[::-1]
    if out.size >= d:
        raise ValueError(f"need fewer outliers ({out.size}) than dimensions ({d})")
    if np.any(out <= 0) or not np.all(np.isfinite(out)):
        raise ValueError("outliers must be finite and > 0")
    low, high = _check_range(*bulk)
    if out.size and out[-1] <= high:
        raise ValueError(f"outliers must lie above the bulk (> high = {high:g}), got {out[-1]:g}")
    return np.concatenate([out, log_uniform(d - out.size, low, high)])


def custom(values) -> np.ndarray:
    """A user-given spectrum, validated (finite, > 0) and sorted decreasing."""
    arr = as_real("values", values)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("a spectrum must be a non-empty 1-D array")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError("spectrum values must be finite and > 0")
    return np.sort(arr)[::-1]


def noise_power(h, scale: float = 1.0, exponent: float = 1.0) -> np.ndarray:
    """Noise variances aligned with H: ``c_i = scale · h_i^exponent`` (``exponent = 1`` is C ∝ H)."""
    h = check_positive_vector("h", h)
    scale, exponent = check_real("scale", scale, low=0.0), check_real("exponent", exponent)
    return scale * h**exponent


def random_rotation(d: int, strength: float = 1.0, seed=0) -> np.ndarray:
    """An orthogonal matrix on the geodesic from I (strength 0) to a Haar-random rotation (strength 1).

    .. math:: R(s) = V\\,\\mathrm{diag}(e^{i s \\varphi_k})\\,V^{*},\\qquad Q = V\\,\\mathrm{diag}(e^{i\\varphi_k})V^{*}

    with ``Q`` Haar-distributed on SO(d); the principal angles are scaled by ``s``, so
    ``strength`` sets how far H's and Σ's eigenbases are apart.
    """
    d = _check_d(d)
    s = float(strength)
    if not (0.0 <= s <= 1.0):
        raise ValueError(f"strength must lie in [0, 1], got {strength!r}")
    if d == 1 or s == 0.0:
        return np.eye(d)
    from scipy.stats import special_ortho_group

    q = special_ortho_group.rvs(d, random_state=np.random.default_rng(seed))
    if s == 1.0:
        return q
    # Q is normal, so its complex eigenvectors are unitary; conjugate pairs keep R(s) real.
    w, v = np.linalg.eig(q)
    r = ((v * np.exp(1j * s * np.angle(w))) @ v.conj().T).real
    # Re-orthogonalise against round-off of the eigendecomposition.
    u, _, vt = np.linalg.svd(r)
    return u @ vt


def misaligned_sigma(c, strength: float = 1.0, seed=0) -> np.ndarray:
    """Dense Σ = R diag(c) Rᵀ whose eigenbasis is rotated away from H's by ``random_rotation``.

    ``tr Σ = Σ c`` is kept; ``tr(HΣ)`` changes with the rotation, which is what makes
    B_noise and B_simple differ (McCandlish et al. 2018, §2.2).
    """
    c = as_vector("c (noise variances)", c)
    if np.any(c < 0):
        raise ValueError("c (noise variances) must be >= 0")
    r = random_rotation(c.size, strength, seed)
    sigma = (r * c) @ r.T
    return 0.5 * (sigma + sigma.T)


def geometric_bins(h, bins: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Bin a spectrum into ``bins`` geometric bins, each represented by its lower edge (curvature rounded
    down, as in Zhang et al.'s public notebook); returns (edges of the non-empty bins, counts).

    n coordinates of one curvature act as one coordinate with n× the variance (θ' = √n θ): for C = H use
    ``NoisyQuadratic(edges, counts * edges)`` with ``init_var = counts`` (for θ₀ ~ N(0, I)).
    """
    h = check_positive_vector("h (curvatures)", h)
    edges = np.geomspace(h.min(), h.max(), int(bins) + 1)
    index = np.clip(np.searchsorted(edges, h, side="right") - 1, 0, int(bins) - 1)
    counts = np.bincount(index, minlength=int(bins))
    keep = counts > 0
    return edges[:-1][keep], counts[keep].astype(np.float64)


def power_law_bins(exponent: float, d: float, exact: int = 256, ratio: float = 1.02) -> tuple[np.ndarray, np.ndarray]:
    r"""The power law ``h_i = i^(−exponent)``, i = 1..d, for d far beyond memory (10³⁰ and more): the first
    ``exact`` coordinates as they are, the rest grouped into bins of index [i_k, ``ratio``·i_k), each represented
    by its count n_k = i_{k+1} − i_k and the curvature at its midpoint. Returns (curvatures, counts).

    As with :func:`geometric_bins`, n coordinates of one curvature act as one coordinate with n× the variance:
    noise ``c(h)`` per coordinate becomes ``counts * c(h)`` and θ₀ ~ N(0, I) becomes ``init_var = counts``. A
    sum Σ_i f(h_i) over the binned tail is the midpoint rule for ∫ f(x^(−exponent)) dx over bins that start at
    ``exact + ½``; for f = h^s its relative error is at most p(p + 1)(ratio − 1)²/24 with p = exponent·s
    (2.5e-5 at p = 1 and the default ratio), so a power law in a sum over the spectrum keeps its exponent.

    Example:
        >>> h, n = power_law_bins(2.0, 1e30)
        >>> h.size, round(float(n.sum()) / 1e30, 12), round(float(n @ h), 6)   # Σ i^-2 = π²/6 − 1e-30
        (3465, 1.0, 1.644934)
    """
    exponent = check_real("exponent", exponent, low=0.0, low_open=True)
    d = check_real("d", d, low=1.0)
    exact = check_count("exact", exact, 1)
    ratio = check_real("ratio", ratio, low=1.0, low_open=True)
    head = np.arange(1, min(exact, int(d)) + 1, dtype=np.float64)
    if d < exact + 1:
        return head ** (-exponent), np.ones(head.size)
    bins = int(np.ceil(np.log((d + 0.5) / (exact + 0.5)) / np.log(ratio)))
    edges = (exact + 0.5) * ratio ** np.arange(bins + 1, dtype=np.float64)
    edges[-1] = d + 0.5
    mid = 0.5 * (edges[:-1] + edges[1:])
    return np.concatenate([head, mid]) ** (-exponent), np.concatenate([np.ones(head.size), np.diff(edges)])
