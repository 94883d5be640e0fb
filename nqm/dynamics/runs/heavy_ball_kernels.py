r"""Heavy ball's tuner compiled with numba, one batch size at a time (optional: ``pip install 'nqm[fast]'``).

The steps of :func:`nqm.dynamics.optimal_steps_to_target` (``family="heavy_ball"``, no weight decay) written as
loops: the nested search (golden sections on s = log(1 − β) around golden sections on log ε below the feasible
step, whose objective is the continuous first crossing of ``E[L_t] = target``, bracketed from the previous
crossing and narrowed by interpolating log(E[L_t] − L∞) in t) in ``search_heavy_ball``, the crossings of given
points in ``cross_points``, E[L_t] over a grid at fixed t for the descent of short runs in
``fixed_step_curve``, the feasible step in ``feasible_lr`` and the branch-and-bound scan of earlier steps
in ``first_hit_pruned``. :mod:`nqm.dynamics.runs.search` keeps the algorithm and its constants (passed in) and
its NumPy code is the reference. The closed form per coordinate is :mod:`nqm.dynamics.moments.heavy_ball`'s,

.. math:: \mathbb E[x_t^2] = V_0 W_t^2 + q S_t,

with the same four forms chosen in the same order: overdamped coordinates by the forward second difference (the
backward sum where that cancels), underdamped ones by the backward sum (the forward form where that cancels), and
where both cancel (nearly equal roots, few steps) the split backward form, the double series or the terms
themselves. Rows are independent, so a batch size searched here gets the same crossings as in the vectorised
search, up to rounding in the last bits (sums over coordinates are added in another order, the compiled
transcendental functions are not NumPy's, and the series keeps its orders per coordinate). A row that meets a
value none of the forms gives (NaN) is left to the caller, who searches it with NumPy.

The functions release the GIL, so batch sizes (or points) run on threads (:mod:`nqm.threads`). Numba compiles
them on first use (about 9 s; cached on disk after that). Only :mod:`nqm.dynamics.runs.compiled` imports this
module, and only when numba is installed.

Reference: Zhang et al. 2019 (arXiv:1907.04164), §3 and App. A (heavy ball on the NQM).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...threads import run_tasks, thread_count
from ..moments.heavy_ball import (
    DIRECT_STEPS,
    FAULHABER,
    MAX_CONDITION,
    SERIES_K,
    SERIES_N,
    SERIES_RADIUS,
    SINHC_SQUARED,
)

__all__ = ["search_heavy_ball", "cross_points", "fixed_step_curve", "first_hit_pruned", "feasible_lr"]

_jit = numba.njit(cache=True, nogil=True, error_model="numpy")  # IEEE division: x/0 is inf or NaN, as in NumPy
_OVER, _UNDER, _CRITICAL = 0, 1, 2  # a coordinate's roots: real and distinct, complex, equal
# a point's table: 18 rows of constants (``fill_tables``), then, at the t last evaluated, sin(tφ), cos(tφ), each
# coordinate's term of E[L_t] and whether that term is final (``_underdamped_terms``)
_TABLE_ROWS = 22
_SIN, _COS, _TERM, _FINAL = 18, 19, 20, 21


@_jit
def new_table(d):
    """An empty table and forms for ``d`` coordinates."""
    return np.empty((_TABLE_ROWS, d)), np.empty(d, dtype=np.int8)


# π/2 split into 30 + 30 + 53 bits (their sum within 2⁻¹¹⁵ of π/2), so that n·P₁ and n·P₂ are exact for n < 2²³
HALF_PI = tuple(float.fromhex(x) for x in ("0x1.921fb548p+0", "-0x1.de973dc8p-31", "-0x1.9d9cceba3f91fp-62"))
PHASES_REDUCED = 2.0**21  # t below which t·φ < 2²¹π (φ ≤ π): n = round(2tφ/π) < 2²³
# Taylor coefficients of sin z/z − 1 and of cos z − 1 + z²/2 in z², to z¹⁸: on |z| ≤ π/4 the first term left out
# is below 1e-19 (highest order first, for Horner's rule)
_SIN_TAYLOR = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(8, 0, -1))
_COS_TAYLOR = tuple((-1) ** k / math.factorial(2 * k) for k in range(9, 1, -1))


@_jit
def _horner(coefficients, x):
    total = 0.0
    for a in coefficients:
        total = total * x + a
    return total


@_jit
def sincos(x):
    r"""(sin x, cos x) for 0 ≤ x < 2²¹π, within 2.3e-16 of the C library's: x reduced by the nearest multiple
    nπ/2 in three exact parts (Cody and Waite), then Taylor series on |z| ≤ π/4 and the quadrant n mod 4.
    Written without calls or branches so that a loop over coordinates runs on SIMD lanes (libm's sin and cos,
    one coordinate at a time, were two thirds of an evaluation of E[L_t])."""
    n = math.floor(x * (2 / math.pi) + 0.5)
    z = ((x - n * HALF_PI[0]) - n * HALF_PI[1]) - n * HALF_PI[2]
    zz = z * z
    s = z + z * zz * _horner(_SIN_TAYLOR, zz)
    c = (1.0 - 0.5 * zz) + zz * zz * _horner(_COS_TAYLOR, zz)
    quadrant = n - 4.0 * math.floor(0.25 * n)  # sin, cos of z + nπ/2: (s, c), (c, −s), (−s, −c), (−c, s)
    odd = quadrant == 1.0 or quadrant == 3.0
    a, b = (c, s) if odd else (s, c)
    return (-a if quadrant >= 2.0 else a), (-b if quadrant == 1.0 or quadrant == 2.0 else b)


@_jit
def _phases(t, table):
    """sin(tφ), cos(tφ) of every coordinate into the table's rows _SIN and _COS (meaningless where a coordinate is
    not underdamped); for large t (reduction not exact) with the C library's."""
    phi = table[0]
    if t < PHASES_REDUCED:
        for j in range(phi.size):
            table[_SIN, j], table[_COS, j] = sincos(t * phi[j])
    else:
        for j in range(phi.size):
            table[_SIN, j], table[_COS, j] = math.sin(t * phi[j]), math.cos(t * phi[j])


