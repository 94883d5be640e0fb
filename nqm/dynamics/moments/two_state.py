"""Closed-form second moments of one coordinate under heavy-ball momentum, iterate averaging, and any stable
two-state linear optimiser (Nesterov's momentum).

Per coordinate of H's basis (λ = ε·p·h, injected noise variance q = ε²p²c/B) the iterate obeys a linear
recursion driven by white noise. Its second moment is the stationary value plus the homogeneous
propagation of the initial deviation from it: if ``x_t = a_t x_0 + b_t y_0`` solves the noise-free
recursion from the state (x_0, y_0), then, for any initial second moments,

.. math:: \\mathbb E[x_t^2] = X_\\infty + a_t^2 (V_0 - X_\\infty) + 2a_tb_t(V_0 - C_\\infty) + b_t^2(V_0 - Y_\\infty)

(the moment map is linear, and the stationary covariance is its fixed point). Each form is O(1) per
coordinate and step, against O(log t) matrix products for powering the moment map
(``nqm.dynamics.moments.expected.powered_second_moments``), which the tests use as an oracle beside step-by-step
recursions.

References: Zhang et al. 2019 (arXiv:1907.04164), §3 and App. A (momentum and EMA on the NQM).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "stable_two_state",
    "ema_variance",
    "ema_stationary",
    "EmaMoments",
    "TwoStateMoments",
    "two_state_stationary",
]


def stable_two_state(f) -> bool:
    """Both eigenvalues of every 2 × 2 F inside the unit circle (Jury: |det F| < 1, |tr F| < 1 + det F)."""
    trace, det = f[:, 0, 0] + f[:, 1, 1], f[:, 0, 0] * f[:, 1, 1] - f[:, 0, 1] * f[:, 1, 0]
    return bool(np.all((np.abs(det) < 1) & (np.abs(trace) < 1 + det)))


def ema_stationary(lam, noise_var, gamma):
    """Stationary (X∞, C∞, Y∞) = E[x²], E[xy], E[y²] of SGD x with its EMA y (see :func:`ema_variance`)."""
    x_inf = noise_var / (lam * (2.0 - lam))
    c_inf = (1 - gamma) * x_inf / (1 - gamma * (1 - lam))
    y_inf = ((1 - gamma) ** 2 * x_inf + 2 * gamma * (1 - gamma) * (1 - lam) * c_inf) / (1 - gamma**2)
    return x_inf, c_inf, y_inf


def ema_variance(lam, noise_var, v0, gamma, t):
    """``E[y_t²]`` of the iterate EMA ``y_{t+1} = γy_t + (1 − γ)x_{t+1}`` over SGD ``x_{t+1} = ux_t − n_t``.

    u = 1 − λ and y_0 = x_0. Noise-free, ``y_t = (1 − γ)u D_t x_0 + γ^t y_0`` with the divided difference
    ``D_t = (u^t − γ^t)/(u − γ)``; the stationary moments are ``X∞ = q/(λ(2 − λ))``,
    ``C∞ = E[x y] = (1 − γ)X∞/(1 − γu)`` and ``Y∞ = ((1 − γ)²X∞ + 2γ(1 − γ)uC∞)/(1 − γ²)``. ``D_t`` is
    formed as ``m^{t−1}·expm1(t log r)/expm1(log r)`` (m = max(u, γ), r = min/max) when u > 0, so nothing
    cancels when u ≈ γ. Integer ``t`` (u^t changes sign when u < 0); needs 0 < γ < 1, 0 < λ < 2.
    """
    return EmaMoments(lam, noise_var, v0, gamma).at(t)


class EmaMoments:
    """:func:`ema_variance` with everything that does not depend on t computed once."""

    def __init__(self, lam, noise_var, v0, gamma):
        lam, q, v0, gamma = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (lam, noise_var, v0, gamma)))
        self.u = 1.0 - lam
        self.lam, self.gamma, self.v0 = lam, gamma, v0
        self.stationary = ema_stationary(lam, q, gamma)
        x_inf, c_inf, self.y_inf = self.stationary
        self.dev = (v0 - x_inf, v0 - c_inf, v0 - self.y_inf)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.pos = self.u > 0
            self.log_r = -np.abs(np.log1p((1 - gamma - lam) / gamma))  # log(min/max) of (u, γ), exact at u ≈ γ
            self.log_m = np.maximum(np.log(np.where(self.pos, self.u, 1.0)), np.log(gamma))
            self.inv_expm1 = np.where(self.log_r == 0, 1.0, 1.0 / np.expm1(self.log_r))
            self.log_gamma = np.log(gamma)
            self.log_abs_u = np.log(np.abs(self.u))

    def coefficients(self, t):
        """``(a_t, b_t)`` with ``y_t = a_t x_0 + b_t y_0`` noise-free: ``a_t = (1 − γ)u D_t``, ``b_t = γ^t``, at
        integer ``t`` broadcasting against the coordinates' shape."""
        t = np.asarray(t, dtype=np.float64)
        u, gamma = self.u, self.gamma
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            coef_y = np.exp(t * self.log_gamma)
            ratio = np.where(self.log_r == 0, t, np.expm1(t * self.log_r) * self.inv_expm1)
            d_pos = np.exp((t - 1) * self.log_m) * ratio
            parity = np.where(np.mod(t, 2) == 1, -1.0, 1.0)
            abs_u_t = np.where(t == 0, 1.0, np.exp(t * self.log_abs_u))  # 0⁰ = 1 at λ = 1 (u = 0)
            d_neg = (np.where(u < 0, parity, 1.0) * abs_u_t - coef_y) / (u - gamma)
            coef_x = (1 - gamma) * u * np.where(self.pos, d_pos, d_neg)
        return coef_x, coef_y

    def at(self, t):
        """E[y_t²] at integer ``t`` broadcasting against the coordinates' shape."""
        coef_x, coef_y = self.coefficients(t)
        dx, dc, dy = self.dev
        with np.errstate(invalid="ignore", over="ignore"):
            return self.y_inf + coef_x * coef_x * dx + 2 * coef_x * coef_y * dc + coef_y * coef_y * dy

    def lower_bound(self, first: float, last: float) -> np.ndarray:
        r"""Per coordinate, a lower bound of E[y_t²] over the integers t in [first, last] (first ≤ last).

        :math:`\mathbb E[y_t^2] = V_0 g_t^2 + N_t` with :math:`g_t = a_t + b_t` (:meth:`coefficients`; the
        noise-free response to the start y₀ = x₀) and :math:`N_t = Y_\infty - (a_t^2X_\infty + 2a_tb_tC_\infty +
        b_t^2Y_\infty)`, the noise injected so far, which grows with t; so the bound is
        :math:`V_0\min g^2 + N_{first}`. Summing the geometric series,
        :math:`g_t = ((1-\gamma)u^{t+1} - \lambda\gamma^{t+1})/(u-\gamma)`. For 0 ≤ u the EMA of the decaying
        :math:`x_t = u^t x_0` is a positive average that decreases, so the smallest g is g_last. For u < 0 both
        terms decay in modulus, so :math:`|g_t|` is at least the larger of each term at ``last`` less the other at
        ``first``. Both parts are lowered by 1e-12 of their terms' magnitudes and the result shrunk by 1e-9
        relative, far more than the rounding of :meth:`at`, so that it stays below the value that computes.
        """
        a_first, b_first = self.coefficients(np.float64(first))
        a_last, b_last = self.coefficients(np.float64(last))
        x_inf, c_inf, y_inf = self.stationary  # (x, y) ordered as the coefficients (a, b)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            g_last = (a_last + b_last) * (1 - 1e-12)
            lam, gamma, gap = self.lam, self.gamma, np.abs(self.u - self.gamma)
            # u < 0: the modes (1 − γ)|u|^{t+1}/|u − γ| and λγ^{t+1}/|u − γ|, each decreasing with t
            mode_u = [(1 - gamma) * np.exp((k + 1) * self.log_abs_u) / gap for k in (first, last)]
            mode_g = [lam * np.exp((k + 1) * self.log_gamma) / gap for k in (first, last)]
            apart = np.maximum(mode_u[1] - mode_g[0], mode_g[1] - mode_u[0]) - 1e-12 * (mode_u[0] + mode_g[0])
            g_min = np.where(self.u >= 0, g_last, apart)
            return _start_and_noise_bound(self.v0, g_min, y_inf, (a_first, b_first), (x_inf, c_inf, y_inf))


