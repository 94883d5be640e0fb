"""The SFC64 engine: replicas in tiles on threads, each tile with its own SFC64 stream (:mod:`.parallel`).

Work is split into *tiles* (a block of replicas × a block of coordinates for diagonal problems, a block of
replicas × all coordinates otherwise). Each tile owns an ``SFC64`` stream seeded by
``SeedSequence(seed, spawn_key=(replica block, coordinate block))`` and runs all its steps on its own, so tiles
go to threads in any order and a result depends only on (seed, problem, arguments), never on the thread count.
Losses are accumulated in float64 whatever the state's dtype.

Diagonal problems take a fast path of in-place updates on cache-sized tiles: a linear optimiser's recurrence
(:mod:`.recurrence`), bound by the normal generator, or an elementwise nonlinear optimiser's in-place step
(``apply``, :mod:`nqm.optim`). Dense Σ, a rotated basis, per-example noise or an update that couples the
coordinates (normalised SGD) take the general path, the optimiser's own ``advance`` with matrix products.
"""

from __future__ import annotations

import numpy as np

from ..noise import minibatch_noise, noise_sd
from ..problem import NoisyQuadratic, check_precond
from ..progress import Progress
from .basis import WorkingBasis
from .fused import fused_step
from .parallel import run_tasks, thread_count, tile_rng
from .recurrence import DiagonalRecurrence, diagonal_recurrence
from .results import loss_curve

__all__ = ["simulate_sfc64", "TILE_ELEMENTS", "GENERAL_TILE_ELEMENTS"]

TILE_ELEMENTS = 1 << 14  # 128 KiB of float64 per array: a tile's working set stays in L2.
GENERAL_TILE_ELEMENTS = 1 << 16