@_jit
def _stationary(eps, beta, kappa, noise, half_h):
    """L∞ = ½Σh·X∞ with X∞ = (1 + β)q/((1 − β)λ((2 − λ) + 2β)), λ = εκ, q = ε²·noise."""
    total = 0.0
    for j in range(kappa.size):
        lam = eps * kappa[j]
        total += half_h[j] * ((1 + beta) * (eps * eps * noise[j]) / ((1 - beta) * lam * ((2 - lam) + 2 * beta)))
    return total


@_jit
def _feasible_lr(beta, kappa, noise, half_h, target):
    """The ε just below the stability edge 2(1 + β)/κ_max at which L∞ reaches the target: 42 halvings in log ε."""
    edge = 2.0 * (1 + beta) / kappa.max() * (1 - 1e-9)
    lo, hi = math.log(edge) - math.log(1e15), math.log(edge)
    for _ in range(42):
        mid = 0.5 * (lo + hi)
        if not (_stationary(math.exp(mid), beta, kappa, noise, half_h) < target):
            hi = mid
        else:
            lo = mid
    return math.exp(lo)


@_jit
def fill_tables(eps, beta, kappa, noise, v0, half_h, table, form):
    """Per coordinate, the constants of E[x_t²] that do not depend on t (the NumPy module's tables), ½h·V₀ and
    ½h·q in rows 14 and 15, and what the near-critical forms need, ψ² and σ, in rows 16 and 17."""
    rho, c = math.sqrt(beta), math.log(beta)
    exp_c, expm1_c, exp_minus_c = math.exp(c), math.expm1(c), math.exp(-c)  # β's, shared by every coordinate
    for j in range(kappa.size):
        lam = eps * kappa[j]
        a = 1.0 + beta - lam
        sign = -1.0 if a < 0 else 1.0
        disc = (lam - ((1 - beta) / (1 + rho)) ** 2) * (lam - (1 + rho) ** 2)
        s_inf = (1 + beta) / ((1 - beta) * lam * ((2 - lam) + 2 * beta))
        c_inf = a * s_inf / (1 + beta)
        kap = (1 - beta - lam) / (2 * sign * rho)
        table[14, j] = half_h[j] * v0[j]
        table[15, j] = half_h[j] * (eps * eps * noise[j])
        table[17, j] = sign
        if disc > 0:
            form[j] = _OVER
            psi = math.asinh(math.sqrt(disc) / (2 * rho))
            table[16, j] = psi * psi
            h = 2 * psi
            d, e_h, e_psi = -math.expm1(-h), math.exp(-h), math.exp(-psi)
            table[0, j], table[1, j] = h, c
            table[2, j] = math.exp(c + h) / math.expm1(c + h)
            table[3, j] = exp_c / expm1_c
            table[4, j] = math.exp(c - h) / math.expm1(c - h)
            table[5, j] = exp_minus_c / (4 * math.sinh(psi) ** 2)
            table[6, j] = s_inf
            table[7, j] = s_inf / d**2
            table[8, j] = s_inf * beta * e_h / d**2
            table[9, j] = 2 * sign * rho * e_psi * c_inf / d**2
            table[10, j] = kap * e_psi / d
            table[11, j], table[12, j] = d, e_h
        else:  # underdamped, or critical (R_n = n: sin φ taken as 1 in the constants)
            form[j] = _UNDER if disc < 0 else _CRITICAL
            root = math.sqrt(-disc)
            phi = math.atan2(root, abs(a))
            table[16, j] = -phi * phi
            sin_phi = root / (2 * rho)
            s2 = sin_phi**2 if disc < 0 else 1.0
            # cos φ, sin φ as the sides of φ's triangle, and their double angles, without calling cos and sin
            side = math.sqrt(a * a + root * root)
            cos_phi, sin_phi_t = abs(a) / side, root / side
            cos_2phi, sin_2phi = (cos_phi - sin_phi_t) * (cos_phi + sin_phi_t), 2 * sin_phi_t * cos_phi
            # G(c + 2iφ) = e^{c + 2iφ}/expm1(c + 2iφ), with expm1(c + 2iφ) = expm1(c)cos 2φ − 2sin²φ + i·e^c sin 2φ
            den_re, den_im = expm1_c * cos_2phi - 2 * sin_phi_t * sin_phi_t, exp_c * sin_2phi
            num_re, num_im = exp_c * cos_2phi, exp_c * sin_2phi
            norm = den_re * den_re + den_im * den_im
            table[0, j], table[1, j], table[2, j] = phi, c, s_inf
            table[3, j], table[4, j] = s_inf / s2, beta * s_inf / s2
            table[5, j] = 2 * sign * rho * c_inf / s2
            table[6, j] = kap / sin_phi if disc < 0 else kap
            table[8, j] = (num_re * den_re + num_im * den_im) / norm
            table[9, j] = (num_im * den_re - num_re * den_im) / norm
            table[10, j] = exp_c / expm1_c
            table[11, j] = -exp_minus_c / (4 * sin_phi**2)
            table[12, j], table[13, j] = cos_phi, sin_phi_t


