"""Timings of nqm.measure on the bundled digits models (nqm[real]), best of several runs with the spread.

    python bench/real_network.py [--repeats 3]

* ``measure`` on the 64–32–10 MLP with the settings the real-network issue names: top 20 eigenpairs, 10 SLQ
  probes × 80 Lanczos steps, all 1797 per-example gradients, exact tr(HΣ) (1797 HVPs); the logistic regression
  beside it;
* one real step, many times: V23's grid (6 batch sizes × 6 step sizes) with 300 draws, on each model;
* whole runs: real SGD on the logistic regression to L = 0.5 at six batch sizes, 8 step sizes × 2 seeds, then 4
  confirming seeds.

The first call of each compiles (JAX); the timings are of later calls.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nqm.measure import digits, measure, one_step_changes, sgd_point, tuned_steps

BATCHES = np.array([4, 16, 64, 256, 1024, 1536])


def timed(fn, repeats, *args):
    fn(*args)  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times), max(times)


def measure_mlp_settings(model, theta):
    return measure(model, theta, top_k=20, probes=10, lanczos_steps=80, seed=0)


def one_step_grid(model, theta, lrs):
    return one_step_changes(model, theta, lrs, BATCHES, 300, seed=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    models = {"logistic": (digits.logistic_regression(), 1.0), "mlp": (digits.mlp(seed=0), 0.5)}
    for key, (model, lr) in models.items():
        theta = sgd_point(model, model.initial, lr, 32, 100, seed=0)
        best, worst = timed(measure_mlp_settings, repeats, model, theta)
        print(f"measure, {model.name} (D = {model.dim}): best {best:.1f} s, worst {worst:.1f} s")
        lrs = np.geomspace(0.01, 1.0, 6)
        best, worst = timed(one_step_grid, repeats, model, theta, lrs)
        print(f"one-step grid (6 B × 6 ε × 300 draws), {key}: best {best:.1f} s, worst {worst:.1f} s")
    model = models["logistic"][0]
    grid = np.geomspace(0.05, 12.8, 8)

    def sweep():
        return tuned_steps(model, model.initial, 0.5, BATCHES, grid, seeds=(0, 1), confirm_seeds=(2, 3, 4, 5))

    best, worst = timed(sweep, repeats)
    print(
        f"whole-run sweep (SGD, 6 B × 8 ε × 2 seeds + 4 confirming), logistic: best {best:.1f} s, worst {worst:.1f} s"
    )
    print("tuned steps:", sweep().steps)


if __name__ == "__main__":
    main()
