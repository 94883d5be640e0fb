r"""SGD's whole runs in closed form: L(t, ε) and its derivatives, the crossing of a target, the feasible step.

For (preconditioned) SGD each coordinate of H's basis relaxes exponentially (Zhang et al. 2019,
arXiv:1907.04164, §3):

.. math::
    L(t, \epsilon) = \tfrac12\sum_i h_i\big[V_i^\infty + (V_{0,i} - V_i^\infty)\,e^{t\ell_i}\big],

    \ell_i = 2\log|1 - \epsilon\lambda_i|,\qquad
    V_i^\infty = \frac{\epsilon\,q_i}{\kappa_i(2 - \epsilon\kappa_i)},

with ``κ = p h`` (so λ = εκ) and ``q = p²c/B`` (a step ε injects ε²q). This is smooth in the continuous step
count t: ``crossing_time`` finds the root of ``L(t) = target`` by Newton's method on log(L − L∞),
``first_integer_step`` the first integer step after it, checked by exact evaluation, and
``first_hit_two_sided`` the exact first hit where some coordinates rise.
"""

from __future__ import annotations

import numpy as np

from ...checks import check_batch_size, check_init_var
from ...noise import injected_variance
from ...problem import NoisyQuadratic, check_precond
from ..moments import log_abs_one_minus

__all__ = [
    "SGDLoss",
    "SGDRows",
    "crossing_time",
    "first_integer_step",
    "monotone",
    "sgd_feasible_lr",
    "first_hit_two_sided",
]


# -- SGD: the loss and its derivatives in closed form ----------------------------------------------
class SGDLoss:
    """L(t, ε) and its derivatives for rows of (ε, B) at once; per-coordinate arrays are (n, d)."""

    def __init__(self, p: NoisyQuadratic, batch_size, init_var, precond):
        pre = check_precond(p, precond)
        b = np.atleast_1d(check_batch_size(batch_size))
        self.half_h = 0.5 * p.h
        self.kappa = pre * p.h  # λ = ε κ
        self.noise = injected_variance(p, b[:, None], pre)  # q = p²c/B: a step ε injects ε²q
        self.v0 = check_init_var(init_var, p.d)

    def at(self, eps) -> SGDRows:
        return SGDRows(self, np.asarray(eps, dtype=np.float64))

    def subset(self, rows) -> SGDLoss:
        """The same loss for a subset of the batch sizes (Newton drops the rows that have converged)."""
        part = object.__new__(SGDLoss)
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


class SGDRows:
    """The per-coordinate pieces at step sizes eps (n,), computed once: ℓ, V∞ and V₀ − V∞ (the ε-derivatives
    are formed only when asked for)."""

    def __init__(self, loss: SGDLoss, eps):
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


def crossing_time(loss: SGDLoss, eps, target, t_guess=None):
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


def first_integer_step(loss: SGDLoss, eps, target, t_cont):
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


def monotone(loss: SGDLoss, eps) -> np.ndarray:
    """True where every coordinate starts at or above its stationary level (so L(t) decreases)."""
    rows = loss.at(eps)
    return np.all(rows.ell < 0, axis=1) & np.all(loss.v0 >= rows.v_inf * (1 - 1e-12), axis=1)


def sgd_feasible_lr(loss: SGDLoss, target):
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


def first_hit_two_sided(rows: SGDRows, target: float, max_steps: float) -> float:
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