@_jit
def loss_at(t, table, form):
    """E[L_t] = Σ ½h(V₀W_t² + qS_t), each coordinate by the first of its forms whose condition is small: the
    underdamped coordinates whose backward sum is well conditioned (most of them) in one pass on SIMD lanes
    (``_underdamped_terms``), the others by ``_parts``; the same values either way, added in the same order."""
    # every coordinate decays with the same log β (row 1): its exponentials are taken once
    e_c, em_c = math.exp(t * table[1, 0]), math.expm1(t * table[1, 0])
    simd = t > 0 and t < PHASES_REDUCED
    if simd:
        _underdamped_terms(t, e_c, table, form)
    else:
        _phases(t, table)
    total = 0.0
    for j in range(form.size):
        if simd and table[_FINAL, j] != 0:
            total += table[_TERM, j]
        else:
            w_sq, noise = _parts(t, table, form, j, e_c, em_c)
            total += _term(table, j, w_sq, noise)
    return total


@_jit
def _term(table, j, w_sq, noise):
    """Coordinate j's part of E[L_t]: ½h·V₀·W_t² + ½h·q·S_t (no noise term where q = 0, whatever S_t)."""
    return table[14, j] * w_sq + (table[15, j] * noise if table[15, j] != 0 else 0.0)


@_jit
def _underdamped_terms(t, e_c, table, form):
    """For 0 < t < 2²¹: the phases of every coordinate, and the term of E[L_t] of each underdamped one by
    ``_parts``' backward sum, marked final where that is well conditioned; the other marks are 0. Every
    coordinate is computed alike, without branches, so that the loop runs on SIMD lanes."""
    for j in range(form.size):
        s0, cos_t = sincos(t * table[0, j])
        table[_SIN, j], table[_COS, j] = s0, cos_t
        s1 = s0 * table[12, j] + cos_t * table[13, j]
        squares = table[3, j] * s1 * s1 + table[4, j] * s0 * s0
        cross = table[5, j] * s1 * s0
        noise = table[2, j] - e_c * (squares - cross)
        accurate = table[2, j] + e_c * (squares + abs(cross)) <= MAX_CONDITION * noise
        g = cos_t + table[6, j] * s0
        table[_TERM, j] = _term(table, j, e_c * g * g, noise)
        table[_FINAL, j] = 1.0 if (form[j] == _UNDER) & accurate else 0.0


