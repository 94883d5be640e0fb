"""V1 — the one-step law, exact on a quadratic (McCandlish et al. 2018, eq. 2.5):

    E[ΔL](ε, B) = ε|G|² − ½ε²(GᵀHG + tr(HΣ)/B).

Every (B, ε) cell of every point is a comparison. Planted errors: the 1/B missing from the noise term,
and the noise variance doubled.
"""

from __future__ import annotations

import numpy as np

from nqm import plots, theory

from .claims import Context, Outcome
from .families import noiseless_or_too_large
from .one_step import EPS_FACTORS, OneStepGrid, improvement_law
from .report import save_figure
from .stats import Check

ID = "V1"
TITLE = "the one-step law on a (B, ε) grid"
SECONDS = (9.1, 70)  # on one core, (quick, full): longest claims start first
SHARES = ("one_step_grids",)  # V1 and V2 read the same grids: one process computes them once

CLAIM = "E[ΔL](ε,B) = ε|G|² − ½ε²(GᵀHG + tr(HΣ)/B)"


def _law(grid: OneStepGrid, noise_factor: float = 1.0, per_batch: bool = True):
    return improvement_law(grid.moments, grid.eps, grid.batch[:, None], noise_factor, per_batch)


def checks(grids: list[OneStepGrid], out_dir) -> list[Check]:
    family = grids[0].family
    measured = np.concatenate([g.result.mean.ravel() for g in grids])
    se = np.concatenate([g.result.sem.ravel() for g in grids])
    # ΔL is quadratic in the noise, so a cell's replicas are skewed (heavy-tailed examples most): Hall's correction
    mean_skew = np.concatenate([g.result.skew.ravel() / np.sqrt(g.result.n) for g in grids])
    check = Check(
        name=f"V1 one-step law [{family.key}]",
        claim=CLAIM,
        family=family.problem.name,
        predicted=np.concatenate([_law(g).ravel() for g in grids]),
        measured=measured,
        se=se,
        mean_skew=mean_skew,
        figure=_figure(grids, out_dir),
        notes={
            "points": [g.point for g in grids],
            "cells": int(measured.size),
            "batch_sizes": {g.point: g.batch.tolist() for g in grids},
            "per_example": family.per_example,
            "replicas": grids[0].result.n,
        },
    )
    return [
        check,
        check.control(
            f"V1 control: 1/B missing [{family.key}]",
            "planted: ε|G|² − ½ε²(GᵀHG + tr(HΣ))",
            np.concatenate([_law(g, per_batch=False).ravel() for g in grids]),
        ),
        check.control(
            f"V1 control: noise 2× [{family.key}]",
            "planted: ε|G|² − ½ε²(GᵀHG + 2tr(HΣ)/B)",
            np.concatenate([_law(g, noise_factor=2.0).ravel() for g in grids]),
        ),
    ]


def _figure(grids: list[OneStepGrid], out_dir) -> str:
    """All batch sizes collapse onto ΔL/ΔL_opt = 2x − x², x = ε/ε_opt(B)."""
    fig, axes = plots.new_axes(len(grids))
    x = np.linspace(0, 2.6, 200)
    for ax, g in zip(axes, grids):
        scale = theory.optimal_improvement(g.family.theory_problem(g.theta), g.theta, g.batch)  # every B onto one curve
        pts = [
            (f"B={b:g}", EPS_FACTORS, g.result.mean[i] / scale[i], g.result.sem[i] / scale[i])
            for i, b in enumerate(g.batch)
        ]
        plots.theory_vs_simulation(
            x,
            2 * x - x**2,
            pts,
            ax=ax,
            xlabel="ε / ε_opt(B)",
            ylabel="ΔL / ΔL_opt(B)",
            title=f"{g.family.key}, {g.point}",
            theory_label="2x − x²",
        )
    name = f"v1_{grids[0].family.key}.png"
    return save_figure(fig, out_dir, name)


def run(ctx: Context) -> Outcome:
    """V1 on the suite's families and budget (the claim registry's entry, :mod:`validation.claims`)."""
    return Outcome([c for f in ctx.families.values() for c in checks(ctx.one_step_grids(f), ctx.out_dir)])


run_on_problem = run  # the families are then the user's problem alone

cannot_speak = noiseless_or_too_large  # on a user's problem: see validation.families
