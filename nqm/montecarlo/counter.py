"""Simulation on counter-based noise: the same runs on the CPU (NumPy) and the GPU (CuPy), on the same streams.

The noise of replica r, coordinate i in update t + 1 (t = 0, 1, …) is entry t mod 4 of the Philox block
(t div 4, i, r, stream 1) (:mod:`nqm.montecarlo.philox`), θ₀'s draw is entry 0 of block (0, i, r, stream 0); nothing
depends on how the work is split. On CuPy a diagonal problem runs in the fused kernel of
``nqm/montecarlo/cuda/fused.cu`` (state in registers across a chunk of steps, noise drawn in-kernel, the loss reduced
in-kernel in float64); on NumPy the loop below does the same arithmetic in the same order, so it is the
kernel's executable specification. Elementwise optimisers that are not linear (sign descent, signum, RMSprop,
Adam) run fused.cu's ``nqm_adaptive_run`` on diagonal problems, mirrored by a loop over their own ``apply``. Dense
Σ, a rotated basis or an optimiser that couples the coordinates take the general loop, the optimiser's
``advance`` with matrix products where needed (cuBLAS on the GPU), on the same normals.

Neither the chunking of steps into launches nor the batching of replicas changes a result: both only
change which counters are computed together.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..noise import correlate, noise_sd
from ..problem import NoisyQuadratic, check_precond
from .backend import kernels, replica_batch, to_host
from .basis import WorkingBasis
from .philox import STREAM_INIT, STREAM_NOISE, normal_block, seed_key
from .recurrence import DiagonalRecurrence, diagonal_recurrence

__all__ = [
    "simulate_counter",
    "initial_theta",
    "replica_loss",
    "diagonal_rows",
    "elementwise_rows",
    "elementwise_parameters",
    "chunks",
    "KIND_CODES",
]

_CPU_BATCH_ELEMENTS = 1 << 18  # rows × d per batch on the CPU: Philox's uint64 temporaries stay small
_GPU_CHUNK_UPDATES = 1 << 37  # coordinate-updates per kernel launch (about 0.7 s at the 2·10¹¹/s target)
_THREADS = 256

KIND_CODES = {"one": 0, "shift": 1, "two": 2}
"""The fused kernel's ``kind`` argument for each recurrence kind of :mod:`nqm.recurrence`."""


def initial_theta(xp, key, theta0, sd, rows: int, row0: int, d: int, dtype):
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


def replica_loss(xp, x, h):
    """½Σ h x² per row, accumulated in float64."""
    # a row-wise sum, not a matrix product: its order must not depend on how many rows are batched
    return 0.5 * (xp.square(x.astype(xp.float64)) * h).sum(axis=1)