@_jit
def _parts(t, table, form, j, e_c, em_c):
    """(W_t², S_t) of coordinate j; ``e_c``, ``em_c`` = exp, expm1 of t·log β; the table's phases at t."""
    c = table[1, j]
    if form[j] == _OVER:
        h = table[0, j]
        rate = t * (c + h)
        em_plus, em_mid, a0 = math.expm1(rate), em_c, -math.expm1(-t * h)
        em_minus = em_mid - (1 + em_mid) * a0
        g_plus, g_mid, g_minus = em_plus * table[2, j], em_mid * table[3, j], em_minus * table[4, j]
        diff = g_plus + g_minus - 2 * g_mid
        noise = table[5, j] * diff
        condition = (abs(g_plus) + 2 * abs(g_mid) + abs(g_minus)) / abs(diff)
        e = math.exp(rate)
        accurate = math.isfinite(noise) and condition <= MAX_CONDITION
        if not accurate:  # the backward form
            a1 = table[11, j] + table[12, j] * a0
            squares = table[7, j] * a1 * a1 + table[8, j] * a0 * a0
            backward = table[6, j] - e * (squares - table[9, j] * a1 * a0)
            if table[6, j] + e * (squares + abs(table[9, j]) * a1 * a0) <= MAX_CONDITION * backward:
                noise, accurate = backward, True
        g = 1 - 0.5 * a0 + table[10, j] * a0
        w_sq = e * g * g
    else:
        critical = form[j] == _CRITICAL
        e = e_c
        s0, cos_t = table[_SIN, j], table[_COS, j]
        s1 = s0 * table[12, j] + cos_t * table[13, j]
        if critical:  # R_n = n
            s1, s0, cos_t = t + 1, t, 1.0
        squares = table[3, j] * s1 * s1 + table[4, j] * s0 * s0
        cross = table[5, j] * s1 * s0
        noise = table[2, j] - e * (squares - cross)
        accurate = table[2, j] + e * (squares + abs(cross)) <= MAX_CONDITION * noise
        if not accurate and not critical:  # the forward form, G(c + 2iφ)'s real part
            em = em_c
            z_re, z_im = em * (1 - 2 * s0 * s0) - 2 * s0 * s0, e * 2 * s0 * cos_t
            g_re = z_re * table[8, j] - z_im * table[9, j]
            g_im = z_re * table[9, j] + z_im * table[8, j]
            g_mid = em * table[10, j]
            diff = 2 * g_re - 2 * g_mid
            forward = table[11, j] * diff
            condition = (2 * math.hypot(g_re, g_im) + 2 * abs(g_mid)) / abs(diff)
            if math.isfinite(forward) and condition <= MAX_CONDITION:
                noise, accurate = forward, True
        g = cos_t + table[6, j] * s0
        w_sq = e * g * g
    if t == 0:
        noise = 0.0
    elif not accurate:
        noise = _near_critical_noise_sum(t, c, table[16, j], table[17, j])
    return w_sq, noise


@_jit
def _cosh_even(z, k):
    """cosh(k√z) for real z (cos(k√−z) when z < 0)."""
    root = math.sqrt(abs(z))
    return math.cosh(k * root) if z > 0 else math.cos(k * root)


@_jit
def _sinhc_even(z, k):
    """sinh(k√z)/(k√z) for real z (sin(k√−z)/(k√−z) when z < 0; 1 at 0)."""
    x = k * math.sqrt(abs(z))
    if x == 0:
        return 1.0
    return math.sinh(x) / x if z > 0 else math.sin(x) / x


@_jit
def _near_critical_noise_sum(t, log_beta, psi_sq, sign):
    """S_t where the backward and forward forms both cancel: the split backward form where its condition is
    small, else the small-argument series (t > 8), else the terms themselves
    (:mod:`nqm.dynamics.moments.heavy_ball`)."""
    value, condition = _split_noise_sum(t, log_beta, psi_sq, sign)
    if condition <= MAX_CONDITION:
        return value
    small = t * abs(log_beta) <= SERIES_RADIUS and 2 * t * math.sqrt(abs(psi_sq)) <= SERIES_RADIUS
    if t > DIRECT_STEPS and small:
        return _series_noise_sum(t, log_beta, psi_sq)
    return _direct_noise_sum(t, log_beta, psi_sq)


@_jit
def _split_noise_sum(t, log_beta, psi_sq, sign):
    """Form 3, the backward sum split at the roots' geometric mean, and its condition (inf where it fails)."""
    beta = math.exp(log_beta)
    r = sign * math.sqrt(beta)
    one_minus = -math.expm1(log_beta)
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
    r_t = math.exp(t * 0.5 * log_beta)
    u_t = r_t * (t + 1) * _sinhc_even(psi_sq, t + 1) / _sinhc_even(psi_sq, 1.0)
    v_t = r_t * _cosh_even(psi_sq, t + 0.5) / half
    first, second, third = u_t * u_t * a_sum, 2 * r * u_t * v_t * b_sum, beta * v_t * v_t * s_inf
    value = s_inf - (first + second + third)
    condition = (s_inf + abs(first) + abs(second) + abs(third)) / abs(value)
    if not (math.isfinite(condition) and p > 0):
        condition = np.inf
    return value, condition


@_jit
def _series_noise_sum(t, log_beta, psi_sq):
    """Form 4's double series in (t·log β, t²ψ²) over Faulhaber's power sums, to terms of 10⁻¹⁸."""
    ct, zt2 = t * log_beta, t * t * psi_sq
    n_top, term = 0, 1.0
    for n in range(1, SERIES_N + 1):
        term *= abs(ct) / n
        if term >= 1e-18:
            n_top = n
    k_top = 0
    for k in range(1, SERIES_K + 1):
        if SINHC_SQUARED[k] * abs(zt2) ** k >= 1e-18:
            k_top = k
    inv_t = 1.0 / t
    p_hat = np.zeros(2 * k_top + 3 + n_top)  # P_p(t)/t^{p+1} = Σ_i F[p, i] t^{−i}
    for p in range(2, p_hat.size):
        power = 1.0
        for i in range(p + 1):
            p_hat[p] += power * FAULHABER[p, i]
            power *= inv_t
    total = 0.0
    for k in range(k_top + 1):
        ct_term = 1.0
        for n in range(n_top + 1):
            if n > 0:
                ct_term *= ct / n
            total += SINHC_SQUARED[k] * zt2**k * ct_term * p_hat[2 * k + 2 + n]
    return t**3 * math.exp(-log_beta) * total / _sinhc_even(psi_sq, 1.0) ** 2


