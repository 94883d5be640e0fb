"""V24 — a real sweep through the critical-batch definitions: Zhang et al. 2024's steps to a C4 loss for five
language models (arXiv:2410.21676, shipped as :func:`nqm.real_sweeps.zhang2024`), fitted by the function the NQM's
exact runs use, with bootstrap errors, beside the NQM's own curve shapes (reported, not judged: the data are what
they are; the bootstrap's calibration is a test, ``tests/test_real_sweeps.py``).
"""

from __future__ import annotations

from nqm import real_sweeps
from nqm.real_sweeps import summary

from .claims import Context, Outcome
from .report import Table

ID = "V24"
TITLE = "a real sweep through the critical-batch definitions (Zhang et al. 2024)"
SECONDS = (8.2, 35)  # on one core, (quick, full): longest claims start first
NOT_ON_A_PROBLEM = "it reads the shipped sweep of Zhang et al. 2024 (reported, not judged)"
FIGURE = "v24_real_sweeps.png"


def compute(quick: bool, seed: int, out_dir) -> list[Table]:
    sweep = real_sweeps.zhang2024()
    fits = summary.fit_all(sweep, draws=500 if quick else 2000, seed=[seed, 24])
    if quick:
        curves = real_sweeps.nqm_curves(real_sweeps.power_law_problem(d=300), target_fractions=(0.1, 0.03, 0.01, 0.003))
    else:
        curves = real_sweeps.nqm_curves()
    shapes = summary.all_shape_fits(fits, curves)
    rows = [
        [
            f.group,
            f.target,
            summary.plus_minus(f.s_min, f.s_min_se),
            summary.plus_minus(f.e_min, f.e_min_se),
            summary.plus_minus(f.b_crit, f.b_crit_se),
            f"{f.b_crit_interval[0]:.0f}–{f.b_crit_interval[1]:.0f}",
            f"{summary.plus_minus(f.linear_scaling, f.linear_scaling_se)} ({f.linear_scaling_bracket[0]:.0f}–"
            f"{f.linear_scaling_bracket[1]:.0f})",
            f"{f.linear_scaling_from_frontier:.0f}",
            f"{f.linear_scaling_from_frontier / f.linear_scaling:.2f}",
            f"{f.b_crit / f.linear_scaling:.1f}",
            f"{f.residual_rms:.3f}",
        ]
        for f in fits
    ]
    laws = [real_sweeps.power_law(fits, v) for v in ("parameters", "target")]
    frontier = Table(
        title="Zhang et al. 2024's sweeps: the frontier fit, McCandlish's B_crit and the 20% rule",
        columns=[
            "model",
            "target C4 loss",
            "S_min",
            "E_min",
            "B_crit = E_min/S_min",
            f"{fits[0].confidence:.0%} interval",
            "B_20 from the table (bracket)",
            "hyperbola's B_20",
            "hyperbola/table",
            "B_crit/B_20",
            "rms log(fit/S)",
        ],
        rows=rows,
        note=f"S = S_min + E_min/B by least squares on log S (nqm.dynamics.fit_frontier, as for the NQM's runs); ± "
        f"are residual-bootstrap SEs ({fits[0].draws} draws, seed ({seed}, 24)). B_20: the smallest B with "
        "S·B > 1.2·S(64)·64, log-log interpolated between measured batch sizes; the hyperbola's B_20 = "
        "1.2·64 + 0.2·B_crit. Across the models B_crit ∝ N^k with "
        f"k = {laws[0].exponent:.3f} ± {laws[0].exponent_se:.3f} (N parameters) and ∝ L^k with "
        f"k = {laws[1].exponent:.2f} ± {laws[1].exponent_se:.2f} (L the target loss; model size and target change "
        "together in this table). Source: " + sweep.source + ".",
        figure=_figure(fits, shapes, out_dir),
    )
    shape_rows = []
    for f, group_shapes in zip(fits, shapes):
        by_shape = {s.shape: s for s in group_shapes}
        shape_rows.append(
            [f.group]
            + [f"{s.residual_rms:.3f} / {s.held_out_rms:.3f}" for s in by_shape.values()]
            + [f"{by_shape[k].residuals[-1]:+.3f}" for k in by_shape]
        )
    names = list(by_shape)
    shapes = Table(
        title="How well does the NQM's optimal-run curve describe each sweep? (RMS of log(fit/S): in sample / "
        "held out)",
        columns=["model", *names, *[f"{k}: residual at B = 16384" for k in names]],
        rows=shape_rows,
        note="The NQM's curves are the optimal runs of a power-law problem (h_i = 1/i, noise c ∝ h, "
        f"d = {300 if quick else 1000}) for SGD, heavy ball (β tuned) and SGD preconditioned by H^(−1/2), with the "
        "data's B = κ·B_NQM, its steps a·S_NQM and the target from a grid of fractions of L₀ free (three parameters; "
        "the hyperbola has two). Held out: each batch size left out in turn, the curve refitted on the rest (target "
        "chosen again), the left-out point predicted. The last columns show where a shape misses at the largest "
        "batch (log(fit/S) > 0: the curve predicts too many steps, i.e. its plateau comes too early).",
    )
    return [frontier, shapes]


def _figure(fits, shapes, out_dir) -> str:
    summary.plot_frontier(fits, shapes, out_dir / FIGURE)
    return FIGURE


def run(ctx: Context) -> Outcome:
    """V24 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    return Outcome(tables=compute(ctx.quick, ctx.seed, ctx.out_dir))
