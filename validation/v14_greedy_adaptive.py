"""V14 — the greedy schedule's steps/examples frontier and the adaptive batch size of McCandlish et al. 2018
(arXiv:1812.06162, §2.3 and App. D), on the exact expected dynamics of zhang2019.

The paper's model counts progress in full-batch-equivalent steps s: S = ∫(1 + B_noise/B) ds,
E = ∫(B_noise + B) ds, so S_min = ∫ds and E_min = ∫B_noise ds along the noiseless run, any constant B obeys
(S/S_min − 1)(E/E_min − 1) = 1, and B(s) = √(r·B_noise(s)) obeys the same with γ = (∫√B_noise ds)²/(S_min·E_min)
in place of 1. Here every run is the greedy schedule (the step that maximises the expected improvement given
the exact second moments), at constant B and with B_t = √(r·B_noise(t)). Reported as measured tables: the
model's S_min, E_min and γ against the fitted frontier, and the examples the adaptive schedule saves at
equal steps against the saving the model predicts, (1 + x)/(1 + γx) with x = S_min/(S − S_min).
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import dynamics, plots

from .claims import Context, Outcome
from .report import Table, save_figure
from .sizes import Sizes

ID = "V14"
TITLE = "greedy frontier, adaptive batch size"
SECONDS = (1.0, 20)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(d=(100, 1000))
NOT_ON_A_PROBLEM = "its frontier and adaptive-batch findings are measured on zhang2019 (reported, not judged)"

TARGET = 0.01
BATCHES = 2.0 ** np.arange(6, 21)
RATES = np.geomspace(1.0, 1000.0, 6)
FIGURE = "v14_greedy_adaptive.png"


def noiseless_noise_scales(p, target):
    """B_noise(t) = tr(HΣ)/tr(H³M_t) along the greedy run with B = ∞ (the paper's s-axis)."""
    run = dynamics.greedy_schedule(p, 1e300, target=target)  # B → ∞: no gradient noise
    v, out = np.ones(p.d), []
    for eps in run.lr:
        out.append(p.trace_h_sigma / (p.h**3 @ v))
        v = (1 - eps * p.h) ** 2 * v
    return np.array(out)


def compute(d: int, out_dir):
    p = nqm.NoisyQuadratic.zhang2019(d)
    const = [dynamics.greedy_schedule(p, b, target=TARGET) for b in BATCHES]
    steps = np.array([r.steps for r in const], dtype=np.float64)
    examples = BATCHES * steps
    s_fit, e_fit, resid = dynamics.fit_frontier(BATCHES, steps)
    b_noise = noiseless_noise_scales(p, TARGET)
    s_model, e_model = float(b_noise.size), float(b_noise.sum())
    gamma = float(np.sqrt(b_noise).sum() ** 2 / (s_model * e_model))
    frontier = Table(
        title=f"Greedy schedule, constant B: the frontier against App. D's model (zhang2019, d = {d}, target {TARGET})",
        columns=["", "S_min", "E_min", "B_crit = E_min/S_min"],
        rows=[
            ["fitted to the greedy runs (S = S_min + E_min/B)", s_fit, e_fit, e_fit / s_fit],
            ["model: ∫ds, ∫B_noise ds along the noiseless run", s_model, e_model, e_model / s_model],
        ],
        note=f"Largest relative residual of the hyperbola fit: {resid:.1%}. B_noise along the noiseless run grows "
        f"from {b_noise[0]:.3g} to {b_noise[-1]:.3g}; its time average is {b_noise.mean():.4g} "
        f"(the model's B_crit), and App. D's γ = (∫√B_noise ds)²/(S_min·E_min) = {gamma:.3f}.",
    )
    rows, adaptive = [], []
    for r in RATES:
        a = dynamics.adaptive_batch_schedule(p, r, TARGET)
        adaptive.append(a)
        # constant-B examples at the same number of steps: log-log interpolation along the constant runs
        order = np.argsort(steps)
        e_const = float(np.exp(np.interp(np.log(a.steps), np.log(steps[order]), np.log(examples[order]))))
        x = s_fit / (a.steps - s_fit)
        rows.append(
            [
                f"{r:.3g}",
                f"{a.steps:.0f}",
                f"{a.examples:.4g}",
                f"{a.batch_sizes[0]:.3g} → {a.batch_sizes[-1]:.3g}",
                f"{e_const:.4g}",
                f"{e_const / a.examples:.3f}",
                f"{(1 + x) / (1 + gamma * x):.3f}",
            ]
        )
    table = Table(
        title="Adaptive batch size B_t = √(r·B_noise(t)) against constant B (greedy steps, exact dynamics)",
        columns=[
            "r",
            "steps S",
            "examples E",
            "B_t first → last",
            "constant-B examples at the same S",
            "measured saving",
            "model saving (1 + x)/(1 + γx)",
        ],
        rows=rows,
        note="Constant-B examples at the adaptive run's S are interpolated (log-log) between the constant-B greedy "
        "runs. The model's saving uses the fitted S_min and App. D's γ from the noiseless run. The saving grows "
        "with r (fewer steps) as the model says; how close the two columns are is the measured quality of "
        "App. D's continuous model on this problem.",
        figure=_figure(steps, examples, adaptive, out_dir),
    )
    return [frontier, table]


def _figure(steps, examples, adaptive, out_dir) -> str:
    fig, (ax,) = plots.new_axes(1, width=5.0)
    plots.theory_vs_simulation(
        None,
        None,
        [
            ("greedy, constant B", steps, examples, None),
            ("greedy, B_t = √(r·B_noise(t))", [a.steps for a in adaptive], [a.examples for a in adaptive], None),
        ],
        ax=ax,
        xscale="log",
        yscale="log",
        xlabel="steps S",
        ylabel="examples E",
        title="steps/examples frontier (exact dynamics)",
    )
    return save_figure(fig, out_dir, FIGURE)


def run(ctx: Context) -> Outcome:
    """V14 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    return Outcome(tables=compute(SIZES.at(ctx.quick).d, ctx.out_dir))
