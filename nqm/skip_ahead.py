"""Exact skip-ahead: jump a linear Gaussian run from checkpoint to checkpoint without the steps between.

On a diagonal problem each coordinate's state x (θ; with momentum also θ_{t−1}; with the EMA also θ̃) follows
x_{t+1} = A x_t + n_t with Gaussian n_t ~ N(0, Q). Over k steps

.. math:: x_{t+k} \\mid x_t \\sim \\mathcal{N}(A^k x_t,\\; Q_k),\\qquad Q_k = \\sum_{j<k} A^j Q A^{j\\top},

and (A_k, Q_k) compose as (A_{j+k}, Q_{j+k}) = (A_k A_j, A_k Q_j A_kᵀ + Q_k), so O(log k) small matrix products
per coordinate give any jump. Runs where only checkpoints matter cost O(d·K) instead of O(d·T); and because
the law is exact, the same maps are a test oracle for step-by-step simulators (Zhang et al. 2019,
arXiv:1907.04164, eq. 5 gives the k = 1 moment map).

The normals come from Philox (stream 2, block = the jump's index), θ₀ from the same draw as
:func:`nqm.simulate` with ``rng="philox"``, so both start from identical points. Works on NumPy and CuPy.

Example:
    >>> import nqm
    >>> p = nqm.NoisyQuadratic.zhang2019(100)
    >>> r = simulate_checkpoints(p, lr=1.0, batch_size=8, record=[0, 10**6], replicas=64, seed=0)
    >>> r.steps.tolist(), r.n
    ([0, 1000000], 64)
"""

from __future__ import annotations

import numpy as np

from .backend import resolve as resolve_backend
from .counter_sim import _initial, _loss, _to_host, diagonal_coefficients
from .philox import normal_block, seed_key
from .problem import (
    NoisyQuadratic,
    check_batch_size,
    check_lr,
    check_precond,
    check_replicas,
    check_unit_interval,
)

__all__ = ["step_map", "jump_map", "simulate_checkpoints", "STREAM_JUMP"]

STREAM_JUMP = 2


def step_map(p: NoisyQuadratic, lr, batch_size, precond=None, momentum: float = 0.0, ema: float = 0.0, xp=np):
    """One step's (A, Q), each (d, m, m): state (θ[, θ_{t−1}][, θ̃]), m = 1 + [β > 0] + [γ > 0].

    SGD θ' = aθ − s z; heavy ball θ' = aθ − βθ_{t−1} − s z with a = 1 + β − ε p h; EMA θ̃' = γθ̃ + (1 − γ)θ'.
    """
    pre = check_precond(p, precond)
    a, s = diagonal_coefficients(p, float(lr), float(batch_size), pre, momentum, np.float64)
    m = 1 + (momentum > 0) + (ema > 0)
    big_a = np.zeros((p.d, m, m))
    noise = np.zeros((p.d, m))  # n = noise·(−z): the direction each state takes the step's normal
    big_a[:, 0, 0], noise[:, 0] = a, s
    if momentum > 0:
        big_a[:, 0, 1] = -momentum
        big_a[:, 1, 0] = 1.0
    if ema > 0:
        e = m - 1
        big_a[:, e, :] = (1 - ema) * big_a[:, 0, :]
        big_a[:, e, e] += ema
        noise[:, e] = (1 - ema) * s
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


def _factor(q, xp):
    """L with L Lᵀ = Q for symmetric PSD Q (possibly singular): V diag(√max(w, 0))."""
    w, v = xp.linalg.eigh(q)
    return v * xp.sqrt(xp.maximum(w, 0.0))[..., None, :]


def simulate_checkpoints(
    p: NoisyQuadratic,
    lr,
    batch_size,
    record,
    replicas: int,
    seed=0,
    init_var=1.0,
    precond=None,
    momentum: float = 0.0,
    ema: float = 0.0,
    backend: str = "numpy",
):
    """Monte Carlo losses at the checkpoints ``record`` by exact jumps (diagonal problems; float64).

    Returns a :class:`nqm.SimulationResult`: the same law as :func:`nqm.simulate` at those steps, at a cost
    that does not grow with the number of steps.
    """
    from .montecarlo import _result

    if not p.is_diagonal:
        raise ValueError("skip-ahead needs a diagonal problem (Σ diagonal in H's basis, no rotation)")
    lr, batch_size = float(check_lr(lr)), float(check_batch_size(batch_size))
    beta, gamma = check_unit_interval("momentum", momentum), check_unit_interval("ema", ema)
    replicas = check_replicas(replicas)
    rec = np.unique(np.asarray(record, dtype=np.int64))
    if rec.ndim != 1 or rec.size == 0 or rec[0] < 0:
        raise ValueError("record must be non-negative step counts")
    xp = resolve_backend(backend)
    key = seed_key(seed)
    step = step_map(p, lr, batch_size, precond, beta, gamma, xp)
    m = step[0].shape[-1]
    coords, reps = xp.arange(p.d)[None, :], xp.arange(replicas)[:, None]
    sd = np.sqrt(np.broadcast_to(np.asarray(init_var, dtype=np.float64), (p.d,)))
    theta0 = _initial(xp, key, None, sd, replicas, 0, p.d, np.float64)  # the θ₀ of nqm.simulate(rng="philox")
    x = xp.repeat(theta0[..., None], m, axis=-1)  # θ_{−1} = θ₀ (v₀ = 0) and θ̃₀ = θ₀
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
        losses[:, k] = _to_host(xp, _loss(xp, x[..., -1] if gamma > 0 else x[..., 0], h))
    return _result(rec, losses, False, None)
