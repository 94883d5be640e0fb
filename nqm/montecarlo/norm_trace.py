"""What a practitioner's noise-scale estimator sees along an SGD run: nested small/big batch gradients."""

from __future__ import annotations

import numpy as np

from ..checks import check_count, check_init_var, check_memory, check_real, check_replicas
from ..noise import check_distribution, nested_minibatch_noise, trace_h_sigma, trace_sigma
from ..problem import NoisyQuadratic
from .basis import WorkingBasis
from .parallel import run_tasks, thread_count, tile_rng
from .results import GradientNormTrace
from .sfc64 import GENERAL_TILE_ELEMENTS, initial_theta

__all__ = ["gradient_norm_trace"]


def gradient_norm_trace(
    p: NoisyQuadratic,
    lr,
    b_small: int,
    b_big: int,
    steps: int,
    replicas: int,
    *,
    seed=0,
    init_var=1.0,
    per_example: str | None = None,
    threads: int | None = None,
) -> GradientNormTrace:
    """Run SGD with batch ``b_big`` and record, at every step, the squared norms a noise-scale estimator uses.

    The small batch is the first ``b_small`` examples of the big one (:func:`nqm.noise.nested_minibatch_noise`).
    Streams are keyed by (seed, replica block) as in :func:`simulate`.
    """
    lr = check_real("step size (lr)", lr, low=0.0, low_open=True)
    b_small, b_big = check_count("b_small", b_small, 1), check_count("b_big", b_big, 2)  # batches of examples
    if not 1 <= b_small < b_big:
        raise ValueError(f"need 1 <= b_small < b_big, got {b_small}, {b_big}")
    steps, replicas = check_count("steps", steps, 1), check_replicas(replicas)
    check_distribution(per_example)
    var0 = check_init_var(init_var, p.d)
    # five (replicas, steps) traces, and the blocks' copies of them before they are joined
    check_memory(
        80.0 * replicas * steps,
        f"gradient_norm_trace with replicas × steps = {replicas} × {steps}",
        "run fewer replicas per call with different seeds and pool the traces",
    )
    basis = WorkingBasis(p, np.ones(p.d), np.float64)
    rows = max(1, GENERAL_TILE_ELEMENTS // p.d)
    blocks = list(range(0, replicas, rows))

    def block(r0):
        def run():
            rng = tile_rng(seed, r0 // rows)
            n = min(rows, replicas - r0)
            x = basis.to_working(initial_theta(rng, None, var0, n, slice(0, p.d), np.float64))
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
        cat["small"], cat["big"], cat["cons"], cat["true"], cat["ghg"], b_small, b_big, trace_sigma(p), trace_h_sigma(p)
    )
