"""``nqm.simulate``: real runs of an optimiser on many replicas, on NumPy (CPU) or CuPy (GPU).

Each replica starts from ``θ_0 ~ N(0, diag(init_var))`` (or a given ``theta0``) and runs the optimiser
(:mod:`nqm.optim`) with minibatch gradients ``G_B = Hθ + ξ_B`` (:mod:`nqm.noise`). Two engines draw the noise:
SFC64 streams per tile of replicas on threads (:mod:`.sfc64`, NumPy's default), or counter-based Philox keyed
by (seed, replica, coordinate, step) (:mod:`.counter`, the same streams on the CPU and in the fused CUDA
kernel). Both return a :class:`~nqm.LossCurve`.
"""

from __future__ import annotations

import numpy as np

from ..checks import (
    check_batch_size,
    check_count,
    check_init_var,
    check_memory,
    check_point,
    check_replicas,
)
from ..noise import check_distribution
from ..optim import as_optimizer
from ..problem import NoisyQuadratic, check_precond
from ..progress import Progress
from .backend import choice as backend_choice
from .backend import resolve as resolve_backend
from .counter import simulate_counter
from .results import LossCurve, as_asked, check_record, loss_curve
from .sfc64 import simulate_sfc64

__all__ = ["simulate", "choose_engine"]


def choose_engine(backend: str, generator: str | None, per_example):
    """(array module, counter-based noise?) for a backend name and a ``generator`` choice.

    Per-example draws and SFC64 streams run on NumPy whatever ``NQM_BACKEND`` says; asked for explicitly
    with ``backend="cupy"`` they are refused.
    """
    if generator not in (None, "sfc64", "philox"):
        raise ValueError(f"generator must be 'sfc64' or 'philox', got {generator!r}")
    if backend != "cupy" and (per_example is not None or generator == "sfc64"):
        backend_choice(backend)  # validates the name and NQM_BACKEND
        xp = np
    else:
        xp = resolve_backend(backend)
    if xp is not np and generator == "sfc64":
        raise ValueError("the cupy backend draws counter-based noise: generator must be 'philox' (or None)")
    counter = xp is not np or generator == "philox"
    if counter and per_example is not None:
        raise ValueError("per_example noise runs on the NumPy SFC64 path only (backend='numpy', generator='sfc64')")
    return xp, counter


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
    generator: str | None = None,
) -> LossCurve:
    """Simulate an optimiser (:mod:`nqm.optim`) on ``replicas`` independent replicas of the problem.

    Args:
        p: the problem. opt: an optimiser value, or a step ε > 0 meaning ``optim.sgd(ε)``.
        batch_size: B ≥ 1 (integer with ``per_example``). steps: T ≥ 0. replicas: R ≥ 2 (a standard error
            needs two).
        seed: anything ``numpy.random.SeedSequence`` accepts; the result is a function of it.
        init_var: E[θ_0²] per coordinate in H's basis (scalar or (d,)); θ_0 ~ N(0, diag(init_var)).
        at: steps at which the loss is recorded, integers in [0, T] (default: 40 log-spaced, with 0 and T); the
            curve comes back in the order asked for, repeats included, as :func:`nqm.dynamics.expected_loss`
            returns it.
        backend: "numpy", "cupy" (an NVIDIA GPU) or "auto" (CuPy if it can run here, else NumPy with a
            notice); the environment variable ``NQM_BACKEND`` overrides it (:mod:`nqm.montecarlo.backend`).
        dtype: float64 or float32 state; losses are accumulated in float64.
        per_example: None (batch-scaled Gaussian noise) or a distribution name of
            :data:`nqm.noise.EXAMPLE_DISTRIBUTIONS`; then B examples are drawn and averaged per step.
        theta0: (d,) common starting point in H's basis, instead of drawing it.
        threads: worker threads (default: all usable cores); does not change the result.
        progress: progress on stderr; default on for runs over about 10 s.
        keep_losses: also return the (R, K) per-replica losses. keep_state: return the final θ.
        generator: "sfc64" (NumPy's default: ``SFC64`` streams per tile) or "philox" (counter-based noise keyed by
            (seed, replica, coordinate, step), :mod:`nqm.montecarlo.counter`). CuPy always uses "philox", and the
            same seed gives the same noise on both backends. On NumPy "philox" is the GPU kernel's reference:
            single-threaded and about 3× slower than "sfc64" on one thread.

    Diagonal problems run the optimiser's transition in a fused loop (:mod:`nqm.montecarlo.recurrence`); dense Σ, a
    rotated basis or per-example noise run its ``advance`` with matrix products.

    Example:
        >>> import nqm
        >>> p = nqm.NoisyQuadratic.zhang2019(100)
        >>> r = nqm.simulate(p, nqm.optim.heavy_ball(0.1, 0.9), 10, 50, 64, seed=1)
        >>> r.steps[[0, -1]].tolist(), r.n
        ([0, 50], 64)
    """
    opt = as_optimizer(opt)
    xp, counter = choose_engine(backend, generator, per_example)
    batch_size = float(check_batch_size(batch_size, integer=per_example is not None, single=True))
    steps, replicas = check_count("steps", steps), check_replicas(replicas)
    dtype = np.dtype(dtype).type
    if dtype not in (np.float32, np.float64):
        raise ValueError("dtype must be float32 or float64")
    check_precond(p, opt.precond)
    check_distribution(per_example)
    asked = check_record(steps, at)
    rec = np.unique(asked)  # the engines record sorted unique steps; the curve comes back as asked
    var0 = check_init_var(init_var, p.d)
    # the per-replica losses (and the tiles' copies of them before they are joined), the final θ if kept
    check_memory(
        16.0 * replicas * (rec.size + (p.d if keep_state else 0)),
        f"simulate with replicas × recorded steps = {replicas} × {rec.size}"
        + (f" and the final θ (replicas × d = {replicas} × {p.d})" if keep_state else ""),
        "run fewer replicas per call with different seeds and pool the results, or record fewer steps (at=[...])",
    )
    th0 = None
    if theta0 is not None:
        th0 = check_point("theta0", theta0, p.d)

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
        return as_asked(loss_curve(rec, losses, keep_losses, state), asked)

    curve = simulate_sfc64(
        p,
        opt,
        batch_size,
        steps,
        replicas,
        seed,
        var0,
        th0,
        rec,
        dtype,
        per_example=per_example,
        threads=threads,
        progress=progress,
        keep_losses=keep_losses,
        keep_state=keep_state,
    )
    return as_asked(curve, asked)
