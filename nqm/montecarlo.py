"""Monte Carlo: real SGD runs on many replicas at once (NumPy backend, multi-threaded).

Each replica starts from ``θ_0 ~ N(0, diag(init_var))`` (or a given ``theta0``) and runs, with
``G_B = Hθ + ξ_B`` (see :mod:`nqm.noise`):

* SGD ``θ ← θ − εP G_B``;
* heavy-ball momentum ``v ← βv + P G_B``, ``θ ← θ − εv`` (v₀ = 0);
* iterate EMA ``θ̃ ← γθ̃ + (1 − γ)θ``, θ̃₀ = θ₀, whose loss is then reported.

Work is split into *tiles* (a block of replicas × a block of coordinates for diagonal problems, a
block of replicas × all coordinates otherwise). Each tile owns an ``SFC64`` stream seeded by
``SeedSequence(seed, spawn_key=(replica block, coordinate block))`` and runs all its steps on its own,
so tiles go to threads in any order and a result depends only on (seed, problem, arguments), never on
the thread count. Losses are accumulated in float64 whatever the state's dtype.

Diagonal problems take a fast path of in-place updates on cache-sized tiles, bound by the normal
generator (DESIGN §6); dense Σ, a rotated basis or per-example noise take the general path of
matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .backend import choice as backend_choice
from .backend import resolve as resolve_backend
from .backend import to_host
from .basis import WorkingBasis
from .counter_sim import simulate_counter
from .noise import check_distribution, correlate, minibatch_noise, nested_minibatch_noise
from .optim import as_optimizer
from .parallel import run_tasks, thread_count, tile_rng
from .philox import STREAM_ONE_STEP, normal_block, seed_key
from .problem import NoisyQuadratic, check_batch_size, check_lr, check_precond, check_replicas
from .progress import Progress
from .recurrence import DiagonalRecurrence, diagonal_recurrence

__all__ = [
    "simulate",
    "one_step_improvement",
    "gradient_norm_trace",
    "SimulationResult",
    "OneStepResult",
    "GradientNormTrace",
    "default_record",
    "loss_curve",
]

_TILE_ELEMENTS = 1 << 14  # 128 KiB of float64 per array: a tile's working set stays in L2.
_GENERAL_TILE_ELEMENTS = 1 << 16


@dataclass
class SimulationResult:
    """Loss statistics of R replicas at the recorded steps.

    Attributes:
        steps: (K,) recorded step indices.
        mean: (K,) mean loss over replicas. sem: (K,) its standard error (ddof = 1).
        n: number of replicas.
        losses: (n, K) per-replica losses when ``keep_losses=True``, else None.
        state: (n, d) final θ in H's basis when ``keep_state=True``, else None.
    """

    steps: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    n: int
    losses: np.ndarray | None = None
    state: np.ndarray | None = None


@dataclass
class OneStepResult:
    """Improvement ``ΔL = L(θ) − L(θ − εP G_B)`` over replicas, on a grid of (lr, batch_size)."""

    lr: np.ndarray
    batch_size: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    n: int


def default_record(steps: int, points: int = 40) -> np.ndarray:
    """Log-spaced checkpoints in [0, steps], always with 0 and ``steps``."""
    if steps == 0:
        return np.array([0])
    inner = np.round(np.geomspace(1, steps, points)).astype(np.int64)
    return np.unique(np.concatenate([[0], inner, [steps]]))


def _record(steps: int, record) -> np.ndarray:
    if record is None:
        return default_record(steps)
    r = np.unique(np.asarray(record, dtype=np.int64))
    if r.ndim != 1 or r.size == 0 or r[0] < 0 or r[-1] > steps:
        raise ValueError(f"record must be steps in [0, {steps}]")
    return r


# -- the diagonal fast path -------------------------------------------------------------------
def _diagonal_tile(rng, coef, theta0, steps, record, dtype, progress, keep_state):
    """Run one (replicas × coordinates) tile of a diagonal problem in place; return its losses.

    ``coef`` holds this tile's slice of the optimiser's recurrence (:mod:`nqm.recurrence`). When every
    coordinate has noise (σ > 0) the tile works on u = s/σ, where SGD's update ``u ← a·u − z`` needs no
    multiply of the fresh normals: one pass fewer per step, which matters because a step is a few passes over
    cache-resident memory beside one normal per coordinate.
    """
    kind, f, gain, s, h, gamma = (coef[k] for k in ("kind", "f", "gain", "s", "h", "gamma"))
    a = f[:, 0, 0]
    # Only when θ/s stays far from overflow (u² is accumulated in float64 for the loss).
    scaled = bool(np.all(s >= np.finfo(dtype).tiny ** 0.25))
    theta = theta0.astype(dtype, copy=True)
    if scaled:
        theta /= s
        weight = h * np.square(s, dtype=np.float64)  # L = ½ Σ h s² u²
    else:
        weight = h
    z = np.empty_like(theta)
    two = kind != "one"
    # the second state: θ_{t−1} (θ_{−1} = θ_0 means v_0 = 0) for "shift", e₁θ₀ in general
    aux = theta * dtype(coef["initial"][1]) if two else None
    tmp = np.empty_like(theta) if two else None
    if kind == "shift":
        beta = -f[:, 0, 1]  # x' = a x − β y − z on positions
    elif kind == "two":
        f01, f10, f11, g0, g1 = f[:, 0, 1], f[:, 1, 0], f[:, 1, 1], gain[:, 0], gain[:, 1]
    plain_gain = kind == "two" or bool(np.all(gain[:, 0] == -1))
    minus_gain = None if plain_gain else -gain[:, 0]
    avg = theta.copy() if gamma > 0 else None
    losses = np.empty((theta.shape[0], record.size))
    k = 0

    def loss_of(x):
        return 0.5 * (np.square(x, dtype=np.float64) @ weight)

    if record[0] == 0:
        losses[:, 0] = loss_of(theta)
        k = 1
    report_every = max(1, steps // 100)
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
            tmp += g0 * z
            aux *= f11
            aux += f10 * theta
            aux += g1 * z
            theta *= a
            theta += tmp
        else:
            theta *= a
            theta -= z
        if gamma > 0:
            avg -= theta
            avg *= gamma
            avg += theta
        if k < record.size and record[k] == t:
            losses[:, k] = loss_of(avg if gamma > 0 else theta)
            k += 1
        if t % report_every == 0:
            progress.update(report_every * theta.size)
    if keep_state and scaled:
        theta *= s
    return losses, (theta if keep_state else None)


def _diagonal_coefficients(rec: DiagonalRecurrence, p, dtype):
    return {
        "kind": rec.kind,
        "f": rec.f.astype(dtype),
        "gain": rec.gain.astype(dtype),
        "s": rec.sigma.astype(dtype),
        "h": p.h,
        "gamma": dtype(rec.gamma),
        "initial": rec.initial,
    }


# -- the general path: dense Σ, rotated basis, per-example noise ------------------------------
def _general_tile(rng, p, basis, opt, batch_size, per_example, theta0, steps, record, dtype, progress, keep_state):
    """The optimiser's own update (:mod:`nqm.optim`) on rows of replicas, one matrix-product step at a time."""
    x = basis.to_working(theta0.astype(dtype))
    state = opt.init(x)
    losses = np.empty((x.shape[0], record.size))
    k = 0
    if record[0] == 0:
        losses[:, 0] = basis.loss(opt.readout(state))
        k = 1
    report_every = max(1, steps // 100)
    for t in range(1, steps + 1):
        noise = basis.to_working(minibatch_noise(rng, p, batch_size, x.shape[0], per_example, dtype))
        state = opt.update(state, basis.precondition(basis.curvature(state[0]) + noise))
        if k < record.size and record[k] == t:
            losses[:, k] = basis.loss(opt.readout(state))
            k += 1
        if t % report_every == 0:
            progress.update(report_every * x.size)
    return losses, (basis.to_eigenbasis(state[0]) if keep_state else None)


def _engine(backend: str, rng: str | None, per_example):
    """(array module, counter-based noise?) for a backend name and an ``rng`` choice.

    Per-example draws and SFC64 streams run on NumPy whatever ``NQM_BACKEND`` says; asked for explicitly
    with ``backend="cupy"`` they are refused.
    """
    if rng not in (None, "sfc64", "philox"):
        raise ValueError(f"rng must be 'sfc64' or 'philox', got {rng!r}")
    if backend != "cupy" and (per_example is not None or rng == "sfc64"):
        backend_choice(backend)  # validates the name and NQM_BACKEND
        xp = np
    else:
        xp = resolve_backend(backend)
    if xp is not np and rng == "sfc64":
        raise ValueError("the cupy backend draws counter-based noise: rng must be 'philox' (or None)")
    counter = xp is not np or rng == "philox"
    if counter and per_example is not None:
        raise ValueError("per_example noise runs on the NumPy SFC64 path only (backend='numpy', rng='sfc64')")
    return xp, counter


def _initial_theta(rng, theta0, init_var, rows, cols: slice, dtype):
    if theta0 is not None:
        return np.broadcast_to(theta0[cols], (rows, theta0[cols].size)).astype(dtype)
    return rng.standard_normal((rows, init_var[cols].size), dtype=dtype) * np.sqrt(init_var[cols]).astype(dtype)


def simulate(
    p: NoisyQuadratic,
    opt,
    batch_size,
    steps: int,
    replicas: int,
    *,
    seed=0,
    init_var=1.0,
    at=None,
    backend: str = "numpy",
    dtype=np.float64,
    per_example: str | None = None,
    theta0=None,
    threads: int | None = None,
    progress: bool | None = None,
    keep_losses: bool = False,
    keep_state: bool = False,
    rng: str | None = None,
) -> SimulationResult:
    """Simulate an optimiser (:mod:`nqm.optim`) on ``replicas`` independent replicas of the problem.

    Args:
        p: the problem. opt: an optimiser value, or a step ε > 0 meaning ``optim.sgd(ε)``.
        batch_size: B ≥ 1 (integer with ``per_example``). steps: T ≥ 0. replicas: R ≥ 2 (a standard error
            needs two).
        seed: anything ``numpy.random.SeedSequence`` accepts; the result is a function of it.
        init_var: E[θ_0²] per coordinate in H's basis (scalar or (d,)); θ_0 ~ N(0, diag(init_var)).
        at: steps at which the loss is recorded (default: 40 log-spaced, with 0 and T).
        backend: "numpy", "cupy" (an NVIDIA GPU) or "auto" (CuPy if it can run here, else NumPy with a
            notice); the environment variable ``NQM_BACKEND`` overrides it (:mod:`nqm.backend`).
        dtype: float64 or float32 state; losses are accumulated in float64.
        per_example: None (batch-scaled Gaussian noise) or a distribution name of
            :data:`nqm.noise.EXAMPLE_DISTRIBUTIONS`; then B examples are drawn and averaged per step.
        theta0: (d,) common starting point in H's basis, instead of drawing it.
        threads: worker threads (default: all usable cores); does not change the result.
        progress: progress on stderr; default on for runs over about 10 s.
        keep_losses: also return the (R, K) per-replica losses. keep_state: return the final θ.
        rng: "sfc64" (NumPy's default: ``SFC64`` streams per tile) or "philox" (counter-based noise keyed by
            (seed, replica, coordinate, step), :mod:`nqm.counter_sim`). CuPy always uses "philox", and the
            same seed gives the same noise on both backends. On NumPy "philox" is the GPU kernel's reference:
            single-threaded and about 3× slower than "sfc64" on one thread.

    Diagonal problems run the optimiser's transition in a fused loop (:mod:`nqm.recurrence`); dense Σ, a
    rotated basis or per-example noise run its ``update`` with matrix products.

    Example:
        >>> import nqm
        >>> p = nqm.NoisyQuadratic.zhang2019(100)
        >>> r = nqm.simulate(p, nqm.optim.heavy_ball(0.1, 0.9), 10, 50, 64, seed=1)
        >>> r.steps[[0, -1]].tolist(), r.n
        ([0, 50], 64)
    """
    opt = as_optimizer(opt)
    xp, counter = _engine(backend, rng, per_example)
    batch_size = float(check_batch_size(batch_size, integer=per_example is not None))
    if int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
    steps, replicas = int(steps), check_replicas(replicas)
    dtype = np.dtype(dtype).type
    if dtype not in (np.float32, np.float64):
        raise ValueError("dtype must be float32 or float64")
    pre = check_precond(p, opt.precond)
    check_distribution(per_example)
    rec = _record(steps, at)
    var0 = np.broadcast_to(np.asarray(init_var, dtype=np.float64), (p.d,))
    if not np.all(np.isfinite(var0)) or np.any(var0 < 0):
        raise ValueError("init_var must be finite and >= 0")
    th0 = None
    if theta0 is not None:
        th0 = np.asarray(theta0, dtype=np.float64)
        if th0.shape != (p.d,):
            raise ValueError(f"theta0 must have shape ({p.d},)")

    if counter:
        work = float(replicas) * p.d * steps
        losses, state = simulate_counter(
            p,
            opt,
            batch_size,
            steps,
            replicas,
            seed,
            var0,
            rec,
            dtype,
            xp,
            theta0=th0,
            keep_state=keep_state,
            progress=Progress(work, "nqm.simulate", work > 2e10 if progress is None else bool(progress)),
        )
        return loss_curve(rec, losses, keep_losses, state)

    fast = p.is_diagonal and per_example is None
    cols = min(p.d, _TILE_ELEMENTS) if fast else p.d
    rows = max(1, (_TILE_ELEMENTS if fast else _GENERAL_TILE_ELEMENTS) // cols)
    tiles = [(r0, c0) for r0 in range(0, replicas, rows) for c0 in range(0, p.d, cols)]
    work = float(replicas) * p.d * steps * (1 + (per_example is not None) * batch_size)
    bar = Progress(work, "nqm.simulate", work > 2e9 if progress is None else bool(progress))

    if fast:
        coef = _diagonal_coefficients(diagonal_recurrence(p, opt, batch_size), p, dtype)

    def task(r0, c0):
        def run():
            rng = tile_rng(seed, r0 // rows, c0 // cols)
            n_rows, sl = min(rows, replicas - r0), slice(c0, c0 + cols)
            theta = _initial_theta(rng, th0, var0, n_rows, sl, dtype)
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


def loss_curve(record, losses, keep_losses: bool = False, state=None) -> SimulationResult:
    """The loss curve of per-replica losses (R, K) at the steps ``record``: mean and standard error."""
    return SimulationResult(
        steps=record,
        mean=losses.mean(axis=0),
        sem=losses.std(axis=0, ddof=1) / np.sqrt(losses.shape[0]),
        n=losses.shape[0],
        losses=losses if keep_losses else None,
        state=state,
    )


def one_step_improvement(
    p: NoisyQuadratic,
    theta,
    lr,
    batch_size,
    replicas: int,
    seed=0,
    precond=None,
    *,
    per_example: str | None = None,
    threads: int | None = None,
    backend: str = "numpy",
    rng: str | None = None,
) -> OneStepResult:
    """One real SGD step from ``theta`` for every cell of a (lr, batch_size) grid.

    .. math:: \\Delta L = L(\\theta) - L(\\theta - \\epsilon P G_B), \\qquad G_B = H\\theta + \\xi_B

    ``lr`` and ``batch_size`` broadcast to the grid's shape; every cell gets its own ``replicas``
    independent draws (stream keyed by (seed, cell)), so cells are statistically independent.
    The step is taken in the simulator's working basis (rotated when ``p.basis`` is set).
    Returns the mean and standard error of ΔL per cell; compare with
    :func:`nqm.theory.expected_improvement` (McCandlish et al. 2018, eq. 2.5).

    ``backend`` and ``rng`` work as in :func:`simulate`: with "philox" (always on CuPy) cell k's noise for
    replica r, coordinate i is entry k mod 4 of the Philox block (k div 4, i, r, stream 3), the same on both
    backends.
    """
    lrs, bs = np.broadcast_arrays(check_lr(lr), check_batch_size(batch_size, integer=per_example is not None))
    replicas = check_replicas(replicas)
    pre = check_precond(p, precond)
    check_distribution(per_example)
    th = np.asarray(theta, dtype=np.float64)
    if th.shape != (p.d,):
        raise ValueError(f"theta must have shape ({p.d},)")
    xp, counter = _engine(backend, rng, per_example)
    basis = WorkingBasis(p, pre, np.float64, xp)
    x = basis.to_working(xp.asarray(th[None, :]))
    loss0 = basis.loss(x)[0]
    grad = basis.curvature(x)
    rows = max(1, _GENERAL_TILE_ELEMENTS // p.d)
    key = seed_key(seed) if counter else None

    def draws(index, r0, n, b):
        if not counter:
            return minibatch_noise(generators[index], p, b, n, per_example)
        coords, reps = xp.arange(p.d)[None, :], r0 + xp.arange(n)[:, None]
        z = normal_block(xp, key, index // 4, coords, reps, STREAM_ONE_STEP)[index % 4]
        return correlate(z, p, 1.0 / np.sqrt(b), xp)

    generators = None if counter else [tile_rng(seed, i) for i in range(lrs.size)]

    def cell(index):
        def run():
            eps, b = float(lrs.flat[index]), float(bs.flat[index])
            out = np.empty(replicas)
            for r0 in range(0, replicas, rows):
                n = min(rows, replicas - r0)
                noise = basis.to_working(draws(index, r0, n, b))
                value = loss0 - basis.loss(x - eps * basis.precondition(grad + noise))
                out[r0 : r0 + n] = to_host(xp, value)
            return out

        return run

    threads = 1 if counter else thread_count(threads, lrs.size)  # one device stream; the Philox mirror is serial
    samples = run_tasks([cell(i) for i in range(lrs.size)], threads)
    samples = np.array(samples).reshape(lrs.shape + (replicas,))
    return OneStepResult(
        lr=lrs.copy(),
        batch_size=bs.copy(),
        mean=samples.mean(axis=-1),
        sem=samples.std(axis=-1, ddof=1) / np.sqrt(replicas),
        n=replicas,
    )


@dataclass
class GradientNormTrace:
    """What a practitioner sees along an SGD run, and the truth, per replica and step: arrays (R, T).

    Attributes:
        sq_small, sq_big: ``|G_small|²`` and ``|G_big|²`` of nested batches of B_small ⊂ B_big examples
            (the big batch is the one SGD steps with).
        sq_consecutive: ``|½(G_big(θ_{t−1}) + G_big(θ_t))|²`` (nan at t = 0).
        sq_true: ``|G(θ_t)|²``. ghg_true: ``G(θ_t)ᵀHG(θ_t)``.
        b_small, b_big: the two batch sizes. trace_sigma, trace_h_sigma: tr Σ and tr(HΣ).
    """

    sq_small: np.ndarray
    sq_big: np.ndarray
    sq_consecutive: np.ndarray
    sq_true: np.ndarray
    ghg_true: np.ndarray
    b_small: int
    b_big: int
    trace_sigma: float
    trace_h_sigma: float


def gradient_norm_trace(
    p: NoisyQuadratic,
    lr,
    b_small: int,
    b_big: int,
    steps: int,
    replicas: int,
    seed=0,
    init_var=1.0,
    *,
    per_example: str | None = None,
    threads: int | None = None,
) -> GradientNormTrace:
    """Run SGD with batch ``b_big`` and record, at every step, the squared norms a noise-scale estimator uses.

    The small batch is the first ``b_small`` examples of the big one (:func:`nqm.noise.nested_minibatch_noise`).
    Streams are keyed by (seed, replica block) as in :func:`simulate`.
    """
    lr = float(check_lr(lr))
    b_small, b_big = int(b_small), int(b_big)
    if not 1 <= b_small < b_big:
        raise ValueError(f"need 1 <= b_small < b_big, got {b_small}, {b_big}")
    if int(steps) != steps or steps < 1 or int(replicas) != replicas or replicas < 2:
        raise ValueError("steps must be >= 1 and replicas >= 2 (integers)")
    steps, replicas = int(steps), int(replicas)
    check_distribution(per_example)
    var0 = np.broadcast_to(np.asarray(init_var, dtype=np.float64), (p.d,))
    basis = WorkingBasis(p, np.ones(p.d), np.float64)
    rows = max(1, _GENERAL_TILE_ELEMENTS // p.d)
    blocks = list(range(0, replicas, rows))

    def block(r0):
        def run():
            rng = tile_rng(seed, r0 // rows)
            n = min(rows, replicas - r0)
            x = basis.to_working(_initial_theta(rng, None, var0, n, slice(0, p.d), np.float64))
            out = {k: np.empty((n, steps)) for k in ("small", "big", "cons", "true", "ghg")}
            previous = None
            for t in range(steps):
                grad = basis.curvature(x)
                small, big = nested_minibatch_noise(rng, p, b_small, b_big, n, per_example)
                g_small, g_big = grad + basis.to_working(small), grad + basis.to_working(big)
                out["small"][:, t] = np.einsum("ij,ij->i", g_small, g_small)
                out["big"][:, t] = np.einsum("ij,ij->i", g_big, g_big)
                out["true"][:, t] = np.einsum("ij,ij->i", grad, grad)
                out["ghg"][:, t] = np.einsum("ij,ij->i", grad, basis.curvature(grad))
                mean = 0.5 * (previous + g_big) if previous is not None else np.full_like(g_big, np.nan)
                out["cons"][:, t] = np.einsum("ij,ij->i", mean, mean)
                previous = g_big
                x = x - lr * g_big
            return out

        return run

    parts = run_tasks([block(r0) for r0 in blocks], thread_count(threads, len(blocks)))
    cat = {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
    return GradientNormTrace(
        cat["small"], cat["big"], cat["cons"], cat["true"], cat["ghg"], b_small, b_big, p.trace_sigma, p.trace_h_sigma
    )
