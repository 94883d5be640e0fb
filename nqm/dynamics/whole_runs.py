"""Whole training runs: steps to reach a target loss, and the step size that minimises them.

For (preconditioned) SGD each coordinate of H's basis relaxes exponentially (Zhang et al. 2019,
arXiv:1907.04164, §3):

.. math::
    L(t, \\epsilon) = \\tfrac12\\sum_i h_i\\big[V_i^\\infty + (V_{0,i} - V_i^\\infty)\\,e^{t\\ell_i}\\big],

    \\ell_i = 2\\log|1 - \\epsilon\\lambda_i|,\\qquad
    V_i^\\infty = \\frac{\\epsilon\\,q_i}{\\kappa_i(2 - \\epsilon\\kappa_i)},

with ``κ = p h`` (so λ = εκ) and ``q = p²c/B`` (a step ε injects ε²q). This is smooth in the continuous step
count t, so

* ``steps_to_target`` finds the root of ``L(t) = target`` in t (safeguarded Newton on log t, after a doubling
  bracket) and returns the first integer step, checked by exact evaluation;
* ``optimal_steps_to_target`` solves, for all batch sizes at once, the two smooth equations that hold at the
  optimum, ``L(t, ε) = target`` and ``∂L/∂ε = 0`` (then ``dt/dε = 0``), by Newton's method in (log t, ε) with
  analytic derivatives, started from a short vectorised golden-section search. No grid over ε, no bisection
  on integer steps.

Other optimisers: :func:`~nqm.dynamics.steps_to_target` evaluates every step exactly (first hitting time, also where
E[L_t] oscillates); ``optimal_steps_to_target(family="heavy_ball" | "nesterov" | "ema")`` tunes (ε, β) or
(ε, γ) with golden-section searches over the O(d) closed forms of :mod:`nqm.dynamics.moments`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
from dataclasses import dataclass

import numpy as np

from ..checks import check_batch_size, check_batch_sizes, check_init_var, check_real
from ..noise import decay_pull, injected_variance, step_coefficients
from ..optim import (
    FAMILIES,
    Nesterov,
    Sgd,
    as_optimizer,
    ema,
    heavy_ball,
    nesterov,
    require_linear,
    sgd,
    stable_lr_bound,
)
from ..problem import NoisyQuadratic, check_precond
from ..threads import run_tasks, thread_count
from .expected import DecayedSgdMoments, log_abs_one_minus, mean_path, second_moments, steady_state_loss
from .moments import (
    EmaMoments,
    HeavyBallMoments,
    TwoStateMoments,
    ema_stationary,
    heavy_ball_stationary,
    two_state_stationary,
)
from .quadrature import compress_spectrum

__all__ = ["steps_to_target", "optimal_steps_to_target", "OptimalRuns", "check_target"]

_DENSE_CHUNK = 256
_BRACKET_STRIDE = 0.02  # the crossings' bracket grows from a guess by 2% of it, doubling


def check_target(target) -> float:
    """A target loss: finite and > 0."""
    return check_real("target loss", target, low=0.0, low_open=True)


# -- SGD: the loss and its derivatives in closed form ----------------------------------------------
class _SGDLoss:
    """L(t, ε) and its derivatives for rows of (ε, B) at once; per-coordinate arrays are (n, d)."""

    def __init__(self, p: NoisyQuadratic, batch_size, init_var, precond):
        pre = check_precond(p, precond)
        b = np.atleast_1d(check_batch_size(batch_size))
        self.half_h = 0.5 * p.h
        self.kappa = pre * p.h  # λ = ε κ
        self.noise = injected_variance(p, b[:, None], pre)  # q = p²c/B: a step ε injects ε²q
        self.v0 = check_init_var(init_var, p.d)

    def at(self, eps) -> _Rows:
        return _Rows(self, np.asarray(eps, dtype=np.float64))

    def subset(self, rows) -> _SGDLoss:
        """The same loss for a subset of the batch sizes (Newton drops the rows that have converged)."""
        part = object.__new__(_SGDLoss)
        part.half_h, part.kappa, part.v0 = self.half_h, self.kappa, self.v0
        part.noise = self.noise[rows]
        return part

    def value(self, t, eps):
        return self.at(eps).value(t)

    def stationary(self, eps):
        """lim L(t) per row: ½Σ h V∞ when every coordinate is stable (εκ < 2), else inf; no logs needed."""
        eps_col = np.asarray(eps, dtype=np.float64)[:, None]
        stable = np.all(eps_col * self.kappa < 2, axis=1)
        with np.errstate(divide="ignore"):
            v_inf = eps_col * (self.noise / self.kappa) / (2.0 - eps_col * self.kappa)
        return np.where(stable, v_inf @ self.half_h, np.inf)


class _Rows:
    """The per-coordinate pieces at step sizes eps (n,), computed once: ℓ, V∞ and V₀ − V∞ (the ε-derivatives
    are formed only when asked for)."""

    def __init__(self, loss: _SGDLoss, eps):
        self.loss, self.eps = loss, eps
        k = loss.kappa
        eps_col = eps[:, None]
        u = 1.0 - eps_col * k
        # εκ = 1 exactly solves that coordinate in one step (ℓ = −∞); a tiny |u| keeps every term finite
        # and still gives e^{tℓ} = 0 for t ≥ 1.
        u = np.where(np.abs(u) < 1e-150, 1e-150, u)
        self.ell = 2.0 * np.maximum(log_abs_one_minus(eps_col * k), np.log(1e-150))
        self.kappa_u = (k, u)
        w = 2.0 - eps_col * k
        self.v_inf = eps_col * (loss.noise / k) / w
        self.gap = loss.v0 - self.v_inf

    def _decay(self, t):
        tt = t[:, None]
        return np.exp(np.minimum(tt * self.ell, 700.0)), tt

    def value(self, t):
        """L(t, ε) for continuous t (n,)."""
        e, _ = self._decay(np.asarray(t, dtype=np.float64))
        return (self.v_inf + self.gap * e) @ self.loss.half_h

    def derivatives(self, t):
        """(L, ∂L/∂s, ∂L/∂ε, ∂²L/∂s∂ε, ∂²L/∂ε²) with s = log t, from V = V∞ + (V₀ − V∞)e^{tℓ}."""
        k, u = self.kappa_u
        w = 2.0 - self.eps[:, None] * k
        d_ell = -2.0 * k / u  # derivatives in ε, needed only here
        dd_ell = -2.0 * k**2 / u**2
        d_v = 2.0 * (self.loss.noise / k) / w**2
        dd_v = 4.0 * self.loss.noise / w**3
        e, tt = self._decay(t)
        de_x = tt * d_ell * e
        dde_x = (tt * dd_ell + (tt * d_ell) ** 2) * e
        de_t = self.ell * e
        dde_xt = (d_ell + tt * self.ell * d_ell) * e
        gap, h = self.gap, self.loss.half_h
        v = self.v_inf + gap * e
        v_x = d_v * (1 - e) + gap * de_x
        v_xx = dd_v * (1 - e) - 2 * d_v * de_x + gap * dde_x
        v_t = gap * de_t
        v_xt = -d_v * de_t + gap * dde_xt
        return v @ h, t * (v_t @ h), v_x @ h, t * (v_xt @ h), v_xx @ h


def _crossing_time(loss: _SGDLoss, eps, target, t_guess=None):
    """Continuous t with L(t, ε) = target for each row; inf where the stationary loss is not below target.

    The excess L(t) − L∞ = Σ w_i e^{ℓ_i t} (w_i ≥ 0, ℓ_i < 0: every coordinate relaxes downwards, which the
    caller guarantees, with L(0) > target) is log-convex and decreasing. Newton's method on
    g(t) = log(L − L∞) − log(target − L∞) therefore climbs monotonically to the root from any point left of
    it, and from a point right of it lands left of it in one step; it is exact in one step when one rate
    dominates. Start: ``t_guess`` (a neighbouring solution) or 0.
    """
    rows = loss.at(eps)
    stationary = rows.v_inf @ loss.half_h
    reached = np.all(rows.ell < 0, axis=1) & (stationary < target)
    log_goal = np.log(np.where(reached, target - stationary, 1.0))
    t = np.zeros(eps.size) if t_guess is None else np.where(np.isfinite(t_guess), np.maximum(t_guess, 0.0), 0.0)
    active = reached.copy()
    for _ in range(100):
        if not active.any():
            break
        e, _ = rows._decay(t)
        excess = (rows.gap * e) @ loss.half_h
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.log(excess) - log_goal
            slope = ((rows.gap * rows.ell * e) @ loss.half_h) / excess
            t_new = np.maximum(t - f / slope, 0.0)
        ok = np.isfinite(t_new)
        # converged when the step is below 1e-11 of t: far below one step (the integer is checked exactly)
        done = ~ok | (np.abs(t_new - t) <= 1e-11 * np.maximum(t, 1e-300))
        t = np.where(active & ok, t_new, t)
        active &= ~done
    return np.where(reached, t, np.inf)


def _first_integer_step(loss: _SGDLoss, eps, target, t_cont):
    """The first integer k with L(k) ≤ target, by integer bisection around the continuous crossing t_cont.

    t_cont is accurate to ~1e-11·t (Newton's tolerance), which is hundreds of steps at t ~ 1e12: the bracket
    [⌈t⌉ − w, ⌈t⌉ + w] with w = ⌈1e-9·t⌉ + 1 is checked by exact evaluation (widened until it holds) and halved
    down to one step. Past 2⁵² steps integers are no longer floats, and ⌈t_cont⌉ is returned.
    """
    finite = np.isfinite(t_cont)
    k = np.where(finite, np.maximum(np.ceil(t_cont), 0.0), 0.0)
    exact = finite & (k < 2.0**52)
    rows = loss.at(eps)
    width = np.ceil(1e-9 * k) + 1
    lo, hi = np.maximum(k - width, 0.0), k + width
    for _ in range(60):  # widen: L(lo) > target (or lo = 0, where L(0) > target is known) and L(hi) ≤ target
        low_bad = exact & (lo > 0) & (rows.value(lo) <= target)
        high_bad = exact & (rows.value(hi) > target)
        if not (low_bad.any() or high_bad.any()):
            break
        lo = np.where(low_bad, np.maximum(lo - 2 * width, 0.0), lo)
        hi = np.where(high_bad, hi + 2 * width, hi)
        width = np.where(low_bad | high_bad, 2 * width, width)
    while True:
        narrowing = exact & (hi - lo > 1)
        if not narrowing.any():
            break
        mid = np.floor(0.5 * (lo + hi))
        below = rows.value(np.where(narrowing, mid, hi)) <= target
        hi = np.where(narrowing & below, mid, hi)
        lo = np.where(narrowing & ~below, mid, lo)
    return np.where(exact, hi, np.where(finite, k, np.inf))


def _monotone(loss: _SGDLoss, eps) -> np.ndarray:
    """True where every coordinate starts at or above its stationary level (so L(t) decreases)."""
    rows = loss.at(eps)
    return np.all(rows.ell < 0, axis=1) & np.all(loss.v0 >= rows.v_inf * (1 - 1e-12), axis=1)


def _dense_first_hit(p, opt, batch_size, target, init_var, max_steps):
    """First integer t with E[L_t] ≤ target by exact evaluation of every step (any linear optimiser).

    Chunks of steps double in length, so a long scan costs few Python round trips. The scan stops early
    with inf once the run has settled above the target to float resolution.
    """
    lam, sigma = step_coefficients(p, opt, batch_size)
    pull = decay_pull(p, opt)
    v0 = check_init_var(init_var, p.d)
    stationary = steady_state_loss(p, opt, batch_size)
    start, chunk = 0, _DENSE_CHUNK
    while start <= max_steps:
        ts = np.arange(start, min(start + chunk, max_steps + 1))
        # E[L] over this chunk: the moment map is re-powered from t = 0, exact at every step
        var = second_moments(opt, lam, sigma, v0, ts)
        with np.errstate(over="ignore", invalid="ignore"):
            if pull is not None:
                var = var + mean_path(opt, lam, pull.step, pull.start, ts) ** 2
            losses = 0.5 * (var @ p.h)
        hit = np.nonzero(losses <= target)[0]
        if hit.size:
            return int(ts[hit[0]])
        last = losses[-1]
        if not np.isfinite(last) or (stationary > target and abs(last - stationary) <= 1e-12 * stationary):
            return float("inf")
        # chunks double (few Python round trips) but stay within about 2^22 values of memory
        start, chunk = ts[-1] + 1, min(2 * chunk, max(_DENSE_CHUNK, (1 << 22) // p.d))
    return float("inf")


def steps_to_target(p: NoisyQuadratic, opt, batch_size, target, *, init_var=1.0, max_steps: int = 10**7):
    """The first step t with E[L_t] ≤ target (an int), or ``inf`` when the run never gets there.

    ``opt`` is a linear optimiser of :mod:`nqm.optim` (a plain ε means ``optim.sgd(ε)``). SGD (optionally
    preconditioned, without weight decay) whose coordinates all relax downwards is solved in closed form: root
    of the continuous L(t) = target, then the first integer, checked exactly. Every other case — momentum
    (underdamped runs oscillate), EMA, weight decay, coordinates that start below their stationary level,
    unstable steps — is scanned step by step with the exact moment recursion, so the answer is the true first
    hitting time; that costs O(t·d) and stops at ``max_steps``.

    Example:
        >>> from nqm import NoisyQuadratic
        >>> p = NoisyQuadratic([1.0], c=[0.0])
        >>> steps_to_target(p, 0.5, 1, 0.01)      # L_t = ½·0.25^t: 0.03125 at t = 2, 0.0078 at t = 3
        3
    """
    opt = require_linear(as_optimizer(opt), "steps_to_target")
    target = check_target(target)
    if np.ndim(batch_size) != 0:
        raise ValueError(f"batch_size must be a single number here, got {batch_size!r}")
    check_batch_size(batch_size)
    if isinstance(opt, Sgd) and not opt.weight_decay:  # (decay: the scan below, which knows its pull)
        loss = _SGDLoss(p, batch_size, init_var, opt.precond)
        eps = np.atleast_1d(np.float64(opt.lr))
        if loss.value(np.zeros(1), eps)[0] <= target:
            return 0
        if _monotone(loss, eps)[0]:
            if loss.stationary(eps)[0] >= target:
                return float("inf")
            k = _first_integer_step(loss, eps, target, _crossing_time(loss, eps, target))[0]
            return int(k) if np.isfinite(k) else float("inf")
        # Coordinates that start below their stationary level, or are unstable, only grow: their share of
        # the loss at t = 0 is a lower bound for every later step.
        rows = loss.at(eps)
        growing = (rows.ell[0] >= 0) | (loss.v0 < rows.v_inf[0])
        if loss.half_h[growing] @ loss.v0[growing] > target:
            return float("inf")
    return _dense_first_hit(p, opt, batch_size, target, init_var, int(max_steps))


_RISING_GRID = 48  # log-spaced ε per batch size over _RISING_DECADES below the feasible step, then as many again
_RISING_DECADES = 4  # around the best


def _first_hit_two_sided(rows: _Rows, target: float, max_steps: float) -> float:
    r"""The first integer t ≥ 1 with L(t) ≤ target for one row of SGD whose coordinates may rise or fall; inf if none
    up to ``max_steps``.

    ``L(t) = L∞ + Σ_i w_i e^{ℓ_i t}`` with ``w_i = ½h_i(V₀ᵢ − V∞ᵢ)``: the falling terms (w > 0) decrease in t, the
    rising ones (w < 0) increase, so on [a, b] ``L ≥ L∞ + Σ_{w>0} w e^{ℓb} + Σ_{w<0} w e^{ℓa}``. Intervals doubling in
    length are pruned by that bound and split where it does not prune, left first, down to single steps, so the
    answer is the exact first hit of the closed form in O(d log t) for a smooth run; past the point where even
    ``L∞ + Σ_{w<0} w e^{ℓa}`` (every falling term gone) exceeds the target, no later step can reach it.
    """
    w = rows.gap[0] * rows.loss.half_h
    ell, base = rows.ell[0], float(rows.v_inf[0] @ rows.loss.half_h)
    falling, rising = w > 0, w < 0

    def value(t):
        return base + float(w @ np.exp(np.maximum(t * ell, -745.0)))

    def bound(a, b):
        return base + float(w[falling] @ np.exp(b * ell[falling])) + float(w[rising] @ np.exp(a * ell[rising]))

    lo = 1
    while lo <= max_steps:
        if base + float(w[rising] @ np.exp(lo * ell[rising])) > target:
            return float("inf")  # even with every falling term gone
        stack = [(lo, min(2 * lo - 1, int(max_steps)))]
        while stack:
            a, b = stack.pop()
            if bound(a, b) > target:
                continue
            if a == b:
                if value(a) <= target:
                    return float(a)
                continue
            mid = (a + b) // 2
            stack += [(mid + 1, b), (a, mid)]  # the left half is popped first
        lo *= 2
    return float("inf")


def _fewest_steps_scanned(loss: _SGDLoss, target, eps_top):
    """(steps, ε) with the fewest exact steps over a log grid of ε in [eps_top·10⁻⁴, eps_top], then a finer grid
    between the best point's neighbours; each run's first hit by :func:`_first_hit_two_sided`, cut off at the best
    count so far."""
    best_steps, best_eps = float("inf"), float("nan")

    def scan(grid):
        nonlocal best_steps, best_eps
        counts = np.full(grid.size, np.inf)
        for k in range(grid.size - 1, -1, -1):
            cap = best_steps if np.isfinite(best_steps) else 10**9
            counts[k] = _first_hit_two_sided(loss.at(np.array([grid[k]])), target, cap)
            if counts[k] < best_steps or (counts[k] == best_steps and grid[k] < best_eps):
                best_steps, best_eps = counts[k], grid[k]
        return counts

    grid = np.geomspace(eps_top * 10.0**-_RISING_DECADES, eps_top, _RISING_GRID)
    counts = scan(grid)
    if np.isfinite(best_steps):
        k = int(np.argmin(counts))
        scan(np.geomspace(grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)], _RISING_GRID))
    return best_steps, best_eps


def _optimal_with_rising_coordinates(p, target, b, init_var, precond, feasible, below):
    r"""SGD's tuner where some coordinate starts below its stationary level V∞(ε) = εq/(κ(2 − εκ)) within reach.

    Such a coordinate's loss only rises, so L(t) need not decrease and the Newton search on the smooth crossing
    (which needs every coordinate to relax downwards) would be confined to ε below the first such level — for a
    coordinate that starts at 0 with noise, to ε = 0. These rows are instead tuned on exact first hits of the
    closed form (:func:`_first_hit_two_sided`) over a log grid of ε below the feasible step and a finer grid
    around its best point; the others by the search, as before.
    """
    steps, eps, t = np.empty(b.size), np.empty(b.size), np.empty(b.size)
    interior = np.zeros(b.size, dtype=bool)
    if not np.all(below):  # the other rows by the search (they have no such coordinate within reach)
        rest = optimal_steps_to_target(p, target, b[~below], init_var=init_var, precond=precond)
        steps[~below], eps[~below], t[~below] = rest.steps, rest.lr, rest.steps_continuous
        interior[~below] = rest.interior
    loss = _SGDLoss(p, b, init_var, precond)
    for j in np.nonzero(below)[0]:
        steps[j], eps[j] = _fewest_steps_scanned(loss.subset([j]), target, feasible[j])
        t[j] = steps[j]
        interior[j] = np.isfinite(steps[j]) and eps[j] < feasible[j] * (1 - 1e-6)
    pre = None if precond is None else check_precond(p, precond)
    return OptimalRuns(b, steps, b * steps, eps, t, interior, precond=pre)


@dataclass
class OptimalRuns:
    """Per batch size: the fewest steps to the target, the examples they cost, and the tuned optimiser.

    Attributes: batch_sizes, steps (int-valued floats; inf where unreachable), examples = B·steps, lr,
    steps_continuous (the continuous optimum t*, for plots and fits), interior (True where the optimum
    is a stationary point of t(ε); False where it sits on the edge of the searched range), the tuned
    ``momentum`` β (heavy ball, Nesterov) or ``ema`` γ per batch size (None where the family has none), the
    ``family`` and the ``precond`` they were tuned with, and the ``weight_decay`` λ per batch size (tuned or held;
    None without) and whether it is ``decoupled``. ``optimizer(i)`` is the tuned value of batch size i.
    """

    batch_sizes: np.ndarray
    steps: np.ndarray
    examples: np.ndarray
    lr: np.ndarray
    steps_continuous: np.ndarray
    interior: np.ndarray
    momentum: np.ndarray | None = None
    ema: np.ndarray | None = None
    family: str = "sgd"
    precond: np.ndarray | None = None
    weight_decay: np.ndarray | None = None
    decoupled: bool = False

    def optimizer(self, i: int):
        """The tuned optimiser value (:mod:`nqm.optim`) of batch size ``batch_sizes[i]``."""
        lr = float(self.lr[i])
        if self.weight_decay is not None and self.family == "heavy_ball":
            return heavy_ball(lr, float(self.momentum[i]), self.precond, float(self.weight_decay[i]), self.decoupled)
        if self.weight_decay is not None:
            return sgd(lr, self.precond, float(self.weight_decay[i]), self.decoupled)
        if self.family == "heavy_ball":
            return heavy_ball(lr, float(self.momentum[i]), self.precond)
        if self.family == "nesterov":
            return nesterov(lr, float(self.momentum[i]), self.precond)
        if self.family == "ema":
            return ema(sgd(lr, self.precond), float(self.ema[i]))
        return sgd(lr, self.precond)


def _feasible_lr(loss: _SGDLoss, target):
    """Largest stable ε per row whose stationary loss is below target.

    L∞(ε) = ½Σ h ε q/(κ(2 − εκ)) is increasing and convex on (0, 2/κ_max), so Newton's method started at
    the stability edge (where L∞ = ∞ > target) descends to the root monotonically.
    """
    edge = 2.0 / loss.kappa.max()
    g_k = loss.noise / loss.kappa
    eps = np.full(loss.noise.shape[0], edge * (1 - 1e-9))
    for _ in range(100):
        w = 2.0 - eps[:, None] * loss.kappa
        f = (eps[:, None] * g_k / w) @ loss.half_h - target
        slope = (2.0 * g_k / w**2) @ loss.half_h
        # f ≤ 0 at the edge (no noise, or too little to matter) keeps the edge; the slope is then never divided by
        eps_new = np.where(f > 0, eps - f / np.where(f > 0, slope, 1.0), eps)
        if np.all(np.abs(eps_new - eps) <= 1e-13 * eps):
            break
        eps = eps_new
    return eps * (1 - 1e-12)


# -- momentum and EMA: integer first crossings on the closed forms, tuned by nested golden sections --------
class _TunedLoss:
    """E[L_t] for rows of (ε, β) — heavy ball or Nesterov — or (ε, γ) — an EMA of SGD — in closed form
    (:mod:`nqm.dynamics.moments`); ``hp`` is the hyper-parameter β or γ of each row."""

    decoupled = False
    compressible = True  # E[L_t] is linear in (V₀, q) per coordinate: see compressed()

    def __init__(self, p: NoisyQuadratic, batch_sizes, init_var, precond, family: str):
        pre = check_precond(p, precond)
        self.precond = None if precond is None else pre
        self.family = family
        self.half_h = 0.5 * p.h
        self.kappa = pre * p.h
        self.batch_sizes = batch_sizes
        self.noise = injected_variance(p, batch_sizes[:, None], pre)
        self.v0 = check_init_var(init_var, p.d)

    def compressed(self, **sizes) -> _TunedLoss:
        """The same loss on a compressed spectrum (:func:`nqm.dynamics.quadrature.compress_spectrum`), to search on:
        pseudo-coordinates of curvature κ with ½h = 1, V₀ = a (the start's weight) and noise b/B per batch size."""
        positive = self.kappa > 0  # κ = 0 coordinates (flat directions) are kept as they are
        unit_noise = self.noise[0] * self.batch_sizes[0]  # p²c
        spectrum = compress_spectrum(
            self.kappa[positive], (self.half_h * self.v0)[positive], (self.half_h * unit_noise)[positive], **sizes
        )
        out = copy.copy(self)
        out.kappa = np.concatenate([spectrum.kappa, self.kappa[~positive]])
        out.half_h = np.concatenate([np.ones(spectrum.kappa.size), self.half_h[~positive]])
        out.v0 = np.concatenate([spectrum.a, self.v0[~positive]])
        weights = np.concatenate([spectrum.b, unit_noise[~positive]])
        out.noise = weights / self.batch_sizes[:, None]
        return out

    def take(self, rows) -> _TunedLoss:
        """The same loss for the batch sizes at the indices ``rows`` (repeats allowed: ``tiled`` repeats them all),
        so that several points per batch size, or a few batch sizes, are searched in one vectorised call."""
        out = copy.copy(self)
        out.batch_sizes = self.batch_sizes[rows]
        out.noise = self.noise[rows]
        return out

    def tiled(self, k: int) -> _TunedLoss:
        """The loss for its batch sizes repeated ``k`` times: rows i, i + n, … are batch size i."""
        return self.take(np.tile(np.arange(self.noise.shape[0]), k))

    def _moments(self, eps, hp, v0, rows=slice(None)):
        lam, q, hh = eps[..., None] * self.kappa, eps[..., None] ** 2 * self.noise[rows], hp[..., None]
        if self.family == "heavy_ball":
            return HeavyBallMoments(lam, q, v0, hh)
        if self.family == "ema":
            return EmaMoments(lam, q, v0, hh)
        f, u = self._nesterov_transition(lam, q, hh)
        return TwoStateMoments(f, u, v0, Nesterov.initial)

    @staticmethod
    def _nesterov_transition(lam, q, beta):
        """Nesterov's (F, u = gσ), one β per row: the value's transition, with β an array broadcasting against
        λ (the step ε does not enter it: λ and σ carry it)."""
        f, g = Nesterov(1.0, beta).transition(lam)
        return f, g * np.sqrt(q)[..., None]

    def curve(self, eps, hp):
        """t ↦ E[L_t] at fixed rows (ε, hp); the t-independent work is done here, once."""
        moments = self._moments(eps, hp, self.v0)
        return lambda t: moments.at(np.asarray(t, dtype=np.float64)[:, None]) @ self.half_h

    def value(self, eps, hp, t):
        return self.curve(eps, hp)(t)

    def initial_loss(self) -> float:
        """E[L_0] = ½Σh·V₀, whatever the hyper-parameters: the runs start at E[θ₀] = θ*."""
        return float(self.v0 @ self.half_h)

    def first_hit_by_scan(
        self, row: int, eps: float, hp: float, target: float, until: int, budget: float = np.inf
    ) -> int | None:
        """The first integer t < ``until`` with E[L_t] ≤ target for batch size ``row`` at (ε, hp) by evaluating
        every step; ``until`` if there is none; None where that would take more than ``budget`` coordinate-steps.

        The stretches where a lower bound of E[L_t] (:meth:`HeavyBallMoments.lower_bound`,
        :meth:`TwoStateMoments.lower_bound`, :meth:`EmaMoments.lower_bound`) stays above the target are skipped:
        intervals (``_first_hit_pruned``) are searched left first and halved down to leaves of a few steps
        (``_scan_leaf``) that are evaluated step by step, so the first hit found is the first one."""
        kernels = _kernels_for(self)
        if kernels is not None:  # compiled, the same branch and bound; NaN: a value it cannot give, decided below
            leaf = _scan_leaf(self.half_h.size)
            hit = kernels.first_hit_pruned(
                eps, hp, self.kappa, self.noise[row], self.v0, self.half_h, target, until, budget, leaf
            )
            if not (isinstance(hit, float) and np.isnan(hit)):
                return hit
        moments = self._moments(np.array(eps), np.array(hp), self.v0, row)
        if isinstance(moments, (HeavyBallMoments, TwoStateMoments, EmaMoments)):
            return _first_hit_pruned(moments, self.half_h, target, until, budget)
        if until * self.v0.size > budget:
            return None
        chunk = max(1, (1 << 22) // self.v0.size)
        for start in range(0, until, chunk):
            ts = np.arange(start, min(start + chunk, until), dtype=np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                hit = np.nonzero(moments.at(ts[:, None]) @ self.half_h <= target)[0]
            if hit.size:
                return int(ts[hit[0]])
        return until

    def stationary(self, eps, hp):
        lam, q, hh = eps[:, None] * self.kappa, eps[:, None] ** 2 * self.noise, hp[:, None]
        if self.family == "heavy_ball":
            return heavy_ball_stationary(lam, q, hh) @ self.half_h
        if self.family == "ema":
            return ema_stationary(lam, q, hh)[2] @ self.half_h
        return two_state_stationary(*self._nesterov_transition(lam, q, hh))[..., 0] @ self.half_h

    def stability_edge(self, hp):
        """Largest stable ε: λ_max below the family's bound (:func:`nqm.optim.stable_lr_bound`)."""
        return stable_lr_bound(self.family, hp) / self.kappa.max()

    def search_range(self) -> tuple[float, float]:
        """The range of s searched, with ``hp = hp_of(s)``: log(1 − h) for h = β or γ in [10⁻⁶, 1 − 10⁻⁴]."""
        return _H_LOG_RANGE

    @staticmethod
    def hp_of(s):
        return -np.expm1(s)

    def result_fields(self, hp) -> dict:
        """The tuned hyper-parameter as :class:`OptimalRuns` names it."""
        return {"ema": hp} if self.family == "ema" else {"momentum": hp}

    def feasible_lr(self, hp, target):
        """Per row, the ε (just below the stability edge) at which the stationary loss reaches ``target``.

        The stationary loss increases with ε, from 0 to ∞ at the edge: bisection in log ε, 42 halvings (compiled
        where :func:`_kernels_for` gives the kernels).
        """
        kernels = _kernels_for(self)
        if kernels is not None:
            return kernels.feasible_lr(hp, self.kappa, self.noise, self.half_h, target)
        edge = self.stability_edge(hp) * (1 - 1e-9)
        lo, hi = np.log(edge) - np.log(1e15), np.log(edge)
        for _ in range(42):  # 34.5·2⁻⁴² = 8e-12 in log ε
            mid = 0.5 * (lo + hi)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                above = ~(self.stationary(np.exp(mid), hp) < target)
            hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
        return np.exp(lo)


def _scan_leaf(d: int) -> int:
    """Steps evaluated one by one where the lower bound does not exclude a hit: about 8192 coordinate-steps per leaf,
    4 to 256 steps (a bound costs a few evaluations of one step, so long spectra halve down to short leaves; at
    d = 10⁴ a leaf of 4 steps scans 13× faster than one of 256)."""
    return int(np.clip(8192 // max(d, 1), 4, 256))


def _first_hit_pruned(
    moments: HeavyBallMoments | TwoStateMoments | EmaMoments, half_h, target: float, until: int, budget: float = np.inf
) -> int | None:
    """The first integer t < ``until`` with ½Σh E[x_t²] ≤ target (``until`` if none): branch and bound on
    intervals of t with the moments' lower bound, leaves evaluated exactly. None once more than ``budget``
    coordinate-steps have been spent (a leaf costs its steps, a bound about one step, times the coordinates).

    The first intervals double in width away from ``until`` (one leaf, one leaf, two, four, …): where E[L] decreases
    to the target, the bound excludes all of them but the last leaf or so, which halving from [0, until) reaches only
    after twice as many bounds (one excluded and one split per level)."""
    leaf = _scan_leaf(half_h.size)
    ends, width = [until], leaf
    while ends[-1] > 0:
        ends.append(max(ends[-1] - width, 0))
        width = width if len(ends) < 3 else 2 * width
    intervals = [(lo, hi - 1) for hi, lo in zip(ends, ends[1:])]  # the leftmost last: it is popped first
    spent = 0
    while intervals:
        if spent > budget:
            return None
        first, last = intervals.pop()
        if last < first:
            continue
        if last - first < leaf:
            ts = np.arange(first, last + 1, dtype=np.float64)
            spent += ts.size * half_h.size
            with np.errstate(over="ignore", invalid="ignore"):
                hit = np.nonzero(moments.at(ts[:, None]) @ half_h <= target)[0]
            if hit.size:
                return int(ts[hit[0]])
            continue
        spent += half_h.size
        with np.errstate(over="ignore", invalid="ignore"):
            if moments.lower_bound(first, last) @ half_h > target:
                continue
        middle = (first + last) // 2
        intervals += [(middle + 1, last), (first, middle)]  # the left half is popped first
    return until


class _DecayTunedLoss(_TunedLoss):
    """E[L_t] of SGD with weight decay λ for rows of (ε, λ), with the problem's optimum θ* (towards which the decay
    does not pull): closed form per coordinate (:class:`~nqm.dynamics.DecayedSgdMoments`). λ is searched on log λ
    over [10⁻³·h_min, h_max], or held at ``decay``."""

    compressible = False  # the mean's path to the biased fixed point is not a sum of a- and b-weighted parts

    def __init__(self, p: NoisyQuadratic, batch_sizes, init_var, precond, decay, decoupled: bool):
        self.pre = check_precond(p, precond)
        self.precond = None if precond is None else self.pre
        self.family = "sgd"
        self.decoupled = decoupled
        self.h, self.half_h = p.h, 0.5 * p.h
        self.optimum = np.zeros(p.d) if p.optimum is None else p.optimum
        self.batch_sizes = batch_sizes
        self.noise = injected_variance(p, batch_sizes[:, None], self.pre)
        self.v0 = check_init_var(init_var, p.d)
        self.range = _decay_range(p) if decay == "tune" else (np.log(decay),) * 2

    def _decayed_kappa(self, decay):
        """The curvature a step ε multiplies, per row: p(h + λ) coupled, ph + λ decoupled."""
        return self.pre * (self.h + decay) if not self.decoupled else self.pre * self.h + decay

    def _moments(self, eps, hp, v0, rows=slice(None)):
        lam = hp[..., None]
        kappa = self._decayed_kappa(lam)
        pulled = lam * (1.0 if self.decoupled else self.pre) * self.optimum  # the pull per unit ε
        return DecayedSgdMoments(eps[..., None] * kappa, eps[..., None] ** 2 * self.noise[rows], v0, -pulled / kappa)

    def stationary(self, eps, hp):
        return self._moments(eps, hp, self.v0).stationary() @ self.half_h

    def stability_edge(self, hp):
        return 2.0 / self._decayed_kappa(np.asarray(hp)[..., None]).max(axis=-1)

    def search_range(self) -> tuple[float, float]:
        return self.range

    @staticmethod
    def hp_of(s):
        return np.exp(s)

    def result_fields(self, hp) -> dict:
        return {"weight_decay": hp}


class _DecayHeavyBallLoss(_TunedLoss):
    """Heavy ball with a held weight decay λ per batch size (a number, or one per row), for rows of (ε, β): E[x_t²]
    is the zero-mean second moment plus the square of the mean's path to the biased fixed point
    (:class:`PulledMoments`). Coupled: heavy ball's closed form at the curvature h + λ, x∞ = −λθ*/(h + λ).
    Decoupled (δ = ελ): the two-state form of ``θ_{t+1} = (1 + β − λ − δ)θ_t − β(1 − δ)θ_{t−1}`` started at
    θ_{−1} = θ₀/(1 − δ), with x∞ = −λ(1 − β)θ*/(ph + λ(1 − β))."""

    compressible = False

    def __init__(self, p: NoisyQuadratic, batch_sizes, init_var, precond, decay, decoupled: bool):
        super().__init__(p, batch_sizes, init_var, precond, "heavy_ball")
        self.decay = np.broadcast_to(np.asarray(decay, dtype=np.float64), batch_sizes.shape)
        self.decoupled = decoupled
        self.pre, self.h = check_precond(p, precond), p.h
        # the curvature a step ε multiplies, per row: coupled decay is curvature p(h + λ)
        self.kappa = self.pre * (p.h + (0.0 if decoupled else self.decay[:, None]))
        if decoupled:
            self.kappa = np.broadcast_to(self.kappa, (batch_sizes.size, p.d))
        self.optimum = None if p.optimum is None or not np.any(p.optimum) else p.optimum

    def take(self, rows) -> _DecayHeavyBallLoss:
        out = super().take(rows)
        out.decay = self.decay[rows]
        out.kappa = self.kappa if self.kappa.ndim == 1 else self.kappa[rows]
        return out

    def _parts(self, eps, hp, rows=slice(None)):
        """(λ, q, β, δ) per row and coordinate, the transition F and the noise's gains u = (−√q, 0)."""
        lam, q = eps[..., None] * self.kappa[rows], eps[..., None] ** 2 * self.noise[rows]
        beta = np.broadcast_to(hp[..., None], lam.shape)
        decay = self.decay[rows][..., None]
        delta = np.broadcast_to(eps[..., None] * decay if self.decoupled else 0.0, lam.shape)
        f = np.empty(lam.shape + (2, 2))
        f[..., 0, 0], f[..., 0, 1] = 1 + beta - lam - delta, -beta * (1 - delta)
        f[..., 1, 0], f[..., 1, 1] = 1.0, 0.0
        u = np.zeros(lam.shape + (2,))
        u[..., 0] = -np.sqrt(q)
        return lam, q, beta, delta, f, u

    def _fixed_point(self, lam, beta, delta, rows=slice(None)):
        """x∞ per row and coordinate (pull over λ + δ(1 − β)), None without an optimum."""
        if self.optimum is None:
            return None
        if self.decoupled:
            return -delta * (1 - beta) * self.optimum / (lam + delta * (1 - beta))
        decay = self.decay[rows][..., None]
        return -decay * self.optimum / (self.h + decay)

    def _moments(self, eps, hp, v0, rows=slice(None)):
        lam, q, beta, delta, f, u = self._parts(eps, hp, rows)
        if self.decoupled:
            start = (1.0, 1.0 / (1.0 - delta[..., :1]))  # θ_{−1} = θ₀/(1 − δ): one δ per row
            variance = TwoStateMoments(f, u, v0, start)
        else:
            variance = HeavyBallMoments(lam, q, v0, beta)
        x_inf = self._fixed_point(lam, beta, delta, rows)
        if x_inf is None:
            return variance
        offset = np.zeros(lam.shape) if not self.decoupled else delta / (1 - delta) * self.optimum
        response = TwoStateMoments(f, np.zeros(lam.shape + (2,)), 0.0, (1.0, 0.0))
        return PulledMoments(variance, response, x_inf, offset)

    def stationary(self, eps, hp):
        lam, q, beta, delta, f, u = self._parts(eps, hp)
        if self.decoupled:
            noise = two_state_stationary(f, u)[..., 0]
        else:
            noise = heavy_ball_stationary(lam, q, beta)
        x_inf = self._fixed_point(lam, beta, delta)
        return (noise if x_inf is None else noise + x_inf**2) @ self.half_h

    def stability_edge(self, hp):
        beta = np.asarray(hp)
        if not self.decoupled:
            return stable_lr_bound("heavy_ball", beta) / self.kappa.max(axis=-1)
        # Jury on x' = a₁x + a₂x₋ with a₁ = 1 + β − εph − ελ, a₂ = −β(1 − ελ): ε(max ph + λ(1 + β)) < 2(1 + β),
        # and ελ < 1 for the decay itself
        return np.minimum(2 * (1 + beta) / (self.kappa.max(axis=-1) + self.decay * (1 + beta)), 1.0 / self.decay)

    def result_fields(self, hp) -> dict:
        return {"momentum": hp, "weight_decay": np.broadcast_to(self.decay, np.shape(hp)).copy()}


class PulledMoments:
    """E[x_t²] of a two-state run pulled towards x∞ (both states at rest there): the zero-mean second moment
    ``variance.at(t)`` plus the mean's square, ``E[s_t] = s∞ + F^t(s₀ − s∞)`` with s∞ = (x∞, x∞), E[s₀] =
    (0, ``offset``), and ``response``'s row e₀ᵀF^t."""

    def __init__(self, variance, response: TwoStateMoments, x_inf, offset):
        self.variance, self.response, self.x_inf, self.offset = variance, response, x_inf, offset

    def at(self, t):
        r0, r1 = self.response.row(np.asarray(t, dtype=np.float64))
        with np.errstate(over="ignore", invalid="ignore"):
            mean = self.x_inf - r0 * self.x_inf + r1 * (self.offset - self.x_inf)
            return self.variance.at(t) + mean**2


def _first_crossing(
    loss: _TunedLoss,
    eps,
    hp,
    target,
    guess=None,
    max_steps=2.0**50,
    stride: float = _BRACKET_STRIDE,
    rel_tol: float = 0.0,
    max_narrowing: int | None = None,
):
    """(first integer k, continuous estimate) with E[L_k] ≤ target, per row; inf where never.

    A bracket [lo, hi] with L(lo) > target ≥ L(hi) is grown from ``guess`` (by ``stride``·guess, doubling) and then
    narrowed by interpolating y = log(L − L∞) linearly in k (exact for one exponential rate, so typically a step
    or two), every third probe a bisection, down to one step, or to ``rel_tol`` of k where that is more (a search
    that needs only the continuous estimate; the integer returned is then the bracket's upper end). A search may
    also stop after ``max_narrowing`` narrowing probes wherever the bracket is within 1% of k (or one step): the
    rows still wider than ``rel_tol`` (the vectorised loop would otherwise wait for its slowest row) get the
    interpolation within their bracket as their estimate. This finds a crossing of the target; it is the first
    one when E[L_k] decreases up to it (heavy ball's oscillations decay as β^k and are past by then in tuned runs;
    ``steps_to_target`` is exact in every case and checks this in the tests).
    """
    n = eps.size
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        l_inf = loss.stationary(eps, hp)
    reached = (eps < loss.stability_edge(hp)) & (l_inf < target)
    goal = np.log(np.where(reached, target - l_inf, 1.0))

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        curve = loss.curve(eps, hp)

    def excess_log(k):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            v = curve(k)
            return v, np.log(np.maximum(v - l_inf, 1e-300)) - goal

    with np.errstate(divide="ignore", invalid="ignore"):
        v0 = np.full(n, loss.initial_loss())  # t = 0 needs no closed form
        y0 = np.log(np.maximum(v0 - l_inf, 1e-300)) - goal
    done0 = reached & (v0 <= target)
    active = reached & ~done0
    # Bracket. Without a guess: lo = 0, hi = 1, 2, 4, … . With one: probe k = ⌈guess⌉, then step away from it
    # by ``stride`` of k (at least one step), doubling the stride, until the other side of the crossing is found.
    if guess is None:
        k = np.ones(n)
    else:
        k = np.maximum(np.ceil(np.where(np.isfinite(guess), guess, 1.0)), 1.0)
    v_k, y_k = excess_log(k)
    k_below = v_k <= target
    stride = np.where(guess is None, k, np.maximum(np.ceil(stride * k), 1.0))
    lo = np.where(k_below & (guess is not None), np.maximum(k - stride, 0.0), np.where(k_below, 0.0, k))
    hi = np.where(k_below, k, k + stride)
    y_lo, y_hi = np.where(k_below, y0, y_k), np.where(k_below, y_k, y0)
    lo_ok, hi_ok = ~active | ~k_below | (lo == 0), ~active | k_below
    while True:
        need_hi = active & ~hi_ok & (hi < max_steps)
        need_lo = active & hi_ok & ~lo_ok
        if not (need_hi.any() or need_lo.any()):
            break
        v_p, y_p = excess_log(np.where(need_hi, hi, lo))
        p_below = v_p <= target
        # upward search: the probe at hi is below (bracket found) or becomes the new lo
        hi_ok |= need_hi & p_below
        up = need_hi & ~p_below
        lo, y_lo = np.where(up, hi, lo), np.where(up, y_p, y_lo)
        y_hi = np.where(need_hi & p_below, y_p, y_hi)
        hi = np.where(up, hi + stride, hi)
        # downward search: the probe at lo is above (bracket found) or becomes the new hi
        lo_ok |= need_lo & ~p_below
        down = need_lo & p_below
        hi, y_hi = np.where(down, lo, hi), np.where(down, y_p, y_hi)
        y_lo = np.where(need_lo & ~p_below, y_p, y_lo)
        lo = np.where(down, np.maximum(lo - stride, 0.0), lo)
        lo_ok |= down & (lo == 0)
        y_lo = np.where(down & (lo == 0), y0, y_lo)
        stride = np.where(up | down, 2 * stride, stride)
    reached &= done0 | hi_ok
    active = reached & ~done0
    # Narrow: the interpolated root r of y, rounded towards the side not yet pinned (floor after a step
    # that moved hi, ceil after one that moved lo), so an accurate r closes the bracket in two probes; every
    # third probe bisects, which bounds the worst case.
    moved_hi = np.zeros(n, dtype=bool)
    for i in range(10**4):
        # past max_narrowing probes, only brackets wider than 1% of k (or than one step, below 100) are narrowed
        tol = rel_tol if max_narrowing is None or i < max_narrowing else _LOOSE_RTOL
        narrowing = active & (hi - lo > np.maximum(1.0, tol * hi))
        if not narrowing.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            r = lo + y_lo / (y_lo - y_hi) * (hi - lo)
        k = np.where(moved_hi, np.floor(r), np.ceil(r))
        if i % 3 == 2:
            k = np.floor(0.5 * (lo + hi))
        k = np.clip(np.where(np.isfinite(k), k, np.floor(0.5 * (lo + hi))), lo + 1, hi - 1)
        v_k, y_k = excess_log(np.where(narrowing, k, hi))
        below = narrowing & (v_k <= target)
        above = narrowing & ~(v_k <= target)
        hi, y_hi = np.where(below, k, hi), np.where(below, y_k, y_hi)
        lo, y_lo = np.where(above, k, lo), np.where(above, y_k, y_lo)
        moved_hi = np.where(narrowing, below, moved_hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.clip(y_lo / (y_lo - y_hi), 0.0, 1.0)
    steps = np.where(done0, 0.0, np.where(reached, hi, np.inf))
    cont = np.where(done0, 0.0, np.where(reached, lo + np.where(np.isfinite(frac), frac, 1.0) * (hi - lo), np.inf))
    return steps, cont


# searched hyper-parameter range: h = β or γ in [1e-6, 1 − 1e-4], golden sections on log(1 − h)
_H_LOG_RANGE = (np.log(1e-4), np.log1p(-1e-6))
_LR_DECADES = 1e4  # ε searched in [ε_hi/1e4, ε_hi]
_GOLDEN_STEPS = 16  # λ's search and ε's search beyond its first decade
_INNER_STEPS = 15  # ε's search over the decade below the feasible step: to 2.3·0.618¹⁵ = 1.7e-3 in log ε
_OUTER_STEPS = 10  # h's search: to 9.2·0.618¹⁰ = 0.075 in log(1 − h), then the patch
_LR_NEAR = np.log(10.0)  # the decade of ε searched first (every optimum measured sits within 0.0–1.0 of its top)
# the search's compressed spectrum (64 + 32·3·2 = 256 coordinates; the patch's is the default 448): the search only
# has to land near the optimum, the patch and the exact crossings settle it
_SEARCH_SIZES = dict(exact=64, bins=32, nodes=3)
_PATCH_WIDTH = 0.03
_PATCH_POINTS = 5
# runs of at most this many steps are searched at fixed steps for the troughs of their ringing (_ripple_descent),
# on a grid of ε in steps of _RIPPLE_RESOLUTION/T in log ε over _RIPPLE_WINDOW of the search's optimum
_RIPPLE_STEPS = 256
_RIPPLE_RESOLUTION = 0.2
_RIPPLE_WINDOW = (-0.04, 0.1)
_SEARCH_RTOL = 1e-4  # the searches narrow crossings to 1e-4 of t (one step where that is less) and interpolate
# ... with at most 4 narrowing probes: most rows need 2–4, and the loop would otherwise run as long as its slowest
# row (7 probes on average over the bench's 20 batch sizes)
_SEARCH_NARROWING = 4
_LOOSE_RTOL = 1e-2  # ... past which the interpolation within a bracket of 1% of t is the estimate
_SCAN_BUDGET = 1 << 25  # coordinate-steps a final run's check of every earlier step may cost
_CROSS_ELEMENTS = 1 << 15  # rows × coordinates crossed per call where several points are crossed at once
_COMPRESS_ABOVE = 2048  # coordinates beyond which the (ε, hp) search runs on a compressed spectrum


def _optimal_tuned(p, target, b, loss: _TunedLoss) -> OptimalRuns:
    """Fewest steps over (ε, hp) per batch size (hp = β, γ or λ, searched on the loss's ``s`` scale: log(1 − hp)
    or log λ): golden sections on s around golden sections on log ε.

    For each hp the inner search runs over ε up to ``feasible_lr`` (stable, stationary loss below target), first
    over the decade below it (15 sections; the rest of the range only where the optimum sits at that decade's low
    end); its objective is the continuous first crossing of the closed form, bracketed to 1e-4 of t (at most four
    narrowing probes where the bracket is within 1% of t) and interpolated. The outer search evaluates s's low
    end (hp → 1, where small batches put the optimum) and then 10 sections. Runs of at most 256 steps are then
    searched at fixed step counts on a fine grid of ε for the troughs of their ringing (``_ripple_descent``); the
    others get a 5 × 5 patch of crossings around the optimum (``_patch``, a few points per call,
    ``_cross_points``). Then come the check of every earlier step and the smaller batch sizes' runs
    (``_reuse_smaller_batches``). Beyond 2048 coordinates the search and the descent run on a compressed spectrum
    of 256 coordinates and the patch on one of 448 (:mod:`nqm.dynamics.quadrature`); their best three points per
    batch size are crossed again on the exact loss, growing the bracket a step at a time from the compressed
    crossing (``_settle_exactly``).
    """

    # a long spectrum is searched compressed (a few hundred weighted coordinates), the patch on a finer compression;
    # its best points and the scan settle on the exact loss
    compress = loss.compressible and p.d > _COMPRESS_ABOVE
    search = loss.compressed(**_SEARCH_SIZES) if compress else loss
    fine = loss.compressed() if compress else loss

    lo, hi = (np.full(b.size, v) for v in loss.search_range())
    held = bool(np.all(lo == hi))
    seen = _searched(search, target, lo, hi)
    _, s, eps, eps_hi = seen
    # t(ε, hp) is jagged where E[L] still oscillates at the target (heavy ball's top coordinates ring for ~1/(1 − β)
    # steps). Short runs (a few hundred steps, at large B) are searched at fixed steps on a fine grid of ε, which finds
    # the troughs of the ringing (``_ripple_descent``); the other runs get a 5 × 5 patch of crossings around the
    # search's optimum (``_patch``).
    rippled, points = _ripple_descent(search, target, seen[0], eps, s, lo, hi)
    best = [np.full(b.size, np.inf), np.full(b.size, np.inf), eps.copy(), s.copy(), eps_hi.copy()]
    parts = []
    if rippled.size < b.size:
        rows = np.setdiff1d(np.arange(b.size), rippled)
        fields = (seen[0][rows], eps[rows], s[rows], eps_hi[rows], lo[rows], hi[rows])
        parts.append((rows, _patch(loss.take(rows), fine.take(rows), target, *fields)))
    if rippled.size:
        fallback = (eps[rippled], s[rippled], eps_hi[rippled])
        parts.append((rippled, _settle_exactly(loss.take(rippled), target, *points, fallback)))
    for rows, part in parts:
        for field, value in zip(best, part):
            field[rows] = value
    steps, cont, eps, s, eps_hi = best
    hp = loss.hp_of(s)
    # The bracketing search finds a crossing; every earlier step is then checked (where E[L] still oscillates at
    # the target, an earlier dip can reach it: heavy ball on d = 10⁴ at B = 1024 hits 18 steps before its crossing).
    # The closed forms' lower bounds skip most steps; a scan that would cost more than 2^25 coordinate-steps (long
    # runs of a loss without a bound, or a bound too weak to prune) keeps the crossing.
    rows = np.nonzero(np.isfinite(steps))[0]
    scans = [
        lambda i=i: loss.first_hit_by_scan(i, eps[i], hp[i], target, int(steps[i]), budget=_SCAN_BUDGET) for i in rows
    ]  # on threads where the scan is compiled (it releases the GIL)
    for i, first in zip(rows, run_tasks(scans, 1 if _kernels_for(loss) is None else thread_count(None, rows.size))):
        steps[i] = steps[i] if first is None else first
    adopted = np.nonzero(_reuse_smaller_batches(loss, b, target, steps, eps, s))[0]
    if adopted.size:  # their feasible steps and continuous crossings at their own batch sizes
        hp, own = loss.hp_of(s), loss.take(adopted)
        eps_hi[adopted] = own.feasible_lr(hp[adopted], target)
        cont[adopted] = _first_crossing(own, eps[adopted], hp[adopted], target, steps[adopted])[1]
    # interior: neither ε nor hp within a hair of its searched bounds
    span = hi - lo
    interior = (eps < eps_hi * (1 - 1e-3)) & (held | ((s > lo + 1e-3 * span) & (s < hi - 1e-3 * span)))
    fields = loss.result_fields(hp)
    return OptimalRuns(
        b, steps, b * steps, eps, cont, interior, **fields, family=loss.family, precond=loss.precond,
        decoupled=loss.decoupled,
    )  # fmt: skip


def _searched(search: _TunedLoss, target, lo, hi) -> list[np.ndarray]:
    """The nested search's best (continuous steps, s, ε, ε's upper end) per row: compiled
    (:mod:`nqm.dynamics.heavy_ball_kernels`) for heavy ball where numba is installed and the environment variable
    ``NQM_COMPILED`` is not ``0``, with NumPy (:func:`_nested_search`) otherwise and for the rows the compiled
    search leaves to it. Both give the same crossings up to rounding (tests/test_compiled_search.py)."""
    kernels = _kernels_for(search)
    if kernels is None:
        return _nested_search(search, target, lo, hi)
    seen, ok = kernels.search_heavy_ball(
        search.kappa, search.noise, search.v0, search.half_h, target, lo, hi,
        steps=(_INNER_STEPS, _GOLDEN_STEPS, _LR_NEAR, _LR_DECADES), outer=_OUTER_STEPS,
        options=(_BRACKET_STRIDE, _SEARCH_RTOL, _SEARCH_NARROWING, _LOOSE_RTOL),
    )  # fmt: skip
    seen = list(seen)
    if not ok.all():
        rows = np.nonzero(~ok)[0]
        for field, value in zip(seen, _nested_search(search.take(rows), target, lo[rows], hi[rows])):
            field[rows] = value
    return seen


def _kernels_for(loss: _TunedLoss):
    """:mod:`nqm.dynamics.heavy_ball_kernels` where it computes ``loss`` (heavy ball without decay, no flat
    directions: κ = 0 has no closed form there) and ``_compiled_kernels`` gives it; else None."""
    if type(loss) is not _TunedLoss or loss.family != "heavy_ball" or not np.all(loss.kappa > 0):
        return None
    return _compiled_kernels()


def _compiled_kernels():
    """:mod:`nqm.dynamics.heavy_ball_kernels`, or None: where ``NQM_COMPILED=0``, or numba is not installed or
    cannot be imported (a numba too old for the installed NumPy raises ImportError)."""
    return None if os.environ.get("NQM_COMPILED", "1") == "0" else _imported_kernels()


@functools.cache
def _imported_kernels():
    """The kernels' module, imported once (None where that fails: it is not retried on every call)."""
    try:
        from . import heavy_ball_kernels
    except ImportError:
        return None
    return heavy_ball_kernels


def _nested_search(search: _TunedLoss, target, lo, hi) -> list[np.ndarray]:
    """Golden sections on s (hp = ``search.hp_of(s)``) in [lo, hi] around golden sections on log ε below the
    feasible step, vectorised over rows; returns the best (continuous steps, s, ε, ε's upper end) seen per row."""
    n = lo.size
    seen = [np.full(n, np.inf), lo.copy(), np.zeros(n), np.zeros(n)]

    def best_lr(s, guess):
        hp = search.hp_of(s)
        eps_hi = search.feasible_lr(hp, target)
        top = np.log(eps_hi)

        def crossing(z, g):
            return _first_crossing(
                search, np.exp(z), hp, target, g, rel_tol=_SEARCH_RTOL, max_narrowing=_SEARCH_NARROWING
            )[1]

        # the optimum sits within a decade below the feasible edge in every family and problem we know of; where
        # the search ends at that decade's low end, the rest of the range is searched too
        z, t = _golden_min(crossing, top - _LR_NEAR, top, _INNER_STEPS, guess)
        low = z < top - 0.95 * _LR_NEAR
        if low.any():
            z_far, t_far = _golden_min(crossing, top - np.log(_LR_DECADES), top - 0.9 * _LR_NEAR, _GOLDEN_STEPS, t)
            take = low & (t_far < t)
            z, t = np.where(take, z_far, z), np.where(take, t_far, t)
        better = t < seen[0]
        for field, value in zip(seen, (t, s, np.exp(z), eps_hi)):
            field[better] = value[better]
        return t

    best_lr(lo, None)  # the low end itself: at small B the optimum pushes β, γ → 1 (s → lo)
    if not np.all(lo == hi):
        _golden_min(best_lr, lo, hi, _OUTER_STEPS, seen[0])
    return seen


def _patch(loss: _TunedLoss, fine: _TunedLoss, target, guess, eps, s, eps_hi, lo, hi):
    """The best of a 5 × 5 patch of crossings around each row's (ε, s), as (steps, continuous steps, ε, s, ε's upper
    end); ``fine`` is the loss the patch is crossed on (``loss`` itself, or a compressed one whose best three points
    per row are then crossed on ``loss``), ``guess`` the search's crossing.

    Where E[L] still oscillates at the target the crossing jumps with (ε, hp): on Zhang's problem binned at B = 64
    the loss at the crossing oscillates by 0.2% of the target over 1.4% of ε, which moves the crossing by up to
    0.4%; the patch picks the best nearby."""
    n = eps.size
    offsets = np.linspace(-_PATCH_WIDTH, _PATCH_WIDTH, _PATCH_POINTS)
    k = offsets.size
    s_c = np.clip(s + offsets[:, None], lo, hi)  # (k, n): the patch's rows of s ...
    cap = fine.tiled(k).feasible_lr(fine.hp_of(s_c).ravel(), target).reshape(k, n)
    eps_c = np.minimum(eps * np.exp(offsets)[:, None], cap[:, None])  # ... and (k, k, n) of ε under each
    s_c, cap = (np.broadcast_to(x[:, None], eps_c.shape) for x in (s_c, cap))
    # compressed, only the continuous crossing ranks the patch; else the integer crossing is final. The points are
    # crossed several at a time, from the search's crossing
    tol = _SEARCH_RTOL if fine is not loss else 0.0
    crossed = _cross_points(fine, eps_c, fine.hp_of(s_c), target, np.broadcast_to(guess, eps_c.shape), rel_tol=tol)
    patch = [x.reshape(k * k, n) for x in (*crossed, eps_c, s_c, cap)]
    if fine is loss:
        return _best_of(patch, (eps, s, eps_hi))
    ranks = np.argsort(patch[1], axis=0)[:3]
    return _settle_exactly(loss, target, *(patch[i][ranks, np.arange(n)] for i in (1, 2, 3, 4)), (eps, s, eps_hi))


def _settle_exactly(loss: _TunedLoss, target, guess, eps, s, cap, fallback):
    """The best of k points per row (``guess``, ``eps``, ``s``, ``cap``: (k, n), found on ``loss`` or on a compressed
    copy of it) crossed on ``loss`` from ``guess``, a step at a time: (steps, continuous steps, ε, s, ε's upper end)."""
    hp = loss.hp_of(s)
    # a compressed stationary loss is not the exact one: where the exact one is not below the target, ε is capped
    # at the exact loss's feasible step
    exact = loss.tiled(eps.shape[0])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        infeasible = ~(exact.stationary(eps.ravel(), hp.ravel()) < target).reshape(cap.shape)
    if infeasible.any():
        cap = np.where(infeasible, exact.feasible_lr(hp.ravel(), target).reshape(cap.shape), cap)
        eps = np.minimum(eps, cap)
    # a compressed crossing is within a few hundredths of a step of the exact one on smooth runs: the bracket is
    # grown from it a step at a time
    crossed = _cross_points(loss, eps, hp, target, guess, stride=1e-9)
    return _best_of([*crossed, eps, s, cap], fallback)


def _ripple_descent(loss: _TunedLoss, target, crossing, eps, s, lo, hi):
    """Fewer steps for short runs, from a grid of (ε, s) at fixed step counts: the rows improved, and per row the
    three best grid points as (k = 3, rows) arrays (steps, ε, s, ε's upper end) to be crossed exactly.

    In a run of T steps whose top coordinates still ring at the target, E[L_T] ripples in ε: on Zhang's problem
    binned at B = 2¹⁸ and T = 152 it has 28 local minima between ε = 3.7 and 4.3 (at β = 0.9595), about 0.6% of ε
    apart, whose depths differ by more than 25×, so a search along the crossing lands in a trough but rarely in the
    deepest (the tuned run there took 158 steps where 152 suffice). For each run of at most ``_RIPPLE_STEPS``
    steps (T = the search's crossing, rounded up), ε is laid out from −4% to +10% of the search's optimum in steps
    of 0.2/T in log ε (about four per ripple, whose period in log ε falls like 1/T as the phases tφ do), at s and
    s ± 0.03; the smallest t < T at which some grid point has E[L_t] ≤ target is then found by galloping down and
    bisecting (:func:`_fixed_step_descent`)."""
    rows = np.nonzero(crossing <= _RIPPLE_STEPS)[0]
    kernels = _kernels_for(loss)

    def descend(i):
        """Row i's best three grid points at the first step found (t, ε, s, ε's upper end), or None."""
        start = int(np.ceil(crossing[i]))
        step = _RIPPLE_RESOLUTION / start
        z = np.arange(np.floor(_RIPPLE_WINDOW[0] / step), np.ceil(_RIPPLE_WINDOW[1] / step) + 1) * step
        s_row = np.unique(np.clip(s[i] + np.array([-_PATCH_WIDTH, 0.0, _PATCH_WIDTH]), lo[i], hi[i]))
        cap_row = loss.take(np.full(s_row.size, i)).feasible_lr(loss.hp_of(s_row), target)
        eps_g, s_g, cap_g = np.broadcast_arrays(eps[i] * np.exp(z)[None, :], s_row[:, None], cap_row[:, None])
        keep = eps_g <= cap_g
        # never empty: at the search's own s the window starts 4% below its ε, which is under that s's cap
        eps_g, s_g, cap_g = eps_g[keep], s_g[keep], cap_g[keep]
        if kernels is None:
            values = _grid_values(loss.take(np.full(eps_g.size, i)).curve(eps_g, loss.hp_of(s_g)), eps_g.size)
            t = _fixed_step_descent(lambda t: values(t).min() <= target, start)
        else:  # compiled: a step reaches the target as soon as one point does
            values = kernels.fixed_step_curve(eps_g, loss.hp_of(s_g), loss.kappa, loss.noise[i], loss.v0, loss.half_h)
            t = _fixed_step_descent(lambda t: values.reaches(t, target), start)
        if t is None:
            return None
        top = np.resize(np.argsort(values(t), kind="stable")[:3], 3)
        return np.full(3, float(t)), eps_g[top], s_g[top], cap_g[top]

    # rows are independent: the compiled descents (which release the GIL) run on threads, one row each
    threads = 1 if kernels is None else thread_count(None, rows.size)
    found = run_tasks([lambda i=i: descend(i) for i in rows], threads)
    improved = [i for i, point in zip(rows, found) if point is not None]
    points = [point for point in found if point is not None]
    return np.array(improved, dtype=int), [np.stack(x, axis=1) for x in zip(*points)] if points else []


def _fixed_step_descent(reaches, start: int) -> int | None:
    """The smallest t < ``start`` found with ``reaches(t)`` (some grid point has E[L_t] ≤ target), galloping down
    from start − 1 (steps 1, 2, 4, …) and then bisecting; None where start − 1 does not reach."""
    good = start - 1
    if good < 1 or not reaches(good):
        return None
    bad, stride = 0, 1
    while good - stride > 0:
        if not reaches(good - stride):
            bad = good - stride
            break
        good, stride = good - stride, 2 * stride
    while good - bad > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if reaches(mid) else (good, mid)
    return good


def _grid_values(curve, n: int):
    """t ↦ E[L_t] at the ``n`` points of ``curve`` (NaN as inf), the last step's values kept for the caller."""
    last = {}

    def values(t):
        if t not in last:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                v = curve(np.full(n, float(t)))
            last.clear()
            last[t] = np.where(np.isnan(v), np.inf, v)
        return last[t]

    return values


def _reuse_smaller_batches(loss: _TunedLoss, b, target, steps, eps, s) -> np.ndarray:
    """Where the next smaller batch size's tuned run reaches the target in fewer steps, run its (ε, s) at this batch
    size too, if that is faster: ``steps``, ``eps`` and ``s`` are updated in place, in order of B (so a run can pass
    up several batch sizes), and the rows that took a smaller batch's run are returned.

    A larger batch only injects less noise: E[L_t] is a part without noise plus q/B times a part that is not
    negative (the closed forms' S_t and its kin), so at the same hyper-parameters its loss is no larger at any step
    and it reaches the target no later. The tuned steps should therefore not grow with B; where the search missed
    that (short runs at large B, where t(ε, hp) is most jagged), the smaller batch's run is checked at this batch
    size step by step (:meth:`_TunedLoss.first_hit_by_scan`, up to the smaller batch's steps) and taken where it hits
    sooner. A check over the scan's budget is skipped."""
    adopted = np.zeros(b.size, dtype=bool)
    order = np.argsort(b, kind="stable")
    for smaller, i in zip(order, order[1:]):
        if not steps[smaller] < steps[i]:
            continue
        hp = loss.hp_of(s[smaller])
        first = loss.first_hit_by_scan(i, eps[smaller], hp, target, int(steps[smaller]) + 1, budget=_SCAN_BUDGET)
        if first is not None and first < steps[i]:
            steps[i], eps[i], s[i], adopted[i] = first, eps[smaller], s[smaller], True
    return adopted


def _cross_points(loss: _TunedLoss, eps, hp, target, guess, **options):
    """:func:`_first_crossing` of k points per batch size (``eps``, ``hp``, ``guess`` of shape (..., n)), several
    points to a call (on the loss ``tiled`` as many times) but at most ``_CROSS_ELEMENTS`` rows × coordinates (at least
    one point): enough to share the calls' fixed costs, few enough that a call does not evaluate many finished
    rows while its slowest one narrows. Rows are independent, so the grouping changes no integer crossing.
    Returns (steps, continuous steps) shaped like ``eps``."""
    kernels = _kernels_for(loss)
    if kernels is not None:
        return _cross_points_compiled(kernels, loss, eps, hp, target, guess, **options)
    shape, n = eps.shape, eps.shape[-1]
    eps, hp, guess = (np.reshape(x, (-1, n)) for x in (eps, hp, guess))
    per_call = max(1, _CROSS_ELEMENTS // (n * loss.v0.size))
    parts = []
    for first in range(0, eps.shape[0], per_call):
        group = slice(first, first + per_call)
        size = eps[group].shape[0]
        crossed = _first_crossing(
            loss.tiled(size), eps[group].ravel(), hp[group].ravel(), target, guess[group].ravel(), **options
        )
        parts.append([x.reshape(size, n) for x in crossed])
    return tuple(np.concatenate(field).reshape(shape) for field in zip(*parts))


def _cross_points_compiled(
    kernels, loss: _TunedLoss, eps, hp, target, guess, stride=_BRACKET_STRIDE, rel_tol=0.0, max_narrowing=None
):
    """:func:`_cross_points` by :func:`nqm.dynamics.heavy_ball_kernels.cross_points`, point by point; points it
    leaves (a value that is not a number) are crossed with :func:`_first_crossing`."""
    shape, n = eps.shape, eps.shape[-1]
    which = np.broadcast_to(np.arange(n), shape).ravel()
    eps, hp, guess = (np.broadcast_to(x, shape).ravel() for x in (eps, hp, guess))
    narrowing = np.iinfo(np.int64).max if max_narrowing is None else max_narrowing
    steps, cont, ok = kernels.cross_points(
        eps, hp, which, guess, loss.kappa, loss.noise, loss.v0, loss.half_h, target,
        options=(stride, rel_tol, narrowing, _LOOSE_RTOL),
    )  # fmt: skip
    if not ok.all():
        left = ~ok
        steps[left], cont[left] = _first_crossing(
            loss.take(which[left]), eps[left], hp[left], target, guess[left], stride=stride, rel_tol=rel_tol,
            max_narrowing=max_narrowing,
        )  # fmt: skip
    return steps.reshape(shape), cont.reshape(shape)


def _best_of(points, fallback):
    """Per column, the first of the rows of ``points`` = [steps, continuous steps, …] (each (k, n)) that reaches the
    target soonest (:func:`_better`); rows that never reach it leave the ``fallback`` fields (ε, s, ε's upper end)."""
    n = points[0].shape[1]
    best = (np.full(n, np.inf), np.full(n, np.inf), *fallback)
    for point in zip(*points):
        best = _better(point, best)
    return best


def _better(point, best):
    """Per row, ``point`` = (steps, continuous steps, …) where it reaches the target sooner than ``best`` (fewer
    steps, then the earlier continuous crossing), else ``best``."""
    better = (point[0] < best[0]) | ((point[0] == best[0]) & (point[1] < best[1]))
    return tuple(np.where(better, new, old) for new, old in zip(point, best))


def _decay_range(p: NoisyQuadratic) -> tuple[float, float]:
    """Where a tuned weight decay is searched, on log λ: [10⁻³·h_min, h_max]."""
    return np.log(1e-3 * p.h.min()), np.log(p.h.max())


def _optimal_heavy_ball_decay(p, target, b, init_var, precond, decoupled: bool) -> OptimalRuns:
    """Heavy ball with its weight decay λ tuned too: golden sections on log λ over :func:`_decay_range`, one λ per
    batch size, around the held-λ search of (ε, β) (:class:`_DecayHeavyBallLoss`, :func:`_optimal_tuned`) whose
    continuous first crossing is the objective: 18 held-λ searches. ``interior`` is also False where λ sits at an
    end of its range."""
    lo, hi = (np.full(b.size, v) for v in _decay_range(p))

    def held(log_lam):
        return _optimal_tuned(p, target, b, _DecayHeavyBallLoss(p, b, init_var, precond, np.exp(log_lam), decoupled))

    u = _golden_min(lambda u, _guess: held(u).steps_continuous, lo, hi, _GOLDEN_STEPS)[0]
    runs = held(u)
    span = hi - lo
    runs.interior &= (u > lo + 1e-3 * span) & (u < hi - 1e-3 * span)
    return runs


def _check_decay_choice(weight_decay, decoupled, family):
    """None (no decay), a held λ > 0, or "tune"; weight decay is held or tuned for SGD and heavy ball."""
    if isinstance(weight_decay, str):
        if weight_decay != "tune":
            raise ValueError(f"weight_decay must be a number >= 0 or 'tune', got {weight_decay!r}")
        decay = "tune"
    else:
        decay = check_real("weight_decay", weight_decay, low=0.0) or None
    if not isinstance(decoupled, (bool, np.bool_)):
        raise TypeError(f"decoupled must be True or False, got {decoupled!r}")
    if decay is not None and family not in ("sgd", "heavy_ball"):
        raise ValueError(f"weight decay is held or tuned for family='sgd' and 'heavy_ball' (not {family!r})")
    return decay


def _golden_min(objective, lo, hi, iterations: int, guess=None):
    """Vectorised golden-section search: per row, the z in [lo, hi] minimising ``objective(z, guess)``.

    ``guess`` is the best value so far (objectives that solve for a step count use it as a warm start; the first
    evaluation gets the caller's). Returns (z, value) at the best point seen. Assumes a unimodal objective on the
    interval.
    """
    g = (np.sqrt(5) - 1) / 2
    a, c = hi - g * (hi - lo), lo + g * (hi - lo)
    fa = objective(a, guess)
    fc = objective(c, fa)
    for _ in range(iterations):
        left = fa < fc
        hi = np.where(left, c, hi)
        lo = np.where(left, lo, a)
        new_a, new_c = hi - g * (hi - lo), lo + g * (hi - lo)
        a_next, c_next = np.where(left, new_a, c), np.where(left, a, new_c)
        f_new = objective(np.where(left, new_a, new_c), np.where(left, fa, fc))
        fc, fa = np.where(left, fa, f_new), np.where(left, f_new, fc)
        a, c = a_next, c_next
    best = fa < fc
    return np.where(best, a, c), np.where(best, fa, fc)


def optimal_steps_to_target(
    p: NoisyQuadratic,
    target,
    batch_sizes,
    *,
    family: str = "sgd",
    init_var=1.0,
    precond=None,
    weight_decay=0.0,
    decoupled: bool = False,
) -> OptimalRuns:
    """Fewest steps to reach ``target`` at each batch size, over the hyper-parameters of an optimiser family.

    ``family`` is one of :data:`nqm.optim.FAMILIES`: "sgd" tunes ε; "heavy_ball" and "nesterov" tune ε and β;
    "ema" (iterate averaging of SGD) tunes ε and γ. ``precond`` is the fixed (d,) diagonal of P.

    At the optimum ε* the continuous step count t(ε) is stationary, so (t*, ε*) solve

    .. math:: L(t, \\epsilon) = \\text{target},\\qquad \\partial L/\\partial\\epsilon\\,(t, \\epsilon) = 0,

    solved for all batch sizes at once by Newton's method in (log t, ε) with analytic derivatives, started
    from 10 golden-section steps on log ε over the searched range. Steps are ``ceil(t*)``: no other ε can do
    better, since t(ε) ≥ t* for all ε in the searched range: stable steps with a stationary loss below the
    target whose coordinates all relax downwards (V₀ ≥ V∞). ``interior`` says where the optimum is a
    stationary point inside that range; where it is not, the optimum sits on the range's edge and a larger ε,
    at which some coordinate grows from the start, may be faster (check with :func:`~nqm.dynamics.steps_to_target`).

    ``family="heavy_ball"``, ``"nesterov"`` and ``"ema"`` also tune h = β or γ in [10⁻⁶, 1 − 10⁻⁴]: golden
    sections on log(1 − h) (after h's high end itself) around golden sections on log ε (over the decade below the
    largest stable step whose stationary loss is below the target, and further down where the optimum is not in
    it), each point's steps the first crossing of the closed form (:mod:`nqm.dynamics.moments`; Nesterov's through
    its two-state transition), then the best of a 5 × 5 patch of nearby points. t(ε, β) is jagged where E[L] still
    oscillates at the target (at large B, and for heavy ball at mid B too: by up to 0.4% of t over 1.4% of ε on
    Zhang's problem at B = 64), so the tuned steps are the best of the points searched, not a certified minimum.
    Beyond 2048 coordinates these searches run on compressed spectra (``nqm.dynamics.quadrature``: 256 weighted
    coordinates for the search, 448 for the patch, whose crossings agree with the exact ones to a few hundredths of
    a step on smooth runs) and the best three points of the patch are crossed again on the exact loss. Every earlier
    step of the chosen runs is then checked (heavy ball, Nesterov and EMA skip the stretches their closed form's lower
    bound excludes), so the steps are exact first hits at the returned hyper-parameters; only a check that would
    cost more than 2²⁵ coordinate-steps (long runs with weight decay, whose closed forms have no such bound) keeps
    the crossing, the first hit where E[L] decreases up to it. A larger batch injects less noise, so it reaches the
    target no later at a smaller batch's hyper-parameters; where the search missed that (short, jagged runs at large
    B), a batch size takes the next smaller one's run where its first hit, checked step by step within the same
    budget, is sooner, so the steps do not grow with B. ``interior`` is False where ε or h sits at an end of its
    range (at small B the optimum pushes β, γ → 1 with ε/(1 − β) fixed). For heavy ball without weight decay all of
    this runs compiled where numba is installed (``pip install 'nqm[fast]'``;
    :mod:`nqm.dynamics.heavy_ball_kernels`): the same forms, steps and tolerances, batch sizes on threads, about 7×
    faster on 100 coordinates, with the same steps and (ε, β) to 1e-10; ``NQM_COMPILED=0`` turns it off.

    ``weight_decay``: for SGD, λ held at a number or ``"tune"``d on log λ over [10⁻³·h_min, h_max], coupled or
    ``decoupled`` (:mod:`nqm.optim`); for heavy ball, λ held or tuned the same way (coupled or decoupled) with ε
    and β (tuned: golden sections on log λ around the (ε, β) search, one batch size at a time, 18 times the cost
    of a held λ). The runs start from E[θ₀] = θ* (the problem's ``optimum``); the decay pulls towards 0, so where
    θ* ≠ 0 the mean leaves θ* for the decay's fixed point. They are searched as the momentum families are, on
    closed forms (:class:`~nqm.dynamics.DecayedSgdMoments`; heavy ball's at the curvature h + λ plus its mean's
    path). With θ* = 0 the decay pulls towards the optimum itself: it only adds curvature, so a tuned λ goes to
    the top of its range, h_max, or near it, and the runs take a few steps (on Zhang's problem with d = 1000 and
    target 0.01, 2 or 3 steps for SGD and heavy ball at B = 64 … 16384, against 57 to 6143 for heavy ball without
    decay). Give the problem an ``optimum`` away from 0 to see what decay trades (there, with θ* = 1, a tuned λ of
    about 2·10⁻⁵ takes heavy ball to 6083 steps at B = 64).

    References: Zhang et al. 2019 (arXiv:1907.04164), Fig. 2–3 (SGD), 5 (momentum), 7 (EMA);
    McCandlish et al. 2018, §2.3.
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    target = check_target(target)
    b = check_batch_sizes(batch_sizes)
    decay = _check_decay_choice(weight_decay, decoupled, family)
    n = b.size
    if _SGDLoss(p, b, init_var, precond).value(np.zeros(n), np.ones(n) * 1e-12)[0] <= target:
        # the start already meets the target (E[L(θ₀)] ≤ target): no step at all, whatever the optimiser
        zeros, none = np.zeros(n), np.full(n, np.nan)
        pre = None if precond is None else check_precond(p, precond)
        return OptimalRuns(
            b,
            zeros,
            zeros,
            none,
            zeros,
            np.zeros(n, dtype=bool),
            momentum=none if family in ("heavy_ball", "nesterov") else None,
            ema=none if family == "ema" else None,
            family=family,
            precond=pre,
            weight_decay=None if decay is None else none,
            decoupled=bool(decoupled),
        )
    if decay == "tune" and family == "heavy_ball":
        return _optimal_heavy_ball_decay(p, target, b, init_var, precond, bool(decoupled))
    if decay is not None and family == "heavy_ball":
        return _optimal_tuned(p, target, b, _DecayHeavyBallLoss(p, b, init_var, precond, decay, bool(decoupled)))
    if decay is not None:
        return _optimal_tuned(p, target, b, _DecayTunedLoss(p, b, init_var, precond, decay, bool(decoupled)))
    if family != "sgd":
        runs = _optimal_tuned(p, target, b, _TunedLoss(p, b, init_var, precond, family))
        return _no_slower_than_sgd(p, target, runs, init_var, precond)
    loss = _SGDLoss(p, b, init_var, precond)
    # Search where every coordinate relaxes downwards (V₀ ≥ V∞, i.e. ε ≤ 2V₀κ/(q + V₀κ²)): there t(ε) is
    # smooth and L(t) decreasing. Beyond, some coordinate's loss only grows; an optimum on that edge is
    # reported as not interior.
    with np.errstate(divide="ignore", invalid="ignore"):
        eps_cap = np.min(2 * loss.v0 * loss.kappa / (loss.noise + loss.v0 * loss.kappa**2), axis=1)
    feasible = _feasible_lr(loss, target)
    below = eps_cap < feasible * (1 - 1e-9)  # some coordinate starts below its stationary level in reach
    if np.any(below):
        return _optimal_with_rising_coordinates(p, target, b, init_var, precond, feasible, below)
    eps_hi = np.minimum(feasible, eps_cap * (1 - 1e-9))
    lo, hi = np.log(eps_hi) - np.log(1e6), np.log(eps_hi)
    # golden-section search on log ε for a starting point
    z, t = _golden_min(lambda z, guess: _crossing_time(loss, np.exp(z), target, guess), lo, hi, 10)
    eps = np.exp(z)
    # Newton on (log t, ε): F = L − target, G = ∂L/∂ε; rows leave once converged
    active = np.arange(n)
    for _ in range(30):
        eps_a, ta, part = eps[active], t[active], loss.subset(active)
        val, ls, lx, lsx, lxx = part.at(eps_a).derivatives(ta)
        f, gx = val - target, lx
        det = ls * lxx - lx * lsx
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # near a cusp: not finite, not taken
            ds = (-f * lxx + gx * lx) / det
            dx = (-gx * ls + f * lsx) / det
        step_ok = np.isfinite(ds) & np.isfinite(dx)
        dx = np.clip(np.where(step_ok, dx, 0), -0.5 * eps_a, np.maximum(0.5 * (eps_hi[active] - eps_a), 0))
        ds = np.clip(np.where(step_ok, ds, 0), -1, 1)
        eps[active], t[active] = eps_a + dx, ta * np.exp(ds)
        active = active[(np.abs(dx) > 1e-12 * eps_a) | (np.abs(ds) > 1e-12)]
        if active.size == 0:
            break
    # re-solve t exactly at the final ε (Newton's t satisfies F = 0 only to its tolerance)
    t = _crossing_time(loss, eps, target, t)
    steps = _first_integer_step(loss, eps, target, t)
    eps, t, steps = _solved_coordinates(loss, target, eps_hi, eps, t, steps)
    interior = eps < eps_hi * (1 - 1e-6)
    pre = None if precond is None else check_precond(p, precond)
    return OptimalRuns(b, steps, b * steps, eps, t, interior, precond=pre)


def _no_slower_than_sgd(p, target, runs: OptimalRuns, init_var, precond) -> OptimalRuns:
    """Heavy ball, Nesterov and EMA at the low end of h's range (h = 10⁻⁶) are SGD to within 10⁻⁶ of a step, so
    their optimum takes no more steps than SGD's: where tuned SGD (whose search crosses the cusps ε = 1/κ exactly,
    :func:`_solved_coordinates`) is faster, its ε is taken with that h, and the steps are the exact first hit of the
    family there. The smooth (ε, h) search cannot find those cusps: on an isotropic H, ε = 1 solves every coordinate
    in one step, which only h → 0 keeps."""
    sgd_runs = optimal_steps_to_target(p, target, runs.batch_sizes, init_var=init_var, precond=precond)
    faster = np.nonzero(sgd_runs.steps < runs.steps)[0]
    if faster.size == 0:
        return runs
    hp_field = "ema" if runs.family == "ema" else "momentum"
    lr, hp = runs.lr.copy(), getattr(runs, hp_field).copy()
    lr[faster], hp[faster] = sgd_runs.lr[faster], -np.expm1(_H_LOG_RANGE[1])  # h = 10⁻⁶
    candidate = dataclasses.replace(runs, lr=lr, **{hp_field: hp})
    steps, continuous, interior = runs.steps.copy(), runs.steps_continuous.copy(), runs.interior.copy()
    keep = np.ones(runs.steps.size, dtype=bool)
    for i in faster:
        budget = int(runs.steps[i]) if np.isfinite(runs.steps[i]) else 10**7
        hit = steps_to_target(p, candidate.optimizer(i), runs.batch_sizes[i], target, init_var=init_var,
                              max_steps=budget)  # fmt: skip
        if hit < steps[i]:
            steps[i], continuous[i], interior[i], keep[i] = hit, hit, False, False
    lr, hp = np.where(keep, runs.lr, lr), np.where(keep, getattr(runs, hp_field), hp)
    return dataclasses.replace(
        runs, steps=steps, examples=runs.batch_sizes * steps, lr=lr, steps_continuous=continuous, interior=interior,
        **{hp_field: hp},
    )  # fmt: skip


_CUSPS = 64  # the largest distinct curvatures whose one-step solution ε = 1/κ is tried per batch size


def _solved_coordinates(loss: _SGDLoss, target, eps_hi, eps, t, steps):
    """The fewest steps over the smooth optimum and the cusps of t(ε): (ε, t, steps) per row.

    t(ε) has a downward cusp at every ε = 1/κ_j, where coordinate j is solved in one step ((1 − εκ_j)² = 0),
    and the smooth search above cannot see one: with one coordinate, an isotropic H, or a few dominant top
    curvatures the deepest cusp is the optimum (H = I, c = 1, B = 8192, target 0.01: ε = 1 reaches it in one
    step; the smooth search returned 256). Between cusps t(ε) is smooth, so its minimum over ε ≤ ε_hi is the
    smooth optimum or a cusp; the cusps within reach are ε = 1/κ_j ≤ ε_hi, i.e. κ_j ≥ κ_max/2 at most. Each is
    crossed exactly (:func:`_crossing_time`, :func:`_first_integer_step`) and the fewest integer steps win
    (ties keep the smooth optimum).
    """
    kappa = np.unique(loss.kappa)[::-1][:_CUSPS]
    row, cusp = np.nonzero(kappa[None, :] > 1.0 / eps_hi[:, None])  # the (batch size, cusp) pairs within reach
    if not row.size:
        return eps, t, steps
    cusp_eps, cusp_t, cusp_steps = 1.0 / kappa[cusp], np.empty(row.size), np.empty(row.size)
    chunk = max(1, _CROSS_ELEMENTS // loss.kappa.size)  # pairs × coordinates held at once
    for at in range(0, row.size, chunk):
        part, pick = loss.subset(row[at : at + chunk]), slice(at, at + chunk)
        cusp_t[pick] = _crossing_time(part, cusp_eps[pick], target)
        cusp_steps[pick] = _first_integer_step(part, cusp_eps[pick], target, cusp_t[pick])
    eps, t, steps = eps.copy(), t.copy(), steps.copy()
    for i in np.argsort(cusp_steps)[::-1]:  # the fewest steps written last; ties keep the smooth optimum
        if cusp_steps[i] < steps[row[i]]:
            eps[row[i]], t[row[i]], steps[row[i]] = cusp_eps[i], cusp_t[i], cusp_steps[i]
    return eps, t, steps
