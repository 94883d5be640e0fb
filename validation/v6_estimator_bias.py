"""V6 — the two-batch estimators of McCandlish et al. 2018 (App. A.1) are unbiased, under data parallelism too.

At a point of a training run, many independent nested batch pairs give |𝒢|² and 𝒮, whose means must equal
|G|² and tr Σ for every (B_small, B_big). Then per-example gradients are pushed through a data-parallel
emulation (K workers × local batch b × A accumulation steps, sum or mean all-reduce, a loss scale): with the
batches it implies and its rescaling the estimates are unbiased again. Planted errors: taking |G_big|² as if
it were |G|² (bias tr Σ/B_big); the noise variance doubled; and the naive data-parallel estimate that uses
B_small = b, B_big = K·b on raw norms.
"""

from __future__ import annotations

import numpy as np

from nqm import estimators, noise, plots, theory

from .claims import Context, Outcome
from .families import Family, noiseless_or_too_large
from .one_step import stream
from .report import save_figure
from .sizes import Sizes
from .stats import Check

ID = "V6"
TITLE = "unbiased two-batch estimators"
SECONDS = (1.0, 18)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(replicas=(2000, 20_000))

PAIRS = [(1, 8), (8, 64), (64, 512), (4, 4096)]
CONFIGS = [
    estimators.DataParallel(workers=4, local_batch=8),
    estimators.DataParallel(workers=8, local_batch=2, accumulation=4, reduction="sum", loss_scale=1024.0),
    estimators.DataParallel(workers=2, local_batch=16, accumulation=2, accumulation_mean=True, loss_scale=8.0),
]


def _sem(x):
    return x.std(axis=-1, ddof=1) / np.sqrt(x.shape[-1])


def checks(family: Family, examples: Family | None, replicas: int, seed: int, out_dir):
    """The two-batch estimators at ``family``'s mid point; the data-parallel reductions on ``examples`` (if any)."""
    p, theta = family.problem, family.points["mid"]
    g_sq, tr = float(np.sum(theory.gradient(p, theta) ** 2)), p.trace_sigma
    rng = np.random.default_rng(stream(seed, "v6", family.key))
    grad = theory.gradient(p, theta)
    est = []
    for b_small, b_big in PAIRS:
        small, big = noise.nested_minibatch_noise(rng, p, b_small, b_big, replicas)
        g2, s = estimators.two_batch_estimates(
            np.sum((grad + small) ** 2, axis=1), np.sum((grad + big) ** 2, axis=1), b_small, b_big
        )
        est.append((g2, s))
    measured = np.array([[g2.mean(), s.mean()] for g2, s in est]).ravel()
    se = np.array([[_sem(g2), _sem(s)] for g2, s in est]).ravel()
    truth = np.tile([g_sq, tr], len(PAIRS))
    naive = np.array([[g_sq + tr / b_big, tr] for _, b_big in PAIRS]).ravel()
    figure = _figure(PAIRS, est, g_sq, tr, out_dir)
    unbiased = Check(
        name=f"V6 two-batch estimators unbiased [{family.key}]",
        claim="E|𝒢|² = |G|², E𝒮 = tr Σ for every (B_small, B_big)",
        family=p.name,
        predicted=truth,
        measured=measured,
        se=se,
        figure=figure,
        notes={"pairs": PAIRS, "replicas": replicas, "cells": "(|𝒢|², 𝒮) per pair"},
    )
    out = [
        unbiased,
        unbiased.control(
            f"V6 control: |G_big|² taken for |G|² [{family.key}]", "planted: E|𝒢|² = |G|² + tr Σ/B_big", naive
        ),
        unbiased.control(
            f"V6 control: noise 2× [{family.key}]", "planted: E𝒮 = 2 tr Σ", np.tile([g_sq, 2 * tr], len(PAIRS))
        ),
    ]
    return out + ([] if examples is None else _data_parallel(examples, replicas, seed, figure))