@_jit
def _direct_noise_sum(t, log_beta, psi_sq):
    """Form 4 for few steps: Σ_{j=1}^t e^{(j−1)log β}·j²·sinhc²(jψ)/sinhc²(ψ), term by term."""
    total = 0.0
    for j in range(1, int(t) + 1):
        total += math.exp((j - 1) * log_beta) * j * j * _sinhc_even(psi_sq, float(j)) ** 2
    return total / _sinhc_even(psi_sq, 1.0) ** 2


@_jit
def _first_crossing(eps, beta, row, guess, options, work):
    """(first step, continuous crossing, True) of E[L_t] = target: ``crossing.first_crossing``'s bracketing and
    narrowing for one row, the step being the bracket's upper end (the first integer crossing once the bracket is one
    step wide); inf where the run is unstable or its stationary loss is not below the target; (NaN, NaN, False) where
    a value is not a number (the caller's NumPy search takes the row over)."""
    kappa, noise, v0, half_h, target = row
    stride, rel_tol, narrowing, loose = options
    table, form = work
    if not (eps < 2.0 * (1 + beta) / kappa.max()):
        return np.inf, np.inf, True
    l_inf = _stationary(eps, beta, kappa, noise, half_h)
    if not (l_inf < target):
        return np.inf, np.inf, True
    goal = math.log(target - l_inf)
    fill_tables(eps, beta, kappa, noise, v0, half_h, table, form)
    start = 0.0
    for j in range(kappa.size):
        start += half_h[j] * v0[j]
    if start <= target:
        return 0.0, 0.0, True
    y0 = math.log(max(start - l_inf, 1e-300)) - goal
    k = max(math.ceil(guess if math.isfinite(guess) else 1.0), 1.0)
    value = loss_at(k, table, form)
    if math.isnan(value):
        return np.nan, np.nan, False
    y = math.log(max(value - l_inf, 1e-300)) - goal
    below = value <= target
    stride = max(math.ceil(stride * k), 1.0)
    if below:
        lo, hi, y_lo, y_hi = max(k - stride, 0.0), k, y0, y
    else:
        lo, hi, y_lo, y_hi = k, k + stride, y, y0
    lo_ok, hi_ok = (not below) or lo == 0, below
    while not (hi_ok and lo_ok):  # grow the bracket away from the guess, doubling the stride
        probe = lo if hi_ok else hi
        if not hi_ok and not probe < 2.0**50:
            return np.inf, np.inf, True
        value = loss_at(probe, table, form)
        if math.isnan(value):
            return np.nan, np.nan, False
        y = math.log(max(value - l_inf, 1e-300)) - goal
        if not hi_ok:
            if value <= target:
                hi_ok, y_hi = True, y
            else:
                lo, y_lo, hi, stride = hi, y, hi + stride, 2 * stride
        elif value <= target:
            hi, y_hi, lo, stride = lo, y, max(lo - stride, 0.0), 2 * stride
            if lo == 0:
                lo_ok, y_lo = True, y0
        else:
            lo_ok, y_lo = True, y
    moved_hi = False
    # narrow: the interpolated root, rounded away from the side last moved; every third probe a bisection
    for i in range(10**4):
        tol = rel_tol if i < narrowing else loose
        if not hi - lo > max(1.0, tol * hi):
            break
        r = lo + y_lo / (y_lo - y_hi) * (hi - lo)
        k = math.floor(r) if moved_hi else math.ceil(r)
        if i % 3 == 2 or not math.isfinite(k):
            k = math.floor(0.5 * (lo + hi))
        k = min(max(k, lo + 1), hi - 1)
        value = loss_at(k, table, form)
        if math.isnan(value):
            return np.nan, np.nan, False
        y = math.log(max(value - l_inf, 1e-300)) - goal
        moved_hi = value <= target
        if moved_hi:
            hi, y_hi = k, y
        else:
            lo, y_lo = k, y
    frac = y_lo / (y_lo - y_hi)
    frac = min(max(frac, 0.0), 1.0) if math.isfinite(frac) else 1.0
    return hi, lo + frac * (hi - lo), True


_GOLDEN = (math.sqrt(5) - 1) / 2


@_jit
def _golden_start(lo, hi):
    """The two interior points of a golden section of [lo, hi] (``golden.golden_min``)."""
    return hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)


@_jit
def _golden_next(lo, hi, a, c, fa, fc):
    """One golden-section step: the bracket kept (left of c where f(a) < f(c), else right of a), the new point,
    the value of the kept point next to it (the new crossing's guess) and whether the left part was kept."""
    if fa < fc:
        return lo, c, c - _GOLDEN * (c - lo), fa, True
    return a, hi, a + _GOLDEN * (hi - a), fc, False


