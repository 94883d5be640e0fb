"""Steps to a target loss for any linear optimiser: SGD's closed form where it applies, else an exact scan."""

from __future__ import annotations

import numpy as np

from ...checks import check_batch_size, check_init_var, check_target
from ...noise import decay_pull, step_coefficients
from ...optim import as_optimizer, is_plain_sgd, require_linear
from ...problem import NoisyQuadratic
from ..moments import mean_path, second_moments, steady_state_loss
from .sgd import SGDLoss, crossing_time, first_integer_step, monotone

__all__ = ["steps_to_target"]

DENSE_CHUNK = 256


def dense_first_hit(p, opt, batch_size, target, init_var, max_steps):
    """First integer t with E[L_t] ≤ target by exact evaluation of every step (any linear optimiser).

    Chunks of steps double in length, so a long scan costs few Python round trips. The scan stops early
    with inf once the run has settled above the target to float resolution.
    """
    lam, sigma = step_coefficients(p, opt, batch_size)
    pull = decay_pull(p, opt)
    v0 = check_init_var(init_var, p.d)
    stationary = steady_state_loss(p, opt, batch_size)
    start, chunk = 0, DENSE_CHUNK
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
        start, chunk = ts[-1] + 1, min(2 * chunk, max(DENSE_CHUNK, (1 << 22) // p.d))
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
    if is_plain_sgd(opt) and not opt.weight_decay:  # (decay: the scan below, which knows its pull)
        loss = SGDLoss(p, batch_size, init_var, opt.precond)
        eps = np.atleast_1d(np.float64(opt.lr))
        if loss.value(np.zeros(1), eps)[0] <= target:
            return 0
        if monotone(loss, eps)[0]:
            if loss.stationary(eps)[0] >= target:
                return float("inf")
            k = first_integer_step(loss, eps, target, crossing_time(loss, eps, target))[0]
            return int(k) if np.isfinite(k) else float("inf")
        # Coordinates that start below their stationary level, or are unstable, only grow: their share of
        # the loss at t = 0 is a lower bound for every later step.
        rows = loss.at(eps)
        growing = (rows.ell[0] >= 0) | (loss.v0 < rows.v_inf[0])
        if loss.half_h[growing] @ loss.v0[growing] > target:
            return float("inf")
    return dense_first_hit(p, opt, batch_size, target, init_var, int(max_steps))
