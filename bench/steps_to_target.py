"""Zhang et al.'s steps-vs-batch-size figure: nqm's solver against a naive baseline, side by side in one run.

Problem: d = 10⁴, h_i = 1/i, C = H, θ₀ ~ N(0, I), target 0.01, B = 2² … 2²¹ (20 batch sizes), SGD and heavy-ball
momentum. Baseline (as in Zhang et al.'s public notebook): the spectrum binned into 100 geometric bins (curvature
rounded down to the bin's lower edge), a 100-point log grid of ε (× a 20-point grid of β for momentum), and
bisection on the integer step count; momentum's E[L_k] by powering each bin's 4 × 4 affine moment map
(``numpy.linalg.matrix_power``). The naive momentum search is timed on every fifth batch size (it takes
minutes) and compared per batch size.
nqm: ``optimal_steps_to_target`` (Newton on L = target, ∂L/∂ε = 0), on the binned problem and on the full
spectrum; for heavy ball with its tuner compiled where numba is installed (``pip install 'nqm[fast]'``) and in
NumPy (``NQM_COMPILED=0``), whose steps must be the same. Accuracy: against a fine reference on the full spectrum
(exact integer steps of ``steps_to_target`` on a 401-point grid of ε within ±2% of the optimum).
Usage: ``python bench/steps_to_target.py [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import time

import numpy as np

import nqm
from nqm import dynamics, optim

TARGET = 0.01
BATCHES = 2.0 ** np.arange(2, 22)
NAIVE_MAX_STEPS = 2**27  # the naive momentum search gives up beyond 1.3·10⁸ steps (the optimum needs < 2·10⁶)


def binned(p: nqm.NoisyQuadratic, bins: int = 100) -> tuple[nqm.NoisyQuadratic, np.ndarray]:
    """The binned problem (C = H) and the per-bin multiplicities, which are its initial variances."""
    h, n = nqm.spectra.geometric_bins(p.h, bins)
    return nqm.NoisyQuadratic(h, n * h), n


def heavy_ball_runs(problem, **kwargs):
    return dynamics.optimal_steps_to_target(problem, TARGET, BATCHES, family="heavy_ball", **kwargs)


@contextlib.contextmanager
def numpy_tuners():
    """The tuners in NumPy even where numba is installed (``NQM_COMPILED=0``)."""
    before = os.environ.get("NQM_COMPILED")
    os.environ["NQM_COMPILED"] = "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ["NQM_COMPILED"]
        else:
            os.environ["NQM_COMPILED"] = before


def naive_steps(p, lr, batch, target, init_var) -> float:
    """Bisection on the integer step count with the closed-form E[L_k] (assumes it decreases)."""
    lam = lr * p.h
    if np.any(lam >= 2):
        return np.inf
    q = lr**2 * p.c / batch
    v_inf = q / (lam * (2 - lam))
    if 0.5 * p.h @ v_inf >= target:
        return np.inf

    def loss(k):
        return 0.5 * p.h @ (v_inf + (init_var - v_inf) * (1 - lam) ** (2 * k))

    hi = 1
    while loss(hi) > target:
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if loss(mid) > target else (lo, mid)
    return float(hi)


def naive_momentum_steps(p, lr, beta, batch, target, init_var) -> float:
    """Bisection on integer steps; E[L_k] from the k-th power of each bin's affine moment map."""
    lam = lr * p.h
    if np.any(lam >= 2 * (1 + beta)):
        return np.inf
    a, q = 1 + beta - lam, lr**2 * p.c / batch
    m = np.zeros((p.d, 4, 4))
    m[:, 0, 0], m[:, 0, 1], m[:, 0, 2], m[:, 0, 3] = a * a, -2 * a * beta, beta * beta, q
    m[:, 1, 0], m[:, 1, 1] = a, -beta
    m[:, 2, 0] = 1.0
    m[:, 3, 3] = 1.0
    s0 = np.stack([init_var, init_var, init_var, np.ones(p.d)], axis=1)
    stationary = 0.5 * p.h @ ((1 + beta) * q / ((1 - beta) * lam * (2 * (1 + beta) - lam)))
    if stationary >= target:
        return np.inf

    def loss(k):
        with np.errstate(over="ignore", invalid="ignore"):
            value = 0.5 * p.h @ np.einsum("nij,nj->ni", np.linalg.matrix_power(m, k), s0)[:, 0]
        return value if np.isfinite(value) else np.inf  # repeated squaring can overflow near the edge

    hi = 1
    while loss(hi) > target:
        hi *= 2
        if hi > NAIVE_MAX_STEPS:  # repeated squaring of a near-identity map drifts above 1 and never comes back
            return np.inf
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if loss(mid) > target else (lo, mid)
    return float(hi)


