"""V12 — the core checks with state-dependent noise (least squares, :mod:`nqm.least_squares`).

Examples are real (x, y) pairs, x ~ N(0, H), y = xᵀθ* + ν: the gradient noise Σ(θ) = HθθᵀH + (θᵀHθ + σ²)H
changes with θ. (a) V1: at points early, mid and late along a run, one real SGD step on a (B, ε) grid against
E[ΔL] = ε|G|² − ½ε²(GᵀHG + tr(HΣ(θ))/B). (b) V4: whole trajectories against the exact closed recursion.
(c) V2 and V3 (the optimal step and ΔL_opt(B), with B_noise fitted from each) through the same code as the
additive families, with Σ(θ) at each point. (d) The noise scales over training: ratio-of-expectations
B_noise(t) and B_simple(t) of simulated runs against the exact recursion. Planted errors: the state-dependent
part of Σ dropped (Σ = σ²H, the additive model), the 1/B missing, and the noise doubled.
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import plots, spectra, theory

from . import v2_optimal_step, v3_optimal_improvement
from .claims import Context, Outcome
from .families import Family
from .one_step import improvement_law, run_grid, stream
from .report import Table, save_figure
from .sizes import Sizes
from .stats import Check, ratio_of_means

ID = "V12"
TITLE = "state-dependent noise"
SECONDS = (22, 91)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(replicas=(1200, 6000), replicas_examples=(300, 1500))
NOT_ON_A_PROBLEM = "it is about least squares, whose noise Σ(θ) changes with θ; a problem file gives a fixed Σ"

POINTS = {"early": 0, "mid": 20, "late": 200}
LR, TRAIN_BATCH = 0.25, 4
EPS_FACTORS = np.array([0.3, 0.7, 1.0, 1.5, 2.2])


def compute(replicas: int, example_replicas: int, seed: int, out_dir, d: int = 16):
    ls = nqm.LeastSquares(spectra.log_uniform(d, 0.05, 1.0), noise_var=0.05)
    additive = nqm.NoisyQuadratic(ls.h, ls.noise_var * ls.h)
    # points θ along one run of real SGD (a common stream: later points extend the same run)
    rng = np.random.default_rng(stream(seed, "v12-run"))
    theta, points, t = rng.standard_normal(d), {}, 0
    for name, steps in POINTS.items():
        while t < steps:
            theta = theta - LR * ls.example_gradients(rng, theta, TRAIN_BATCH)[0]
            t += 1
        points[name] = theta.copy()
    pred, meas, se, plain, no_b, panels = [], [], [], [], [], []
    for name, th in points.items():
        p_at = ls.at(th)
        b_noise = ls.noise_scale(th)
        batch = np.unique(np.maximum(1, np.round(b_noise * 4.0 ** np.arange(-2, 3))))
        eps = theory.optimal_step(p_at, th, batch)[:, None] * EPS_FACTORS
        r = ls.one_step_improvement(th, eps, batch[:, None], replicas, seed=stream(seed, "v12", name))
        pred.append(theory.expected_improvement(p_at, th, eps, batch[:, None]).ravel())
        plain.append(theory.expected_improvement(additive, th, eps, batch[:, None]).ravel())
        no_b.append(improvement_law(theory.step_moments(p_at, th), eps, batch[:, None], per_batch=False).ravel())
        meas.append(r.mean.ravel())
        se.append(r.sem.ravel())
        scale = theory.optimal_improvement(p_at, th, batch)[:, None]
        panels.append((name, b_noise, batch, r.mean / scale, r.sem / scale))
    cat = np.concatenate
    figure = _figure(panels, ls, replicas, seed, out_dir)
    one_step = Check(
        "V12 one-step law, state-dependent noise",
        "E[ΔL] = ε|G|² − ½ε²(GᵀHG + tr(HΣ(θ))/B) with real (x, y) examples",
        "least squares",
        predicted=cat(pred),
        measured=cat(meas),
        se=cat(se),
        figure=figure,
        notes={"points": list(POINTS), "replicas": replicas},
    )
    checks = [
        one_step,
        one_step.control("V12 control: additive noise Σ = σ²H", "planted: state dependence dropped", cat(plain)),
        one_step.control("V12 control: 1/B missing", "planted: tr(HΣ(θ)) without 1/B", cat(no_b)),
    ]
    for batch in (1, 4):
        sim = ls.simulate(LR, batch, 200, replicas // 2, seed=stream(seed, "v12-traj", str(batch)))
        exact = ls.expected_loss(LR, batch, 200)[sim.steps]
        traj = Check(
            f"V12 dynamics, state-dependent noise, B = {batch}",
            "simulated mean loss = exact recursion",
            "least squares",
            predicted=exact,
            measured=sim.mean,
            se=sim.sem,
            figure=figure,
            notes={"replicas": sim.n, "lr": LR},
        )
        checks += [
            traj,
            traj.control(
                f"V12 control: additive noise, B = {batch}",
                "planted: Σ = σ²H (no state dependence)",
                nqm.dynamics.expected_loss(additive, LR, batch, 200, at=sim.steps),
            ),
        ]
    family = Family(
        "least-squares",
        ls.at(points["mid"]),
        "real (x, y) examples",
        LR,
        TRAIN_BATCH,
        POINTS,
        points=points,
        problem_at=ls.at,
        one_step=lambda th, eps, batch, n, seed: ls.one_step_improvement(th, eps, batch, n, seed=seed),
    )
    # V2 and V3 draw B real examples per replica and B reaches 64·B_noise: the per-example budget
    checks += v2_optimal_step.checks([run_grid(family, name, example_replicas, seed) for name in points], out_dir)
    checks += v3_optimal_improvement.checks(family, example_replicas, seed, out_dir)
    more_checks, table = _noise_scales_over_training(ls, additive, replicas // 2, seed)
    return checks + more_checks, [table]


def _noise_scales_over_training(ls, additive, replicas, seed, batch=4, steps=200):
    """Simulated ratio-of-means B_noise(t), B_simple(t) of real-example SGD against the exact recursion."""
    at = np.unique(np.round(np.geomspace(1, steps, 8)).astype(int))
    rng = np.random.default_rng(stream(seed, "v12-noise-scales"))
    theta = rng.standard_normal((replicas, ls.d))
    measured, se = [], []
    for t in range(1, steps + 1):
        theta = theta - LR * ls.example_gradients(rng, theta, batch)
        if t in at:
            g = theta * ls.h
            level = np.sum(theta * g, axis=1) + ls.noise_var  # θᵀHθ + σ² per replica
            ghg, gg = (g * g) @ ls.h, np.sum(g * g, axis=1)
            for num, den in ((ghg + level * (ls.h @ ls.h), ghg), (gg + level * ls.h.sum(), gg)):
                value, error = ratio_of_means(num, den)
                measured.append(value)
                se.append(error)
    v = ls.second_moments(LR, batch, steps)[at]
    exact = np.stack(ls.expected_noise_scales(v), axis=1).ravel()
    # the additive model's noise scales along its own exact run (Σ = σ²H)
    v_add = np.stack([nqm.dynamics.coordinate_variance(additive, LR, batch, int(t)) for t in at])
    plain = np.stack(
        [
            ls.noise_var * (ls.h @ ls.h) / (v_add @ ls.h**3),  # tr(H·σ²H)/E[GᵀHG]
            ls.noise_var * ls.h.sum() / (v_add @ ls.h**2),  # tr(σ²H)/E|G|²
        ],
        axis=1,
    ).ravel()
    check = Check(
        "V12 noise scales over training, state-dependent noise",
        "E[tr HΣ(θ_t)]/E[GᵀHG](t) and E[tr Σ(θ_t)]/E|G|²(t) of simulated runs = exact recursion",
        "least squares",
        predicted=exact,
        measured=measured,
        se=se,
        figure="v12_least_squares.png",
        notes={"steps": at.tolist(), "batch": batch, "replicas": replicas},
    )
    control = check.control(
        "V12 control: noise scales of the additive model", "planted: Σ = σ²H along its own run", plain
    )
    whole = np.stack(ls.expected_noise_scales(ls.second_moments(LR, batch, steps)[[0, steps]]), axis=1)
    table = Table(
        title=f"Noise scales over training with state-dependent noise (least squares, B = {batch}, ε = {LR})",
        columns=["step", "B_noise exact", "B_noise simulated", "B_simple exact", "B_simple simulated"],
        rows=[[int(t), exact[2 * i], measured[2 * i], exact[2 * i + 1], measured[2 * i + 1]] for i, t in enumerate(at)],
        note=f"Over {steps} steps B_noise grows {whole[1, 0] / whole[0, 0]:.1f}× and B_simple "
        f"{whole[1, 1] / whole[0, 1]:.1f}× (ratio-of-expectations; simulated from {replicas} runs on real examples).",
    )
    return [check, control], table


def _figure(panels, ls, replicas, seed, out_dir) -> str:
    fig, axes = plots.new_axes(len(panels) + 1)
    x = np.linspace(0, 2.4, 100)
    for ax, (name, b_noise, batch, y, yerr) in zip(axes, panels):
        plots.theory_vs_simulation(
            x,
            2 * x - x**2,
            [(f"B = {b:g}", EPS_FACTORS, y[i], yerr[i]) for i, b in enumerate(batch)],
            ax=ax,
            xlabel="ε / ε_opt(B)",
            ylabel="ΔL / ΔL_opt(B)",
            title=f"least squares, {name} (B_noise = {b_noise:.3g})",
            theory_label="2x − x²",
        )
    sim = ls.simulate(LR, 1, 200, max(replicas // 8, 2), seed=stream(seed, "v12-fig"))
    t = np.arange(1, 201)
    plots.theory_vs_simulation(
        t,
        ls.expected_loss(LR, 1, 200)[1:],
        [("simulated, B = 1", sim.steps[1:], sim.mean[1:], sim.sem[1:])],
        ax=axes[-1],
        xscale="log",
        yscale="log",
        xlabel="step t",
        ylabel="E[L_t]",
        title="trajectory vs exact recursion",
        theory_label="exact recursion",
    )
    return save_figure(fig, out_dir, "v12_least_squares.png")


def run(ctx: Context) -> Outcome:
    """V12 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    size = SIZES.at(ctx.quick)
    checks, tables = compute(size.replicas, size.replicas_examples, ctx.seed, ctx.out_dir)
    return Outcome(checks, tables)
