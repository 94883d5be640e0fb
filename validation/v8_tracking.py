"""V8 — tracking B_simple along a training run where it grows (McCandlish et al. 2018, App. A.1).

SGD on Zhang et al.'s spectrum with B_big = 64 (B_small = 8 nested in it) from θ₀ ~ N(0, I): as the loss
falls, |G| shrinks and B_simple(t) = tr Σ/|G_t|² grows by orders of magnitude. Each estimator is held against
the true B_simple(t) = tr Σ/E|G_t|² (exact dynamics): the per-step ratio, ratios of moving averages (β = 0.9, 0.99,
0.999), and the consecutive-step estimator (no extra batch; θ moves between its two gradients). Reported,
not judged: the median |log(estimate/truth)| in three windows, the share of unusable (≤ 0) estimates, and
the lag of each moving average. The table ends with the recommendation per window.
"""

from __future__ import annotations

import warnings

import numpy as np

import nqm
from nqm import dynamics, estimators, plots

from .claims import Context, Outcome
from .families import Family
from .one_step import stream
from .report import Table, save_figure
from .sizes import Sizes

ID = "V8"
TITLE = "tracking a growing B_simple along a run"
SECONDS = (1.1, 18)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(steps=(300, 1500), replicas=(40, 100))
NOT_ON_A_PROBLEM = "it reports (does not judge) how smoothed estimators track B_simple along zhang2019's run at ε = 1"

B_SMALL, B_BIG, LR = 8, 64, 1.0
BETAS = (0.9, 0.99, 0.999)


def _log_error(estimate, truth):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(estimate > 0, np.abs(np.log(estimate / truth)), np.inf)


def _median_positive(estimate):
    """Median over runs of the usable (> 0) estimates at each step; nan where none is usable."""
    with warnings.catch_warnings():  # a step where no run's estimate is usable is left as a gap
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(np.where(estimate > 0, estimate, np.nan), axis=0)


def _lag(estimate, truth, max_lag):
    """The shift s that best aligns the median estimate with the median truth s steps earlier (late half).

    Medians over runs average the noise out, so what is left is the delay of the smoothing (an EMA's mean
    age is β/(1 − β) steps) and any bias.
    """
    t = truth.shape[1]
    est = np.log(_median_positive(estimate)[t // 2 :])
    true = np.log(np.median(truth, axis=0))
    errors = [np.nanmean(np.abs(est - true[t // 2 - s : t - s])) for s in range(max_lag)]
    return int(np.nanargmin(errors))


def compute(family: Family, steps: int, replicas: int, seed: int, out_dir):
    p = family.problem
    trace = nqm.gradient_norm_trace(p, LR, B_SMALL, B_BIG, steps, replicas, seed=stream(seed, "v8", family.key))
    # The truth is the ratio of expectations tr Σ/E|G_t|² along the run (exact dynamics); tr Σ/|G_t|² of a
    # single run jumps from step to step with the noise in θ_t and is no target for a smoothed estimate.
    e_grad_sq = np.array([p.h**2 @ dynamics.coordinate_variance(p, LR, B_BIG, t) for t in range(steps)])
    truth = np.broadcast_to(trace.trace_sigma / e_grad_sq, trace.sq_true.shape)
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
        beta = next((b for b in BETAS if name == f"ratio of EMAs, β = {b}"), None)
        lag = f"{_lag(est, truth, steps // 2)} / {beta / (1 - beta):.0f}" if beta is not None else "—"
        rows.append([name, *medians, f"{unusable:.3f}", lag])
    best = [min(scores, key=lambda k, i=i: scores[k][i]) for i in range(len(windows))]
    rows.append(["**recommended**", *best, "", ""])
    growth = float(np.median(truth[:, -1]) / np.median(truth[:, 0]))
    figure = _figure(truth, candidates, out_dir)
    table = Table(
        title=f"Tracking B_simple(t) ({family.key}, SGD ε = {LR}, B_small/B_big = {B_SMALL}/{B_BIG}, "
        f"{steps} steps × {truth.shape[0]} runs; B_simple grew {growth:.0f}×)",
        columns=[
            "estimator",
            *[f"median |log error|, {w}" for w in windows],
            "share ≤ 0 or undefined",
            "lag (steps): measured / β/(1−β)",
        ],
        rows=rows,
        note="Truth: tr Σ/E|G_t|² from the exact dynamics. Recommendation: for each window, the estimator with the "
        "smallest median log error over runs and steps. Smoothing trades variance for lag while B_simple moves.",
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
        q = _median_positive(est[:, 1:])
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
    return save_figure(fig, out_dir, "v8_tracking.png")


def run(ctx: Context) -> Outcome:
    """V8 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    size = SIZES.at(ctx.quick)
    return Outcome(tables=compute(ctx.families["zhang2019"], size.steps, size.replicas, ctx.seed, ctx.out_dir))
