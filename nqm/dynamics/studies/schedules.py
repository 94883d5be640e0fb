"""Optimal piecewise-constant step-size schedules for SGD on the NQM (Zhang et al. 2019, Z6); the greedy schedule
is :mod:`.greedy`'s.

A schedule of K pieces runs ε_k for n_k steps. Per coordinate of H's basis each piece maps the second
moment exactly (the SGD closed form, ``nqm.dynamics``):

.. math:: V \\leftarrow A_k (V - W_k) + W_k,\\qquad A_k = (1 - \\epsilon_k\\kappa)^{2n_k},\\qquad
          W_k = \\frac{\\epsilon_k q}{\\kappa(2 - \\epsilon_k\\kappa)}

(κ = p·h, q = p²c/B), so the final loss ½Σ h V is a smooth function of (log ε_k, log n_k) with an
analytic gradient (one backward pass). The fewest total steps Σ n_k with final loss ≤ target is found by
SLSQP from the best constant schedule, then made integer: durations rounded, and the last piece lengthened
until the target is met under exact integer evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from ...checks import check_init_var, check_target
from ...noise import injected_variance
from ...problem import NoisyQuadratic, check_precond
from ..moments import log_abs_one_minus
from ..runs import optimal_steps_to_target

__all__ = ["PiecewiseSchedule", "optimal_piecewise_schedule"]


@dataclass
class PiecewiseSchedule:
    """Step sizes ``lr`` (K,) and integer durations ``steps`` (K,) of a schedule; ``total_steps`` their sum
    (inf if the target is unreachable), ``steps_continuous`` the optimum before rounding, ``loss`` the
    exact E[L] at the end of the integer schedule."""

    lr: np.ndarray
    steps: np.ndarray
    total_steps: float
    steps_continuous: float
    loss: float


class PiecewiseLoss:
    """Final E[L] of a piecewise-constant schedule and its gradient in (log ε_k, log n_k)."""

    def __init__(self, p: NoisyQuadratic, batch_size, init_var, precond):
        pre = check_precond(p, precond)
        self.half_h = 0.5 * p.h
        self.kappa = pre * p.h
        self.noise = injected_variance(p, batch_size, pre)
        self.v0 = check_init_var(init_var, p.d)

    def _piece(self, eps):
        u = 1.0 - eps * self.kappa
        u = np.where(np.abs(u) < 1e-150, 1e-150, u)  # εκ = 1 solves that coordinate in one step
        w = 2.0 - eps * self.kappa
        ell = 2.0 * np.maximum(log_abs_one_minus(eps * self.kappa), np.log(1e-150))
        return u, ell, eps * (self.noise / self.kappa) / w, w

    def loss(self, eps, n) -> float:
        v = self.v0
        for e, k in zip(eps, n):
            _, ell, w_inf, _ = self._piece(e)
            a = np.exp(k * ell)
            v = a * (v - w_inf) + w_inf
        return float(self.half_h @ v)

    def loss_and_gradient(self, log_eps, log_n):
        eps, n = np.exp(log_eps), np.exp(log_n)
        v, saved = self.v0, []
        for e, k in zip(eps, n):
            u, ell, w_inf, w = self._piece(e)
            a = np.exp(k * ell)
            saved.append((v, u, ell, w_inf, w, a))
            v = a * (v - w_inf) + w_inf
        loss = float(self.half_h @ v)
        g = self.half_h  # ∂L/∂V after the current piece
        d_log_eps, d_log_n = np.empty(len(eps)), np.empty(len(eps))
        for j in reversed(range(len(eps))):
            v_prev, u, ell, w_inf, w, a = saved[j]
            gap = v_prev - w_inf
            d_ell = -2.0 * self.kappa / u
            d_w = 2.0 * (self.noise / self.kappa) / w**2
            d_log_n[j] = n[j] * (g @ (ell * a * gap))
            d_log_eps[j] = eps[j] * (g @ (n[j] * d_ell * a * gap + (1.0 - a) * d_w))
            g = g * a
        return loss, d_log_eps, d_log_n


def optimal_piecewise_schedule(
    p: NoisyQuadratic, target, batch_size, pieces: int, *, init_var=1.0, precond=None
) -> PiecewiseSchedule:
    """The K-piece constant-step schedule that reaches ``target`` in the fewest SGD steps.

    Minimises Σ n_k subject to E[L_end] ≤ target over (ε_k, n_k), ε_k below the stability edge 2/κ_max,
    by SLSQP with analytic gradients, started from the best constant schedule (``optimal_steps_to_target``)
    cut into K equal pieces. A local optimum in general; ``pieces=1`` returns the constant optimum.

    Zhang et al. 2019 (arXiv:1907.04164), §4 and Fig. 8: optimal piecewise-constant schedules close most of
    the gap to the lower bound d/(2·target·B) (C = H) at small B, and start at the largest feasible step.

    Example:
        >>> import nqm
        >>> p = nqm.NoisyQuadratic.zhang2019(100)
        >>> two = optimal_piecewise_schedule(p, 0.05, 4, pieces=2)
        >>> one = optimal_piecewise_schedule(p, 0.05, 4, pieces=1)
        >>> bool(two.total_steps < one.total_steps) and bool(two.lr[0] > two.lr[1])
        True
    """
    target = check_target(target)
    if int(pieces) != pieces or pieces < 1:
        raise ValueError(f"pieces must be a positive integer, got {pieces!r}")
    k = int(pieces)
    model = PiecewiseLoss(p, batch_size, init_var, precond)
    start = optimal_steps_to_target(p, target, [batch_size], init_var=init_var, precond=precond)
    t_const = float(start.steps_continuous[0])
    if not np.isfinite(t_const):
        return PiecewiseSchedule(np.full(k, np.nan), np.zeros(k), np.inf, np.inf, np.nan)
    if t_const == 0:
        return PiecewiseSchedule(np.full(k, np.nan), np.zeros(k), 0.0, 0.0, model.loss([], []))
    eps0 = float(start.lr[0])
    edge = 2.0 / model.kappa.max()
    scale = t_const  # durations in units of the constant optimum: the objective is O(1)
    log_goal = np.log(target)

    def split(x):
        return x[:k], x[k:] + np.log(scale)

    def objective(x):
        return np.exp(x[k:]).sum(), np.concatenate([np.zeros(k), np.exp(x[k:])])

    def constraint(x):
        loss, d_eps, d_n = model.loss_and_gradient(*split(x))
        return log_goal - np.log(loss), -np.concatenate([d_eps, d_n]) / loss

    x0 = np.concatenate([np.full(k, np.log(eps0)), np.full(k, np.log(1.0 / k))])
    bounds = [(np.log(edge) - np.log(1e8), np.log(edge * (1 - 1e-9)))] * k + [(np.log(1e-9), np.log(1e3))] * k
    if k > 1:
        res = minimize(
            lambda x: objective(x),
            x0,
            jac=True,
            method="SLSQP",
            bounds=bounds,
            constraints=[{"type": "ineq", "fun": lambda x: constraint(x)[0], "jac": lambda x: constraint(x)[1]}],
            options={"maxiter": 500, "ftol": 1e-12},
        )
        x = res.x if constraint(res.x)[0] >= -1e-9 and res.fun < 1.0 else x0
    else:
        x = x0
    log_eps, log_n = split(x)
    eps, n_cont = np.exp(log_eps), np.exp(log_n)
    # integer durations: round the pieces, then the last one is the fewest steps that meet the target
    # (doubling, then bisection on the exact integer loss)
    n_int = np.maximum(np.round(n_cont), 0.0)

    def meets(last):
        return model.loss(eps, np.concatenate([n_int[:-1], [last]])) <= target

    lo, hi = -1.0, max(n_int[-1], 1.0)
    while not meets(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = np.floor(0.5 * (lo + hi))
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    n_int[-1] = hi
    return PiecewiseSchedule(eps, n_int, float(n_int.sum()), float(n_cont.sum()), model.loss(eps, n_int))
