r"""How the critical batch size grows as the target loss falls: its two limits, and the exponent α_B.

McCandlish et al. 2018 (arXiv:1812.06162, §2.3) define B_crit = E_min/S_min from the two ends of the
steps/examples frontier: **S_min**, the fewest steps (the B → ∞ limit: noise-free gradient descent with its step
tuned), and **E_min**, the fewest examples (the B → 0 limit). Both have exact forms here.

*The small-batch limit.* At B → 0 the step must shrink with B, so hold η = ε/B and the time τ = εt fixed.
SGD's per-coordinate variance V_t = (1 − εκ)^{2t}V₀ + ε²(q/B)(1 − (1 − εκ)^{2t})/(εκ(2 − εκ)) (κ = ph, q = p²c)
tends to e^{−2κτ}V₀ + ηq(1 − e^{−2κτ})/(2κ), so the loss at τ is G(τ) + ηN(τ) with

.. math:: G(\tau) = \tfrac12\sum_i h_i V_{0,i}\,e^{-2\kappa_i\tau},\qquad
          N(\tau) = \tfrac14\sum_i p_i c_i\,\bigl(1 - e^{-2\kappa_i\tau}\bigr),

and the run spends E = Bt = τ/η examples. The largest η that reaches L at τ is (L − G(τ))/N(τ), so

.. math:: E_\text{min}(L) = \min_{\tau:\,G(\tau) < L} \frac{\tau\,N(\tau)}{L - G(\tau)}.

*The exponent.* For h_i = i^{−a} (a > 1), c_i = h_i^q with a(1 + q) > 1 (so that tr(HΣ) is finite), θ₀ ~ N(0, I)
and d → ∞, the sums become integrals (x = (2τ)^{1/a} y):

* G(τ) = g·τ^{−γ} with γ = (a − 1)/a, so gradient descent needs S_min ∝ L^{−1/γ} = L^{−a/(a−1)} steps;
* N(τ) → N(∞) = ¼Σc, a constant, when aq > 1; N(τ) = n·τ^δ with δ = (1 − aq)/a when aq < 1 (the noise of
  the directions not yet fitted keeps adding up);
* the minimum over τ sits where G(τ*) = L/(1 + γ) (for constant N; a fixed multiple of L in general), so
  τ* ∝ L^{−1/γ} and E_min ∝ τ*·N(τ*)/L ∝ L^{−(1 + δ⁺)/γ − 1}.

Hence

.. math:: B_\text{crit}(L) = \frac{E_\text{min}}{S_\text{min}} \propto L^{-1/\alpha_B},\qquad
          \alpha_B = \begin{cases} 1 & aq \ge 1,\\[2pt] \dfrac{a - 1}{a(1 - q)} & aq < 1, \end{cases}

(at aq = 1 a logarithm joins: N ∝ log τ). The gradient noise scale at the end of the optimal run,
B_noise = tr(HΣ)/E[GᵀHG], follows the same law: near the target E[GᵀHG] is dominated by the stationary noise
Σ h²·ηc/2 ∝ η (the signal part falls as τ^{−(3 − 1/a)}, faster since a(2 + q) > 1), and the tuned η ∝ L^{1/α_B}.
Since a(1 + q) > 1 forces α_B > (a − 1)/(2a − 1), Kaplan et al. 2020's α_B ≈ 0.21 (arXiv:2001.08361, for
language models) needs a shallow spectrum (a < 1.36) and noise not concentrated on the top directions:
q = 1 − (a − 1)/(0.21a), e.g. a = 1/0.79 ≈ 1.266 with q = 0 (equal noise in every direction). Zhang et al.
2019's c = h (q = 1) gives α_B = 1 for every a: B_crit ∝ 1/L.

The leading corrections fall as a power of L: N(∞) − N(τ) ∝ τ^{−(aq−1)/a} when aq > 1, and a constant beside
n·τ^δ (from the sum's first terms, ζ(aq)/4) when aq < 1, so the local slope d log B_crit/d log L approaches
−1/α_B like L^{abs(1 − aq)/(a − 1)}. :func:`~nqm.dynamics.critical_batch_scaling` measures it on a binned power law of
10³⁰ coordinates and more (:func:`nqm.spectra.power_law_bins`), so that d does not end the law first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from ...checks import check_init_var, check_real, check_target
from ...noise import example_variance, noise_scale_of_moments
from ...problem import NoisyQuadratic, check_precond
from ...spectra import power_law_bins
from ..runs import optimal_steps_to_target

__all__ = [
    "large_batch_steps",
    "small_batch_examples",
    "SmallBatchLimit",
    "ScalingExponents",
    "scaling_exponents",
    "CriticalScaling",
    "critical_batch_scaling",
]


def large_batch_steps(p: NoisyQuadratic, target, *, init_var=1.0, precond=None) -> float:
    """S_min: the fewest steps to ``target`` as B → ∞, i.e. of noise-free gradient descent with its step tuned
    (continuous step count t*, :func:`~nqm.dynamics.optimal_steps_to_target` on ``p`` without its noise)."""
    quiet = NoisyQuadratic(p.h, np.zeros(p.d))
    runs = optimal_steps_to_target(quiet, target, [1.0], init_var=init_var, precond=precond)
    return float(runs.steps_continuous[0])


@dataclass(frozen=True)
class SmallBatchLimit:
    """The fewest-examples run in the B → 0 limit: ``examples`` E_min, the time ``tau`` = εt at which it reaches
    the target, its ``eta`` = ε/B, and ``b_noise`` = tr(PHPΣ)/E[GᵀPHPG] at the target (the run's gradient noise
    scale where it ends)."""

    examples: float
    tau: float
    eta: float
    b_noise: float


def small_batch_examples(p: NoisyQuadratic, target, *, init_var=1.0, precond=None) -> SmallBatchLimit:
    r"""E_min: the fewest examples to ``target`` as B → 0 (continuous time, see
    :mod:`nqm.dynamics.studies.critical_scaling`),

    .. math:: E_\text{min} = \min_{\tau:\,G(\tau) < L} \frac{\tau N(\tau)}{L - G(\tau)},

    with the run that attains it (:class:`SmallBatchLimit`; examples 0 when θ₀ is already at the target). The
    minimum is found on a grid of 480 points in log τ over τ₀·(1, e¹²] (τ₀: G(τ₀) = L), refined by Brent's method
    between the best point's neighbours.
    """
    target = check_target(target)
    pre = check_precond(p, precond)
    kappa = pre * p.h
    v0 = check_init_var(init_var, p.d)
    half_h_v0 = 0.5 * p.h * v0
    pc = pre * example_variance(p)
    quarter_pc = 0.25 * pc  # exact: a power of two

    def signal(tau):
        return np.exp(-2.0 * np.multiply.outer(tau, kappa)) @ half_h_v0

    def noise(tau):
        return -np.expm1(-2.0 * np.multiply.outer(tau, kappa)) @ quarter_pc

    def log_examples(s):
        out = []
        for part in np.array_split(s, max(1, s.size * p.d >> 22)):  # at most ~2²² (τ, coordinate) pairs at once
            tau = np.exp(part)
            room = target - signal(tau)
            with np.errstate(divide="ignore", invalid="ignore"):
                out.append(np.where(room > 0, part + np.log(noise(tau)) - np.log(room), np.inf))
        return np.concatenate(out)

    if half_h_v0.sum() <= target:
        return SmallBatchLimit(0.0, 0.0, np.inf, float("nan"))
    # τ₀ with G(τ₀) = L: G falls from G(0) > L to 0; bisection in log τ after a doubling bracket
    lo, hi = -50.0, 0.0
    while signal(np.exp(hi)) > target:
        lo, hi = hi, hi + 1.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if signal(np.exp(mid)) > target else (lo, mid)
    grid = hi + np.linspace(0.0, 12.0, 481)[1:]
    values = log_examples(grid)
    i = int(np.argmin(values))
    if i == grid.size - 1:
        raise ValueError(f"the fewest examples lie beyond τ₀·e¹² (τ₀ = {np.exp(hi):.3g}); the noise must be ~ 0")
    bounds = (grid[i - 1] if i > 0 else hi, grid[i + 1])
    best = minimize_scalar(
        lambda s: float(log_examples(np.array([s]))[0]), bounds=bounds, method="bounded", options={"xatol": 1e-10}
    )
    tau = float(np.exp(best.x))
    eta = float((target - signal(tau)) / noise(tau))
    decay = np.exp(-2.0 * tau * kappa)
    variance = v0 * decay - eta * (pc / (2.0 * p.h)) * np.expm1(-2.0 * tau * kappa)  # V∞ = ηp²c/(2κ)
    b_noise = float(noise_scale_of_moments(p, variance, pre))
    return SmallBatchLimit(float(np.exp(best.fun)), tau, eta, b_noise)


@dataclass(frozen=True)
class ScalingExponents:
    r"""The derived exponents of a power-law problem h_i = i^{−a}, c_i = h_i^q (see the module): each quantity
    ∝ L^{exponent} as the target L → 0. ``alpha_b`` is Kaplan et al.'s α_B, with B_crit ∝ L^{−1/α_B}."""

    steps: float
    examples: float
    critical: float
    alpha_b: float


