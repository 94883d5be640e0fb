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
from scipy import special

from .checks import as_real, check_batch_size, check_lr, check_point, check_real
from .noise import parameter_covariance, trace_h_sigma, trace_sigma
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
    "parameter_gradient",
    "preconditioned_simple_noise_scale",
    "adam_preconditioner",
    "sign_moments",
    "sign_step_moments",
    "sign_improvement",
    "sign_optimal_step",
    "sign_optimal_improvement",
]


def _divide(num, den):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(num, den)


def _theta(p: NoisyQuadratic, theta) -> np.ndarray:
    return check_point("theta", theta, p.d, batched=True)


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
    tr_phps = trace_h_sigma(p, pre)
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
    return _divide(trace_sigma(p), np.einsum("...i,...i->...", g, g))


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


def parameter_gradient(p: NoisyQuadratic, theta) -> np.ndarray:
    """``G_x = QG``, the true gradient in the simulator's (parameter) coordinates x = Qθ; shape (..., d).

    A component below the rounding error of that product (4dε_mach|G|) is an exact zero: it decides a sign at
    B = inf (:func:`sign_moments`), where 1e-17 from rounding would otherwise count as one.
    """
    g = gradient(p, theta)
    if p.basis is None:
        return g
    norm = np.sqrt(np.einsum("...i,...i->...", g, g))[..., None]
    g_x = g @ p.basis.T
    return np.where(np.abs(g_x) <= 4 * p.d * np.finfo(np.float64).eps * norm, 0.0, g_x)


# -- the noise scale an adaptive optimiser's preconditioner sees ----------------------------------------------
def preconditioned_simple_noise_scale(p: NoisyQuadratic, theta, precond_x):
    r"""The simple noise scale of preconditioned gradients, with P diagonal in the parameter coordinates x = Qθ:

    .. math:: B_\text{simple}(P) = \frac{\operatorname{tr}(P\Sigma_x P)}{|P G_x|^2}
              = \frac{\sum_i p_i^2 (\Sigma_x)_{ii}}{\sum_i p_i^2 G_{x,i}^2}

    With ``precond_x`` = 1/(√v̂ + eps) from Adam's second moment this is what adaptdl's ``AdamGradientNoiseScale``
    estimates: its two-batch estimates of ``|G|²`` and tr Σ are taken on P·g (AdaptDL, Qiao et al. 2021, OSDI; the
    estimator of McCandlish et al. 2018, arXiv:1812.06162, App. A.1, on preconditioned gradients). ``theta`` is in
    H's eigenbasis, shape (..., d); ``precond_x`` (d,) or broadcasting against theta.
    """
    th = _theta(p, theta)
    pre = as_real("precond_x", precond_x)
    if pre.shape[-1:] != (p.d,) or np.any(~np.isfinite(pre)) or np.any(pre <= 0):
        raise ValueError(f"precond_x must hold finite values > 0 with last axis {p.d}, got shape {pre.shape}")
    g = parameter_gradient(p, th)
    noise = np.diag(parameter_covariance(p))
    return _divide(np.sum(pre * pre * noise, axis=-1), np.sum((pre * g) ** 2, axis=-1))


def adam_preconditioner(p: NoisyQuadratic, theta, batch_size, eps: float = 1e-8):
    r"""``1/(√v + eps)`` per parameter with v = E[g_B²] = G_x² + (Σ_x)_ii/B at θ: Adam's preconditioner once its
    second moment has averaged many gradients at (nearly) the same θ (its bias-corrected v̂ tends to this)."""
    th = _theta(p, theta)
    b = check_batch_size(batch_size)
    g = parameter_gradient(p, th)
    eps = check_real("eps", eps, low=0.0)  # a negative offset would make the preconditioner negative or infinite
    return 1.0 / (np.sqrt(g * g + np.diag(parameter_covariance(p)) / b[..., None]) + eps)


# -- sign descent ----------------------------------------------------------------------------------------
# |ρ| below this is independence: the cross term is then below ~1e-12 of the pair's weight (it is linear in ρ),
# and it spares the d² bivariate-normal evaluations for noise that is diagonal up to rounding.
_INDEPENDENT_RHO = 1e-12