@_jit
def _golden_keep(left, z, f, a, c, fa, fc):
    """The interior points and their values after evaluating the new point z (f)."""
    return (z, a, f, fa) if left else (c, z, fc, f)


@_jit
def _golden_lr(lo, hi, iterations, guess, beta, row, options, work):
    """Golden sections on log ε in [lo, hi] for the fewest (continuous) steps at β: (log ε, steps, ok)."""
    a, c = _golden_start(lo, hi)
    _, fa, ok = _first_crossing(math.exp(a), beta, row, guess, options, work)
    if not ok:
        return np.nan, np.nan, False
    _, fc, ok = _first_crossing(math.exp(c), beta, row, fa, options, work)
    if not ok:
        return np.nan, np.nan, False
    for _ in range(iterations):
        lo, hi, z, near, left = _golden_next(lo, hi, a, c, fa, fc)
        _, f, ok = _first_crossing(math.exp(z), beta, row, near, options, work)
        if not ok:
            return np.nan, np.nan, False
        a, c, fa, fc = _golden_keep(left, z, f, a, c, fa, fc)
    return (a, fa, True) if fa < fc else (c, fc, True)


@_jit
def _best_lr(s, guess, row, steps, options, seen, work):
    """Fewest steps over ε at β = 1 − e^s (the decade below the feasible step, then the rest of the range where
    the optimum sits at that decade's low end); the best (steps, s, ε, ε's upper end) so far kept in ``seen``."""
    kappa, noise, v0, half_h, target = row
    inner, far, near, decades = steps
    beta = -math.expm1(s)
    eps_hi = _feasible_lr(beta, kappa, noise, half_h, target)
    top = math.log(eps_hi)
    z, t, ok = _golden_lr(top - near, top, inner, guess, beta, row, options, work)
    if ok and z < top - 0.95 * near:
        z_far, t_far, ok = _golden_lr(top - math.log(decades), top - 0.9 * near, far, t, beta, row, options, work)
        if t_far < t:
            z, t = z_far, t_far
    if ok and t < seen[0]:
        seen[0], seen[1], seen[2], seen[3] = t, s, math.exp(z), eps_hi
    return t, ok


@_jit
def _search_row(row, lo, hi, steps, outer, options, seen):
    """The nested search for one batch size; False where it met a coordinate it cannot evaluate."""
    work = new_table(row[0].size)
    seen[0] = np.inf
    _, ok = _best_lr(lo, np.inf, row, steps, options, seen, work)  # s's low end: β → 1, where small batches go
    if not ok:
        return False
    a, c = _golden_start(lo, hi)
    fa, ok = _best_lr(a, seen[0], row, steps, options, seen, work)
    if not ok:
        return False
    fc, ok = _best_lr(c, fa, row, steps, options, seen, work)
    if not ok:
        return False
    for _ in range(outer):
        lo, hi, z, near, left = _golden_next(lo, hi, a, c, fa, fc)
        f, ok = _best_lr(z, near, row, steps, options, seen, work)
        if not ok:
            return False
        a, c, fa, fc = _golden_keep(left, z, f, a, c, fa, fc)
    return True


@_jit
def _search_rows(kappa, noise, v0, half_h, target, lo, hi, steps, outer, options, rows, seen, ok):
    for i in rows:
        row = (kappa, noise[i], v0, half_h, target)
        ok[i] = _search_row(row, lo[i], hi[i], steps, outer, options, seen[i])


def search_heavy_ball(kappa, noise, v0, half_h, target, lo, hi, *, steps, outer, options):
    """The heavy-ball tuner's nested search over (ε, s = log(1 − β)) for each batch size (row of ``noise``, the
    injected variance per unit ε², (n, d)), on curvatures ``kappa`` (> 0), initial variances ``v0`` and loss weights
    ``half_h`` (d,); s in [lo, hi] per row.

    ``steps`` = (golden steps over the decade below the feasible ε, over the rest of the range, log of that decade,
    the range's decades), ``outer`` the golden steps on s, ``options`` = (bracket stride, relative tolerance,
    narrowing probes, looser tolerance) of the crossings. Returns ``seen``, (4, n): the best (continuous steps, s,
    ε, ε's upper end) per row, and ``ok`` (n,): False for the rows to search with NumPy instead.

    The rows are searched on threads, one task per row taken by the next free thread (the compiled search releases
    the GIL, and rows differ in cost); each row's result is the same on any number of threads.
    """
    kappa, noise, v0, half_h, lo, hi = (
        np.ascontiguousarray(x, dtype=np.float64) for x in (kappa, noise, v0, half_h, lo, hi)
    )
    n = noise.shape[0]
    seen = np.full((n, 4), np.nan)
    ok = np.zeros(n, dtype=np.bool_)
    steps = (int(steps[0]), int(steps[1]), float(steps[2]), float(steps[3]))
    options = (float(options[0]), float(options[1]), int(options[2]), float(options[3]))
    outer = int(outer)

    def task(i):
        rows = np.array([i])
        return lambda: _search_rows(
            kappa, noise, v0, half_h, float(target), lo, hi, steps, outer, options, rows, seen, ok
        )

    run_tasks([task(i) for i in range(n)], thread_count(None, n))
    return seen.T.copy(), ok


