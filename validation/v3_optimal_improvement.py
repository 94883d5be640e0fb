"""V3 — the loss-improvement law (McCandlish et al. 2018, eq. 2.7): ΔL_opt(B) = ΔL_max/(1 + B_noise/B).

The improvement is simulated at the predicted ε_opt(B) on a fine batch grid (B_noise·2^k, |k| ≤ 6), then
B_noise is fitted from those points and compared with tr(HΣ)/(GᵀHG). Planted errors: 1/B missing;
noise variance doubled.
"""

from __future__ import annotations

import numpy as np

from nqm import theory

from .claims import Context, Outcome
from .families import Family, batch_grid, noiseless_or_too_large
from .one_step import improvement_law, saturation_figure, stream
from .sizes import Sizes
from .stats import Check, fit_saturation

ID = "V3"
TITLE = "ΔL_opt(B) at the optimal step"
SECONDS = (8.6, 55)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(replicas=(1500, 10_000))  # per (B, ε) cell of the fitted parabolas

CLAIM = "ΔL_opt(B) = ΔL_max/(1 + B_noise/B)"
FACTORS = 2.0 ** np.arange(-6, 7)


def _law(p, theta, batch, eps, noise_factor=1.0, per_batch=True):
    """E[ΔL] at the simulated ε (equals ΔL_opt(B) unplanted), optionally with a planted noise term."""
    return improvement_law(theory.step_moments(p, theta), eps, batch, noise_factor, per_batch)


def checks(family: Family, replicas: int, seed: int, out_dir) -> list[Check]:
    rows = []
    for point, theta in family.points.items():
        p = family.theory_problem(theta)
        b_noise = float(theory.noise_scale(p, theta))
        batch = batch_grid(b_noise, FACTORS)
        eps = theory.optimal_step(p, theta, batch)
        r = family.one_step_improvement(theta, eps, batch, replicas, seed=stream(seed, "v3", family.key, point))
        dl_max = float(theory.max_improvement(p, theta))
        fitted = fit_saturation(batch, r.mean, r.sem, dl_max, b_noise)
        rows.append(
            dict(
                point=point,
                theta=theta,
                problem=p,
                batch=batch,
                eps=eps,
                result=r,
                b_noise=b_noise,
                dl_max=dl_max,
                fitted=fitted,
            )
        )
    cat = np.concatenate
    law = Check(
        name=f"V3 ΔL_opt(B) [{family.key}]",
        claim=CLAIM,
        family=family.problem.name,
        predicted=cat([theory.optimal_improvement(r["problem"], r["theta"], r["batch"]) for r in rows]),
        measured=cat([r["result"].mean for r in rows]),
        se=cat([r["result"].sem for r in rows]),
        figure=_figure(family, rows, out_dir),
        notes={"points": [r["point"] for r in rows], "replicas": replicas},
    )
    fit = Check(
        name=f"V3 B_noise fitted from ΔL_opt(B) [{family.key}]",
        claim="B_noise fitted from ΔL_opt(B) = tr(HΣ)/(GᵀHG)",
        family=family.problem.name,
        predicted=[r["b_noise"] for r in rows],
        measured=[r["fitted"][1] for r in rows],
        se=[r["fitted"][3] for r in rows],
        figure=law.figure,
        notes={"dl_max_fitted": [r["fitted"][0] for r in rows], "dl_max": [r["dl_max"] for r in rows]},
    )
    return [
        law,
        law.control(
            f"V3 control: 1/B missing [{family.key}]",
            "planted: noise term tr(HΣ) without 1/B",
            cat([_law(r["problem"], r["theta"], r["batch"], r["eps"], per_batch=False) for r in rows]),
        ),
        law.control(
            f"V3 control: noise 2× [{family.key}]",
            "planted: noise term 2tr(HΣ)/B",
            cat([_law(r["problem"], r["theta"], r["batch"], r["eps"], noise_factor=2.0) for r in rows]),
        ),
        fit,
        fit.control(
            f"V3 control: fitted B_noise vs 2× [{family.key}]",
            "planted: B_noise doubled",
            [2 * r["b_noise"] for r in rows],
        ),
    ]


def _figure(family, rows, out_dir) -> str:
    panels = [
        (
            f"{family.key}, {r['point']}",
            r["batch"] / r["b_noise"],
            r["result"].mean / r["dl_max"],
            r["result"].sem / r["dl_max"],
        )
        for r in rows
    ]
    return saturation_figure(panels, "ΔL_opt / ΔL_max", "simulated at ε_opt(B)", f"v3_{family.key}.png", out_dir)


def run(ctx: Context) -> Outcome:
    """V3 on the suite's families and budget (the claim registry's entry, :mod:`validation.claims`)."""
    replicas = SIZES.at(ctx.quick).replicas
    return Outcome([c for f in ctx.families.values() for c in checks(f, replicas, ctx.seed, ctx.out_dir)])


run_on_problem = run  # the families are then the user's problem alone

cannot_speak = noiseless_or_too_large  # on a user's problem: see validation.families