def sign_moments(p: NoisyQuadratic, theta, batch_size):
    r"""``(E[s], E[ssᵀ])`` of the signs ``s = sign(g_B)`` at one point θ (d,) and one batch size B.

    In the parameter coordinates x = Qθ a batch of B Gaussian examples gives ``g = G_x + ξ``,
    ``ξ ~ N(0, Σ_x/B)``. With ``a_i = G_i/σ_i``, ``σ_i² = (Σ_x)_{ii}/B`` and ρ the noise correlation:

    .. math::
        \mathbb E[s_i] = \operatorname{erf}(a_i/\sqrt2), \qquad
        \mathbb E[s_i s_j] = 4\Phi_2(a_i, a_j; \rho_{ij}) - 2\Phi(a_i) - 2\Phi(a_j) + 1 \quad (i \ne j),

    ``E[s_i s_j] = E[s_i]E[s_j]`` when ρ_ij = 0, and ``E[s_i²] = 1``. Derived here, not quoted: P(g_i > 0) = Φ(a_i),
    P(g_i > 0, g_j > 0) = Φ₂(a_i, a_j; ρ_ij), and s_i s_j = 1 − 2·[the signs differ]. ``batch_size`` may be
    ``inf``: then s_i = sign(G_i) where G_i ≠ 0, and pure noise where G_i = 0. A coordinate with neither gradient
    nor noise has s_i = sign(0) = 0. G_x is :func:`parameter_gradient`'s (rounding residues are exact zeros).
    """
    th = _theta(p, theta)
    if th.ndim != 1:
        raise ValueError(f"theta must have shape ({p.d},) here, got {th.shape}")
    b = check_batch_size(batch_size)
    if b.ndim != 0:
        raise ValueError("sign_moments takes one batch size; sign_step_moments broadcasts over many")
    inputs = _SignInputs(p, th[None, :], b.reshape(1))
    mean = inputs.mean[0]
    second = np.outer(mean, mean)
    second[np.diag_indices(p.d)] = inputs.alive[0]
    i, j, rho = inputs.pairs
    cov = _sign_covariance(inputs.a[0, i], inputs.a[0, j], rho)
    second[i, j] += cov
    second[j, i] += cov
    return mean, second


def sign_step_moments(p: NoisyQuadratic, theta, batch_size):
    r"""The two sums sign descent's one-step law is built from: ``(G_xᵀE[s], Σ_ij (H_x)_ij E[s_i s_j])``.

    The expectations are :func:`sign_moments`'; here θ has shape (..., d) and the result the shape of
    ``theta.shape[:-1]`` broadcast against ``batch_size``, without forming E[ssᵀ]. With independent noise the
    sum is eq. 9 of Li et al. 2024 (arXiv:2405.14578).
    """
    th = _theta(p, theta)
    b = check_batch_size(batch_size)
    shape = np.broadcast_shapes(th.shape[:-1], b.shape)
    inputs = _SignInputs(p, np.broadcast_to(th, shape + (p.d,)).reshape(-1, p.d), np.broadcast_to(b, shape).ravel())
    hx, mean = inputs.hx, inputs.mean
    h_diag = np.diag(hx)
    first = np.einsum("ki,ki->k", inputs.g, mean)
    second = np.einsum("ki,ij,kj->k", mean, hx, mean) - (mean * mean) @ h_diag + inputs.alive @ h_diag
    i, j, rho = inputs.pairs
    if rho.size:
        second += 2.0 * (_sign_covariance(inputs.a[:, i], inputs.a[:, j], rho) @ hx[i, j])
    return first.reshape(shape), second.reshape(shape)


