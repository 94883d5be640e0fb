"""V7 — the per-step ratio 𝒮/|𝒢|² against the ratio of means, as B_big/B_simple varies (App. A.1).

With B_big/B_small = 8 fixed, B_big sweeps B_simple·4^k. The ratio of the means of 𝒮 and |𝒢|² is consistent:
it is checked against B_simple = tr Σ/|G|² with a delta-method SE (planted error: B_simple doubled). The
per-step ratio is reported, not judged: its median bias, its sample mean (it has no finite mean), and the
probability that |𝒢|² < 0, which makes the ratio negative.
"""

from __future__ import annotations

import numpy as np

from nqm import estimators, noise, plots, theory

from .claims import Context, Outcome
from .families import Family, noiseless_or_too_large
from .one_step import stream
from .report import Table, save_figure
from .sizes import Sizes
from .stats import Check

ID = "V7"
TITLE = "per-step ratio against ratio of means"
SECONDS = (1.2, 23)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(replicas=(2000, 20_000))

RATIOS = 4.0 ** np.arange(-2, 4)


def compute(family: Family, replicas: int, seed: int, out_dir):
    p, theta = family.problem, family.points["mid"]
    grad = theory.gradient(p, theta)
    b_simple = float(theory.simple_noise_scale(p, theta))
    rng = np.random.default_rng(stream(seed, "v7", family.key))
    rows, ratio_of_means, ratio_se, plotted = [], [], [], []
    for r in RATIOS:
        b_big = max(2, int(round(r * b_simple)))
        b_small = max(1, b_big // 8)
        small, big = noise.nested_minibatch_noise(rng, p, b_small, b_big, replicas)
        g2, s = estimators.two_batch_estimates(
            np.sum((grad + small) ** 2, axis=1), np.sum((grad + big) ** 2, axis=1), b_small, b_big
        )
        m_g, m_s = g2.mean(), s.mean()
        cov = np.cov(np.stack([s, g2])) / replicas
        grad_ratio = np.array([1 / m_g, -m_s / m_g**2])  # delta method for m_s/m_g
        ratio_of_means.append(m_s / m_g)
        ratio_se.append(float(np.sqrt(grad_ratio @ cov @ grad_ratio)))
        with np.errstate(divide="ignore"):
            per_step = s / g2
        negative = np.mean(g2 < 0)
        rows.append(
            [
                f"{b_big / b_simple:.3g}",
                f"{b_small}/{b_big}",
                float(np.median(per_step) / b_simple),
                float(np.mean(per_step) / b_simple),
                float(m_s / m_g / b_simple),
                f"{negative:.4f} ± {np.sqrt(negative * (1 - negative) / replicas):.4f}",
            ]
        )
        plotted.append(
            (
                b_big / b_simple,
                np.median(per_step) / b_simple,
                m_s / m_g / b_simple,
                negative,
                np.sqrt(negative * (1 - negative) / replicas),
                ratio_se[-1] / b_simple,
            )
        )
    figure = _figure(np.array(plotted), out_dir)
    check = Check(
        name=f"V7 ratio of means → B_simple [{family.key}]",
        claim="mean(𝒮)/mean(|𝒢|²) = tr Σ/|G|² (consistent as replicas grow)",
        family=p.name,
        predicted=np.full(RATIOS.size, b_simple),
        measured=ratio_of_means,
        se=ratio_se,
        figure=figure,
        notes={"B_big/B_simple": RATIOS.tolist(), "replicas": replicas},
    )
    table = Table(
        title=f"Per-step ratio vs ratio of means ({family.key}, B_simple = {b_simple:.4g}, {replicas} draws)",
        columns=[
            "B_big/B_simple",
            "B_small/B_big",
            "median(𝒮/|𝒢|²)/B_simple",
            "mean(𝒮/|𝒢|²)/B_simple",
            "mean𝒮/mean|𝒢|² / B_simple",
            "P(|𝒢|² < 0)",
        ],
        rows=rows,
        note="The per-step ratio has no finite mean (|𝒢|² crosses 0): its sample mean is erratic and its median "
        "is biased where B_big ≲ B_simple; the ratio of means is consistent.",
        figure=figure,
    )
    return [
        check,
        check.control(
            f"V7 control: B_simple 2× [{family.key}]", "planted: B_simple doubled", np.full(RATIOS.size, 2 * b_simple)
        ),
    ], [table]


def _figure(rows, out_dir) -> str:
    fig, (a, b) = plots.new_axes(2)
    x = rows[:, 0]
    plots.theory_vs_simulation(
        x,
        np.ones_like(x),
        [("median per-step ratio", x, rows[:, 1], None), ("ratio of means ± SE", x, rows[:, 2], rows[:, 5])],
        ax=a,
        xscale="log",
        xlabel="B_big / B_simple",
        ylabel="estimate / B_simple",
        title="bias of B_simple estimates",
        theory_label="truth",
    )
    plots.theory_vs_simulation(
        x,
        None,
        [("measured ± SE", x, rows[:, 3], rows[:, 4])],
        ax=b,
        xscale="log",
        xlabel="B_big / B_simple",
        ylabel="P(estimated |G|² < 0)",
        title="negative |G|² estimates",
    )
    return save_figure(fig, out_dir, "v7_ratio.png")


def run(ctx: Context) -> Outcome:
    """V7 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    checks, tables = compute(ctx.families["zhang2019"], SIZES.at(ctx.quick).replicas, ctx.seed, ctx.out_dir)
    return Outcome(checks, tables)


def run_on_problem(ctx: Context) -> Outcome:
    """V7 at the mid point of the user's problem (``nqm validate --problem FILE``)."""
    checks, tables = compute(ctx.families["problem"], SIZES.at(ctx.quick).replicas, ctx.seed, ctx.out_dir)
    return Outcome(checks, tables)


cannot_speak = noiseless_or_too_large  # on a user's problem: see validation.families