class TwoStateMoments:
    r"""``E[x_t²]`` of the first component of any stable two-state linear recursion ``s' = F s + u z``.

    With ``s₀ = e·x₀`` (``E x₀² = V₀``), the stationary covariance ``S∞`` (the fixed point of
    ``S ← FSFᵀ + uuᵀ``) and ``D = V₀eeᵀ − S∞``, the deviation propagates as ``F^t D F^{tᵀ}``. By
    Cayley–Hamilton ``F^t = P_t F − δP_{t−1} I`` with δ = det F and ``P_n = (μ₁ⁿ − μ₂ⁿ)/(μ₁ − μ₂)`` over F's
    eigenvalues, so with ``r_t = e₀ᵀF^t = (P_tF₀₀ − δP_{t−1}, P_tF₀₁)``

    .. math:: \mathbb E[x_t^2] = X_\infty + r_t D r_t^\top .

    ``P_n`` is formed without cancellation: ``μ₁^{n−1}(1 − rⁿ)/(1 − r)`` with r = μ₂/μ₁ (|r| ≤ 1, and
    ``expm1(n log r)/expm1(log r)`` when 0 < r, so nothing cancels near critical damping) for real roots,
    ``m^{n−1} sin(nφ)/sin φ`` for complex ones, ``nμ^{n−1}`` at a double root. This covers Nesterov's
    momentum (whose noise enters both components, so heavy ball's AR(2) form does not apply); the tests hold it
    against the powered moment map and a step-by-step recursion. Arrays broadcast; integer ``t``.
    """

    def __init__(self, f, u, v0, e):
        f = np.asarray(f, dtype=np.float64)
        u = np.asarray(u, dtype=np.float64)
        f00, f01, f10, f11 = f[..., 0, 0], f[..., 0, 1], f[..., 1, 0], f[..., 1, 1]
        s_inf = two_state_stationary(f, u)
        self.x_inf = s_inf[..., 0]
        v0 = np.asarray(v0, dtype=np.float64)
        e0, e1 = (np.asarray(x, dtype=np.float64) for x in e)  # numbers, or arrays broadcasting with the rest
        self.v00 = v0 * e0 * e0
        self.dev = (v0 * e0 * e0 - s_inf[..., 0], v0 * e0 * e1 - s_inf[..., 1], v0 * e1 * e1 - s_inf[..., 2])
        self.f00, self.f01 = f00, f01
        self.v0, self.e, self.s_inf = v0, (e0, e1), s_inf
        tau, self.delta = f00 + f11, f00 * f11 - f01 * f10
        disc = tau * tau - 4 * self.delta
        with np.errstate(divide="ignore", invalid="ignore"):
            root = np.sqrt(np.abs(disc))
            sign_tau = np.where(tau < 0, -1.0, 1.0)
            self.real = disc > 0
            mu1 = 0.5 * (tau + sign_tau * root)  # the root of larger modulus
            self.log_abs_mu1 = np.log(np.abs(mu1))
            self.neg_mu1 = mu1 < 0
            self.pos_r = self.delta > 0  # r = μ₂/μ₁ = δ/μ₁²
            self.log_r = np.log1p(-root / np.abs(mu1))  # log r = log(1 − √disc/|μ₁|) when r > 0
            self.r = self.delta / (mu1 * mu1)
            self.inv_expm1 = np.where(self.log_r == 0, 1.0, 1.0 / np.expm1(self.log_r))
            # complex pair m e^{±iφ}, m = √δ; a double root μ = τ/2 when disc = 0
            self.log_m = 0.5 * np.log(np.abs(self.delta))
            self.phi = np.arctan2(root, tau)
            self.sin_phi = np.sin(self.phi)
            self.double = disc == 0
            self.log_abs_half_tau = np.log(np.abs(0.5 * tau))
            self.neg_tau = tau < 0
        self.shape = np.broadcast_shapes(*(np.shape(x) for x in (self.x_inf, self.v00, *self.dev, tau)))
        self._cached_kinds = None

    def _p(self, n):
        """P_n for integer n ≥ 0 (array broadcasting against the coordinates): every form, each selected where
        it holds."""
        const = _form_constants(self)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            pos, neg, double, complex_ = (_p_by_form(form, n, const) for form in ("pos", "neg", "double", "complex"))
        return np.where(self.real, np.where(self.pos_r, pos, neg), np.where(self.double, double, complex_))

    def row(self, t):
        """``r_t = e₀ᵀF^t`` as its two components at integer ``t``: the first component after t steps of the
        noise-free recursion, per unit of each starting component."""
        t = np.asarray(t, dtype=np.float64)
        p_t, p_prev = self._p(t), self._p(np.maximum(t - 1, 0))
        return np.where(t == 0, 1.0, p_t * self.f00 - self.delta * p_prev), np.where(t == 0, 0.0, p_t * self.f01)

    def at(self, t):
        """E[x_t²] at integer ``t`` broadcasting against the coordinates' shape.

        Where t broadcasts against the coordinates without adding to them (one t per row, or steps × the
        coordinates: the solvers' cases), each coordinate's ``P_n`` is formed by its own form only (real roots
        with 0 < r or r < 0, a double root, a complex pair), with the same arithmetic; otherwise all forms are
        evaluated everywhere and selected."""
        t = np.asarray(t, dtype=np.float64)
        shape = np.broadcast_shapes(t.shape, self.shape)
        if shape[len(shape) - len(self.shape) :] == self.shape:
            return self._at_by_form(t, shape)
        r0, r1 = self.row(t)
        dx, dc, dy = self.dev
        with np.errstate(over="ignore", invalid="ignore"):
            out = self.x_inf + r0 * r0 * dx + 2 * r0 * r1 * dc + r1 * r1 * dy
        return np.where(t == 0, self.v00, out)

    def _at_by_form(self, t, shape):
        width = int(np.prod(self.shape))
        tt = np.broadcast_to(t, shape).reshape(-1, width)
        out = np.empty(tt.shape)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for columns, form, const in self._kinds():
                n = tt[:, columns]
                p_t, p_prev = (_p_by_form(form, k, const) for k in (n, np.maximum(n - 1, 0)))
                f00, f01, delta, x_inf, dx, dc, dy, v00 = const[-8:]
                r0 = np.where(n == 0, 1.0, p_t * f00 - delta * p_prev)
                r1 = np.where(n == 0, 0.0, p_t * f01)
                value = x_inf + r0 * r0 * dx + 2 * r0 * r1 * dc + r1 * r1 * dy
                out[:, columns] = np.where(n == 0, v00, value)
        return out.reshape(shape)

    def lower_bound(self, first: float, last: float) -> np.ndarray:
        r"""Per coordinate, a lower bound of E[x_t²] over the integers t in [first, last] (first ≤ last).

        :math:`\mathbb E[x_t^2] = V_0 g_t^2 + N_t` with :math:`g_t = r_t e` (the noise-free response to the
        start) and :math:`N_t = \sum_{j<t} (e_0^\top F^j u)^2 = X_\infty - r_t S_\infty r_t^\top`, which grows
        with t; so the bound is :math:`V_0 \min g^2 + N_{first}`. For t ≥ 1, :math:`g_t = \alpha P_t - \gamma
        P_{t-1}` (α = F₀₀e₀ + F₀₁e₁, γ = δe₀): for a complex pair :math:`m e^{\pm i\phi}`,
        :math:`g_t = m^{t-1} R \sin(t\phi + \theta)/\sin\phi`, smallest at an end of the phase interval
        unless that holds a zero; for real roots :math:`g_t = c_1\mu_1^{t-1} + c_2\mu_2^{t-1}`, at least
        :math:`|c_1||\mu_1|^{t-1} - |c_2||\mu_2|^{t-1}`; at a double root 0 is taken; g₀ = e₀. Both parts are
        lowered by 1e-12 of their terms' magnitudes and the result shrunk by 1e-9 relative, far more than the
        rounding of :meth:`at`, so that it stays below the value that computes.
        """
        e0, e1 = self.e
        alpha, gamma = self.f00 * e0 + self.f01 * e1, self.delta * e0
        k_first, k_last = max(first, 1) - 1, last - 1  # powers t − 1 at the interval's ends (from t = 1)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # complex pair: g_t = m^{t−1}[(α − me₀cos φ) sin tφ + me₀ sin φ cos tφ]/sin φ
            m = np.exp(self.log_m)
            a1, a2 = alpha - m * e0 * np.cos(self.phi), m * e0 * self.sin_phi
            theta = np.arctan2(a2, a1)
            lo, hi = (k_first + 1) * self.phi + theta, (k_last + 1) * self.phi + theta
            zero_inside = np.floor(hi / np.pi) >= np.ceil(lo / np.pi)
            ends = np.minimum(np.abs(np.sin(lo)), np.abs(np.sin(hi)))
            decay = np.minimum(_power(self.log_m, k_first), _power(self.log_m, k_last))
            g_complex = np.where(zero_inside, 0.0, np.hypot(a1, a2) / self.sin_phi * decay * ends * (1 - 1e-12))
            # real roots μ₁ (the larger modulus) and μ₂ = rμ₁
            mu1 = np.where(self.neg_mu1, -1.0, 1.0) * np.exp(self.log_abs_mu1)
            mu2 = self.r * mu1
            c1, c2 = (alpha * mu1 - gamma) / (mu1 - mu2), -(alpha * mu2 - gamma) / (mu1 - mu2)
            log_abs_mu2 = np.log(np.abs(mu2))
            big = np.abs(c1) * np.minimum(_power(self.log_abs_mu1, k_first), _power(self.log_abs_mu1, k_last))
            small = np.abs(c2) * np.maximum(_power(log_abs_mu2, k_first), _power(log_abs_mu2, k_last))
            g_real = big - small - 1e-12 * (big + small)
            g_min = np.where(self.real, g_real, np.where(self.double, 0.0, g_complex))
            if first == 0:
                g_min = np.abs(e0) if last == 0 else np.minimum(g_min, np.abs(e0))
            s_inf = tuple(self.s_inf[..., i] for i in range(3))
            return _start_and_noise_bound(self.v0, g_min, self.x_inf, self.row(np.float64(first)), s_inf)

    def _kinds(self):
        """[(columns, form, their constants)] per form of ``P_n`` among the flattened coordinates (cached)."""
        if self._cached_kinds is None:
            flat = [np.broadcast_to(x, self.shape).ravel() for x in _form_constants(self)]
            real, pos_r, double = (np.broadcast_to(x, self.shape).ravel() for x in (self.real, self.pos_r, self.double))
            masks = {"pos": real & pos_r, "neg": real & ~pos_r, "double": ~real & double, "complex": ~real & ~double}
            self._cached_kinds = [
                (columns, form, [x[columns] for x in flat])
                for form, mask in masks.items()
                if (columns := np.flatnonzero(mask)).size
            ]
        return self._cached_kinds


