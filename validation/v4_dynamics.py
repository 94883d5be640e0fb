"""V4 — simulated trajectories against the exact expected dynamics (Zhang et al. 2019, §3).

SGD, preconditioned SGD (P = H^−½), heavy-ball momentum, Nesterov momentum and iterate EMA on Zhang's
spectrum; SGD and Nesterov with a dense misaligned Σ (only Σ's diagonal in H's basis should matter; the
simulator then runs the optimiser's own update with matrix products, the exact engine its transition) and SGD
with per-example Student-t noise. Every recorded step is a comparison. Planted errors: 1/B missing; noise
variance doubled; for the SGD runs, the contraction (1 − εh) in place of (1 − εh)²; for Nesterov, heavy ball's
transition at the same (ε, β). A replica's loss is a sum of squares, skewed to the right, so each cell is
decided on its skewness-corrected z (:func:`validation.stats.skew_corrected`).
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import dynamics, optim, plots

from .claims import Context, Outcome
from .families import Family, too_large
from .one_step import stream
from .sizes import Sizes
from .stats import Check, mean_skewness

ID = "V4"
TITLE = "simulated trajectories against exact dynamics"
SECONDS = (6.0, 210)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(steps=(300, 1500), replicas=(100, 500))

CLAIM = "simulated mean loss = exact E[L_t] at every checkpoint"


def _unsquared_contraction(p, lr, batch, steps, precond=None, init_var=1.0):
    """Planted error: V ← (1 − ελ)V + ε²p²c/B, i.e. (1 − εh) where (1 − εh)² belongs."""
    pre = np.ones(p.d) if precond is None else precond
    a = 1 - lr * pre * p.h
    q = lr**2 * pre**2 * p.c / batch
    t = steps[:, None].astype(float)
    var = a**t * init_var + q * (1 - a**t) / (1 - a)
    return 0.5 * var @ p.h


def runs(families: dict[str, Family]):
    zhang, dense, ex = families["zhang2019"], families["dense-misaligned"], families["student-t-examples"]
    zp = zhang.problem
    return [
        ("SGD", zp, optim.sgd(1.0), 8, None, True),
        ("preconditioned SGD, P = H^-1/2", zp, optim.sgd(1.0, zp.h**-0.5), 8, None, True),
        ("momentum β=0.9", zp, optim.heavy_ball(0.1, 0.9), 8, None, False),
        ("EMA γ=0.9", zp, optim.ema(optim.sgd(1.0), 0.9), 8, None, False),
        ("momentum β=0.5 + EMA γ=0.8", zp, optim.ema(optim.heavy_ball(0.5, 0.5), 0.8), 8, None, False),
        ("SGD, dense misaligned Σ", dense.problem, optim.sgd(1.0), 8, None, True),
        ("SGD, Student-t examples", ex.problem, optim.sgd(0.5), 4, "student_t", True),
        ("Nesterov β=0.9", zp, optim.nesterov(0.1, 0.9), 8, None, False),
        ("Nesterov β=0.9 + EMA γ=0.5", zp, optim.ema(optim.nesterov(0.2, 0.9), 0.5), 8, None, False),
        ("Nesterov β=0.8, dense misaligned Σ", dense.problem, optim.nesterov(0.2, 0.8), 8, None, False),
    ]


def problem_runs(family: Family):
    """The cases of :func:`runs` that need no second problem, on a user's problem, with every step scaled by its
    largest curvature as zhang2019's (h_max = 1) would be."""
    p, step = family.problem, 1.0 / float(family.problem.h.max())
    return [
        ("SGD", p, optim.sgd(step), 8, None, True),
        ("preconditioned SGD, P = H^-1/2", p, optim.sgd(step**0.5, p.h**-0.5), 8, None, True),
        ("momentum β=0.9", p, optim.heavy_ball(0.1 * step, 0.9), 8, None, False),
        ("EMA γ=0.9", p, optim.ema(optim.sgd(step), 0.9), 8, None, False),
        ("Nesterov β=0.9", p, optim.nesterov(0.1 * step, 0.9), 8, None, False),
    ]


