"""Zhang et al.'s steps-vs-batch-size figure: nqm's solver against a naive baseline, side by side in one run.

Problem: d = 10⁴, h_i = 1/i, C = H, θ₀ ~ N(0, I), target 0.01, B = 2² … 2²¹ (20 batch sizes), SGD.
Baseline (as in Zhang et al.'s public notebook): the spectrum binned into 100 geometric bins (curvature rounded
down to the bin's lower edge), a 100-point log grid of ε, and bisection on the integer step count.
nqm: ``optimal_steps_to_target`` (Newton on L = target, ∂L/∂ε = 0), on the binned problem and on the full
spectrum. Accuracy: against a fine reference on the full spectrum (exact integer steps of ``steps_to_target``
on a 401-point grid of ε within ±2% of the optimum). Usage: ``python bench/steps_to_target.py [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import nqm
from nqm import dynamics

TARGET = 0.01
BATCHES = 2.0 ** np.arange(2, 22)


def binned(p: nqm.NoisyQuadratic, bins: int = 100) -> tuple[nqm.NoisyQuadratic, np.ndarray]:
    """The binned problem (C = H) and the per-bin multiplicities, which are its initial variances."""
    h, n = nqm.spectra.geometric_bins(p.h, bins)
    return nqm.NoisyQuadratic(h, n * h), n


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


def naive_optimum(p, init_var):
    grid = np.geomspace(1e-3, 2.0 / p.h.max(), 100)
    steps = np.array([[naive_steps(p, e, b, TARGET, init_var) for e in grid] for b in BATCHES])
    best = steps.argmin(axis=1)
    return steps[np.arange(BATCHES.size), best], grid[best]


def timed(fn, repeats=3):
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    full = nqm.NoisyQuadratic.zhang2019(10_000)
    small, counts = binned(full)
    t_naive, (naive, naive_lr) = timed(lambda: naive_optimum(small, counts), repeats=1)
    t_binned, ours_binned = timed(lambda: dynamics.optimal_steps_to_target(small, TARGET, BATCHES, init_var=counts))
    t_full, ours = timed(lambda: dynamics.optimal_steps_to_target(full, TARGET, BATCHES))
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
        "steps": {"B": BATCHES.tolist(), "nqm full": ours.steps.tolist(), "naive binned": naive.tolist()},
        "lr": {"nqm full": ours.lr.tolist(), "naive binned": naive_lr.tolist()},
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return
    for section in ("seconds", "speed-up", "agreement"):
        print(section)
        for k, v in out[section].items():
            print(f"  {k:72s} {v:.4g}" if not isinstance(v, bool) else f"  {k:72s} {v}")
    print(f"{'B':>9s} {'nqm steps':>11s} {'naive steps':>12s} {'nqm ε':>9s} {'naive ε':>9s}")
    for b, s1, s2, e1, e2 in zip(BATCHES, ours.steps, naive, ours.lr, naive_lr):
        print(f"{b:9.0f} {s1:11.0f} {s2:12.0f} {e1:9.4f} {e2:9.4f}")


if __name__ == "__main__":
    main()