def scaling_exponents(exponent: float, noise_exponent: float) -> ScalingExponents:
    r"""The exponents of S_min, E_min and B_crit (= B_noise at the end of the optimal run) in the target L for
    h_i = i^{−a}, c_i = h_i^q, θ₀ ~ N(0, I), d → ∞ (derived in :mod:`nqm.dynamics.studies.critical_scaling`):

    .. math:: S_\text{min} \propto L^{-a/(a-1)},\quad
              E_\text{min} \propto L^{-\frac{a}{a-1}(1 + \delta^+) - 1},\quad
              B_\text{crit} \propto L^{-1/\alpha_B},\qquad \delta = \frac{1 - aq}{a}.

    Example:
        >>> scaling_exponents(2.0, 1.0).alpha_b, scaling_exponents(2.0, 0.0).alpha_b
        (1.0, 0.5)
    """
    a = check_real("exponent", exponent, low=1.0, low_open=True)
    q = check_real("noise_exponent", noise_exponent)
    if a * (1 + q) <= 1:
        raise ValueError(
            f"noise_exponent must exceed 1/exponent − 1 = {1 / a - 1:.4g} "
            f"(else tr(HΣ) = Σ i^(−a(1+q)) diverges), got {q!r}"
        )
    delta = max((1 - a * q) / a, 0.0)
    steps = -a / (a - 1)
    examples = steps * (1 + delta) - 1
    critical = examples - steps
    return ScalingExponents(steps, examples, critical, -1.0 / critical)