def checks(cases, steps: int, replicas: int, seed: int, out_dir, init_var=1.0) -> list[Check]:
    """Each case ``(label, problem, optimiser, B, per_example, sgd_like)`` simulated against its exact E[L_t]."""
    out = []
    fig, axes = plots.new_axes(len(cases), width=3.4)
    for ax, (label, p, opt, batch, per_example, sgd_like) in zip(axes, cases):
        sim = nqm.simulate(
            p,
            opt,
            batch,
            steps,
            replicas,
            seed=stream(seed, "v4", label),
            per_example=per_example,
            init_var=init_var,
            keep_losses=True,
        )

        def exact(p=p, opt=opt, batch=batch, at=sim.steps):
            return dynamics.expected_loss(p, opt, batch, steps, at=at, init_var=init_var)

        predicted = exact()
        check = Check(
            name=f"V4 dynamics: {label}",
            claim=CLAIM,
            family=p.name,
            predicted=predicted,
            measured=sim.mean,
            se=sim.sem,
            mean_skew=mean_skewness(sim.losses),  # the replicas' losses are skewed (a sum of squares)
            figure="v4_dynamics.png",
            notes={"replicas": sim.n, "steps": steps, "optimizer": _describe(opt), "batch_size": batch},
        )
        doubled = nqm.NoisyQuadratic(p.h, 2 * p.c)
        out += [
            check,
            check.control(
                f"V4 control: 1/B missing — {label}",
                "planted: B = 1 in the noise term",
                exact(batch=1),
            ),
            check.control(
                f"V4 control: noise 2× — {label}",
                "planted: c → 2c",
                exact(p=doubled),
            ),
        ]
        if sgd_like:
            out.append(
                check.control(
                    f"V4 control: (1−εh) for (1−εh)² — {label}",
                    "planted: V ← (1 − εh)V + ε²c/B",
                    _unsquared_contraction(p, opt.lr, batch, sim.steps, opt.precond, init_var),
                )
            )
        core, gamma = optim.split_average(opt)
        if isinstance(core, optim.Nesterov):
            planted = optim.ema(optim.heavy_ball(core.lr, core.momentum), gamma)
            out.append(
                check.control(
                    f"V4 control: heavy ball for Nesterov — {label}",
                    "planted: the heavy-ball transition with the same (ε, β)",
                    exact(opt=planted),
                )
            )
        t_fine = np.unique(np.round(np.geomspace(1, steps, 300)).astype(int))
        plots.theory_vs_simulation(
            t_fine,
            exact(at=t_fine),
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


def _describe(opt) -> str:
    """A short name of an optimiser value for the report's notes."""
    if isinstance(opt, optim.Ema):
        return f"{_describe(opt.inner)} + EMA γ={opt.gamma:g}"
    parts = [f"lr={opt.lr:g}"] + ([f"β={opt.momentum:g}"] if hasattr(opt, "momentum") else [])
    parts += ["precond"] if opt.precond is not None else []
    return f"{type(opt).__name__}({', '.join(parts)})"


def run(ctx: Context) -> Outcome:
    """V4 on the suite's families and budget (the claim registry's entry, :mod:`validation.claims`)."""
    size = SIZES.at(ctx.quick)
    return Outcome(checks(runs(ctx.families), size.steps, size.replicas, ctx.seed, ctx.out_dir))


def run_on_problem(ctx: Context) -> Outcome:
    """V4 on the user's problem (``nqm validate --problem FILE``) from its initial variance."""
    cases = problem_runs(ctx.families["problem"])
    size = SIZES.at(ctx.quick)
    return Outcome(checks(cases, size.steps, size.replicas, ctx.seed, ctx.out_dir, init_var=ctx.problem.init_var))


cannot_speak = too_large  # on a user's problem: see validation.families