def _start_and_noise_bound(v0, g_min, level, row, s_inf):
    r"""The closing step of the two-state lower bounds: :math:`V_0 g_{min}^2 + N_{first}` with the noise part
    :math:`N = X_\infty - r S_\infty r^\top` at the interval's start (``row`` = r = (r₀, r₁), ``s_inf`` = the
    stationary (S₀₀, S₀₁, S₁₁), ``level`` = X∞ = S₀₀ of the component the loss reads), lowered by 1e-12 of its
    terms' magnitudes; g_min clipped to ≥ 0 (0 where not finite); the sum shrunk by 1e-9 relative."""
    r0, r1 = row
    terms = (r0 * r0 * s_inf[0], 2 * r0 * r1 * s_inf[1], r1 * r1 * s_inf[2])
    with np.errstate(invalid="ignore", over="ignore"):
        g_min = np.where(np.isfinite(g_min), np.maximum(g_min, 0.0), 0.0)
        noise = level - sum(terms) - 1e-12 * (np.abs(level) + sum(np.abs(x) for x in terms))
        bound = np.maximum(noise, 0.0) + v0 * g_min * g_min
    return np.where(np.isfinite(bound), bound, 0.0) * (1 - 1e-9)


def _form_constants(m):
    """The per-coordinate constants :func:`_p_by_form` and the per-row path read, in their order."""
    return (
        m.log_abs_mu1, m.neg_mu1, m.log_r, m.inv_expm1, m.r, m.log_m, m.phi, m.sin_phi, m.log_abs_half_tau, m.neg_tau,
        m.f00, m.f01, m.delta, m.x_inf, *m.dev, m.v00,
    )  # fmt: skip


