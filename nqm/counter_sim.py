"""Simulation on counter-based noise: the same runs on the CPU (NumPy) and the GPU (CuPy), on the same streams.

The noise of replica r, coordinate i in update t + 1 (t = 0, 1, …) is entry t mod 4 of the Philox block
(t div 4, i, r, stream 1) (:mod:`nqm.philox`), θ₀'s draw is entry 0 of block (0, i, r, stream 0); nothing
depends on how the work is split. On CuPy a diagonal problem runs in the fused kernel of
``nqm/cuda/fused.cu`` (state in registers across a chunk of steps, noise drawn in-kernel, the loss reduced
in-kernel in float64); on NumPy the loop below does the same arithmetic in the same order, so it is the
kernel's executable specification. Dense Σ or a rotated basis take a matrix-product loop (cuBLAS on the GPU)
on the same normals.

Neither the chunking of steps into launches nor the batching of replicas changes a result: both only
change which counters are computed together.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .backend import kernels, replica_batch
from .basis import WorkingBasis
from .noise import correlate
from .philox import STREAM_INIT, STREAM_NOISE, normal_block, seed_key
from .problem import NoisyQuadratic

__all__ = ["simulate_counter", "diagonal_coefficients"]

_CPU_BATCH_ELEMENTS = 1 << 18  # rows × d per batch on the CPU: Philox's uint64 temporaries stay small
_GPU_CHUNK_UPDATES = 1 << 37  # coordinate-updates per kernel launch (about 0.7 s at the 2·10¹¹/s target)
_THREADS = 256


def diagonal_coefficients(p: NoisyQuadratic, lr, batch_size, pre, beta, dtype):
    """Per coordinate: a = 1 + β − ε p h (SGD: β = 0) and the noise scale s = ε p √(c/B), in ``dtype``."""
    lam = lr * pre * p.h
    return (1.0 + beta - lam).astype(dtype), (lr * pre * np.sqrt(p.c / batch_size)).astype(dtype)


def _initial(xp, key, theta0, sd, rows: int, row0: int, d: int, dtype):
    """θ₀ of rows [row0, row0 + rows): ``theta0`` repeated, or entry 0 of Philox block (0, i, r, stream 0)·√var."""
    if theta0 is not None:
        return xp.broadcast_to(xp.asarray(theta0, dtype=dtype), (rows, d)).copy()
    if xp is not np:  # the init kernel: no (rows, d) uint64 temporaries on the device
        x = xp.empty((rows, d), dtype=dtype)
        init = kernels(xp).get_function("nqm_init_f32" if np.dtype(dtype) == np.float32 else "nqm_init_f64")
        blocks = int(min(65535 * 64, (rows * d + _THREADS - 1) // _THREADS))
        args = (x, xp.asarray(sd, dtype=xp.float64), np.int32(d), np.int32(rows), np.int64(row0))
        init((blocks,), (_THREADS,), (*args, np.uint32(key[0]), np.uint32(key[1])))
        return x
    z = normal_block(xp, key, 0, xp.arange(d)[None, :], row0 + xp.arange(rows)[:, None], STREAM_INIT, dtype)[0]
    return (z.astype(xp.float64) * xp.asarray(sd)).astype(dtype)


def _loss(xp, x, h):
    # a row-wise sum, not a matrix product: its order must not depend on how many rows are batched
    return 0.5 * (xp.square(x.astype(xp.float64)) * h).sum(axis=1)


def _chunk_numpy(key, x, prev, avg, a, s, h, beta, gamma, row0, t0, t1, ck, part):
    """``nqm_run`` of fused.cu in NumPy: steps t0+1 … t1 on all rows at once, losses at ``ck`` into ``part``."""
    rows, d = x.shape
    coords, reps = np.arange(d)[None, :], row0 + np.arange(rows)[:, None]
    k = 0
    if k < ck.size and ck[k] == t0:
        part[:, k] = _loss(np, avg if gamma else x, h)
        k += 1
    z = None
    for t in range(t0, t1):  # update t + 1 uses noise index t: entry t mod 4 of block t div 4
        if z is None or t % 4 == 0:
            z = normal_block(np, key, t // 4, coords, reps, STREAM_NOISE, x.dtype)
        if beta:
            x, prev = a * x - beta * prev - s * z[t % 4], x
        else:
            x = a * x - s * z[t % 4]
        if gamma:
            avg = gamma * (avg - x) + x
        if k < ck.size and ck[k] == t + 1:
            part[:, k] = _loss(np, avg if gamma else x, h)
            k += 1
    return x, prev, avg


def _chunk_cupy(cp, key, x, prev, avg, a, s, h, beta, gamma, row0, t0, t1, ck, part):
    """One launch of ``nqm_run`` (in place on x, prev, avg)."""
    rows, d = x.shape
    dt = x.dtype.type
    run = kernels(cp).get_function("nqm_run_f32" if x.dtype == np.float32 else "nqm_run_f64")
    null = np.uint64(0)  # a null pointer argument
    args = (
        x,
        prev if prev is not None else null,
        avg if avg is not None else null,
        a,
        s,
        h,
        dt(beta),
        dt(gamma),
        np.int32(d),
        np.int32(rows),
        np.int64(row0),
        np.int64(t0),
        np.int64(t1),
        cp.asarray(ck, dtype=cp.int64),
        np.int32(ck.size),
        part,
        np.int32(part.shape[1]),
        np.uint32(key[0]),
        np.uint32(key[1]),
    )
    run(((d + _THREADS - 1) // _THREADS, min(rows, 65535)), (_THREADS,), args)
    return x, prev, avg


def _diagonal_rows(xp, key, x, coef, h, beta, gamma, record, row0, chunks, launch=None):
    """Rows [row0, row0 + len(x)) of a diagonal problem, one kernel launch (or NumPy mirror) per chunk.

    ``launch(key, x, prev, avg, a, s, h, beta, gamma, row0, t0, t1, ck, part) -> (x, prev, avg)`` runs one
    chunk: the CUDA kernel on CuPy, its NumPy mirror on NumPy (the tests also pass the kernel source compiled
    for the CPU).
    """
    if launch is None:
        launch = _chunk_numpy if xp is np else partial(_chunk_cupy, xp)
    rows = x.shape[0]
    a, s = (xp.asarray(c) for c in coef)
    h = xp.asarray(h, dtype=xp.float64)
    prev = x.copy() if beta else None
    avg = x.copy() if gamma else None
    losses = np.zeros((rows, record.size))
    if not chunks:  # no steps: the loss of θ₀ only
        losses[:, 0] = _to_host(xp, _loss(xp, x, h))
    for t0, t1 in chunks:
        # this chunk's checkpoints: (t0, t1], and t0 itself in the first chunk
        lo = int(np.searchsorted(record, t0, side="left" if t0 == 0 else "right"))
        hi = int(np.searchsorted(record, t1, side="right"))
        ck = record[lo:hi]
        part = xp.zeros((rows, max(1, ck.size)))
        x, prev, avg = launch(key, x, prev, avg, a, s, h, beta, gamma, row0, t0, t1, ck, part)
        losses[:, lo:hi] = _to_host(xp, part[:, : ck.size])
    return losses, x


def _general_rows(xp, key, x, p, lr, batch_size, pre, beta, gamma, steps, record, row0):
    """Dense Σ or a rotated basis: one matrix-product step at a time on the same Philox normals, as in
    :func:`nqm.simulate`'s general path (noise Σ^½ z/√B in H's basis, the run in :class:`nqm.basis.WorkingBasis`).
    """
    rows, d = x.shape
    basis = WorkingBasis(p, pre, x.dtype, xp)
    x = basis.to_working(x)
    v = xp.zeros_like(x) if beta else None
    avg = x.copy() if gamma else None
    losses = np.zeros((rows, record.size))
    coords, reps = xp.arange(d)[None, :], row0 + xp.arange(rows)[:, None]
    k = 0
    if record[0] == 0:
        losses[:, 0] = _to_host(xp, basis.loss(x))
        k = 1
    z = None
    for t in range(steps):
        if z is None or t % 4 == 0:
            z = normal_block(xp, key, t // 4, coords, reps, STREAM_NOISE, x.dtype)
        noise = basis.to_working(correlate(z[t % 4], p, 1.0 / np.sqrt(batch_size), xp))
        step = basis.precondition(basis.curvature(x) + noise)
        if beta:
            v = beta * v + step
            step = v
        x = x - lr * step
        if gamma:
            avg = gamma * avg + (1 - gamma) * x
        if k < record.size and record[k] == t + 1:
            losses[:, k] = _to_host(xp, basis.loss(avg if gamma else x))
            k += 1
    return losses, basis.to_eigenbasis(x)


def _to_host(xp, a):
    return a.get() if hasattr(a, "get") and xp is not np else np.asarray(a)


def _chunks(steps: int, chunk_steps: int) -> list[tuple[int, int]]:
    return [(t, min(steps, t + chunk_steps)) for t in range(0, steps, chunk_steps)]


def simulate_counter(
    p: NoisyQuadratic,
    lr: float,
    batch_size: float,
    steps: int,
    replicas: int,
    seed,
    init_var: np.ndarray,
    pre: np.ndarray,
    beta: float,
    gamma: float,
    record: np.ndarray,
    dtype,
    xp,
    *,
    theta0=None,
    chunk_steps: int | None = None,
    batch_rows: int | None = None,
    keep_state: bool = False,
    progress=None,
):
    """(replicas, K) losses at ``record`` (float64, on the host) and the final θ if ``keep_state``.

    Arguments are validated by :func:`nqm.simulate`, which calls this for ``backend="cupy"`` or
    ``rng="philox"``. ``chunk_steps`` (steps per kernel launch / loop chunk) and ``batch_rows`` (replicas at
    once) default to sizes that fit the device; neither changes the result.
    """
    key = seed_key(seed)
    d = p.d
    on_gpu = xp is not np
    itemsize = np.dtype(dtype).itemsize
    if batch_rows is None:
        if on_gpu:
            free = xp.cuda.runtime.memGetInfo()[0] + xp.get_default_memory_pool().free_bytes()
            per_row = d * itemsize * (1 + (beta > 0) + (gamma > 0)) * (1 if p.is_diagonal else 8) + 8 * record.size
            batch_rows = replica_batch(replicas, per_row, free)
        else:
            batch_rows = max(1, _CPU_BATCH_ELEMENTS // d)
    if chunk_steps is None:
        chunk_steps = max(1, _GPU_CHUNK_UPDATES // (min(batch_rows, replicas) * d)) if on_gpu else max(1, steps)
    if int(batch_rows) < 1 or int(chunk_steps) < 1:
        raise ValueError("batch_rows and chunk_steps must be >= 1")
    chunks = _chunks(steps, int(chunk_steps))
    sd = np.sqrt(init_var)
    losses = np.zeros((replicas, record.size))
    state = np.empty((replicas, d), dtype=dtype) if keep_state else None
    coef = diagonal_coefficients(p, lr, batch_size, pre, beta, dtype) if p.is_diagonal else None
    for row0 in range(0, replicas, int(batch_rows)):
        rows = min(int(batch_rows), replicas - row0)
        x = _initial(xp, key, theta0, sd, rows, row0, d, dtype)
        if not p.is_diagonal:
            part, x = _general_rows(xp, key, x, p, lr, batch_size, pre, beta, gamma, steps, record, row0)
        else:
            part, x = _diagonal_rows(xp, key, x, coef, p.h, beta, gamma, record, row0, chunks)
        losses[row0 : row0 + rows] = part
        if keep_state:
            state[row0 : row0 + rows] = _to_host(xp, x)
        if progress is not None:
            progress.update(float(rows) * d * steps)
    return losses, state