def naive_momentum_optimum(p, init_var, batches):
    betas = 1 - np.geomspace(1e-3, 0.9, 20)
    best = np.full(batches.size, np.inf)
    chosen = np.zeros((batches.size, 2))
    for i, b in enumerate(batches):
        for beta in betas:
            for e in np.geomspace(1e-5, 2.0 * (1 + beta) / p.h.max(), 100):
                steps = naive_momentum_steps(p, e, beta, b, TARGET, init_var)
                if steps < best[i]:
                    best[i], chosen[i] = steps, (e, beta)
    return best, chosen


def naive_optimum(p, init_var):
    grid = np.geomspace(1e-3, 2.0 / p.h.max(), 100)
    steps = np.array([[naive_steps(p, e, b, TARGET, init_var) for e in grid] for b in BATCHES])
    best = steps.argmin(axis=1)
    return steps[np.arange(BATCHES.size), best], grid[best]


SPREAD = {}  # label: (best, worst) seconds of the repeated timings


def timed(fn, repeats=3, label=None):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    if label is not None:
        SPREAD[label] = (min(times), max(times))
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    full = nqm.NoisyQuadratic.zhang2019(10_000)
    small, counts = binned(full)
    t_naive, (naive, naive_lr) = timed(lambda: naive_optimum(small, counts), repeats=1)
    t_binned, ours_binned = timed(lambda: dynamics.optimal_steps_to_target(small, TARGET, BATCHES, init_var=counts))
    t_full, ours = timed(lambda: dynamics.optimal_steps_to_target(full, TARGET, BATCHES))
    subset = BATCHES[::5]
    t_naive_mom, (naive_mom, naive_choice) = timed(lambda: naive_momentum_optimum(small, counts, subset), repeats=1)
    # heavy ball as installed (compiled where numba is), and in NumPy for comparison; the
    # first call compiles (numba caches it on disk), so it is timed apart
    compiled = importlib.util.find_spec("numba") is not None
    t_first = timed(lambda: heavy_ball_runs(small, init_var=counts), repeats=1)[0]
    t_mom_binned, mom_binned = timed(
        lambda: heavy_ball_runs(small, init_var=counts), repeats=5, label="momentum, nqm binned"
    )
    t_mom_full, mom_full = timed(lambda: heavy_ball_runs(full), repeats=5, label="momentum, nqm full spectrum")
    with numpy_tuners():
        t_np_binned, np_binned = timed(
            lambda: heavy_ball_runs(small, init_var=counts), repeats=5, label="momentum, nqm binned, NumPy"
        )
        t_np_full, np_full = timed(lambda: heavy_ball_runs(full), repeats=5, label="momentum, nqm full spectrum, NumPy")
    # what the naive answers are worth: exact first hits at the (ε, β) it chose, on its own binned problem
    naive_mom_exact = np.array(
        [  # capped at 4× nqm's optimum on the same problem (inf: slower than that, or never)
            dynamics.steps_to_target(
                small, optim.heavy_ball(e, beta), b, TARGET, init_var=counts, max_steps=int(4 * cap)
            )
            for (e, beta), b, cap in zip(naive_choice, subset, mom_binned.steps[::5])
        ]
    )
    per_b_naive = t_naive_mom / subset.size
    reference = np.array(
        [
            min(dynamics.steps_to_target(full, e * f, b, TARGET) for f in np.linspace(0.98, 1.02, 401))
            for e, b in zip(ours.lr, BATCHES)
        ]
    )
    out = {
        "seconds": {"naive, binned": t_naive, "nqm, binned": t_binned, "nqm, full spectrum": t_full},
        "speed-up": {
            "nqm binned vs naive binned": t_naive / t_binned,
            "nqm full vs naive binned": t_naive / t_full,
        },
        "agreement": {
            "naive grid vs nqm on the same binned problem (max rel. excess of the grid)": float(
                np.max((naive - ours_binned.steps) / ours_binned.steps)
            ),
            "nqm binned ≤ naive binned everywhere": bool(np.all(ours_binned.steps <= naive)),
            "nqm full vs fine reference (max rel. difference)": float(
                np.max(np.abs(ours.steps - reference) / reference)
            ),
            "nqm full ≤ reference everywhere": bool(np.all(ours.steps <= reference)),
            "naive binned vs exact full spectrum (max rel. difference)": float(
                np.max(np.abs(naive - ours.steps) / ours.steps)
            ),
        },
        "momentum": {
            "seconds per batch size, naive binned": per_b_naive,
            "seconds per batch size, nqm binned": t_mom_binned / BATCHES.size,
            "seconds per batch size, nqm full spectrum": t_mom_full / BATCHES.size,
            "speed-up, nqm binned vs naive binned": per_b_naive / (t_mom_binned / BATCHES.size),
            "speed-up, nqm full vs naive binned": per_b_naive / (t_mom_full / BATCHES.size),
            "tuner compiled (numba installed)": compiled,
            "first call, binned (includes compiling the tuner, or loading it from numba's cache)": t_first,
            "speed-up, nqm binned in NumPy vs naive binned": per_b_naive / (t_np_binned / BATCHES.size),
            "speed-up, nqm full in NumPy vs naive binned": per_b_naive / (t_np_full / BATCHES.size),
            "compiled and NumPy tuners give the same steps (binned and full)": bool(
                np.array_equal(mom_binned.steps, np_binned.steps) and np.array_equal(mom_full.steps, np_full.steps)
            ),
            "nqm binned ≤ the naive grid's reported steps (its matrix powers drift: see below)": bool(
                np.all(mom_binned.steps[::5] <= naive_mom)
            ),
            "naive grid vs nqm, same binned problem (max rel. excess of the grid)": float(
                np.max(naive_mom / mom_binned.steps[::5] - 1)
            ),
            "naive reported steps vs exact steps at its own (ε, β) (max rel. error)": float(
                np.max(np.abs(naive_mom / naive_mom_exact - 1))
            ),
            "nqm binned ≤ exact steps at the naive's (ε, β)": bool(np.all(mom_binned.steps[::5] <= naive_mom_exact)),
            "naive binned vs nqm full spectrum (max rel. difference)": float(
                np.max(np.abs(naive_mom / mom_full.steps[::5] - 1))
            ),
        },
        "spread (best, worst of 5 runs, seconds for all batch sizes)": {k: list(v) for k, v in SPREAD.items()},
        "steps": {
            "B": BATCHES.tolist(),
            "nqm full": ours.steps.tolist(),
            "naive binned": naive.tolist(),
            "momentum, nqm full": mom_full.steps.tolist(),
            "momentum, nqm binned": mom_binned.steps.tolist(),
            "momentum, naive binned (every 5th B)": naive_mom.tolist(),
            "momentum, exact at the naive's choice": naive_mom_exact.tolist(),
        },
        "lr": {"nqm full": ours.lr.tolist(), "naive binned": naive_lr.tolist()},
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return
    for section in ("seconds", "speed-up", "agreement", "momentum"):
        print(section)
        for k, v in out[section].items():
            print(f"  {k:90s} {v:.4g}" if not isinstance(v, bool) else f"  {k:90s} {v}")
    print("spread (best, worst of 5 runs; seconds for all batch sizes)")
    for k, (lo, hi) in SPREAD.items():
        print(f"  {k:90s} {lo:.3f} {hi:.3f}")
    print(f"{'B':>9s} {'nqm steps':>11s} {'naive steps':>12s} {'nqm ε':>9s} {'naive ε':>9s}")
    for b, s1, s2, e1, e2 in zip(BATCHES, ours.steps, naive, ours.lr, naive_lr):
        print(f"{b:9.0f} {s1:11.0f} {s2:12.0f} {e1:9.4f} {e2:9.4f}")
    print(f"{'B':>9s} {'momentum, nqm':>14s} {'nqm binned':>11s} {'naive binned':>13s} {'β':>8s}")
    for i, b in enumerate(BATCHES):
        naive_i = f"{naive_mom[i // 5]:13.0f}" if i % 5 == 0 else f"{'':13s}"
        print(f"{b:9.0f} {mom_full.steps[i]:14.0f} {mom_binned.steps[i]:11.0f} {naive_i} {mom_full.momentum[i]:8.4f}")


if __name__ == "__main__":
    main()