def _chunk_numpy(key, x, aux, avg, kind, coef, drift, h, gamma, row0, t0, t1, ck, part):
    """``nqm_run`` of fused.cu in NumPy: steps t0+1 … t1 on all rows at once, losses at ``ck`` into ``part``.

    ``coef`` holds the rows f₀₀, f₀₁, f₁₀, f₁₁, u₀, u₁ (u = gσ) of the recurrence; ``kind`` its shape; ``drift``
    weight decay's constant pull on θ's row (None: none)."""
    rows, d = x.shape
    coords, reps = np.arange(d)[None, :], row0 + np.arange(rows)[:, None]
    f00, f01, f10, f11, u0, u1 = coef
    k = 0
    if k < ck.size and ck[k] == t0:
        part[:, k] = replica_loss(np, avg if gamma else x, h)
        k += 1
    z = None
    for t in range(t0, t1):  # update t + 1 uses noise index t: entry t mod 4 of block t div 4
        if z is None or t % 4 == 0:
            z = normal_block(np, key, t // 4, coords, reps, STREAM_NOISE, x.dtype)
        zt = z[t % 4]
        if kind == "one":
            x = f00 * x + u0 * zt
        elif kind == "shift":
            x, aux = f00 * x + f01 * aux + u0 * zt, x
        else:
            x, aux = f00 * x + f01 * aux + u0 * zt, f10 * x + f11 * aux + u1 * zt
        if drift is not None:
            x = x + drift
        if gamma:
            avg = gamma * (avg - x) + x
        if k < ck.size and ck[k] == t + 1:
            part[:, k] = replica_loss(np, avg if gamma else x, h)
            k += 1
    return x, aux, avg


def _chunk_cupy(cp, key, x, aux, avg, kind, coef, drift, h, gamma, row0, t0, t1, ck, part):
    """One launch of ``nqm_run`` (in place on x, aux, avg)."""
    rows, d = x.shape
    dt = x.dtype.type
    run = kernels(cp).get_function("nqm_run_f32" if x.dtype == np.float32 else "nqm_run_f64")
    null = np.uint64(0)  # a null pointer argument
    args = (
        x,
        aux if aux is not None else null,
        avg if avg is not None else null,
        coef,
        drift if drift is not None else null,
        h,
        np.int32(KIND_CODES[kind]),
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
    return x, aux, avg


def diagonal_rows(xp, key, x, rec: DiagonalRecurrence, h, record, row0, chunk_list, launch=None):
    """Rows [row0, row0 + len(x)) of a diagonal problem, one kernel launch (or NumPy mirror) per chunk.

    ``rec`` is the optimiser's recurrence (:mod:`nqm.recurrence`), with weight decay's pull and start offset when the
    optimum is not 0. ``launch(key, x, aux, avg, kind, coef, drift, h, gamma, row0, t0, t1, ck, part) -> (x, aux,
    avg)`` runs one chunk: the CUDA kernel on CuPy, its NumPy mirror
    on NumPy (the tests also pass the kernel source compiled for the CPU).
    """
    if launch is None:
        launch = _chunk_numpy if xp is np else partial(_chunk_cupy, xp)
    coef = xp.asarray(rec.coefficients(x.dtype))
    drift = None if rec.drift is None else xp.ascontiguousarray(xp.asarray(rec.drift, dtype=x.dtype))  # a kernel arg
    h = xp.asarray(h, dtype=xp.float64)
    gamma = x.dtype.type(rec.gamma)
    aux = x * x.dtype.type(rec.initial[1]) if rec.kind != "one" else None  # θ_{−1} = θ₀, or e₁θ₀
    if aux is not None and rec.start is not None:  # decoupled decay's θ_{−1} = θ₀/(1 − δ), in the error θ − θ*
        aux += xp.asarray(rec.start[:, 1], dtype=x.dtype)
    state = [x, aux, x.copy() if rec.gamma else None]  # θ, the second state, θ̃

    def run(t0, t1, ck, part):
        state[:] = launch(key, *state, rec.kind, coef, drift, h, gamma, row0, t0, t1, ck, part)

    return _run_chunks(xp, x, h, record, chunk_list, run), state[0]


def _run_chunks(xp, x, h, record, chunk_list, run) -> np.ndarray:
    """(rows, K) losses, chunk after chunk: ``run(t0, t1, ck, part)`` advances the state over steps (t0, t1] and
    writes the losses at the chunk's checkpoints ``ck`` into ``part``; with no steps, the loss of θ₀ alone."""
    rows = x.shape[0]
    losses = np.zeros((rows, record.size))
    if not chunk_list:
        losses[:, 0] = to_host(xp, replica_loss(xp, x, h))
    for t0, t1 in chunk_list:
        # this chunk's checkpoints: (t0, t1], and t0 itself in the first chunk
        lo = int(np.searchsorted(record, t0, side="left" if t0 == 0 else "right"))
        hi = int(np.searchsorted(record, t1, side="right"))
        ck = record[lo:hi]
        part = xp.zeros((rows, max(1, ck.size)))
        run(t0, t1, ck, part)
        losses[:, lo:hi] = to_host(xp, part[:, : ck.size])
    return losses


def _general_rows(xp, key, x, p, opt, batch_size, steps, record, row0):
    """Dense Σ or a rotated basis: the optimiser's update (:mod:`nqm.optim`, weight decay included), one
    matrix-product step at a time, on the same Philox normals as the fused path (noise Σ^½ z/√B in H's basis, the run in
    :class:`nqm.basis.WorkingBasis`), as in :func:`nqm.simulate`'s general path.
    """
    rows, d = x.shape
    basis = WorkingBasis(p, check_precond(p, opt.precond), x.dtype, xp)
    state = opt.init(basis.to_working(x))
    losses = np.zeros((rows, record.size))
    coords, reps = xp.arange(d)[None, :], row0 + xp.arange(rows)[:, None]
    k = 0
    if record[0] == 0:
        losses[:, 0] = to_host(xp, basis.loss(opt.readout(state)))
        k = 1
    z = None
    for t in range(steps):
        if z is None or t % 4 == 0:
            z = normal_block(xp, key, t // 4, coords, reps, STREAM_NOISE, x.dtype)
        noise = basis.to_working(correlate(z[t % 4], p, 1.0 / np.sqrt(batch_size), xp))
        state = basis.step(opt, state, noise)
        if k < record.size and record[k] == t + 1:
            losses[:, k] = to_host(xp, basis.loss(opt.readout(state)))
            k += 1
    return losses, basis.to_eigenbasis(state[0])


def elementwise_parameters(opt) -> tuple[int, float, float, float, float, float] | None:
    """The arguments ``(kind, lr, β₁, β₂, eps, decay)`` of fused.cu's ``nqm_adaptive_run`` for an elementwise
    optimiser that is not linear, as the optimiser gives them (:meth:`nqm.optim.SignSgd.kernel_arguments` and its
    kin); None for one the kernel does not run."""
    return None if opt.linear else opt.kernel_arguments()


def _elementwise_chunk_numpy(key, x, aux, opt, h, sd, pull, row0, t0, t1, ck, part):
    """``nqm_adaptive_run`` of fused.cu in NumPy: steps t0+1 … t1 of ``opt.apply`` (:mod:`nqm.optim`) on all rows,
    with the gradient ``z·sd + x·h`` on the Philox normals, then AdamW's ``pull`` (None: none); losses at ``ck``
    into ``part``."""
    rows, d = x.shape
    coords, reps = np.arange(d)[None, :], row0 + np.arange(rows)[:, None]
    h_t, sd_t = h.astype(x.dtype), sd.astype(x.dtype)
    g, buf = np.empty_like(x), np.empty_like(x)
    k = 0
    if k < ck.size and ck[k] == t0:
        part[:, k] = replica_loss(np, x, h)
        k += 1
    z = None
    for t in range(t0, t1):
        if z is None or t % 4 == 0:
            z = normal_block(np, key, t // 4, coords, reps, STREAM_NOISE, x.dtype)
        np.multiply(z[t % 4], sd_t, out=g)
        np.multiply(x, h_t, out=buf)
        g += buf
        opt.apply(x, aux, g, buf, t + 1)
        if pull is not None:
            x += pull
        if k < ck.size and ck[k] == t + 1:
            part[:, k] = replica_loss(np, x, h)
            k += 1
    return x, aux


def _elementwise_chunk_cupy(cp, key, x, aux, opt, h, sd, pull, row0, t0, t1, ck, part):
    """One launch of ``nqm_adaptive_run`` (in place on x and the auxiliary arrays)."""
    rows, d = x.shape
    run = kernels(cp).get_function("nqm_adaptive_run_f32" if x.dtype == np.float32 else "nqm_adaptive_run_f64")
    null = np.uint64(0)  # a null pointer argument
    kind, lr, beta1, beta2, eps, decay = elementwise_parameters(opt)
    mom = aux[0] if kind in (1, 3) else null  # signum's m, Adam's m
    sec = aux[-1] if kind in (2, 3) else null  # RMSprop's v, Adam's v
    scalars = tuple(np.float64(v) for v in (lr, beta1, beta2, eps, decay))
    args = (x, mom, sec, cp.asarray(sd, dtype=x.dtype), null if pull is None else pull, h, np.int32(kind), *scalars)
    args += (np.int32(d), np.int32(rows))
    args += (np.int64(row0), np.int64(t0), np.int64(t1), cp.asarray(ck, dtype=cp.int64), np.int32(ck.size), part)
    args += (np.int32(part.shape[1]), np.uint32(key[0]), np.uint32(key[1]))
    run(((d + _THREADS - 1) // _THREADS, min(rows, 65535)), (_THREADS,), args)
    return x, aux


def elementwise_rows(xp, key, x, opt, h, sd, record, row0, chunk_list, launch=None, pull=None):
    """Rows [row0, row0 + len(x)) of a diagonal problem under an elementwise optimiser that is not linear: one launch
    of fused.cu's ``nqm_adaptive_run`` (or its NumPy mirror) per chunk. ``sd`` is √(c/B) per coordinate; ``pull``
    AdamW's constant step towards 0 when the optimum is not 0 (:meth:`nqm.optim.Adam.pull`).

    ``launch(key, x, aux, opt, h, sd, pull, row0, t0, t1, ck, part) -> (x, aux)``: the kernel on CuPy, the mirror on
    NumPy (the tests also pass the kernel source compiled for the CPU).
    """
    if launch is None:
        launch = _elementwise_chunk_numpy if xp is np else partial(_elementwise_chunk_cupy, xp)
    h = xp.asarray(h, dtype=xp.float64)
    pull = None if pull is None else xp.ascontiguousarray(xp.asarray(pull, dtype=x.dtype))
    state = [x, [xp.zeros_like(x) for _ in range(opt.slots)]]  # θ and the optimiser's auxiliary arrays

    def run(t0, t1, ck, part):
        state[:] = launch(key, *state, opt, h, sd, pull, row0, t0, t1, ck, part)

    return _run_chunks(xp, x, h, record, chunk_list, run), state[0]


def chunks(steps: int, chunk_steps: int) -> list[tuple[int, int]]:
    """Consecutive (t0, t1] step ranges of at most ``chunk_steps`` covering 0 … steps."""
    return [(t, min(steps, t + chunk_steps)) for t in range(0, steps, chunk_steps)]


def simulate_counter(
    p: NoisyQuadratic,
    opt,
    batch_size: float,
    steps: int,
    replicas: int,
    seed,
    init_var: np.ndarray,
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
    ``generator="philox"``. ``chunk_steps`` (steps per kernel launch / loop chunk) and ``batch_rows`` (replicas at
    once) default to sizes that fit the device; neither changes the result.
    """
    key = seed_key(seed)
    d = p.d
    on_gpu = xp is not np
    itemsize = np.dtype(dtype).itemsize
    rec = diagonal_recurrence(p, opt, batch_size) if p.is_diagonal and opt.linear else None
    fused_elementwise = p.is_diagonal and not opt.linear and elementwise_parameters(opt) is not None
    pull = opt.pull(p.optimum) if fused_elementwise and hasattr(opt, "pull") else None
    batch_sd = noise_sd(p, batch_size)
    if batch_rows is None:
        if on_gpu:
            free = xp.cuda.runtime.memGetInfo()[0] + xp.get_default_memory_pool().free_bytes()
            states = opt.order if getattr(opt, "linear", False) else 3
            per_row = d * itemsize * states * (1 if p.is_diagonal else 8) + 8 * record.size
            batch_rows = replica_batch(replicas, per_row, free)
        else:
            batch_rows = max(1, _CPU_BATCH_ELEMENTS // d)
    if chunk_steps is None:
        chunk_steps = max(1, _GPU_CHUNK_UPDATES // (min(batch_rows, replicas) * d)) if on_gpu else max(1, steps)
    if int(batch_rows) < 1 or int(chunk_steps) < 1:
        raise ValueError("batch_rows and chunk_steps must be >= 1")
    chunk_list = chunks(steps, int(chunk_steps))
    sd = np.sqrt(init_var)
    losses = np.zeros((replicas, record.size))
    state = np.empty((replicas, d), dtype=dtype) if keep_state else None
    for row0 in range(0, replicas, int(batch_rows)):
        rows = min(int(batch_rows), replicas - row0)
        x = initial_theta(xp, key, theta0, sd, rows, row0, d, dtype)
        if rec is not None:
            part, x = diagonal_rows(xp, key, x, rec, p.h, record, row0, chunk_list)
        elif fused_elementwise:
            part, x = elementwise_rows(xp, key, x, opt, p.h, batch_sd, record, row0, chunk_list, pull=pull)
        else:
            part, x = _general_rows(xp, key, x, p, opt, batch_size, steps, record, row0)
        losses[row0 : row0 + rows] = part
        if keep_state:
            state[row0 : row0 + rows] = to_host(xp, x)
        if progress is not None:
            progress.update(float(rows) * d * steps)
    return losses, state
