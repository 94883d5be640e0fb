"""V2 — the optimal step (McCandlish et al. 2018, eq. 2.6): ε_opt(B) = ε_max/(1 + B_noise/B).

At each B, ε_opt is estimated from the simulated ΔL(ε) by a weighted quadratic fit (vertex, delta-method
SE); the estimates are compared with the law, then B_noise is fitted from them and compared with
tr(HΣ)/(GᵀHG). Planted errors: 1/B missing; noise variance doubled (B_noise doubled).
"""

from __future__ import annotations

import numpy as np

from nqm import theory

from .claims import Context, Outcome
from .families import noiseless_or_too_large
from .one_step import OneStepGrid, saturation_figure
from .stats import Check, fit_saturation, parabola_vertex

ID = "V2"
TITLE = "ε_opt(B) from the one-step parabolas"
SECONDS = (4.3, 4.3)  # on one core, (quick, full): longest claims start first
SHARES = ("one_step_grids",)  # V1 and V2 read the same grids: one process computes them once

CLAIM = "ε_opt(B) = ε_max/(1 + B_noise/B)"
CLAIM_FIT = "B_noise fitted from ε_opt(B) = tr(HΣ)/(GᵀHG)"


def _vertices(g: OneStepGrid):
    fits = [parabola_vertex(g.eps[i], g.result.mean[i], g.result.sem[i]) for i in range(g.batch.size)]
    return np.array([f[0] for f in fits]), np.array([f[1] for f in fits])


def _law(g: OneStepGrid, noise_factor=1.0, per_batch=True):
    gg, ghg, tr = g.moments
    return np.broadcast_to(gg / (ghg + noise_factor * tr / (g.batch if per_batch else 1.0)), g.batch.shape)


def checks(grids: list[OneStepGrid], out_dir) -> list[Check]:
    family = grids[0].family
    p = family.problem
    at = [family.theory_problem(g.theta) for g in grids]  # Σ depends on θ for least squares
    est = [_vertices(g) for g in grids]
    measured = np.concatenate([e[0] for e in est])
    se = np.concatenate([e[1] for e in est])
    fits = [
        fit_saturation(g.batch, e[0], e[1], float(theory.max_step(q, g.theta)), float(theory.noise_scale(q, g.theta)))
        for g, e, q in zip(grids, est, at)
    ]
    b_noise = np.array([float(theory.noise_scale(q, g.theta)) for g, q in zip(grids, at)])
    step = Check(
        name=f"V2 optimal step [{family.key}]",
        claim=CLAIM,
        family=p.name,
        predicted=np.concatenate([_law(g) for g in grids]),
        measured=measured,
        se=se,
        figure=_figure(grids, est, out_dir),
        notes={"points": [g.point for g in grids], "fit": "weighted quadratic ΔL = b₁ε + b₂ε² per B"},
    )
    fit = Check(
        name=f"V2 B_noise fitted from ε_opt(B) [{family.key}]",
        claim=CLAIM_FIT,
        family=p.name,
        predicted=b_noise,
        measured=[f[1] for f in fits],
        se=[f[3] for f in fits],
        figure=step.figure,
        notes={"points": [g.point for g in grids], "eps_max_fitted": [f[0] for f in fits]},
    )
    return [
        step,
        step.control(
            f"V2 control: 1/B missing [{family.key}]",
            "planted: ε_opt = |G|²/(GᵀHG + tr(HΣ))",
            np.concatenate([_law(g, per_batch=False) for g in grids]),
        ),
        step.control(
            f"V2 control: noise 2× [{family.key}]",
            "planted: ε_opt = ε_max/(1 + 2B_noise/B)",
            np.concatenate([_law(g, noise_factor=2.0) for g in grids]),
        ),
        fit,
        fit.control(f"V2 control: fitted B_noise vs 2× [{family.key}]", "planted: B_noise doubled", 2.0 * b_noise),
    ]


def _figure(grids, est, out_dir) -> str:
    panels = []
    for g, (e, s) in zip(grids, est):
        p = g.family.theory_problem(g.theta)
        eps_max, b_noise = float(theory.max_step(p, g.theta)), float(theory.noise_scale(p, g.theta))
        panels.append((f"{g.family.key}, {g.point}", g.batch / b_noise, e / eps_max, s / eps_max))
    return saturation_figure(panels, "ε_opt / ε_max", "fitted vertex", f"v2_{grids[0].family.key}.png", out_dir)


def run(ctx: Context) -> Outcome:
    """V2 on the suite's families and budget (the claim registry's entry, :mod:`validation.claims`)."""
    return Outcome([c for f in ctx.families.values() for c in checks(ctx.one_step_grids(f), ctx.out_dir)])


run_on_problem = run  # the families are then the user's problem alone

cannot_speak = noiseless_or_too_large  # on a user's problem: see validation.families
