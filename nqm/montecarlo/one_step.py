"""One real step from a point, for every cell of a (step, batch size) grid: the simulated side of the one-step
law (McCandlish et al. 2018, arXiv:1812.06162, eq. 2.5)."""

from __future__ import annotations

import numpy as np

from ..checks import check_batch_size, check_lr, check_point, check_replicas
from ..noise import check_distribution, correlate, minibatch_noise
from ..problem import NoisyQuadratic, check_precond
from .backend import to_host
from .basis import WorkingBasis
from .parallel import run_tasks, thread_count, tile_rng
from .philox import STREAM_ONE_STEP, normal_block, seed_key
from .results import OneStepResult
from .sfc64 import GENERAL_TILE_ELEMENTS
from .simulation import choose_engine

__all__ = ["one_step_improvement"]


def one_step_improvement(
    p: NoisyQuadratic,
    theta,
    lr,
    batch_size,
    replicas: int,
    *,
    seed=0,
    precond=None,
    per_example: str | None = None,
    threads: int | None = None,
    backend: str = "numpy",
    generator: str | None = None,
) -> OneStepResult:
    """One real SGD step from ``theta`` for every cell of a (lr, batch_size) grid.

    .. math:: \\Delta L = L(\\theta) - L(\\theta - \\epsilon P G_B), \\qquad G_B = H\\theta + \\xi_B

    ``lr`` and ``batch_size`` broadcast to the grid's shape; every cell gets its own ``replicas``
    independent draws (stream keyed by (seed, cell)), so cells are statistically independent.
    The step is taken in the simulator's working basis (rotated when ``p.basis`` is set).
    Returns the mean and standard error of ΔL per cell; compare with
    :func:`nqm.theory.expected_improvement` (McCandlish et al. 2018, eq. 2.5).

    ``backend`` and ``generator`` work as in :func:`simulate`: with "philox" (always on CuPy) cell k's noise for
    replica r, coordinate i is entry k mod 4 of the Philox block (k div 4, i, r, stream 3), the same on both
    backends.
    """
    lrs, bs = np.broadcast_arrays(check_lr(lr), check_batch_size(batch_size, integer=per_example is not None))
    replicas = check_replicas(replicas)
    pre = check_precond(p, precond)
    check_distribution(per_example)
    th = check_point("theta", theta, p.d)
    xp, counter = choose_engine(backend, generator, per_example)
    basis = WorkingBasis(p, pre, np.float64, xp)
    x = basis.to_working(xp.asarray(th[None, :]))
    loss0 = basis.loss(x)[0]
    grad = basis.curvature(x)
    rows = max(1, GENERAL_TILE_ELEMENTS // p.d)
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
    return OneStepResult.of_samples(lrs, bs, samples)