def _p_by_form(form: str, n, const):
    """``P_n`` in one of its forms (``"pos"``/``"neg"``: real roots with 0 < r or r < 0, ``"double"``,
    ``"complex"``; see :class:`TwoStateMoments`), for coordinates whose constants ``const`` are in the order of
    :func:`_form_constants`."""
    log_abs_mu1, neg_mu1, log_r, inv_expm1, r, log_m, phi, sin_phi, log_abs_half_tau, neg_tau = const[:10]
    k = n - 1
    if form == "complex":
        out = _power(log_m, k) * np.sin(n * phi) / sin_phi
    else:
        parity = np.where(np.mod(n - 1, 2) == 1, -1.0, 1.0)
        if form == "double":
            out = n * _power(log_abs_half_tau, k) * np.where(neg_tau, parity, 1.0)
        else:
            lead = _power(log_abs_mu1, k) * np.where(neg_mu1, parity, 1.0)
            if form == "pos":
                ratio = np.where(log_r == 0, n, np.expm1(n * log_r) * inv_expm1)
            else:
                r_n = np.where(np.mod(n, 2) == 1, -1.0, 1.0) * np.exp(n * np.log(np.abs(r)))
                ratio = (1 - r_n) / (1 - r)
            out = lead * ratio
    return np.where(n == 0, 0.0, out)


