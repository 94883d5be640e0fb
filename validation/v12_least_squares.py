"""V12 — the one-step law and the exact dynamics with state-dependent noise (least squares, DESIGN §2).

Examples are real (x, y) pairs, x ~ N(0, H), y = xᵀθ* + ν: the gradient noise Σ(θ) = HθθᵀH + (θᵀHθ + σ²)H
changes with θ. (a) At points early, mid and late along a run, one real SGD step on a (B, ε) grid against
E[ΔL] = ε|G|² − ½ε²(GᵀHG + tr(HΣ(θ))/B). (b) Whole trajectories against the exact closed recursion.
Planted errors: the state-dependent part of Σ dropped (Σ = σ²H, the additive model), and the 1/B missing.
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import plots, spectra, theory

from .one_step import improvement_law, stream
from .stats import Check

POINTS = {"early": 0, "mid": 20, "late": 200}
LR, TRAIN_BATCH = 0.25, 4
EPS_FACTORS = np.array([0.3, 0.7, 1.0, 1.5, 2.2])


def run(replicas: int, seed: int, out_dir, d: int = 16):
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
    return checks


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
    plots.save(fig, out_dir / "v12_least_squares.png")
    return "v12_least_squares.png"
