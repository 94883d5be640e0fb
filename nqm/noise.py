"""Minibatch gradient noise: what a batch of B examples adds to the true gradient.

A minibatch gradient is ``G_B = G + ξ_B`` with ``ξ_B = (1/B) Σ_b ξ_b`` and ``Cov ξ_b = Σ``, so
``Cov ξ_B = Σ/B`` (McCandlish et al. 2018, arXiv:1812.06162, eq. 2.3). Two ways to draw ``ξ_B``:

* **batch-scaled Gaussian** (default): ``ξ_B = F z/√B`` with one standard normal per coordinate,
  whatever B is (``F Fᵀ = Σ``; ``F = diag(√c)`` for a diagonal Σ);
* **per-example**: B unit-variance vectors ``z_b`` from a named zero-mean distribution are really
  drawn and averaged, ``ξ_B = F (1/B) Σ_b z_b``; this tests that only the covariance matters.

This module is the noise's one home. The problem (:class:`nqm.NoisyQuadratic`) stores Σ as it was given; every
engine reads it through the accessors below (:func:`example_variance`, :func:`example_factor`,
:func:`parameter_covariance`) and the quantities built from them here: what a step injects
(:func:`injected_variance`, :func:`step_coefficients`, :func:`noise_sd`), the traces and the noise scales
(:func:`trace_sigma`, :func:`trace_h_sigma`, :func:`noise_scale_of_moments`), and the draws. A change to the
noise model (label noise Σ → Σ + s²H, say) is a change to the accessors alone.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .checks import check_batch_size
from .problem import NoisyQuadratic, check_precond

__all__ = [
    "example_variance",
    "example_factor",
    "parameter_covariance",
    "trace_sigma",
    "trace_h_sigma",
    "noise_scale_of_moments",
    "simple_noise_scale_of_moments",
    "noise_sd",
    "EXAMPLE_DISTRIBUTIONS",
    "STUDENT_T_DF",
    "unit_examples",
    "minibatch_noise",
    "nested_minibatch_noise",
    "injected_variance",
    "step_coefficients",
    "decay_pull",
    "DecayPull",
]


# -- Σ as the engines see it: nothing outside this module reads the problem's noise fields ---------------------
def example_variance(p: NoisyQuadratic) -> np.ndarray:
    """Σ's diagonal in H's basis, ``c_i = Σ_ii``: the variance one example's gradient noise has along h_i. All
    that the exact engines, the closed forms and the fused simulators need of Σ (the coordinates of H's basis
    decouple in mean square)."""
    return p.c


def example_factor(p: NoisyQuadratic) -> np.ndarray | None:
    """(d, d) F with F Fᵀ = Σ in H's basis for a dense Σ, None for a diagonal one (whose factor is diag(√c))."""
    return p.sigma_factor


def parameter_covariance(p: NoisyQuadratic) -> np.ndarray:
    """(d, d) Σ in the parameter coordinates x = Qθ, ``Q Σ Qᵀ``: what the laws of elementwise optimisers (sign
    descent, Adam's preconditioner) need, since they act coordinate by coordinate there."""
    return p.parameter_sigma


def trace_sigma(p: NoisyQuadratic) -> float:
    """tr Σ = Σ_i c_i."""
    return float(example_variance(p).sum())


def trace_h_sigma(p: NoisyQuadratic, precond=None) -> float:
    """tr(PHPΣ) = Σ_i p_i² h_i c_i for a preconditioner P diagonal in H's basis (tr(HΣ) without one)."""
    pre = check_precond(p, precond)
    return float((pre * pre * p.h) @ example_variance(p))


def noise_scale_of_moments(p: NoisyQuadratic, second_moment, precond=None) -> np.ndarray:
    r"""The gradient noise scale of a distribution of θ, from its second moments V_i = E[θ_i²] (..., d):

    .. math:: B_\text{noise} = \frac{\operatorname{tr}(PHP\Sigma)}{\mathbb E[G^\top PHPG]}
              = \frac{\sum_i p_i^2 h_i c_i}{\sum_i p_i^2 h_i^3 V_i}

    (McCandlish et al. 2018, arXiv:1812.06162, eq. 2.8, with G = Hθ averaged over θ's distribution).
    """
    pre = check_precond(p, precond)
    return trace_h_sigma(p, pre) / (np.asarray(second_moment) @ (pre**2 * p.h**3))


