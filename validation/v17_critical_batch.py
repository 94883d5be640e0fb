r"""V17 — the critical batch size by each definition, on the same exact optimal runs (findings, not pass/fail).

For four problem families (Zhang et al.'s h_i = 1/i with Σ = H; a power law h_i = i^(−2) with c = √h; a log-uniform
spectrum with κ = 10³ and c = h; the same spectrum with a dense Σ rotated away from H's basis) and SGD, SGD
preconditioned by P = H^(−½), and (on zhang2019) heavy ball, each at the target 1% of its initial loss
(θ₀ ~ N(0, I)), :func:`nqm.dynamics.critical_batch_sizes` gives

* McCandlish et al. 2018's B_crit = E_min/S_min of the fitted frontier S = S_min + E_min/B;
* Zhang et al. 2024's B_20%: the smallest B whose steps exceed linear scaling from B₀ = 1 by 20%, beside what the
  hyperbola predicts for it, 1.2·B₀ + 0.2·B_crit (derived in :mod:`nqm.dynamics.studies.critical`);
* B_noise at θ₀, at the target and averaged over the run in full-batch-equivalent steps ds = dt/(1 + B_noise/B),
  the average that McCandlish et al.'s App. D model equates with E_min/S_min.

The ratios say how far each definition sits from the others on each problem; none is judged. Adam's E_min/S_min and
B_20%, from steps tuned by Monte Carlo, are in V16.
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import dynamics, info, plots, spectra

from .claims import Context, Outcome
from .report import Table, save_figure
from .sizes import Sizes

ID = "V17"
TITLE = "the critical batch size by each definition"
SECONDS = (5.5, 15)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(d=(300, 1000), d_heavy_ball=(30, 100))
NOT_ON_A_PROBLEM = "it compares the definitions across four problem families of its own (nqm info gives B_crit)"

FIGURE = "v17_critical_batch.png"
BATCHES = 2.0 ** np.arange(0, 21)
HEAVY_BALL_BATCHES = 2.0 ** np.arange(0, 15)


def problems(d: int, seed: int) -> list[nqm.NoisyQuadratic]:
    h_log = spectra.log_uniform(d, 1e-3, 1.0)
    h_pow = spectra.power_law(d, 2.0)
    return [
        nqm.NoisyQuadratic.zhang2019(d),
        nqm.NoisyQuadratic(h_pow, spectra.noise_power(h_pow, 1.0, 0.5), name=f"power law h = i^-2, c = √h (d={d})"),
        nqm.NoisyQuadratic(h_log, h_log.copy(), name=f"log-uniform κ = 1e3, c = h (d={d})"),
        nqm.NoisyQuadratic(
            h_log, sigma=spectra.misaligned_sigma(h_log, 1.0, seed), name=f"log-uniform κ = 1e3, dense Σ (d={d})"
        ),
    ]


def compute(d: int, d_heavy_ball: int, seed: int, out_dir):
    rows, curves = [], []
    cases = [(p, label, pre) for p in problems(d, seed) for label, pre in (("SGD", None), ("SGD, P = H^-1/2", -0.5))]
    hb = nqm.NoisyQuadratic.zhang2019(d_heavy_ball)
    cases.append((hb, "heavy ball", None))
    for p, label, power in cases:
        target = 0.01 * info.summary(p)["L0"]
        precond = None if power is None else p.h**power
        family = "heavy_ball" if label == "heavy ball" else "sgd"
        batches = HEAVY_BALL_BATCHES if family == "heavy_ball" else BATCHES
        c = dynamics.critical_batch_sizes(p, target, family=family, precond=precond, batch_sizes=batches)
        mean = c.b_noise_mean
        rows.append(
            [
                p.name,
                label,
                f"{target:.4g}",
                c.mccandlish,
                f"{c.frontier_residual:.1%}",
                c.linear_scaling,
                c.linear_scaling_from_frontier,
                c.linear_scaling / c.linear_scaling_from_frontier,
                "—" if c.b_noise_start is None else c.b_noise_start,
                "—" if mean is None else mean,
                "—" if c.b_noise_end is None else c.b_noise_end,
                "—" if mean is None else c.mccandlish / mean,
                f"{int((~c.interior).sum())}/{c.interior.size}",
            ]
        )
        curves.append((f"{p.name.split(' (')[0]}, {label}", c))
    table = Table(
        title="The critical batch size by each definition (exact optimal runs, target 1% of the initial loss)",
        columns=[
            "problem",
            "optimiser",
            "target",
            "B_crit = E_min/S_min",
            "max |fit − S|/S",
            "B_20% (Zhang 2024)",
            "1.2 + 0.2·B_crit (hyperbola)",
            "B_20% / hyperbola",
            "B_noise(θ₀)",
            "⟨B_noise⟩_s over the run",
            "B_noise(target)",
            "B_crit / ⟨B_noise⟩_s",
            "optima on the edge",
        ],
        rows=rows,
        note="B_20% is the smallest batch whose steps to the target exceed linear scaling from B₀ = 1 by 20% (found "
        "by bisection to 1e-6 on exact first hits); on the frontier hyperbola it would be 1.2·B₀ + 0.2·B_crit. "
        "The noise scales are those of the optimal run at the grid's batch size nearest B_crit (for SGD and "
        "preconditioned SGD, whose second moments are exact; the preconditioned rows use tr(PHPΣ)/E[GᵀPHPG]). "
        "App. D's model says ⟨B_noise⟩_s = E_min/S_min. Heavy ball is tuned over (ε, β) on a smaller copy of "
        f"zhang2019 (d = {d_heavy_ball}, B ≤ 2¹⁴). 'Optima on the edge' counts the batch sizes whose optimal step "
        "sits on the edge of the exact solver's range (steps at which every coordinate's variance relaxes downwards): "
        "their steps are upper bounds, and a row with many of them has definitions that are not to be trusted "
        "(preconditioning by H^-1/2 raises the flat directions' noise until their stationary variance exceeds the "
        "initial one).",
        figure=_figure(curves, out_dir),
    )
    return [table]


def _figure(curves, out_dir) -> str:
    """Examples E(B) relative to linear scaling from B = 1, with each definition marked."""
    fig, (ax,) = plots.new_axes(1, width=6.5)
    for (label, c), (colour, dash) in zip(curves, plots.LINES * 3):
        ok = np.isfinite(c.steps)
        ratio = c.steps[ok] * c.batch_sizes[ok] / (c.steps[0] * c.batch_sizes[0])
        ax.plot(c.batch_sizes[ok], ratio, color=colour, linestyle=dash, linewidth=1, label=label)
        ax.plot([c.linear_scaling], [1.2], "o", color=colour, markersize=3)
    ax.axhline(1.2, color="0.5", linewidth=0.5)
    ax.set(xscale="log", yscale="log", xlabel="batch size B", ylabel="E(B)/E(1) (examples to target)")
    ax.set_title("examples over linear scaling; dots: B_20% (Zhang 2024)", fontsize=9)
    ax.legend(fontsize=5, ncol=2)
    return save_figure(fig, out_dir, FIGURE)


def run(ctx: Context) -> Outcome:
    """V17 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    size = SIZES.at(ctx.quick)
    return Outcome(tables=compute(size.d, size.d_heavy_ball, ctx.seed, ctx.out_dir))