@_jit
def _cross_each(eps, beta, which, guess, kappa, noise, v0, half_h, target, options, steps, cont, ok):
    work = new_table(kappa.size)
    for m in range(eps.size):
        row = (kappa, noise[which[m]], v0, half_h, target)
        steps[m], cont[m], ok[m] = _first_crossing(eps[m], beta[m], row, guess[m], options, work)


def cross_points(eps, beta, which, guess, kappa, noise, v0, half_h, target, *, options):
    """(first step, continuous crossing, ok) of E[L_t] = target at points (ε, β) of batch sizes ``which`` (rows
    of ``noise``), each bracketed from its ``guess``: ``crossing.first_crossing``, ``options`` = (bracket
    stride, relative tolerance, narrowing probes at that tolerance, looser tolerance after them)."""
    eps, beta, guess = (np.ascontiguousarray(x, dtype=np.float64).ravel() for x in (eps, beta, guess))
    kappa, noise, v0, half_h = (np.ascontiguousarray(x, dtype=np.float64) for x in (kappa, noise, v0, half_h))
    which = np.ascontiguousarray(which, dtype=np.int64).ravel()
    steps, cont, ok = np.empty(eps.size), np.empty(eps.size), np.empty(eps.size, dtype=np.bool_)
    options = (float(options[0]), float(options[1]), int(options[2]), float(options[3]))
    threads = thread_count(None, eps.size)

    def task(first):  # every k-th point to the k-th thread: points are independent
        part = slice(first, None, threads)
        return lambda: _cross_each(
            eps[part], beta[part], which[part], guess[part], kappa, noise, v0, half_h, float(target), options,
            steps[part], cont[part], ok[part],
        )  # fmt: skip

    run_tasks([task(first) for first in range(threads)], threads)
    return steps, cont, ok


@_jit
def _grid_tables(eps, beta, kappa, noise, v0, half_h, tables, forms):
    for g in range(eps.size):
        fill_tables(eps[g], beta[g], kappa, noise, v0, half_h, tables[g], forms[g])


@_jit
def _grid_values(t, tables, forms, out):
    for g in range(out.size):
        value = loss_at(t, tables[g], forms[g])
        out[g] = np.inf if math.isnan(value) else value


@_jit
def _grid_reaches(t, tables, forms, target):
    for g in range(forms.shape[0]):
        if loss_at(t, tables[g], forms[g]) <= target:
            return True
    return False


class _FixedStepCurve:
    """E[L_t] at points (ε, β) of one batch size, at one t for all: ``curve(t)`` (inf where a value is not a
    number) and ``curve.reaches(t, target)`` (whether one of them is at most ``target``: it stops at the first)."""

    def __init__(self, tables, forms):
        self.tables, self.forms = tables, forms

    def __call__(self, t):
        out = np.empty(self.forms.shape[0])
        _grid_values(float(t), self.tables, self.forms, out)
        return out

    def reaches(self, t, target) -> bool:
        return bool(_grid_reaches(float(t), self.tables, self.forms, float(target)))


def fixed_step_curve(eps, beta, kappa, noise, v0, half_h) -> _FixedStepCurve:
    """E[L_t] at points (ε, β) of one batch size (``noise``: its injected variance per unit ε², (d,)), with the
    constants of each point computed once."""
    eps, beta = (np.ascontiguousarray(x, dtype=np.float64).ravel() for x in (eps, beta))
    kappa, noise, v0, half_h = (np.ascontiguousarray(x, dtype=np.float64) for x in (kappa, noise, v0, half_h))
    tables, forms = np.empty((eps.size, _TABLE_ROWS, kappa.size)), np.empty((eps.size, kappa.size), dtype=np.int8)
    _grid_tables(eps, beta, kappa, noise, v0, half_h, tables, forms)
    return _FixedStepCurve(tables, forms)