def simple_noise_scale_of_moments(p: NoisyQuadratic, second_moment) -> np.ndarray:
    r"""``B_simple = tr Σ / E[|G|²] = Σ_i c_i / Σ_i h_i² V_i`` for second moments V_i = E[θ_i²] (..., d) (eq. 2.9)."""
    return trace_sigma(p) / (np.asarray(second_moment) @ p.h**2)


# -- the noise model of the exact engines: what a step injects per coordinate of H's basis ------------------
def injected_variance(p: NoisyQuadratic, batch_size, precond=None) -> np.ndarray:
    r"""Variance of the preconditioned minibatch noise per coordinate of H's basis, per unit step ε²:

    .. math:: \operatorname{Var}(P\xi_B)_i = p_i^2 c_i / B

    (McCandlish et al. 2018, arXiv:1812.06162, eq. 2.3; Zhang et al. 2019, arXiv:1907.04164, §3). ``batch_size``
    broadcasts against the coordinates (e.g. a column (n, 1) of batch sizes gives (n, d)). Only Σ's diagonal
    enters: the exact engines need E[θ_i²], and the coordinates of H's basis decouple in mean square.
    """
    pre = check_precond(p, precond)
    return pre * pre * example_variance(p) / check_batch_size(batch_size)


def noise_sd(p: NoisyQuadratic, batch_size) -> np.ndarray:
    """√(c/B): the standard deviation of a batch's mean noise per coordinate of H's basis, what the fused
    simulators scale their normals by (before the step ε and the preconditioner)."""
    return np.sqrt(example_variance(p) / batch_size)


def step_coefficients(p: NoisyQuadratic, opt, batch_size):
    """(λ, σ) per coordinate of H's basis for one step of ``opt``: ``λ = εp(h + λ_c)`` and ``σ = εp√(c/B)``.

    ``σ² = ε²·injected_variance`` is the variance a step of size ε injects; every linear optimiser's transition
    (:mod:`nqm.optim`) is written in λ and σ, so this is where the noise model enters the exact engines and
    the fused simulators. λ_c is the optimiser's coupled weight decay (0 without): the gradient it follows has
    the curvature h + λ_c.
    """
    e, b = float(opt.lr), float(check_batch_size(batch_size, single=True))
    pre = check_precond(p, opt.precond)
    return e * pre * (p.h + getattr(opt, "coupled_decay", 0.0)), e * pre * noise_sd(p, b)


class DecayPull(NamedTuple):
    """Weight decay's pull towards 0 in the error x = θ − θ* (:mod:`nqm.optim`): ``step`` (d, m) is added to the
    state each step, ``s_{t+1} = F s_t + step + gσz``, and ``start`` (d, m) to the start, ``s₀ = e·x₀ + start``."""

    step: np.ndarray
    start: np.ndarray


def decay_pull(p: NoisyQuadratic, opt) -> DecayPull | None:
    """Weight decay's constant pull when the optimum θ* is not 0; None where there is none (no decay, or θ* = 0),
    so the engines keep their homogeneous paths."""
    if not getattr(opt, "weight_decay", 0.0) or p.optimum is None or not np.any(p.optimum):
        return None
    theta = p.optimum[:, None]
    return DecayPull(opt.forcing(check_precond(p, opt.precond)) * theta, opt.start_offset()[None, :] * theta)


STUDENT_T_DF = 5.0
"""Degrees of freedom of the scaled Student-t examples (finite fourth moment needs df > 4)."""


def _gaussian(rng, size, dtype):
    return rng.standard_normal(size, dtype=dtype)


def _rademacher(rng, size, dtype):
    return (2 * rng.integers(0, 2, size=size, dtype=np.int8) - 1).astype(dtype)


def _student_t(rng, size, dtype):
    # Var t_ν = ν/(ν − 2): rescale to unit variance.
    return (rng.standard_t(STUDENT_T_DF, size) * np.sqrt((STUDENT_T_DF - 2) / STUDENT_T_DF)).astype(dtype)


