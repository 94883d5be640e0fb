"""V8 — tracking B_simple along a training run where it grows (McCandlish et al. 2018, App. A.1).

SGD on Zhang et al.'s spectrum with B_big = 64 (B_small = 8 nested in it) from θ₀ ~ N(0, I): as the loss
falls, |G| shrinks and B_simple(t) = tr Σ/|G_t|² grows by orders of magnitude. Each estimator is held against
the true B_simple(t) of its own replica: the per-step ratio, ratios of moving averages (β = 0.9, 0.99,
0.999), and the consecutive-step estimator (no extra batch; θ moves between its two gradients). Reported,
not judged: the median |log(estimate/truth)| in three windows, the share of unusable (≤ 0) estimates, and
the lag of each moving average. The table ends with the recommendation per window.
"""

from __future__ import annotations

import warnings

import numpy as np

import nqm
from nqm import estimators, plots

from .families import Budget, Family
from .one_step import stream
from .report import Table

B_SMALL, B_BIG, LR = 8, 64, 1.0
BETAS = (0.9, 0.99, 0.999)


def _log_error(estimate, truth):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(estimate > 0, np.abs(np.log(estimate / truth)), np.inf)


def _lag(estimate, truth, max_lag):
    """The shift s (steps) that best aligns the estimate with the truth s steps earlier (late half)."""
    t = truth.shape[1]
    late = slice(t // 2, t)
    errors = [np.nanmedian(_log_error(estimate[:, late], truth[:, t // 2 - s : t - s])) for s in range(max_lag)]
    return int(np.argmin(errors))


def run(family: Family, budget: Budget, seed: int, out_dir):
    p = family.problem
    trace = nqm.gradient_norm_trace(
        p, LR, B_SMALL, B_BIG, budget.tracking_steps, budget.tracking_replicas, seed=stream(seed, "v8", family.key)
    )
    truth = trace.trace_sigma / trace.sq_true
    g2, s = estimators.two_batch_estimates(trace.sq_small, trace.sq_big, B_SMALL, B_BIG)
    with np.errstate(divide="ignore", invalid="ignore"):
        candidates = {"per-step ratio 𝒮/|𝒢|²": s / g2}
    for beta in BETAS:
        candidates[f"ratio of EMAs, β = {beta}"] = estimators.ratio_of_averages(
            trace.sq_small, trace.sq_big, B_SMALL, B_BIG, beta
        )
    # consecutive steps: the big-batch gradients of steps t−1 and t as B and 2B; step 0 has no predecessor
    g2c, sc = estimators.consecutive_step_estimates_from_norms(
        0.5 * (trace.sq_big[:, 1:] + trace.sq_big[:, :-1]), trace.sq_consecutive[:, 1:], B_BIG
    )
    cons = np.full_like(truth, np.nan)
    cons[:, 1:] = estimators.ema(sc, 0.99) / estimators.ema(g2c, 0.99)
    candidates["consecutive steps, ratio of EMAs, β = 0.99"] = cons
    steps = truth.shape[1]
    windows = {
        "early (t < T/10)": slice(1, steps // 10),
        "mid": slice(steps // 10, steps // 2),
        "late (t ≥ T/2)": slice(steps // 2, steps),
    }
    rows, scores = [], {}
    for name, est in candidates.items():
        err = _log_error(est, truth)
        medians = [float(np.nanmedian(err[:, w])) for w in windows.values()]
        scores[name] = medians
        unusable = float(np.mean(~(est[:, 1:] > 0)))
        lag = _lag(est, truth, steps // 4) if "EMA" in name else 0
        rows.append([name, *medians, f"{unusable:.3f}", lag])
    best = [min(scores, key=lambda k, i=i: scores[k][i]) for i in range(len(windows))]
    rows.append(["**recommended**", *best, "", ""])
    growth = float(np.median(truth[:, -1]) / np.median(truth[:, 0]))
    figure = _figure(truth, candidates, out_dir)
    table = Table(
        title=f"Tracking B_simple(t) ({family.key}, SGD ε = {LR}, B_small/B_big = {B_SMALL}/{B_BIG}, "
        f"{steps} steps × {truth.shape[0]} runs; B_simple grew {growth:.0f}×)",
        columns=["estimator", *[f"median |log error|, {w}" for w in windows], "share ≤ 0 or undefined", "lag (steps)"],
        rows=rows,
        note="Recommendation: for each window, the estimator with the smallest median log error against the "
        "truth of the same run. Smoothing trades variance for lag while B_simple moves.",
        figure=figure,
    )
    return [table]


def _figure(truth, candidates, out_dir) -> str:
    fig, (ax,) = plots.new_axes(1, width=6.0, height=4.0)
    t = np.arange(truth.shape[1])
    pts = []
    for name, est in candidates.items():
        if "per-step" in name:
            continue
        with warnings.catch_warnings():  # a step where no run's estimate is usable (> 0) is left as a gap
            warnings.simplefilter("ignore", RuntimeWarning)
            q = np.nanmedian(np.where(est[:, 1:] > 0, est[:, 1:], np.nan), axis=0)
        pts.append((name, t[1::25], q[::25], None))
    plots.theory_vs_simulation(
        t[1:],
        np.median(truth, axis=0)[1:],
        pts,
        ax=ax,
        xscale="log",
        yscale="log",
        xlabel="step t",
        ylabel="B_simple (median over runs)",
        title="tracking a growing noise scale",
        theory_label="true B_simple(t)",
    )
    plots.save(fig, out_dir / "v8_tracking.png")
    return "v8_tracking.png"
