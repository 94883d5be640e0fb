"""The bootstrap's frontier fits: :func:`nqm.dynamics.fit_frontiers` on all replicates at once against a loop of
scipy's ``least_squares`` (trust-region reflective with the bounds S_min, E_min ≥ 0) on the same log-space problem,
one replicate at a time, in one run (best of 5, with the spread), and the largest difference of B_crit between
the two. Usage: ``python bench/frontier_fit.py [--json]``."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy import optimize

from nqm.dynamics import fit_frontiers

BATCHES = 2.0 ** np.arange(6, 15)  # Zhang et al. 2024's design
REPLICATES = 2000


def one_at_a_time(b, steps):
    x = np.stack([np.ones(b.size), 1 / b], axis=1)
    out = np.empty((steps.shape[0], 2))
    for i, s in enumerate(steps):
        log_s = np.log(s)
        start, *_ = np.linalg.lstsq(x / s[:, None], np.ones(b.size), rcond=None)
        out[i] = optimize.least_squares(
            lambda p, log_s=log_s: np.log(x @ p) - log_s,
            np.maximum(start, 1e-6 * np.array([s.min(), s.min() * b.min()])),
            jac=lambda p: x / (x @ p)[:, None],
            bounds=(0.0, np.inf),
            xtol=1e-14,
            ftol=1e-14,
            gtol=1e-14,
        ).x
    return out[:, 0], out[:, 1]


def timed(fit, b, steps, repeats=5):
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fit(b, steps)
        times.append(time.perf_counter() - t0)
    return (min(times), max(times)), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    steps = (2000 + 1e7 / BATCHES) * np.exp(0.05 * rng.standard_normal((REPLICATES, BATCHES.size)))
    (fast, (s1, e1)), (slow, (s2, e2)) = timed(fit_frontiers, BATCHES, steps), timed(one_at_a_time, BATCHES, steps)
    row = {
        "replicates": REPLICATES,
        "seconds, fit_frontiers (best, worst)": fast,
        "seconds, scipy least_squares loop (best, worst)": slow,
        "speed-up (best/best)": slow[0] / fast[0],
        "largest relative difference of B_crit": float(np.max(np.abs((e1 / s1) / (e2 / s2) - 1))),
    }
    print(json.dumps(row, indent=1) if args.json else "\n".join(f"{k}: {v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
