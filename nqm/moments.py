"""Closed-form second moments of one coordinate under heavy-ball momentum and under iterate averaging.

Per coordinate of H's basis (λ = ε·p·h, injected noise variance q = ε²p²c/B) the iterate obeys a linear
recursion driven by white noise. Its second moment is the stationary value plus the homogeneous
propagation of the initial deviation from it: if ``x_t = a_t x_0 + b_t y_0`` solves the noise-free
recursion from the state (x_0, y_0), then, for any initial second moments,

.. math:: \\mathbb E[x_t^2] = X_\\infty + a_t^2 (V_0 - X_\\infty) + 2a_tb_t(V_0 - C_\\infty) + b_t^2(V_0 - Y_\\infty)

(the moment map is linear, and the stationary covariance is its fixed point). Both functions are O(1) per
coordinate and step, against O(log t) matrix products for powering the moment map (``nqm.dynamics``),
which the tests use as their oracle.

References: Zhang et al. 2019 (arXiv:1907.04164), §3 and App. A (momentum and EMA on the NQM).
"""

from __future__ import annotations

import numpy as np

__all__ = ["heavy_ball_variance", "ema_variance"]


def _log_sinh_ratio(n, psi):
    """log(sinh(nψ)/sinh ψ) for ψ > 0, n ≥ 0, without overflow: (n−1)ψ + log((1 − e^{−2nψ})/(1 − e^{−2ψ}))."""
    with np.errstate(divide="ignore"):
        return (n - 1) * psi + np.log(-np.expm1(-2 * n * psi)) - np.log(-np.expm1(-2 * psi))


def heavy_ball_variance(lam, noise_var, v0, beta: float, t):
    """``E[x_t²]`` of heavy-ball momentum ``x_{t+1} = (1 + β − λ)x_t − βx_{t−1} − n_t``, ``x_{−1} = x_0``.

    With roots r₁,₂ = σρe^{±ψ} of z² − (1 + β − λ)z + β (ρ = √β, σ = sign(1 + β − λ)) the noise-free
    solution is ``x_t = U_t x_0 − βU_{t−1} x_{−1}``, ``U_t = (σρ)^t R_{t+1}``, ``R_n = sinh(nψ)/sinh ψ``
    (``sin(nφ)/sin φ`` when underdamped, ψ = iφ; ``n`` at critical damping). The AR(2) stationary moments
    are ``X∞ = (1 + β)q/((1 − β)λ(2(1 + β) − λ))`` and ``C∞ = E[x_t x_{t−1}] = (1 + β − λ)X∞/(1 + β)``, so

    .. math:: \\mathbb E[x_t^2] = X_\\infty + \\rho^{2t}\\big[(V_0 - X_\\infty)(R_{t+1}^2 + \\beta R_t^2)
              - 2\\sigma\\rho\\,(V_0 - C_\\infty)R_{t+1}R_t\\big].

    The discriminant is formed as (λ − (1−ρ)²)(λ − (1+ρ)²), so nothing cancels near critical damping, and
    the overdamped branch works in logs, so nothing overflows. Smooth in a continuous ``t`` (exact at
    integers). Needs 0 < β < 1 and 0 < λ < 2(1 + β) (a stable run); arrays broadcast.
    """
    lam, q, v0, t = (np.asarray(a, dtype=np.float64) for a in (lam, noise_var, v0, t))
    rho = np.sqrt(beta)
    a = 1.0 + beta - lam
    sign = np.where(a < 0, -1.0, 1.0)
    disc = (lam - (1 - rho) ** 2) * (lam - (1 + rho) ** 2)
    x_inf = (1 + beta) * q / ((1 - beta) * lam * (2 * (1 + beta) - lam))
    dev_x = v0 - x_inf
    dev_c = v0 - a * x_inf / (1 + beta)
    log_decay = t * np.log(beta)  # log ρ^{2t}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # overdamped: logs of R_{t+1}, R_t (R_0 = 0 gives −inf, a zero term)
        psi = np.arcsinh(np.sqrt(np.maximum(disc, 0.0)) / (2 * rho))
        g1, g0 = _log_sinh_ratio(t + 1, psi), _log_sinh_ratio(t, psi)
        over = (
            dev_x * (np.exp(log_decay + 2 * g1) + beta * np.exp(log_decay + 2 * g0))
            - 2 * sign * rho * dev_c * np.exp(log_decay + g1 + g0)
        )
        # underdamped (and critical): bounded ratios sin(nφ)/sin φ, or n
        sin_phi = np.sqrt(np.maximum(-disc, 0.0)) / (2 * rho)
        phi = np.arctan2(np.sqrt(np.maximum(-disc, 0.0)), np.abs(a))
        r1 = np.where(sin_phi > 0, np.sin((t + 1) * phi) / np.where(sin_phi > 0, sin_phi, 1.0), t + 1)
        r0 = np.where(sin_phi > 0, np.sin(t * phi) / np.where(sin_phi > 0, sin_phi, 1.0), t)
        under = np.exp(log_decay) * (dev_x * (r1 * r1 + beta * r0 * r0) - 2 * sign * rho * dev_c * r1 * r0)
    return x_inf + np.where(disc > 0, over, under)


def ema_variance(lam, noise_var, v0, gamma: float, t):
    """``E[y_t²]`` of the iterate EMA ``y_{t+1} = γy_t + (1 − γ)x_{t+1}`` over SGD ``x_{t+1} = ux_t − n_t``.

    u = 1 − λ and y_0 = x_0. Noise-free, ``y_t = (1 − γ)u D_t x_0 + γ^t y_0`` with the divided difference
    ``D_t = (u^t − γ^t)/(u − γ)``; the stationary moments are ``X∞ = q/(λ(2 − λ))``,
    ``C∞ = E[x y] = (1 − γ)X∞/(1 − γu)`` and ``Y∞ = ((1 − γ)²X∞ + 2γ(1 − γ)uC∞)/(1 − γ²)``. ``D_t`` is
    formed as ``m^{t−1}·expm1(t log r)/expm1(log r)`` (m = max(u, γ), r = min/max) when u > 0, so nothing
    cancels when u ≈ γ. Integer ``t`` (u^t changes sign when u < 0); needs 0 < γ < 1, 0 < λ < 2.
    """
    lam, q, v0, t = (np.asarray(a, dtype=np.float64) for a in (lam, noise_var, v0, t))
    u = 1.0 - lam
    x_inf = q / (lam * (2.0 - lam))
    c_inf = (1 - gamma) * x_inf / (1 - gamma * u)
    y_inf = ((1 - gamma) ** 2 * x_inf + 2 * gamma * (1 - gamma) * u * c_inf) / (1 - gamma**2)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        pos = u > 0
        u_pos = np.where(pos, u, 1.0)
        log_r = -np.abs(np.log1p((1 - gamma - lam) / gamma))  # log(min/max) of (u, γ), exact near u = γ
        log_m = np.maximum(np.log(u_pos), np.log(gamma))
        ratio = np.where(log_r == 0, t, np.expm1(t * log_r) / np.where(log_r == 0, 1.0, np.expm1(log_r)))
        d_pos = np.exp((t - 1) * log_m) * ratio
        d_neg = (np.sign(u) ** t * np.abs(u) ** t - gamma**t) / (u - gamma)
        coef_x = (1 - gamma) * u * np.where(pos, d_pos, d_neg)
        coef_y = gamma**t
        return (
            y_inf
            + coef_x**2 * (v0 - x_inf)
            + 2 * coef_x * coef_y * (v0 - c_inf)
            + coef_y**2 * (v0 - y_inf)
        )