# -- the diagonal fast path -------------------------------------------------------------------
class _Checkpoints:
    """A tile's losses at the recorded steps and its progress reports; ``loss(x)`` gives each row's loss."""

    def __init__(self, record, rows: int, loss, steps: int, progress, size: int):
        self.record, self.loss, self.progress, self.size = record, loss, progress, size
        self.losses = np.empty((rows, record.size))
        self.k = 0
        self.every = max(1, steps // 100)

    def start(self, x):
        if self.record[0] == 0:
            self.losses[:, 0] = self.loss(x)
            self.k = 1

    def after(self, t: int, x):
        """After step t with the reported iterate x."""
        if self.k < self.record.size and self.record[self.k] == t:
            self.losses[:, self.k] = self.loss(x)
            self.k += 1
        if t % self.every == 0:
            self.progress.update(self.every * self.size)


def _weighted_loss(weight):
    """½Σ weight·x² per row, accumulated in float64 whatever x's dtype."""
    return lambda x: 0.5 * (np.square(x, dtype=np.float64) @ weight)


def _diagonal_tile(rng, coef, theta0, steps, record, dtype, progress, keep_state):
    """Run one (replicas × coordinates) tile of a diagonal problem in place; return its losses.

    ``coef`` holds this tile's slice of the optimiser's recurrence (:mod:`nqm.recurrence`). When every
    coordinate has noise (σ > 0) the tile works on u = s/σ, where SGD's update ``u ← a·u − z`` needs no
    multiply of the fresh normals: one pass fewer per step, which matters because a step is a few passes over
    cache-resident memory beside one normal per coordinate.
    """
    kind, f, gain, s, h, gamma, drift = (coef[k] for k in ("kind", "f", "gain", "s", "h", "gamma", "drift"))
    a = np.ascontiguousarray(f[:, 0, 0])  # a strided operand would slow every in-place multiply
    # Only when θ/s stays far from overflow (u² is accumulated in float64 for the loss).
    scaled = bool(np.all(s >= np.finfo(dtype).tiny ** 0.25))
    theta = theta0.astype(dtype, copy=True)
    if scaled:
        theta /= s
        weight = h * np.square(s, dtype=np.float64)  # L = ½ Σ h s² u²
        drift = None if drift is None else drift / s
    else:
        weight = h
    z = np.empty_like(theta)
    two = kind != "one"
    # the second state: θ_{t−1} (θ_{−1} = θ_0 means v_0 = 0) for "shift", e₁θ₀ in general
    aux = theta * dtype(coef["initial"][1]) if two else None
    if two and coef["start"] is not None:  # decoupled decay's θ_{−1} = θ₀/(1 − δ), in the error θ − θ*
        aux += coef["start"][:, 1] / s if scaled else coef["start"][:, 1]
    tmp = np.empty_like(theta) if two else None
    buf = np.empty_like(theta) if kind == "two" else None
    if kind == "shift":
        beta = -_row(f[:, 0, 1])  # x' = a x − β y − z on positions
    elif kind == "two":
        f01, f10, f11, g0, g1 = (_row(c) for c in (f[:, 0, 1], f[:, 1, 0], f[:, 1, 1], *gain.T))
    plain_gain = kind == "two" or bool(np.all(gain[:, 0] == -1))
    minus_gain = None if plain_gain else -gain[:, 0]
    avg = theta.copy() if gamma > 0 else None
    checkpoints = _Checkpoints(record, theta.shape[0], _weighted_loss(weight), steps, progress, theta.size)
    checkpoints.start(theta)
    for t in range(1, steps + 1):
        rng.standard_normal(out=z, dtype=dtype)
        if not scaled:
            z *= s
        if minus_gain is not None:
            z *= minus_gain
        if kind == "shift":
            # θ_{t+1} = aθ_t − βθ_{t−1} − s z (heavy ball written on positions).
            aux *= beta
            aux += z
            np.multiply(theta, a, out=tmp)
            np.subtract(tmp, aux, out=aux)
            theta, aux = aux, theta
        elif kind == "two":
            # x' = f₀₀x + f₀₁y + g₀z, y' = f₁₀x + f₁₁y + g₁z, both from the old (x, y)
            np.multiply(aux, f01, out=tmp)
            np.multiply(z, g0, out=buf)
            tmp += buf
            aux *= f11
            np.multiply(theta, f10, out=buf)
            aux += buf
            np.multiply(z, g1, out=buf)
            aux += buf
            theta *= a
            theta += tmp
        else:
            theta *= a
            theta -= z
        if drift is not None:  # weight decay's pull towards 0 when the optimum is not 0
            theta += drift
        if gamma > 0:
            avg -= theta
            avg *= gamma
            avg += theta
        checkpoints.after(t, avg if gamma > 0 else theta)
    if keep_state and scaled:
        theta *= s
    return checkpoints.losses, (theta if keep_state else None)


def _elementwise_tile(rng, opt, h, sd, theta0, steps, record, dtype, progress, keep_state, pull=None):
    """One (replicas × coordinates) tile of a diagonal problem under an optimiser that is not linear: the
    gradient ``hθ + sd·z``, then the optimiser's own step (:mod:`nqm.optim`), then its decay's ``pull`` towards 0
    when the optimum is not 0 (AdamW). Where numba is installed the gradient and the step are one compiled loop
    (:mod:`.fused`, the same numbers); otherwise NumPy forms g in place and runs ``apply``."""
    x = theta0.astype(dtype, copy=True)
    pull = None if pull is None else pull.astype(dtype)
    aux = [np.zeros_like(x) for _ in range(opt.slots)]
    g, buf = np.empty_like(x), np.empty_like(x)
    h_row, sd_row = h.astype(dtype), sd.astype(dtype)
    kernel = fused_step(opt)
    checkpoints = _Checkpoints(record, x.shape[0], _weighted_loss(h), steps, progress, x.size)
    checkpoints.start(x)
    for t in range(1, steps + 1):
        rng.standard_normal(out=g, dtype=dtype)
        if kernel is not None:
            kernel(x, tuple(aux), g, h_row, sd_row, tuple(dtype(c) for c in opt.constants(t)))
        else:
            g *= sd_row
            np.multiply(x, h_row, out=buf)
            g += buf
            opt.apply(x, aux, g, buf, t)
        if pull is not None:
            x += pull
        checkpoints.after(t, x)
    return checkpoints.losses, (x if keep_state else None)


def _row(values):
    """A coefficient row as the loop wants it: a scalar when it is the same for every coordinate (one stream of
    memory less per step), else a contiguous array (a strided operand slows every in-place multiply)."""
    return values[0] if np.all(values == values[0]) else np.ascontiguousarray(values)


def _diagonal_coefficients(rec: DiagonalRecurrence, p, dtype):
    return {
        "kind": rec.kind,
        "f": rec.f.astype(dtype),
        "gain": rec.gain.astype(dtype),
        "s": rec.sigma.astype(dtype),
        "h": p.h,
        "gamma": dtype(rec.gamma),
        "initial": rec.initial,
        "drift": None if rec.drift is None else rec.drift.astype(dtype),
        "start": None if rec.start is None else rec.start.astype(dtype),
    }


# -- the general path: dense Σ, rotated basis, per-example noise ------------------------------
def _general_tile(rng, p, basis, opt, batch_size, per_example, theta0, steps, record, dtype, progress, keep_state):
    """The optimiser's own update (:mod:`nqm.optim`) on rows of replicas, one matrix-product step at a time, weight
    decay included (:meth:`WorkingBasis.step`)."""
    x = basis.to_working(theta0.astype(dtype))
    state = opt.init(x)
    checkpoints = _Checkpoints(record, x.shape[0], basis.loss, steps, progress, x.size)
    checkpoints.start(opt.readout(state))
    for t in range(1, steps + 1):
        noise = basis.to_working(minibatch_noise(rng, p, batch_size, x.shape[0], per_example, dtype))
        state = basis.step(opt, state, noise)
        checkpoints.after(t, opt.readout(state))
    return checkpoints.losses, (basis.to_eigenbasis(state[0]) if keep_state else None)


def nonlinear_pull(p: NoisyQuadratic, opt):
    """The per-step pull of a nonlinear optimiser's weight decay towards 0 in H's basis (d,), None without."""
    pull = getattr(opt, "pull", None)
    return None if pull is None else pull(p.optimum)


def initial_theta(rng, theta0, init_var, rows, cols: slice, dtype):
    """θ₀ of a tile: ``theta0`` repeated over its rows, or N(0, init_var) draws from the tile's stream."""
    if theta0 is not None:
        return np.broadcast_to(theta0[cols], (rows, theta0[cols].size)).astype(dtype)
    return rng.standard_normal((rows, init_var[cols].size), dtype=dtype) * np.sqrt(init_var[cols]).astype(dtype)


def simulate_sfc64(
    p: NoisyQuadratic,
    opt,
    batch_size,
    steps,
    replicas,
    seed,
    var0,
    th0,
    rec,
    dtype,
    *,
    per_example=None,
    threads=None,
    progress=None,
    keep_losses=False,
    keep_state=False,
):
    """Losses of ``replicas`` runs of ``opt`` at the steps ``rec`` on SFC64 streams; the arguments are those of
    :func:`nqm.simulate`, already checked there (``var0`` the (d,) initial variance, ``th0`` a common θ₀)."""
    pre = check_precond(p, opt.precond)
    # the fused loops: a linear optimiser's recurrence, or an elementwise optimiser's in-place step
    fast = p.is_diagonal and per_example is None and (opt.linear or opt.elementwise)
    cols = min(p.d, TILE_ELEMENTS) if fast else p.d
    rows = max(1, (TILE_ELEMENTS if fast else GENERAL_TILE_ELEMENTS) // cols)
    tiles = [(r0, c0) for r0 in range(0, replicas, rows) for c0 in range(0, p.d, cols)]
    work = float(replicas) * p.d * steps * (1 + (per_example is not None) * batch_size)
    bar = Progress(work, "nqm.simulate", work > 2e9 if progress is None else bool(progress))

    if fast and opt.linear:
        coef = _diagonal_coefficients(diagonal_recurrence(p, opt, batch_size), p, dtype)
    pull = None if opt.linear else nonlinear_pull(p, opt)
    sd = noise_sd(p, batch_size)

    def task(r0, c0):
        def run():
            rng = tile_rng(seed, r0 // rows, c0 // cols)
            n_rows, sl = min(rows, replicas - r0), slice(c0, c0 + cols)
            theta = initial_theta(rng, th0, var0, n_rows, sl, dtype)
            if fast and not opt.linear:
                tile_pull = None if pull is None else pull[sl]
                return _elementwise_tile(
                    rng, opt, p.h[sl], sd[sl], theta, steps, rec, dtype, bar, keep_state, tile_pull
                )
            if fast:
                tile_coef = {k: (v[sl] if isinstance(v, np.ndarray) else v) for k, v in coef.items()}
                return _diagonal_tile(rng, tile_coef, theta, steps, rec, dtype, bar, keep_state)
            basis = WorkingBasis(p, pre, dtype)
            return _general_tile(rng, p, basis, opt, batch_size, per_example, theta, steps, rec, dtype, bar, keep_state)

        return run

    outputs = run_tasks([task(*t) for t in tiles], thread_count(threads, len(tiles)))
    losses = np.zeros((replicas, rec.size))
    state = np.empty((replicas, p.d)) if keep_state else None
    for (r0, c0), (tile_losses, tile_state) in zip(tiles, outputs):  # fixed order: deterministic sums
        losses[r0 : r0 + tile_losses.shape[0]] += tile_losses
        if keep_state:
            state[r0 : r0 + tile_state.shape[0], c0 : c0 + tile_state.shape[1]] = tile_state
    return loss_curve(rec, losses, keep_losses, state)