def _data_parallel(family: Family, replicas: int, seed: int, figure: str):
    """Per-example Gaussian gradients at a point, reduced as a data-parallel framework would."""
    p, theta = family.problem, family.points["mid"]
    grad = theory.gradient(p, theta)
    truth = [float(grad @ grad), p.trace_sigma]
    rng = np.random.default_rng(stream(seed, "v6-dp", family.key))
    measured, se, naive_measured, naive_se, labels = [], [], [], [], []
    for cfg in CONFIGS:
        n = cfg.workers * cfg.accumulation * cfg.local_batch
        per_example = grad + noise.minibatch_noise(rng, p, 1, replicas * n).reshape(replicas, n, p.d)
        local, reduced = cfg.raw_gradients(per_example)
        g2, s = cfg.estimates(local, reduced)
        measured += [g2.mean(), s.mean()]
        se += [_sem(g2), _sem(s)]
        raw_small = np.mean(np.sum(local**2, axis=-1), axis=-1)
        g2n, sn = estimators.two_batch_estimates(
            raw_small, np.sum(reduced**2, axis=-1), cfg.local_batch, cfg.workers * cfg.local_batch
        )
        naive_measured += [g2n.mean(), sn.mean()]
        naive_se += [_sem(g2n), _sem(sn)]
        labels.append(
            f"K={cfg.workers}, b={cfg.local_batch}, A={cfg.accumulation}, {cfg.reduction}, "
            f"scale={cfg.loss_scale:g} → (B_small, B_big)={cfg.implied_batches()}"
        )
    dp = Check(
        name=f"V6 data-parallel estimators unbiased [{family.key}]",
        claim="with the implied (B_small, B_big) and rescaled norms: E|𝒢|² = |G|², E𝒮 = tr Σ",
        family=p.name,
        predicted=np.tile(truth, len(CONFIGS)),
        measured=measured,
        se=se,
        figure=figure,
        notes={"configs": labels},
    )
    naive = Check(
        name=f"V6 control: naive data-parallel estimate [{family.key}]",
        claim="planted: raw norms with B_small = b, B_big = K·b",
        family=p.name,
        predicted=np.tile(truth, len(CONFIGS)),
        measured=naive_measured,
        se=naive_se,
        kind="negative_control",
        figure=figure,
    )
    return [dp, naive]


def _figure(pairs, est, g_sq, tr, out_dir) -> str:
    fig, (a, b) = plots.new_axes(2)
    x = np.arange(len(pairs))
    labels = [f"{s}/{b}" for s, b in pairs]
    for ax, k, truth, name in ((a, 0, g_sq, "estimated |G|² / |G|²"), (b, 1, tr, "estimated tr Σ / tr Σ")):
        vals = np.array([e[k] for e in est]) / truth
        plots.theory_vs_simulation(
            x,
            np.ones_like(x, dtype=float),
            [("mean ± SE", x, vals.mean(axis=1), _sem(vals))],
            ax=ax,
            xlabel="B_small / B_big",
            ylabel=name,
            title="unbiased two-batch estimates",
            theory_label="truth",
        )
        ax.set_xticks(x, labels)
    return save_figure(fig, out_dir, "v6_estimators.png")


def run(ctx: Context) -> Outcome:
    """V6 on the suite's families and budget (the claim registry's entry, :mod:`validation.claims`)."""
    fams = ctx.families
    return Outcome(
        checks(fams["zhang2019"], fams["student-t-examples"], SIZES.at(ctx.quick).replicas, ctx.seed, ctx.out_dir)
    )


def run_on_problem(ctx: Context) -> Outcome:
    """V6's estimators on the user's problem; the data-parallel part needs per-example gradients (Student-t
    examples), which a problem file does not describe, so it stays with the suite's families."""
    return Outcome(checks(ctx.families["problem"], None, SIZES.at(ctx.quick).replicas, ctx.seed, ctx.out_dir))


cannot_speak = noiseless_or_too_large  # on a user's problem: see validation.families
