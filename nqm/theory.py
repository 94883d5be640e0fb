"""Closed-form one-step quantities at a point θ (McCandlish, Kaplan, Amodei 2018, arXiv:1812.06162, §2).

All functions take ``theta`` in H's eigenbasis with shape (..., d) and return float64 arrays of
shape ``theta.shape[:-1]`` broadcast against ``batch_size`` / ``lr``. With a diagonal
preconditioner P (``precond``, shape (d,)) the update is ``θ ← θ − εP G_B`` and

.. math::
    \\mathbb E[L(\\theta) - L(\\theta - \\epsilon P G_B)]
      = \\epsilon\\, G^\\top P G - \\tfrac12 \\epsilon^2\\,(G^\\top PHP G + \\operatorname{tr}(PHP\\Sigma)/B),

exact on a quadratic (eq. 2.5 with P = I). Only Σ's diagonal in H's basis enters, because PHP is
diagonal there.

At the optimum θ = θ* (G = 0) the ratios are 0/0 or x/0 and follow IEEE arithmetic, without warnings:
``max_step`` is nan (the direction of G is undefined), ``noise_scale`` and ``simple_noise_scale`` are
inf when there is noise (nan without), ``optimal_step`` is 0 with noise (every step loses
``½ε² tr(PHPΣ)/B``; nan without), ``max_improvement`` and ``optimal_improvement`` are 0.
"""

from __future__ import annotations

import numpy as np

from .checks import check_batch_size, check_lr
from .problem import NoisyQuadratic, check_precond

__all__ = [
    "gradient",
    "noise_scale",
    "simple_noise_scale",
    "max_step",
    "optimal_step",
    "max_improvement",
    "optimal_improvement",
    "expected_improvement",
    "step_moments",
]


def _divide(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(num, den)


def _theta(p: NoisyQuadratic, theta) -> np.ndarray:
    th = np.asarray(theta, dtype=np.float64)
    if th.shape[-1:] != (p.d,):
        raise ValueError(f"theta must have shape (..., {p.d}), got {th.shape}")
    return th


def gradient(p: NoisyQuadratic, theta) -> np.ndarray:
    """True gradient ``G = Hθ``, shape (..., d)."""
    return p.h * _theta(p, theta)


def step_moments(p: NoisyQuadratic, theta, precond=None):
    """The three scalars every one-step law is built from.

    Returns ``(GᵀPG, GᵀPHPG, tr(PHPΣ))`` with shapes (...), (...), ().
    """
    pre = check_precond(p, precond)
    g = gradient(p, theta)
    gpg = np.einsum("...i,i,...i->...", g, pre, g)
    gphpg = np.einsum("...i,i,...i->...", g, pre * pre * p.h, g)
    tr_phps = float((pre * pre * p.h) @ p.c)
    return gpg, gphpg, tr_phps


def noise_scale(p: NoisyQuadratic, theta, precond=None):
    """The gradient noise scale (eq. 2.8).

    .. math:: B_\\text{noise} = \\operatorname{tr}(PHP\\Sigma) / (G^\\top PHPG)

    Example:
        >>> from nqm import NoisyQuadratic
        >>> p = NoisyQuadratic([1.0, 2.0], c=[1.0, 1.0])
        >>> float(noise_scale(p, [1.0, 0.0]))
        3.0
    """
    _, gphpg, tr = step_moments(p, theta, precond)
    return _divide(tr, gphpg)


def simple_noise_scale(p: NoisyQuadratic, theta):
    """``B_simple = tr(Σ)/|G|²`` (eq. 2.9); equals B_noise when H ∝ I."""
    g = gradient(p, theta)
    return _divide(p.trace_sigma, np.einsum("...i,...i->...", g, g))


def max_step(p: NoisyQuadratic, theta, precond=None):
    """The optimal step of the noiseless gradient, ``ε_max = GᵀPG/(GᵀPHPG)`` (eq. 2.6)."""
    gpg, gphpg, _ = step_moments(p, theta, precond)
    return _divide(gpg, gphpg)


def optimal_step(p: NoisyQuadratic, theta, batch_size, precond=None):
    """The step that maximises the expected improvement at batch size B (eq. 2.6).

    .. math:: \\epsilon_\\text{opt}(B) = \\frac{\\epsilon_\\max}{1 + B_\\text{noise}/B}
              = \\frac{G^\\top PG}{G^\\top PHPG + \\operatorname{tr}(PHP\\Sigma)/B}

    The right-hand form is what is computed: it stays finite at G = 0 (where it is 0 with noise).
    """
    b = check_batch_size(batch_size)
    gpg, gphpg, tr = step_moments(p, theta, precond)
    return _divide(gpg, gphpg + _divide(tr, b))


def max_improvement(p: NoisyQuadratic, theta, precond=None):
    """``ΔL_max = ½ (GᵀPG)² / (GᵀPHPG)`` (eq. 2.7); 0 at G = 0."""
    gpg, gphpg, _ = step_moments(p, theta, precond)
    return np.where(gpg > 0, 0.5 * _divide(gpg * gpg, gphpg), 0.0)


def optimal_improvement(p: NoisyQuadratic, theta, batch_size, precond=None):
    """The best expected one-step improvement at batch size B (eq. 2.7).

    .. math:: \\Delta L_\\text{opt}(B) = \\frac{\\Delta L_\\max}{1 + B_\\text{noise}/B}
              = \\tfrac12 \\frac{(G^\\top PG)^2}{G^\\top PHPG + \\operatorname{tr}(PHP\\Sigma)/B}
    """
    b = check_batch_size(batch_size)
    gpg, gphpg, tr = step_moments(p, theta, precond)
    return np.where(gpg > 0, 0.5 * _divide(gpg * gpg, gphpg + _divide(tr, b)), 0.0)


def expected_improvement(p: NoisyQuadratic, theta, lr, batch_size, precond=None):
    """Exact expected one-step improvement (eq. 2.5), broadcast over ``lr`` and ``batch_size``.

    .. math:: \\mathbb E[\\Delta L] = \\epsilon G^\\top PG - \\tfrac12\\epsilon^2
              (G^\\top PHPG + \\operatorname{tr}(PHP\\Sigma)/B)
    """
    e = check_lr(lr)
    b = check_batch_size(batch_size)
    gpg, gphpg, tr = step_moments(p, theta, precond)
    return e * gpg - 0.5 * e * e * (gphpg + _divide(tr, b))