@_jit
def _lower_bound(first, last, table, form):
    """A lower bound of E[L_t] over the integers t in [first, last]: S_t ≥ S_first, and W_t² above its envelope
    (:meth:`nqm.dynamics.moments.heavy_ball.HeavyBallMoments.lower_bound`, whose arithmetic this follows), shrunk
    by 1e-9."""
    e_c, em_c = math.exp(first * table[1, 0]), math.expm1(first * table[1, 0])
    _phases(first, table)
    total = 0.0
    for j in range(form.size):
        w_first, noise = _parts(first, table, form, j, e_c, em_c)
        if form[j] == _OVER:
            h, c, kw = table[0, j], table[1, j], table[10, j]
            g_first = 1 + (kw - 0.5) * -math.expm1(-first * h)
            g_last = 1 + (kw - 0.5) * -math.expm1(-last * h)
            w_min = math.exp(last * (c + h)) * min(g_first**2, g_last**2) if g_first * g_last > 0 else 0.0
        elif form[j] == _UNDER:
            phi, c, kappa_r = table[0, j], table[1, j], table[6, j]
            delta = math.atan2(kappa_r, 1.0)
            lo, hi = first * phi - delta, last * phi - delta
            zero_inside = math.floor((hi - 0.5 * math.pi) / math.pi) >= math.ceil((lo - 0.5 * math.pi) / math.pi)
            ends = min(math.cos(lo) ** 2, math.cos(hi) ** 2) * (1 + kappa_r**2)
            w_min = 0.0 if zero_inside else math.exp(last * c) * ends
        else:  # critical: W_t = ρ^t(1 + κt)
            c, kappa_r = table[1, j], table[6, j]
            line_first, line_last = 1 + kappa_r * first, 1 + kappa_r * last
            w_min = math.exp(last * c) * min(line_first**2, line_last**2) if line_first * line_last > 0 else 0.0
        w_min = min(w_min if math.isfinite(w_min) else 0.0, w_first)
        total += _term(table, j, w_min, noise) * (1 - 1e-9)
    return total


@_jit
def _first_hit_pruned(eps, beta, kappa, noise, v0, half_h, target, until, budget, leaf):
    """``crossing.first_hit_pruned`` for one heavy-ball run: the first integer t < ``until`` with
    E[L_t] ≤ target (``until`` if none), by branch and bound on intervals of t; −1 once more than ``budget``
    coordinate-steps are spent; −2 where a value is not a number."""
    table, form = new_table(kappa.size)
    fill_tables(eps, beta, kappa, noise, v0, half_h, table, form)
    d = kappa.size
    stack = np.empty((256, 2), dtype=np.int64)  # (first, last); the leftmost interval on top
    ends = np.empty(128, dtype=np.int64)
    ends[0], n_ends, width = until, 1, leaf
    while ends[n_ends - 1] > 0:  # widths one leaf, one leaf, two, four, … away from ``until``
        ends[n_ends] = max(ends[n_ends - 1] - width, 0)
        n_ends += 1
        width = width if n_ends < 3 else 2 * width
    top = 0
    for i in range(n_ends - 1):
        stack[top, 0], stack[top, 1] = ends[i + 1], ends[i] - 1
        top += 1
    spent = 0.0
    while top > 0:
        if spent > budget:
            return -1
        top -= 1
        first, last = stack[top, 0], stack[top, 1]
        if last < first:
            continue
        if last - first < leaf:
            spent += (last - first + 1) * d
            for t in range(first, last + 1):
                value = loss_at(float(t), table, form)
                if math.isnan(value):
                    return -2
                if value <= target:
                    return t
            continue
        spent += d
        bound = _lower_bound(float(first), float(last), table, form)
        if bound > target:
            continue
        middle = (first + last) // 2
        stack[top, 0], stack[top, 1] = middle + 1, last
        stack[top + 1, 0], stack[top + 1, 1] = first, middle
        top += 2
    return until


def first_hit_pruned(eps, beta, kappa, noise, v0, half_h, target, until, budget, leaf):
    """The first integer t < ``until`` at which the heavy-ball run (ε, β) of one batch size (``noise``, (d,)) has
    E[L_t] ≤ target, ``until`` if none, by branch and bound with leaves of ``leaf`` steps:
    ``crossing.first_hit_pruned``. None where that would spend more than ``budget`` coordinate-steps; NaN where a
    value is not a number (the caller's NumPy scan then decides)."""
    kappa, noise, v0, half_h = (np.ascontiguousarray(x, dtype=np.float64) for x in (kappa, noise, v0, half_h))
    budget = float(min(budget, 1e300))
    hit = _first_hit_pruned(
        float(eps), float(beta), kappa, noise, v0, half_h, float(target), int(until), budget, int(leaf)
    )
    return None if hit == -1 else (np.nan if hit == -2 else int(hit))


@_jit
def _feasible_lrs(beta, kappa, noise, half_h, target, out):
    for i in range(beta.size):
        out[i] = _feasible_lr(beta[i], kappa, noise[i], half_h, target[i])


def feasible_lr(beta, kappa, noise, half_h, target):
    """Per row of ``noise`` ((n, d)) and its β and target (scalars or (n,)), the ε just below the stability edge at
    which the stationary loss reaches the target: ``tuned_losses.TunedLoss.feasible_lr`` (42 halvings in log ε)."""
    n = noise.shape[0]
    beta, target = (np.ascontiguousarray(np.broadcast_to(x, (n,)), dtype=np.float64) for x in (beta, target))
    kappa, noise, half_h = (np.ascontiguousarray(x, dtype=np.float64) for x in (kappa, noise, half_h))
    out = np.empty(n)
    _feasible_lrs(beta, kappa, noise, half_h, target, out)
    return out
