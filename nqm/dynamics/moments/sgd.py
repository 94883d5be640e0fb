r"""SGD's second moment per coordinate in closed form, without cancellation: the noise's run from V₀, and with
weight decay's pull towards a biased fixed point (Zhang et al. 2019, arXiv:1907.04164, §3).

.. math:: V_t = a^{2t} V_0 + \frac{1 - a^{2t}}{1 - a^2}\,q,\quad a = 1 - \lambda,\quad 1 - a^2 = \lambda(2 - \lambda)

with ``a^{2t} = exp(2t·log1p(−λ))``, so nothing cancels when λ ≪ 1 and nothing overflows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["log_abs_one_minus", "sgd_variance", "one_minus_power", "DecayedSgdMoments"]


def log_abs_one_minus(lam):
    """``log|1 − λ|`` elementwise, exact to rounding where λ is tiny (``log1p``: forming 1 − λ first loses
    every digit of λ below 1e-16, and a curvature of 1e-30 would not decay at all); −inf at λ = 1."""
    lam = np.asarray(lam, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(lam < 0.5, np.log1p(-np.minimum(lam, 0.5)), np.log(np.abs(lam - 1)))


def sgd_variance(lam, noise_var, v0, t):
    """Closed-form ``E[θ_t²]`` of ``θ ← (1 − λ)θ − n``, ``Var n = noise_var``; broadcasts ``t`` (T, 1).

    .. math:: V_t = a^{2t}V_0 + \\frac{1 - a^{2t}}{\\lambda(2 - \\lambda)}\\,q,\\qquad a = 1 - \\lambda

    with ``q = noise_var``.

    ``lam`` here is the product ε·p·h. The limit 1 − a² → 0 (λ = 2) gives ``V_0 + t·noise_var``.
    """
    lam = np.asarray(lam, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        log_abs_a = log_abs_one_minus(lam)
        t_log_r = np.where(t == 0, 0.0, 2.0 * t * log_abs_a)
        r_t = np.exp(t_log_r)
        one_minus_r = lam * (2.0 - lam)
        safe = np.where(one_minus_r == 0, 1.0, one_minus_r)
        growth = np.where(one_minus_r == 0, t, -np.expm1(t_log_r) / safe)
        return r_t * v0 + growth * noise_var


def one_minus_power(rate, log_abs, t):
    """``1 − (1 − r)^t`` at integer t, with ``log_abs`` = log|1 − r|: by ``expm1`` while 1 − r ≥ 0 (no cancellation
    while the power is near 1), with the power's sign (−1)^t beyond."""
    sign = np.where(np.mod(t, 2) == 1, -1.0, 1.0)
    return np.where(rate <= 1, -np.expm1(t * log_abs), 1.0 - sign * np.exp(t * log_abs))


class DecayedSgdMoments:
    r"""``E[x_t²]`` per coordinate of SGD with weight decay's pull, for many rows at once (the tuner's form of
    :func:`mean_path`): ``x' = (1 − r)x + r·x∞ − σz`` from ``E x₀ = 0``, ``E x₀² = V₀``, with r = ε times the
    decayed curvature and x∞ the biased fixed point,

    .. math:: \mathbb E[x_t^2] = V_t(r, q, V_0) + x_\infty^2\,\big(1 - (1 - r)^t\big)^2

    (:func:`sgd_variance` for V_t). Arrays broadcast; ``at(t)`` takes integer t broadcasting against them."""

    def __init__(self, rate, noise_var, v0, x_inf):
        self.rate, self.q, self.v0, self.x_inf = rate, noise_var, v0, x_inf
        self.log_abs = log_abs_one_minus(rate)

    def at(self, t):
        t = np.asarray(t, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            rest = one_minus_power(self.rate, self.log_abs, t)
            return sgd_variance(self.rate, self.q, self.v0, t) + (self.x_inf * rest) ** 2

    def stationary(self):
        """lim E[x_t²]: the noise's floor q/(r(2 − r)) plus the bias x∞² (inf where unstable)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((self.rate > 0) & (self.rate < 2), self.q / (self.rate * (2 - self.rate)), np.inf) + (
                self.x_inf**2
            )
