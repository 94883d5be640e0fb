"""Exact skip-ahead: jump a linear Gaussian run from checkpoint to checkpoint without the steps between.

On a diagonal problem each coordinate's state x (θ and whatever the optimiser carries: θ_{t−1} for heavy ball,
εv for Nesterov, θ̃ for an EMA) follows the optimiser's transition (:mod:`nqm.optim`),
x_{t+1} = A x_t + n_t with Gaussian n_t ~ N(0, Q). Over k steps

.. math:: x_{t+k} \\mid x_t \\sim \\mathcal{N}(A^k x_t,\\; Q_k),\\qquad Q_k = \\sum_{j<k} A^j Q A^{j\\top},

and (A_k, Q_k) compose as (A_{j+k}, Q_{j+k}) = (A_k A_j, A_k Q_j A_kᵀ + Q_k), so O(log k) small matrix products
per coordinate give any jump. Weight decay with an optimum θ* ≠ 0 adds a constant pull b each step
(:func:`nqm.noise.decay_pull`); the deviation from the fixed point s∞ = (I − A)⁻¹b then follows the homogeneous
law, so the jumps carry y = x − s∞ and the losses read x = y + s∞. Runs where only checkpoints matter cost
O(d·K) instead of O(d·T); and because the law is exact, the same maps are a test oracle for step-by-step
simulators (Zhang et al. 2019, arXiv:1907.04164, eq. 5 gives the k = 1 moment map).

The normals come from Philox (stream 2, block = the jump's index), θ₀ from the same draw as
:func:`nqm.simulate` with ``generator="philox"``, so both start from identical points. Works on NumPy and CuPy.

Example:
    >>> import nqm
    >>> p = nqm.NoisyQuadratic.zhang2019(100)
    >>> r = simulate_checkpoints(p, 1.0, 8, [0, 10**6], 64, seed=0)
    >>> r.steps.tolist(), r.n
    ([0, 1000000], 64)
"""

from __future__ import annotations

import numpy as np

from ..checks import as_real, check_batch_size, check_init_var, check_replicas
from ..noise import decay_pull, step_coefficients
from ..optim import as_optimizer, require_linear
from ..problem import NoisyQuadratic
from .backend import resolve as resolve_backend
from .backend import to_host
from .counter import initial_theta, replica_loss
from .philox import normal_block, seed_key
from .results import loss_curve

__all__ = ["step_map", "jump_map", "simulate_checkpoints", "STREAM_JUMP"]

STREAM_JUMP = 2


def step_map(p: NoisyQuadratic, opt, batch_size, xp=np):
    """One step's (A, Q), each (d, m, m), of a linear optimiser (or a step ε, meaning SGD): A = F and
    Q = σ² g gᵀ from its transition (:mod:`nqm.optim`), m its number of state components."""
    opt = require_linear(as_optimizer(opt), "skip-ahead")
    lam, sigma = step_coefficients(p, opt, batch_size)
    big_a, gain = opt.transition(lam)
    noise = gain * sigma[:, None]  # the direction each state takes the step's normal
    q = noise[:, :, None] * noise[:, None, :]
    return xp.asarray(big_a), xp.asarray(q)


def _compose(first, then, xp):
    (a1, q1), (a2, q2) = first, then
    return a2 @ a1, a2 @ q1 @ xp.swapaxes(a2, -1, -2) + q2


def jump_map(step, k: int, xp=np):
    """(A_k, Q_k) of k steps of ``step`` = (A, Q) by binary powering (k ≥ 0)."""
    a, q = step
    eye = xp.broadcast_to(xp.eye(a.shape[-1]), a.shape).copy()
    result, power = (eye, xp.zeros_like(q)), (a, q)
    k = int(k)
    while k:
        if k & 1:
            result = _compose(result, power, xp)
        k >>= 1
        if k:
            power = _compose(power, power, xp)
    return result


def _rest_state(p: NoisyQuadratic, opt, batch_size):
    """(s∞, start), each (d, m): the state's fixed point under weight decay's pull, s∞ = (I − A)⁻¹b, and what the
    start adds to s₀ = eθ₀ (zeros without a pull)."""
    pull = decay_pull(p, opt)
    if pull is None:
        zeros = np.zeros((p.d, opt.order))
        return zeros, zeros
    a, _ = opt.transition(step_coefficients(p, opt, batch_size)[0])
    return np.linalg.solve(np.eye(opt.order) - a, pull.step[..., None])[..., 0], pull.start


def _factor(q, xp):
    """L with L Lᵀ = Q for symmetric PSD Q (possibly singular): V diag(√max(w, 0))."""
    w, v = xp.linalg.eigh(q)
    return v * xp.sqrt(xp.maximum(w, 0.0))[..., None, :]


def simulate_checkpoints(
    p: NoisyQuadratic, opt, batch_size, at, replicas: int, *, seed=0, init_var=1.0, backend: str = "numpy"
):
    """Monte Carlo losses at the checkpoints ``at`` by exact jumps (diagonal problems; float64).

    Returns a :class:`nqm.LossCurve`: the same law as :func:`nqm.simulate` at those steps, at a cost
    that does not grow with the number of steps.
    """
    if not p.is_diagonal:
        raise ValueError("skip-ahead needs a diagonal problem (Σ diagonal in H's basis, no rotation)")
    opt = require_linear(as_optimizer(opt), "skip-ahead")
    batch_size = float(check_batch_size(batch_size, single=True))
    replicas = check_replicas(replicas)
    steps = as_real("at", at)
    if steps.ndim != 1 or steps.size == 0 or not np.all((steps >= 0) & (steps == np.round(steps)) & np.isfinite(steps)):
        raise ValueError(f"at must be a non-empty 1-D array of step counts >= 0, got {at!r}")
    rec = np.unique(steps.astype(np.int64))
    xp = resolve_backend(backend)
    key = seed_key(seed)
    step = step_map(p, opt, batch_size, xp)
    m = step[0].shape[-1]
    coords, reps = xp.arange(p.d)[None, :], xp.arange(replicas)[:, None]
    sd = np.sqrt(check_init_var(init_var, p.d))
    theta0 = initial_theta(
        xp, key, None, sd, replicas, 0, p.d, np.float64
    )  # the θ₀ of nqm.simulate(generator="philox")
    rest, start = (xp.asarray(v) for v in _rest_state(p, opt, batch_size))
    # s₀ = eθ₀ (+ the decay's start offset): θ_{−1} = θ₀ (v₀ = 0), εv₀ = 0, θ̃₀ = θ₀; carried as s − s∞
    x = theta0[..., None] * xp.asarray(opt.initial) + start - rest
    h = xp.asarray(p.h)
    losses = np.zeros((replicas, rec.size))
    now, maps = 0, {}
    for k, target in enumerate(rec.tolist()):
        gap = target - now
        if gap:
            if gap not in maps:
                a_k, q_k = jump_map(step, gap, xp)
                maps[gap] = (a_k, _factor(q_k, xp))
            a_k, l_k = maps[gap]
            z = normal_block(xp, key, k, coords, reps, STREAM_JUMP)[:m]  # (m, R, d)
            x = xp.einsum("dij,rdj->rdi", a_k, x) - xp.einsum("dij,jrd->rdi", l_k, z)
            now = target
        losses[:, k] = to_host(xp, replica_loss(xp, (x + rest)[..., opt.loss_index], h))
    return loss_curve(rec, losses)