def _power(log_abs, k):
    """|x|^k from log|x| for integer k ≥ 0, with 0⁰ = 1."""
    return np.where(k == 0, 1.0, np.exp(k * log_abs))


def two_state_stationary(f, u):
    """Stationary (E x², E xy, E y²), stacked on the last axis, of ``s' = F s + u z``: the solution of
    ``(I − M) S = w`` with M the map of ``S ← FSFᵀ`` on the three moments and w = (u₀², u₀u₁, u₁²), by Cramer's
    rule elementwise (many tiny systems at once); inf where I − M is singular (at the stability edge)."""
    f00, f01, f10, f11 = f[..., 0, 0], f[..., 0, 1], f[..., 1, 0], f[..., 1, 1]
    u0, u1 = u[..., 0], u[..., 1]
    a = (
        (1 - f00 * f00, -2 * f00 * f01, -f01 * f01),
        (-f00 * f10, 1 - f00 * f11 - f01 * f10, -f01 * f11),
        (-f10 * f10, -2 * f10 * f11, 1 - f11 * f11),
    )
    w = (u0 * u0, u0 * u1, u1 * u1)

    def det(m):
        return (
            m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
        )

    d = det(a)
    cols = []
    for j in range(3):
        m = [[w[i] if k == j else a[i][k] for k in range(3)] for i in range(3)]
        with np.errstate(divide="ignore", invalid="ignore"):
            cols.append(np.where(d == 0, np.inf, det(m) / np.where(d == 0, 1.0, d)))
    return np.stack(cols, axis=-1)
