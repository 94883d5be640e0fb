"""Whole runs on a real network against its local NQM's prediction (digits logistic regression; nqm[real]).

    python bench/real_whole_runs.py [--quick]

Real training from the model's initial parameters θ₀ to a target training loss at each batch size, constant-step
SGD and heavy ball (β = 0.9), the step tuned on a grid per batch size (mean over seeds); the frontier
S = S_min + E_min/B fitted (nqm.dynamics.fit_frontier) with bootstrap SEs over seeds. Beside it the local NQM built
at θ₀ (nqm.measure.local_quadratic), asked for the same improvement L(θ₀) − target from its own starting loss, its
steps tuned exactly (nqm.dynamics.optimal_steps_to_target). The comparison is a finding, not a check: the NQM is
second order at θ₀ and knows nothing of how H and Σ change along the run.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from nqm import dynamics
from nqm.dynamics.frontier import fit_frontier
from nqm.measure import digits, measure, tuned_steps

TARGET = 0.5
BATCH_SIZES = np.array([4, 16, 64, 256, 1024, 1536])
LRS = np.geomspace(0.05, 8.0, 16)
BOOTSTRAP = 500


def frontier_with_errors(batch_sizes, per_seed, rng):
    """(S_min, E_min, B_crit) of the seed-mean steps, and bootstrap SEs resampling each batch size's seeds."""
    fit = fit_frontier(batch_sizes, per_seed.mean(axis=1))[:2]
    boots = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, per_seed.shape[1], per_seed.shape)
        s_min, e_min, _ = fit_frontier(batch_sizes, np.take_along_axis(per_seed, pick, axis=1).mean(axis=1))
        boots.append((s_min, e_min, e_min / s_min))
    return (*fit, fit[1] / fit[0]), np.std(boots, axis=0, ddof=1)


def main(quick: bool) -> None:
    seeds = (0, 1) if quick else (0, 1, 2, 3)
    model = digits.logistic_regression()
    theta0 = model.initial
    start = time.perf_counter()
    m = measure(model, theta0, top_k=20, probes=10, lanczos_steps=80, seed=0)
    local = m.local_quadratic()
    improvement = m.loss - TARGET
    nqm_target = 0.5 * float(local.problem.h @ local.init_var) - improvement
    print(
        f"measure + local NQM: {time.perf_counter() - start:.1f} s; B_noise {m.b_noise:.1f}, B_simple {m.b_simple:.1f}"
    )
    rng = np.random.default_rng(0)
    rows = []
    for name, beta, family in (("SGD", 0.0, "sgd"), ("heavy ball β = 0.9", 0.9, "heavy_ball")):
        start = time.perf_counter()
        real = tuned_steps(model, theta0, TARGET, BATCH_SIZES, LRS * (1 - beta), momentum=beta, seeds=seeds)
        seconds = time.perf_counter() - start
        (s_min, e_min, b_crit), (se_s, se_e, se_b) = frontier_with_errors(BATCH_SIZES, real.per_seed, rng)
        pred = dynamics.optimal_steps_to_target(
            local.problem, nqm_target, BATCH_SIZES, init_var=local.init_var, family=family
        )
        p_s, p_e, _ = fit_frontier(BATCH_SIZES, pred.steps)
        edge = np.isin(real.lr, LRS[[0, -1]] * (1 - beta))
        print(
            f"\n{name}: real runs {seconds:.0f} s ({len(seeds)} seeds); tuned step on the grid's edge at B = "
            f"{BATCH_SIZES[edge].tolist()}"
        )
        print("B         " + " ".join(f"{b:>7d}" for b in BATCH_SIZES))
        print("real S(B) " + " ".join(f"{s:7.1f}" for s in real.steps))
        print("NQM  S(B) " + " ".join(f"{s:7.0f}" for s in pred.steps))
        rows.append((name, s_min, se_s, p_s, e_min, se_e, p_e, b_crit, se_b, p_e / p_s))
    print("\n| optimiser | S_min real | S_min NQM | E_min real | E_min NQM | B_crit real | B_crit NQM |")
    print("|---|---|---|---|---|---|---|")
    for name, s, ses, ps, e, see, pe, bc, seb, pbc in rows:
        print(
            f"| {name} | {s:.1f} ± {ses:.1f} | {ps:.1f} | {e:.0f} ± {see:.0f} | {pe:.0f} "
            f"| {bc:.1f} ± {seb:.1f} | {pbc:.1f} |"
        )


if __name__ == "__main__":
    main("--quick" in sys.argv[1:])
