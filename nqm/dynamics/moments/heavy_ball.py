r"""The second moment of one coordinate under heavy-ball momentum, in closed form and without cancellation.

Per coordinate (λ = ε·p·h, injected noise variance q) heavy ball is the AR(2) recursion
``x_{t+1} = (1 + β − λ)x_t − βx_{t−1} − n_t`` with ``x_{−1} = x_0``. Its characteristic roots are
``r₁,₂ = σρe^{±ψ}`` (ρ = √β, σ = sign(1 + β − λ), ψ real when overdamped, ψ = iφ when underdamped, 0 at
critical damping), and the noise-free solution started from ``x_{j−1} = 0, x_j = 1`` is
``U_k = (σρ)^k R_{k+1}`` with ``R_n = sinh(nψ)/sinh ψ``. Since x₀ and the noise are independent,

.. math:: \mathbb E[x_t^2] = V_0 W_t^2 + q S_t, \qquad W_t = U_t - \beta U_{t-1}, \qquad
          S_t = \sum_{j=0}^{t-1} U_j^2 = \sum_{j=1}^{t} \beta^{\,j-1} R_j^2 .

The classic form ``X∞ + (deviation from X∞)·(decaying terms)`` subtracts two numbers of size X∞ ∝ 1/(1 − β)
whenever the run is young compared with its relaxation time; near β → 1 at critical damping that loses
eleven digits at β = 1 − 10⁻⁶. Here each piece is formed where it is accurate:

* ``W_t = (σρ)^t [cosh tψ + κR_t]``, κ = (1 − β − λ)/(2σρ) (from ``U_t − r₂U_{t−1} = r₁^t``): a sum of
  positive terms wherever the roots are real.
* ``S_t`` by the first of four forms whose rounding is small (each estimates its own condition; the forward
  form is tried first for overdamped coordinates, the backward one for the others):

  1. backward, ``S∞ − Σ_{j≥t} U_j²`` (the classic form; good once t is comparable with the relaxation time,
     unless the roots nearly coincide: then its terms grow like t² and cancel);
  2. forward, a second difference of ``G(u) = Σ_{j=1}^t e^{ju}``:
     ``S_t = Δ²G(log β; 2ψ) / (4β sinh²ψ)`` (good once the two roots differ on the scale of 1/t and of
     log β);
  3. backward split at the geometric mean r = σρ of the roots: with ``V_i = U_i − rU_{i−1} =
     r^i cosh((i + ½)ψ)/cosh(ψ/2)``, ``U_{t+i} = U_tV_i + rV_tU_{i−1}``, so the tail is
     ``U_t²A + 2rU_tV_tB + βV_t²S∞`` with A = ΣV_i², B = ΣV_iU_{i−1}, whose terms are all positive near
     critical damping;
  4. otherwise ``t·|log β|`` and ``t·|ψ|`` are both small, and ``S_t`` is a double series in (t log β, t²ψ²) over the
     power sums ``Σ j^p`` (Faulhaber), or, for t ≤ 8, the sum itself.

The tests hold it at 10⁻⁹ against exact rational and 60-digit decimal recursions.

References: Zhang et al. 2019 (arXiv:1907.04164), §3 and App. A (heavy ball on the NQM).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb, factorial

import numpy as np

__all__ = ["heavy_ball_variance", "heavy_ball_stationary", "HeavyBallMoments"]

#: Largest accepted condition (sum of absolute terms over the result) of forms 1–3: rounding then costs at most
#: about 10⁴·10⁻¹⁶ relative.
MAX_CONDITION = 1e4
#: Up to this many steps form 4 adds up the terms themselves (Faulhaber's sums lose digits at small t: 1% at
#: t = 1 for the 35th power, none measurable from t = 8).
DIRECT_STEPS = 8
#: Form 4's series is used where t·|log β| and t·|ψ| are at most this; its orders below are chosen so that
#: the first omitted term is under 10⁻¹⁸ there (0.5¹⁷/17! and s₈·(¼)⁸).
SERIES_RADIUS = 0.5
SERIES_N = 17  # powers of t·log β
SERIES_K = 8  # powers of t²ψ²


def heavy_ball_stationary(lam, noise_var, beta):
    """Stationary ``X∞ = (1 + β)q/((1 − β)λ(2(1 + β) − λ))`` of heavy ball (the AR(2) variance); stable iff
    0 < λ < 2(1 + β). The edge distance is formed as (2 − λ) + 2β, exact up to one rounding (2(1 + β) would
    round 1 + β first, an error of 10⁻⁷ relative at λ = 4 − 2·10⁻⁹)."""
    return (1 + beta) * noise_var / ((1 - beta) * lam * ((2 - lam) + 2 * beta))


def heavy_ball_variance(lam, noise_var, v0, beta, t):
    r"""``E[x_t²]`` of heavy-ball momentum ``x_{t+1} = (1 + β − λ)x_t − βx_{t−1} − n_t``, ``x_{−1} = x_0``.

    .. math:: \mathbb E[x_t^2] = V_0 W_t^2 + q S_t

    with the homogeneous response ``W_t`` and the accumulated noise ``S_t = Σ_{j<t} U_j²`` of
    :mod:`nqm.dynamics.moments.heavy_ball`, each formed without cancellation (also near β → 1 at critical damping).
    Integer ``t`` (as floats or integers); needs 0 < β < 1 and 0 < λ < 2(1 + β) (a stable run); arrays
    broadcast.
    """
    return HeavyBallMoments(lam, noise_var, v0, beta).at(t)


class HeavyBallMoments:
    """:func:`heavy_ball_variance` with everything that does not depend on t computed once.

    ``at(t)`` then costs four transcendental functions per coordinate and step where the first form tried is
    accurate (the solvers call it many times): the forward form for overdamped coordinates (most of a
    spectrum's small-λ tail), the backward form for underdamped ones; the others only where those cancel.
    """

    def __init__(self, lam, noise_var, v0, beta):
        lam, q, v0, beta = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (lam, noise_var, v0, beta)))
        self.shape = lam.shape
        self.q, self.v0 = q, v0
        rho = np.sqrt(beta)
        a = 1.0 + beta - lam
        sign = np.where(a < 0, -1.0, 1.0)
        # (1+β−λ)² − 4β as a product, with 1 − ρ = (1 − β)/(1 + ρ): nothing cancels near critical damping
        disc = (lam - ((1 - beta) / (1 + rho)) ** 2) * (lam - (1 + rho) ** 2)
        s_inf = heavy_ball_stationary(lam, 1.0, beta)
        c_inf = a * s_inf / (1 + beta)  # E[x_t x_{t−1}]/q when stationary
        kappa = (1 - beta - lam) / (2 * sign * rho)
        c = np.log(beta)
        self.over = disc > 0
        self._cached_sides = self._cached_row_sides = None
        # each side's constants are computed and kept for its own coordinates only (columns of the flattened
        # shape): half the transcendental functions and a third of the memory of full tables for both sides
        over = self.over.ravel()
        self._columns = (_columns(over), _columns(~over))
        psi_sq = np.empty(over.size)
        self._tables, self._full = [None, None], [None, None]
        flat = [np.ravel(x) for x in (disc, rho, beta, a, sign, s_inf, c_inf, kappa, c)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self._columns[0] is not None:
                disc_o, rho_o, beta_o, _, sign_o, s_inf_o, c_inf_o, kappa_o, c_o = (x[self._columns[0]] for x in flat)
                psi = np.arcsinh(np.sqrt(disc_o) / (2 * rho_o))
                psi_sq[self._columns[0]] = psi * psi
                # forward: G(u) = expm1(tu)·e^u/expm1(u) at u = c + h, c, c − h (h = 2ψ); backward, with
                # A_n = 1 − e^{−nh}, D = 1 − e^{−h}, E = |r₁|^{2t} = e^{t(c + h)}: ρ^{2t}R_{t+1}² = E·A_{t+1}²/D²,
                # βρ^{2t}R_t² = E·βe^{−h}A_t²/D², ρ^{2t+1}R_{t+1}R_t = E·ρe^{−ψ}A_{t+1}A_t/D²;
                # W_t² = E·(1 − A_t/2 + κe^{−ψ}A_t/D)²
                h = 2 * psi
                d, e_h, e_psi = -np.expm1(-h), np.exp(-h), np.exp(-psi)
                self._tables[0] = np.stack(
                    [h, c_o, *(np.exp(x) / np.expm1(x) for x in (c_o + h, c_o, c_o - h))]
                    + [np.exp(-c_o) / (4 * np.sinh(psi) ** 2), s_inf_o, s_inf_o / d**2, s_inf_o * beta_o * e_h / d**2]
                    + [2 * sign_o * rho_o * e_psi * c_inf_o / d**2, kappa_o * e_psi / d, d, e_h]
                )
            if self._columns[1] is not None:
                disc_u, rho_u, beta_u, a_u, sign_u, s_inf_u, c_inf_u, kappa_u, c_u = (x[self._columns[1]] for x in flat)
                root = np.sqrt(-disc_u)
                phi = np.arctan2(root, np.abs(a_u))  # ψ = iφ
                psi_sq[self._columns[1]] = -phi * phi
                # underdamped and critical, backward: R_n = sin(nφ)/sin φ (n when φ = 0); W_t = ρ^t(cos tφ + κR_t)
                # (κ/sin φ kept); forward as above with h = 2iφ, where G(c + h) + G(c − h) = 2 Re G(c + 2iφ)
                critical = disc_u == 0
                sin_phi = root / (2 * rho_u)
                s2 = np.where(critical, 1.0, sin_phi**2)
                g_plus = np.exp(c_u + 2j * phi) / np.expm1(c_u + 2j * phi)
                self._tables[1] = np.stack(
                    [phi, c_u, s_inf_u, s_inf_u / s2, beta_u * s_inf_u / s2, 2 * sign_u * rho_u * c_inf_u / s2]
                    + [kappa_u * np.where(critical, 1.0, 1.0 / sin_phi), critical, g_plus.real, g_plus.imag]
                    + [np.exp(c_u) / np.expm1(c_u), -np.exp(-c_u) / (4 * sin_phi**2), np.cos(phi), np.sin(phi)]
                )
        # the near-critical forms need only (c, ψ², σ)
        self.near_critical = np.stack([c, psi_sq.reshape(self.shape), sign])

    @property
    def overdamped(self):
        """The overdamped constants as a (13, *shape) table (NaN at underdamped coordinates)."""
        return self._full_table(0, 13)

    @property
    def underdamped(self):
        """The underdamped constants as a (14, *shape) table (NaN at overdamped coordinates)."""
        return self._full_table(1, 14)

    def _full_table(self, side: int, rows: int):
        if self._full[side] is None:
            table = np.full((rows, int(np.prod(self.shape))), np.nan)
            if self._columns[side] is not None:
                table[:, self._columns[side]] = self._tables[side]
            self._full[side] = table.reshape((rows, *self.shape))
        return self._full[side]

    def at(self, t):
        """E[x_t²] at integer ``t`` broadcasting against the coordinates' shape."""
        t = np.asarray(t, dtype=np.float64)
        if len(self.shape) > 1 and t.shape == self.shape[:-1] + (1,):
            return self._at_one_step_per_row(t)
        w_sq, noise = self.parts(t)
        q = np.broadcast_to(self.q, w_sq.shape)
        return np.broadcast_to(self.v0, w_sq.shape) * w_sq + np.where(q == 0, 0.0, q * noise)

    def _at_one_step_per_row(self, t):
        """:meth:`at` for one ``t`` per row (the solvers' case), with the same arithmetic: each side's steps,
        initial variances and noise variances are gathered once per object, so a call gathers only ``t``."""
        out = np.empty(self.v0.size)  # v0 is broadcast to the coordinates' shape
        t_rows = t.ravel()
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for columns, rows, evaluate, row_of, v0, q, near_critical in self._row_sides():
                tt = t_rows[row_of][None, :]
                noise, bad, w_sq = evaluate(tt, rows)
                bad &= tt > 0
                if bad.any():
                    noise[bad] = _near_critical_noise_sum(tt[bad], *near_critical[:, bad[0]])
                noise = np.where(tt == 0, 0.0, noise)[0]
                out[columns] = v0 * w_sq[0] + np.where(q == 0, 0.0, q * noise)
        return out.reshape(self.shape)

    def _row_sides(self):
        """:meth:`_sides` for the coordinates' own shape, each with its columns' row, V₀, q and near-critical
        constants (cached)."""
        if self._cached_row_sides is None:
            width = self.shape[-1]
            v0, q = (np.broadcast_to(x, self.shape).ravel() for x in (self.v0, self.q))
            near_critical = _per_coordinate(self.near_critical, self.shape)
            self._cached_row_sides = [
                (columns, rows, evaluate, np.arange(v0.size)[columns] // width, v0[columns], q[columns],
                 near_critical[:, columns])
                for columns, rows, evaluate in self._sides(self.shape)
            ]  # fmt: skip
        return self._cached_row_sides

    def parts(self, t):
        """(W_t², S_t) at integer ``t`` broadcasting against the coordinates' shape: E[x_t²] = V₀W_t² + qS_t."""
        t = np.asarray(t, dtype=np.float64)
        shape = np.broadcast_shapes(t.shape, self.shape)
        coordinates = shape[len(shape) - len(self.shape) :]
        # work on (steps, coordinates): the over/underdamped split is by coordinate, so each side's constants
        # are one slice of its table, broadcast over the steps, and only t is gathered
        tt = np.broadcast_to(t, shape).reshape(-1, int(np.prod(coordinates)))
        noise, w_sq, bad = (np.empty(tt.shape, dtype=x) for x in (float, float, bool))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for columns, rows, evaluate in self._sides(coordinates):
                noise[:, columns], bad[:, columns], w_sq[:, columns] = evaluate(tt[:, columns], rows)
            bad &= tt > 0
            if bad.any():
                columns = np.nonzero(bad)[1]
                noise[bad] = _near_critical_noise_sum(
                    tt[bad], *_per_coordinate(self.near_critical, coordinates)[:, columns]
                )
            return w_sq.reshape(shape), np.where(tt == 0, 0.0, noise).reshape(shape)

    def lower_bound(self, first: float, last: float) -> np.ndarray:
        r"""Per coordinate, a lower bound of E[x_t²] over the integers t in [first, last] (first ≤ last).

        S_t is a sum of non-negative terms, so it is at least S_first. W_t² is bounded below by its envelope:
        overdamped, :math:`W_t = (\sigma\rho)^t e^{t\psi}\,g(a_t)` with g linear in
        :math:`a_t = 1 - e^{-2t\psi}`, which rises with t, so |g| is smallest at an end unless g changes sign;
        underdamped, :math:`W_t = \rho^t A\cos(t\phi - \delta)`, smallest at an end of the phase interval
        unless that contains a zero of the cosine; at critical damping :math:`W_t = \rho^t(1 + \kappa t)`. The
        decay factor is taken at ``last``. The result is shrunk by 1e-9 relative, far more than the rounding of
        the forms, so that it stays below the value :meth:`at` computes.
        """
        w_first, noise = self.parts(first)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            h, c, kw = self.overdamped[0], self.overdamped[1], self.overdamped[10]
            g_first = 1 + (kw - 0.5) * -np.expm1(-first * h)
            g_last = 1 + (kw - 0.5) * -np.expm1(-last * h)
            over = np.where(g_first * g_last > 0, np.exp(last * (c + h)) * np.minimum(g_first**2, g_last**2), 0.0)
            phi, c_u, kappa_r, critical = (self.underdamped[i] for i in (0, 1, 6, 7))
            delta = np.arctan2(kappa_r, 1.0)
            lo, hi = first * phi - delta, last * phi - delta
            zero_inside = np.floor((hi - 0.5 * np.pi) / np.pi) >= np.ceil((lo - 0.5 * np.pi) / np.pi)
            ends = np.minimum(np.cos(lo) ** 2, np.cos(hi) ** 2) * (1 + kappa_r**2)
            under = np.where(zero_inside, 0.0, np.exp(last * c_u) * ends)
            line_first, line_last = 1 + kappa_r * first, 1 + kappa_r * last
            crit = np.where(
                line_first * line_last > 0, np.exp(last * c_u) * np.minimum(line_first**2, line_last**2), 0.0
            )
            under = np.where(critical.astype(bool), crit, under)
            w_min = np.where(self.over, over, under)
            w_min = np.minimum(np.where(np.isfinite(w_min), w_min, 0.0), w_first)
        bound = self.v0 * w_min + np.where(self.q == 0, 0.0, self.q * noise)
        return bound * (1 - 1e-9)

    def _sides(self, coordinates):
        """[(columns, their constants (k, 1, n), evaluator)] for the over- and the underdamped coordinates of
        the flattened ``coordinates`` (cached for the coordinates' own shape, the solvers' case)."""
        if coordinates == self.shape:
            if self._cached_sides is None:
                self._cached_sides = [
                    (columns, table[:, None, :], evaluate)
                    for columns, table, evaluate in zip(self._columns, self._tables, (_overdamped, _underdamped))
                    if columns is not None
                ]
            return self._cached_sides
        sides = []
        for side, table, evaluate in (
            (self.over, self.overdamped, _overdamped),
            (~self.over, self.underdamped, _underdamped),
        ):
            columns = _columns(np.broadcast_to(side, coordinates).ravel())
            if columns is not None:
                sides.append(
                    (columns, np.ascontiguousarray(_per_coordinate(table, coordinates)[:, None, columns]), evaluate)
                )
        return sides


def _columns(mask):
    """The indices where ``mask`` holds, as a slice when they are contiguous (a sorted spectrum splits into
    one under- and one overdamped range, and slices spare a gather and a scatter); None if there are none."""
    index = np.flatnonzero(mask)
    if not index.size:
        return None
    return slice(index[0], index[-1] + 1) if index[-1] - index[0] + 1 == index.size else index


def _per_coordinate(table, coordinates):
    """A (k, *shape) table of per-coordinate constants as (k, prod(coordinates)), broadcast if need be."""
    return np.broadcast_to(table, table.shape[:1] + coordinates).reshape(len(table), -1)


def _overdamped(t, table):
    """(S_t, not accurate, W_t²) for overdamped coordinates: the forward form, else the backward form where
    that is better conditioned; four transcendental functions (the other exponentials follow without
    cancellation: ``expm1(t(c − h)) = expm1(tc) − e^{tc}A_t``, ``A_{t+1} = D + e^{−h}A_t``)."""
    h, c, g_plus, g_mid, g_minus, prefactor, s_inf, k1, k2, k3, kw, d, e_h = table
    rate = t * (c + h)
    em_plus, em_mid, a0 = np.expm1(rate), np.expm1(t * c), -np.expm1(-t * h)
    em_minus = em_mid - (1 + em_mid) * a0
    noise, condition = _second_difference(em_plus * g_plus, em_mid * g_mid, em_minus * g_minus, prefactor)
    e = np.exp(rate)  # |r₁|^{2t}, not 1 + em_plus: W_t² needs it to full relative precision when tiny
    w_sq = e * (1 - 0.5 * a0 + kw * a0) ** 2
    bad = ~(condition <= MAX_CONDITION)
    if bad.any():
        s_inf, k1, k2, k3, d, e_h = np.broadcast_to(table[[6, 7, 8, 9, 11, 12]], (6, *t.shape))[:, bad]
        e, a0 = e[bad], a0[bad]
        a1 = d + e_h * a0
        squares = k1 * a1 * a1 + k2 * a0 * a0
        backward = s_inf - e * (squares - k3 * a1 * a0)
        good = s_inf + e * (squares + np.abs(k3) * a1 * a0) <= MAX_CONDITION * backward
        redone = bad.copy()
        redone[bad] = good
        noise[redone], bad[redone] = backward[good], False
    return noise, bad, w_sq


def _underdamped(t, table):
    """(S_t, not accurate, W_t²) for underdamped and critical coordinates: the backward form, else the
    forward form where that is better conditioned (``expm1(t(c + 2iφ)) = expm1(tc)cos 2tφ − 2sin²tφ +
    i·e^{tc} sin 2tφ``, so it costs one more transcendental function)."""
    phi, c, s_inf, k1, k2, k3, kappa_r, critical, g_re, g_im, g_mid, prefactor, cos_phi, sin_phi = table
    critical = critical != 0
    e = np.exp(t * c)
    angle = t * phi
    s0, cos_t = np.sin(angle), np.cos(angle)
    s1 = s0 * cos_phi + cos_t * sin_phi  # sin((t + 1)φ), one rounding from the two above
    if critical.any():  # R_n = n, so the "sines" are (t + 1, t) with sin φ = 1
        s1, s0, cos_t = np.where(critical, t + 1, s1), np.where(critical, t, s0), np.where(critical, 1.0, cos_t)
    squares = k1 * s1 * s1 + k2 * s0 * s0
    cross = k3 * s1 * s0
    noise = s_inf - e * (squares - cross)
    bad = ~(s_inf + e * (squares + np.abs(cross)) <= MAX_CONDITION * noise)
    w_sq = e * (cos_t + kappa_r * s0) ** 2
    if bad.any():
        c, g_re, g_im, g_mid, prefactor = np.broadcast_to(table[[1, 8, 9, 10, 11]], (5, *t.shape))[:, bad]
        critical = np.broadcast_to(critical, t.shape)[bad]
        em, e, s0, cos_t = np.expm1(t[bad] * c), e[bad], s0[bad], cos_t[bad]
        z_re, z_im = em * (1 - 2 * s0 * s0) - 2 * s0 * s0, e * 2 * s0 * cos_t
        g_plus = (z_re * g_re - z_im * g_im) + 1j * (z_re * g_im + z_im * g_re)
        forward, condition = _second_difference(g_plus, em * g_mid, np.conj(g_plus), prefactor)
        good = (condition <= MAX_CONDITION) & ~critical
        redone = bad.copy()
        redone[bad] = good
        noise[redone], bad[redone] = forward[good], False
    return noise, bad, w_sq


def _second_difference(g_plus, g_mid, g_minus, prefactor):
    r"""Form 2 from its three terms ``G(c + h), G(c), G(c − h)``: ``S_t = prefactor·(G₊ − 2G₀ + G₋)`` with
    ``prefactor = e^{−c}/(4 sinh²(h/2))``, from ``β^{j−1}R_j² = e^{(j−1)c}(e^{jh} − 2 + e^{−jh})/(4 sinh²(h/2))``
    and ``G(u) = Σ_{j=1}^t e^{ju} = expm1(tu)·e^u/expm1(u)``; with its condition, the ratio of the terms'
    absolute sum to the difference (inf at h = 0)."""
    diff = (g_plus + g_minus - 2 * g_mid).real
    value = prefactor * diff
    condition = (np.abs(g_plus) + 2 * np.abs(g_mid) + np.abs(g_minus)) / np.abs(diff)
    return value, np.where(np.isfinite(value), condition, np.inf)


def _near_critical_noise_sum(t, log_beta, psi_sq, sign):
    r"""``S_t = Σ_{j=1}^t β^{j−1} R_j²`` where the backward and forward forms both cancel (nearly equal roots):
    the split backward form where its condition is small, else the small-argument series (or the terms
    themselves)."""
    out, condition = _split_noise_sum(t, log_beta, psi_sq, sign)
    rest = ~(condition <= MAX_CONDITION)
    small = (t * np.abs(log_beta) <= SERIES_RADIUS) & (2 * t * np.sqrt(np.abs(psi_sq)) <= SERIES_RADIUS)
    series = rest & (t > DIRECT_STEPS) & small
    out[series] = _series_noise_sum(t[series], log_beta[series], psi_sq[series])
    direct = rest & ~series
    out[direct] = _direct_noise_sum(t[direct], log_beta[direct], psi_sq[direct])
    return out


def _cosh_even(z, k):
    """``cosh(k√z)`` for real z (``cos(k√−z)`` when z < 0): an even function of ψ given z = ψ²."""
    root = np.sqrt(np.abs(z))
    return np.where(z > 0, np.cosh(k * root), np.cos(k * root))


def _sinhc_even(z, k):
    """``sinh(k√z)/(k√z)`` for real z (``sin(k√−z)/(k√−z)`` when z < 0; 1 at 0)."""
    x = k * np.sqrt(np.abs(z))
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.where(x == 0, 1.0, np.sinh(x) / x)
    return np.where(z > 0, pos, np.sinc(x / np.pi))


def _split_noise_sum(t, log_beta, psi_sq, sign):
    r"""Form 3: ``S_t = S∞ − (U_t²A + 2rU_tV_tB + βV_t²S∞)`` (r = σρ, z = ψ²), with

    .. math:: A = \frac{1}{\cosh^2(ψ/2)}\Big(\frac{1}{2(1-β)} + \frac{(1-β)\cosh ψ}{2P}\Big),\quad
              B = \frac{β}{2r\cosh(ψ/2)\,\mathrm{shc}\,ψ}\Big(\frac{\tfrac52\mathrm{shc}\tfrac{5ψ}{2}
              - \tfrac{β}{2}\mathrm{shc}\tfrac{ψ}{2}}{P} - \frac{\mathrm{shc}\tfrac{ψ}{2}}{2(1-β)}\Big),

    P = (1 − βe^{2ψ})(1 − βe^{−2ψ}) = (1 − β)² − 4β sinh²ψ and shc x = sinh(x)/x, summed from
    ``cosh²((i+½)ψ) = (1 + cosh((2i+1)ψ))/2`` and ``cosh((i+½)ψ)sinh(iψ) = (sinh((2i+½)ψ) − sinh(ψ/2))/2``, and
    ``S∞ = (1 + β)/((1 − β)P)`` (as λ(2(1 + β) − λ) = P). P has no cancellation where this form is used
    (``|ψ| ≪ 1 − β``). S∞ is taken from ψ, like A and B, rather than from λ: the three must describe the same
    roots, since the form subtracts them, and ψ carries a rounding of about one unit of λ that would otherwise
    be amplified by the form's condition. Returns the value and its condition (the absolute terms over the
    result)."""
    beta = np.exp(log_beta)
    r = sign * np.sqrt(beta)
    one_minus = -np.expm1(log_beta)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p = one_minus**2 - 4 * beta * psi_sq * _sinhc_even(psi_sq, 1.0) ** 2
        s_inf = (1 + beta) / (one_minus * p)
        half = _cosh_even(psi_sq, 0.5)
        a_sum = (0.5 / one_minus + one_minus * _cosh_even(psi_sq, 1.0) / (2 * p)) / half**2
        shc_half = _sinhc_even(psi_sq, 0.5)
        b_sum = (
            beta
            / (2 * r * half * _sinhc_even(psi_sq, 1.0))
            * ((2.5 * _sinhc_even(psi_sq, 2.5) - 0.5 * beta * shc_half) / p - 0.5 * shc_half / one_minus)
        )
        r_t = np.exp(t * 0.5 * log_beta)  # |r|^t: σ^t cancels in every product below (U_t, V_t share it)
        u_t = r_t * (t + 1) * _sinhc_even(psi_sq, t + 1) / _sinhc_even(psi_sq, 1.0)
        v_t = r_t * _cosh_even(psi_sq, t + 0.5) / half
        tail_terms = (u_t * u_t * a_sum, 2 * r * u_t * v_t * b_sum, beta * v_t * v_t * s_inf)
        value = s_inf - sum(tail_terms)
        condition = (s_inf + sum(np.abs(x) for x in tail_terms)) / np.abs(value)
    ok = np.isfinite(condition) & (p > 0)
    return value, np.where(ok, condition, np.inf)


def _direct_noise_sum(t, log_beta, psi_sq):
    """Form 4 for few steps: ``Σ_{j=1}^t e^{(j−1)c}·j²·sinhc²(jψ)/sinhc²(ψ)`` term by term (in chunks)."""
    out = np.zeros(t.shape)
    top = int(t.max()) if t.size else 0
    norm = _sinhc_even(psi_sq, 1.0) ** 2
    for start in range(1, top + 1, 256):
        j = np.arange(start, min(start + 256, top + 1), dtype=np.float64)[None, :]
        terms = np.exp((j - 1) * log_beta[:, None]) * j * j * _sinhc_even(psi_sq[:, None], j) ** 2 / norm[:, None]
        out += np.where(j <= t[:, None], terms, 0.0).sum(axis=1)
    return out


def _faulhaber_table(top: int) -> np.ndarray:
    """``F[p, i]`` with ``Σ_{j=1}^t j^p = t^{p+1}·Σ_i F[p, i]·t^{−i}`` (Faulhaber, B₁ = +½), p ≤ top."""
    bern = [Fraction(1)]
    for m in range(1, top + 1):
        bern.append(-sum(comb(m + 1, k) * bern[k] for k in range(m)) / (m + 1))
    bern[1] = Fraction(1, 2)
    table = np.zeros((top + 1, top + 1))
    for p in range(top + 1):
        for i in range(p + 1):
            table[p, i] = float(comb(p + 1, i) * bern[i] / (p + 1))
    return table


FAULHABER = _faulhaber_table(2 * SERIES_K + SERIES_N + 2)
#: sinh²x/x² = Σ_k s_k x^{2k}, s_k = 2^{2k+1}/(2k + 2)!
SINHC_SQUARED = np.array([2.0 ** (2 * k + 1) / factorial(2 * k + 2) for k in range(SERIES_K + 1)])


def _series_noise_sum(t, log_beta, psi_sq):
    r"""Form 4 for many steps with small ``t·|c|`` and ``t·|ψ|`` (c = log β, z = ψ²):

    .. math:: S_t = \frac{t^3 e^{-c}}{s(z)} \sum_{k,n} s_k (zt^2)^k \frac{(ct)^n}{n!}\,
              \frac{P_{2k+2+n}(t)}{t^{2k+3+n}},

    from ``R_j² = j²s(j²z)/s(z)`` with ``s(w) = Σ s_k w^k = sinh²(√w)/w`` and ``e^{(j−1)c} = e^{−c}Σ (jc)ⁿ/n!``;
    the power sums ``P_p(t) = Σ_{j≤t} j^p`` are Faulhaber's polynomials, whose terms fall like (p/2πt)^i for
    t > 64. Every series term is at most 0.5^n/n!·s_k/4^k of the first, so nothing cancels."""
    ct, zt2 = t * log_beta, t * t * psi_sq
    # as many orders as the largest arguments need for 10⁻¹⁸ (fewer than the maxima when t is small)
    n_top = _order(np.abs(ct).max(initial=0.0) ** _SERIES_NS / _FACTORIALS)
    k_top = _order(SINHC_SQUARED * np.abs(zt2).max(initial=0.0) ** _SERIES_KS)
    p_top = 2 * k_top + 2 + n_top
    inv_t = 1.0 / t
    powers = inv_t[:, None] ** np.arange(p_top + 1)[None, :]
    p_hat = powers @ FAULHABER[: p_top + 1, : p_top + 1].T  # (m, p): P_p(t)/t^{p+1}
    ct_terms = ct[:, None] ** _SERIES_NS[: n_top + 1] / _FACTORIALS[: n_top + 1]  # (m, n): (ct)ⁿ/n!
    zt2_terms = SINHC_SQUARED[: k_top + 1] * zt2[:, None] ** _SERIES_KS[: k_top + 1]  # (m, k): s_k (zt²)^k
    total = np.einsum("mk,mn,mkn->m", zt2_terms, ct_terms, p_hat[:, _SERIES_P[: k_top + 1, : n_top + 1]])
    return t**3 * np.exp(-log_beta) * total / _sinhc_even(psi_sq, 1.0) ** 2


def _order(terms):
    """The last index whose term is at least 10⁻¹⁸ (0 if none): the order a series must keep."""
    return int(np.flatnonzero(terms >= 1e-18).max(initial=0))


_SERIES_NS = np.arange(SERIES_N + 1)
_SERIES_KS = np.arange(SERIES_K + 1)
_FACTORIALS = np.array([float(factorial(n)) for n in _SERIES_NS])
_SERIES_P = 2 * _SERIES_KS[:, None] + 2 + _SERIES_NS[None, :]  # the power summed by term (k, n)
