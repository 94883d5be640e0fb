"""V4 — simulated trajectories against the exact expected dynamics (Zhang et al. 2019, §3).

SGD, preconditioned SGD (P = H^−½), heavy-ball momentum and iterate EMA on Zhang's spectrum; SGD with a
dense misaligned Σ (only Σ's diagonal in H's basis should matter) and with per-example Student-t noise.
Every recorded step is a comparison. Planted errors: 1/B missing; noise variance doubled; and, for the
SGD runs, the contraction (1 − εh) in place of (1 − εh)².
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import dynamics, plots

from .families import Budget, Family
from .one_step import stream
from .stats import Check

CLAIM = "simulated mean loss = exact E[L_t] at every checkpoint"


def _unsquared_contraction(p, lr, batch, steps, precond=None):
    """Planted error: V ← (1 − ελ)V + ε²p²c/B, i.e. (1 − εh) where (1 − εh)² belongs."""
    pre = np.ones(p.d) if precond is None else precond
    a = 1 - lr * pre * p.h
    q = lr**2 * pre**2 * p.c / batch
    t = steps[:, None].astype(float)
    var = a**t + q * (1 - a**t) / (1 - a)
    return 0.5 * var @ p.h


def runs(families: dict[str, Family], budget: Budget):
    zhang, dense, ex = families["zhang2019"], families["dense-misaligned"], families["student-t-examples"]
    zp = zhang.problem
    return [
        ("SGD", zp, dict(lr=1.0, batch_size=8), None, True),
        ("preconditioned SGD, P = H^-1/2", zp, dict(lr=1.0, batch_size=8, precond=zp.h**-0.5), None, True),
        ("momentum β=0.9", zp, dict(lr=0.1, batch_size=8, momentum=0.9), None, False),
        ("EMA γ=0.9", zp, dict(lr=1.0, batch_size=8, ema=0.9), None, False),
        ("momentum β=0.5 + EMA γ=0.8", zp, dict(lr=0.5, batch_size=8, momentum=0.5, ema=0.8), None, False),
        ("SGD, dense misaligned Σ", dense.problem, dict(lr=1.0, batch_size=8), None, True),
        ("SGD, Student-t examples", ex.problem, dict(lr=0.5, batch_size=4), "student_t", True),
    ]


def checks(families: dict[str, Family], budget: Budget, seed: int, out_dir) -> list[Check]:
    out = []
    cases = runs(families, budget)
    fig, axes = plots.new_axes(len(cases), width=3.4)
    for ax, (label, p, kw, per_example, sgd_like) in zip(axes, cases):
        steps = budget.trajectory_steps
        sim = nqm.simulate(
            p,
            steps=steps,
            replicas=budget.trajectory_replicas,
            seed=stream(seed, "v4", label),
            per_example=per_example,
            **kw,
        )
        predicted = dynamics.expected_loss(p, steps=steps, at=sim.steps, **kw)
        check = Check(
            name=f"V4 dynamics: {label}",
            claim=CLAIM,
            family=p.name,
            predicted=predicted,
            measured=sim.mean,
            se=sim.sem,
            figure="v4_dynamics.png",
            notes={"replicas": sim.n, "steps": steps, **{k: (v if np.isscalar(v) else "array") for k, v in kw.items()}},
        )
        doubled = nqm.NoisyQuadratic(p.h, 2 * p.c)
        out += [
            check,
            check.control(
                f"V4 control: 1/B missing — {label}",
                "planted: B = 1 in the noise term",
                dynamics.expected_loss(p, steps=steps, at=sim.steps, **{**kw, "batch_size": 1}),
            ),
            check.control(
                f"V4 control: noise 2× — {label}",
                "planted: c → 2c",
                dynamics.expected_loss(doubled, steps=steps, at=sim.steps, **kw),
            ),
        ]
        if sgd_like:
            out.append(
                check.control(
                    f"V4 control: (1−εh) for (1−εh)² — {label}",
                    "planted: V ← (1 − εh)V + ε²c/B",
                    _unsquared_contraction(p, kw["lr"], kw["batch_size"], sim.steps, kw.get("precond")),
                )
            )
        t_fine = np.unique(np.round(np.geomspace(1, steps, 300)).astype(int))
        plots.theory_vs_simulation(
            t_fine,
            dynamics.expected_loss(p, steps=steps, at=t_fine, **kw),
            [("simulated", sim.steps[1:], sim.mean[1:], sim.sem[1:])],
            ax=ax,
            xscale="log",
            yscale="log",
            xlabel="step t",
            ylabel="E[L_t]",
            title=label,
            theory_label="exact E[L_t]",
        )
    plots.save(fig, out_dir / "v4_dynamics.png")
    return out