def _laplace(rng, size, dtype):
    # Var Laplace(0, b) = 2b².
    return rng.laplace(0.0, np.sqrt(0.5), size).astype(dtype)


EXAMPLE_DISTRIBUTIONS = {
    "gaussian": _gaussian,
    "rademacher": _rademacher,
    "student_t": _student_t,
    "laplace": _laplace,
}
"""Zero-mean, unit-variance, independent-coordinate example distributions, by name."""

# Examples are drawn in chunks so that memory stays at about this many values whatever B is.
_EXAMPLE_CHUNK_VALUES = 1 << 22


def check_distribution(name: str | None) -> str | None:
    """Validate a per-example distribution name (None means batch-scaled Gaussian)."""
    if name is not None and name not in EXAMPLE_DISTRIBUTIONS:
        raise ValueError(f"unknown per-example distribution {name!r}; choose from {sorted(EXAMPLE_DISTRIBUTIONS)}")
    return name


def unit_examples(rng: np.random.Generator, name: str, size, dtype=np.float64) -> np.ndarray:
    """``size`` independent zero-mean unit-variance draws from the distribution ``name``."""
    return EXAMPLE_DISTRIBUTIONS[check_distribution(name)](rng, size, dtype)


def minibatch_noise(
    rng: np.random.Generator,
    p: NoisyQuadratic,
    batch_size: int,
    rows: int,
    per_example: str | None = None,
    dtype=np.float64,
) -> np.ndarray:
    """(rows, d) draws of ξ_B in H's basis, each with mean 0 and covariance Σ/B.

    Args:
        rng: the generator of this replica block.
        p: the problem (Σ as ``c`` or dense).
        batch_size: B ≥ 1 (an integer in per-example mode).
        rows: number of independent draws (replicas).
        per_example: None for batch-scaled Gaussian noise, else a name in ``EXAMPLE_DISTRIBUTIONS``.
    """
    batch_size = float(check_batch_size(batch_size, integer=per_example is not None, single=True))
    if per_example is None:
        z = rng.standard_normal((rows, p.d), dtype=dtype)
        scale = 1.0 / np.sqrt(batch_size)
    else:
        b = int(batch_size)
        z = np.zeros((rows, p.d), dtype=dtype)
        chunk = max(1, _EXAMPLE_CHUNK_VALUES // (rows * p.d))
        for lo in range(0, b, chunk):
            z += unit_examples(rng, per_example, (min(chunk, b - lo), rows, p.d), dtype).sum(axis=0)
        scale = 1.0 / b
    return correlate(z, p, scale)


def correlate(z, p: NoisyQuadratic, scale: float, xp=np):
    """``scale``·Σ^½ z in H's basis for rows of unit draws z (rows, d), in z's dtype: √c·z for diagonal Σ,
    z Lᵀ with Σ = LLᵀ otherwise. ``xp`` is the array module of z (NumPy or CuPy)."""
    factor = example_factor(p)
    if factor is None:
        return z * xp.asarray(np.sqrt(example_variance(p)) * scale).astype(z.dtype)
    return (z @ xp.asarray(factor.T * scale)).astype(z.dtype, copy=False)


def nested_minibatch_noise(
    rng: np.random.Generator,
    p: NoisyQuadratic,
    b_small: int,
    b_big: int,
    rows: int,
    per_example: str | None = None,
    dtype=np.float64,
):
    """Noise of a small batch and of a big batch that contains it, as a practitioner measures them.

    .. math:: \\xi_\\text{big} = \\frac{B_s\\,\\xi_\\text{small} + (B_b - B_s)\\,\\xi_\\text{rest}}{B_b}

    with ``ξ_rest`` the mean noise of the other ``B_b − B_s`` examples. Returns two (rows, d) arrays.
    """
    if not 1 <= b_small < b_big:
        raise ValueError(f"need 1 <= b_small < b_big, got {b_small}, {b_big}")
    small = minibatch_noise(rng, p, b_small, rows, per_example, dtype)
    rest = minibatch_noise(rng, p, b_big - b_small, rows, per_example, dtype)
    return small, (b_small * small + (b_big - b_small) * rest) / b_big