@dataclass(frozen=True)
class CriticalScaling:
    """S_min, E_min, B_crit = E_min/S_min and B_noise at the target against the target loss, on a power law.

    Attributes:
        exponent, noise_exponent: a and q of h_i = i^{−a}, c_i = noise_scale·h_i^q.
        d: the number of coordinates (binned by :func:`nqm.spectra.power_law_bins`).
        initial_loss: L₀ = ½Σh (θ₀ ~ N(0, I)).
        targets: the target losses, decreasing.
        s_min, e_min, b_crit: the two limits (:func:`large_batch_steps`, :func:`small_batch_examples`) and their
            ratio, per target.
        b_noise_end: tr(HΣ)/E[GᵀHG] at the target, at the end of the fewest-examples run (B → 0).
        derived: the exponents of :func:`scaling_exponents`.
    """

    exponent: float
    noise_exponent: float
    d: float
    initial_loss: float
    targets: np.ndarray
    s_min: np.ndarray
    e_min: np.ndarray
    b_crit: np.ndarray
    b_noise_end: np.ndarray
    derived: ScalingExponents

    def slopes(self, values, stride: int = 1) -> np.ndarray:
        """The local exponents d log(values)/d log L between every ``stride``-th target (2 with the default
        targets: one slope per decade)."""
        every = slice(None, None, stride)
        return np.diff(np.log(np.asarray(values, dtype=np.float64)[every])) / np.diff(np.log(self.targets[every]))


def critical_batch_scaling(
    exponent: float,
    noise_exponent: float,
    targets=None,
    *,
    d: float | None = None,
    noise_scale: float = 1.0,
) -> CriticalScaling:
    """S_min, E_min, B_crit and B_noise at the target for h_i = i^{−a}, c_i = ``noise_scale``·h_i^q, θ₀ ~ N(0, I),
    over ``targets`` (default: L₀·10^(−1, −1.5, …, −4)), for comparison with :func:`scaling_exponents`.

    ``d`` defaults to the size at which the initial loss beyond it, Σ_{i>d} i^{−a} ≈ d^{1−a}/(a − 1), is 1e-9 of
    the smallest target, so that the measured law is the infinite power law's (up to 10²⁰⁰ coordinates, binned).
    """
    derived = scaling_exponents(exponent, noise_exponent)
    a, q = float(exponent), float(noise_exponent)
    noise_scale = check_real("noise_scale", noise_scale, low=0.0, low_open=True)
    h_top, _ = power_law_bins(a, 1e6)
    approx_l0 = 0.5 * float(h_top.sum())
    if targets is None:
        targets = approx_l0 * 10.0 ** -np.arange(1.0, 4.01, 0.5)
    targets = np.array([check_target(t) for t in np.atleast_1d(targets)])
    if d is None:
        d = ((a - 1) * 1e-9 * targets.min()) ** (-1 / (a - 1))
        if d > 1e200:
            raise ValueError(f"the smallest target {targets.min():.3g} needs d = {d:.3g} > 1e200 coordinates")
    h, counts = power_law_bins(a, d)
    p = NoisyQuadratic(h, noise_scale * counts * h**q)
    s_min, e_min, b_noise = [], [], []
    for target in targets:
        s_min.append(large_batch_steps(p, target, init_var=counts))
        run = small_batch_examples(p, target, init_var=counts)
        e_min.append(run.examples)
        b_noise.append(run.b_noise)
    s_min, e_min = np.array(s_min), np.array(e_min)
    return CriticalScaling(
        exponent=a,
        noise_exponent=q,
        d=float(d),
        initial_loss=0.5 * float(counts @ h),
        targets=targets,
        s_min=s_min,
        e_min=e_min,
        b_crit=e_min / s_min,
        b_noise_end=np.array(b_noise),
        derived=derived,
    )