class _SignInputs:
    """What both sign laws need for k points (rows of θ) and their batch sizes (k,): G_x, a = G_x√B/sd, E[s],
    which signs are random or non-zero (``alive``), and the correlated pairs (i, j, ρ) with i < j."""

    def __init__(self, p: NoisyQuadratic, th, b):
        self.g = parameter_gradient(p, th)  # rows of points
        self.hx, sx = p.parameter_hessian, parameter_covariance(p)
        sd = np.sqrt(np.clip(np.diag(sx), 0.0, None))
        with np.errstate(divide="ignore", invalid="ignore"):
            # ±inf without noise (or at B = inf); 0 for a zero gradient, whatever the noise
            self.a = np.where(self.g == 0, 0.0, self.g * np.sqrt(b)[:, None] / sd)
        self.mean = special.erf(self.a / np.sqrt(2.0))
        self.alive = ((sd > 0) | (self.g != 0)).astype(np.float64)
        i, j = np.triu_indices(p.d, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.nan_to_num(sx[i, j] / (sd[i] * sd[j]))
        keep = np.abs(rho) > _INDEPENDENT_RHO
        self.pairs = (i[keep], j[keep], np.clip(rho[keep], -1.0, 1.0))


def _sign_covariance(a, b, rho):
    r"""``Cov(sign(a + X), sign(b + Y))`` for standard normals with correlation ρ: ``4(Φ₂(a, b; ρ) − Φ(a)Φ(b))``.

    Φ₂ by Owen's T (Owen 1956): ``Φ₂(a, b; ρ) = ½Φ(a) + ½Φ(b) − T(a, α_a) − T(b, α_b) − β`` with
    ``α_a = (b − ρa)/(a√(1 − ρ²))``, β = ½ when ab < 0 (or ab = 0 and a + b < 0), else 0; ``T(0, α_a)`` is the
    limit sign(b)/4, and Φ₂(0, 0; ρ) = ¼ + arcsin(ρ)/(2π). The covariance is 0 when a or b is infinite (that sign
    is certain), and |ρ| = 1 uses Φ₂ = Φ(min(a, b)) or max(0, Φ(a) + Φ(b) − 1).
    """
    a, b = np.broadcast_arrays(a, b)
    rho = np.broadcast_to(rho, a.shape)
    finite = np.isfinite(a) & np.isfinite(b)
    a, b = np.where(finite, a, 0.0), np.where(finite, b, 0.0)
    cdf_a, cdf_b = special.ndtr(a), special.ndtr(b)
    edge = np.abs(rho) >= 1.0
    r = np.sqrt(np.where(edge, 1.0, 1.0 - rho * rho))
    with np.errstate(divide="ignore", invalid="ignore"):
        t_a = np.where(a != 0, special.owens_t(a, (b - rho * a) / (a * r)), 0.25 * np.sign(b))
        t_b = np.where(b != 0, special.owens_t(b, (a - rho * b) / (b * r)), 0.25 * np.sign(a))
    beta = np.where((a * b < 0) | ((a * b == 0) & (a + b < 0)), 0.5, 0.0)
    both = 0.5 * (cdf_a + cdf_b) - t_a - t_b - beta
    both = np.where((a == 0) & (b == 0), 0.25 + np.arcsin(rho) / (2 * np.pi), both)
    both = np.where(edge & (rho > 0), np.minimum(cdf_a, cdf_b), both)
    both = np.where(edge & (rho < 0), np.maximum(0.0, cdf_a + cdf_b - 1.0), both)
    return np.where(finite, 4.0 * (both - cdf_a * cdf_b), 0.0)


def sign_improvement(p: NoisyQuadratic, theta, lr, batch_size):
    r"""Exact expected one-step improvement of sign descent ``θ ← θ − ε sign(g_B)`` (signs taken in x = Qθ).

    .. math:: \mathbb E[L(\theta) - L(\theta - \epsilon\,\mathrm{sign}(g_B))]
              = \epsilon\, G_x^\top \mathbb E[s]
                - \tfrac12 \epsilon^2 \textstyle\sum_{ij} (H_x)_{ij}\,\mathbb E[s_i s_j]

    broadcast over ``lr`` and ``batch_size`` (:func:`sign_step_moments`). Gaussian minibatch noise.

    Example:
        >>> from nqm import NoisyQuadratic
        >>> p = NoisyQuadratic([1.0], c=[1.0])       # one coordinate: E[s] = erf(G√B/√2)
        >>> round(float(sign_improvement(p, [1.0], 0.5, 1e12)), 12)      # noiseless: ε|G| − ½ε²h
        0.375
    """
    e = check_lr(lr)
    first, second = sign_step_moments(p, theta, batch_size)
    return e * first - 0.5 * e * e * second


def sign_optimal_step(p: NoisyQuadratic, theta, batch_size):
    r"""The step that maximises sign descent's expected improvement at batch size B.

    .. math:: \epsilon_\text{opt}(B) = \frac{G_x^\top \mathbb E[s]}{\sum_{ij} (H_x)_{ij}\,\mathbb E[s_i s_j]}

    As B → ∞ it tends to ``Σ|G_i| / (sign(G)ᵀH_x sign(G) + Σ_{i,j: G_i=G_j=0} (H_x)_ij (2/π) arcsin ρ_ij)``
    (``batch_size=inf`` gives it); the second sum, from coordinates with no gradient, is what the large-B
    formula of Li et al. 2024 (arXiv:2405.14578, eq. 17) leaves out. With independent noise, ε_opt ∝ √B at
    small B.
    """
    first, second = sign_step_moments(p, theta, batch_size)
    return _divide(first, second)


def sign_optimal_improvement(p: NoisyQuadratic, theta, batch_size):
    r"""The best expected one-step improvement of sign descent, ``½(G_xᵀE[s])² / Σ_ij (H_x)_ij E[s_i s_j]``."""
    first, second = sign_step_moments(p, theta, batch_size)
    return 0.5 * _divide(first * first, second)
