"""The standard figures of large-batch theory, computed with nqm's engines and drawn by :mod:`nqm.plots`.

Each entry of :data:`FIGURES` is a function ``(d, seed, target, problem, init_var) -> matplotlib Figure`` that
computes its data on ``problem`` (default: Zhang et al.'s with dimension ``d``; ``nqm plot NAME --problem FILE``
passes a problem file's) with θ₀ ~ N(0, init_var),
with :mod:`nqm.theory`, :mod:`nqm.dynamics` and :func:`nqm.simulate` and leaves the drawing to
:mod:`nqm.plots`. ``nqm plot NAME --out FILE`` renders one (``.svg``/``.pdf`` for vector output),
``nqm plot all --out DIR`` all of them (the README gallery), ``nqm plot --list`` names them.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from . import dynamics, optim, plots, spectra, theory
from .finite_data import FiniteDataset
from .montecarlo import one_step_improvement, simulate
from .noise import trace_sigma
from .problem import NoisyQuadratic

__all__ = [
    "FIGURES",
    "NEEDS",
    "NEEDS_NOISE",
    "NOT_ON_A_PROBLEM",
    "NO_TARGET",
    "cannot_draw",
    "missing_extra",
    "render",
    "render_all",
]


def _problem(d: int, problem: NoisyQuadratic | None) -> NoisyQuadratic:
    """The figure's problem: the one given, or Zhang et al.'s with dimension ``d``."""
    return problem if problem is not None else NoisyQuadratic.zhang2019(d)


def _mid_run_point(p: NoisyQuadratic, seed: int, init_var) -> np.ndarray:
    """A θ from partway through a training run (30 SGD steps at ε = 1/h_max, B = 8), where the laws are
    interesting."""
    run = simulate(p, 1.0 / p.h.max(), 8, 30, replicas=2, seed=seed, init_var=init_var, keep_state=True, progress=False)
    return run.state[0]


def _require_noise(p: NoisyQuadratic, name: str) -> None:
    """A figure of the noise's effects has nothing to draw on a noiseless problem (B_noise = 0): say so."""
    if trace_sigma(p) == 0:
        raise ValueError(f"figure {name} {NEEDS_NOISE[name]}; {p.name} is noiseless (tr Σ = 0)")


def _check_target(p: NoisyQuadratic, target: float, init_var, largest: float | None = None) -> None:
    """A target the figure's runs can reach: > 0 and, with the largest target it draws, below E[L(θ₀)]."""
    loss0 = 0.5 * float(np.sum(p.h * init_var))
    top = target if largest is None else largest
    if not (np.isfinite(target) and target > 0 and top < loss0):
        drawn = "" if largest is None else f" (the figure also draws {largest:g})"
        raise ValueError(
            f"target must lie between 0 and the initial loss {loss0:.4g} of {p.name}{drawn}, got {target!r}"
        )


def laws(d: int = 1000, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """ε_opt(B)/ε_max and ΔL_opt(B)/ΔL_max against B/B_noise, with one simulated step at ε_opt per point."""
    p = _problem(d, problem)
    _require_noise(p, "laws")
    theta = _mid_run_point(p, seed, init_var)
    b_noise = float(theory.noise_scale(p, theta))
    x = np.geomspace(max(1 / 64, 1 / b_noise), 64, 200)  # B ≥ 1
    batch = np.maximum(1.0, x * b_noise)
    step_ratio = theory.optimal_step(p, theta, batch) / theory.max_step(p, theta)
    best = theory.max_improvement(p, theta)
    improvement_ratio = theory.optimal_improvement(p, theta, batch) / best
    b_sim = np.maximum(1, np.round(b_noise * 4.0 ** np.arange(-2, 3)))
    eps = theory.optimal_step(p, theta, b_sim)
    sim = one_step_improvement(p, theta, eps[:, None], b_sim[:, None], 4000, seed=seed + 1)
    points = [("one simulated step at ε_opt (±1 SE)", b_sim / b_noise, sim.mean[:, 0] / best, sim.sem[:, 0] / best)]
    fig, (ax,) = plots.new_axes(1, width=5.0)
    plots.batch_size_laws(x, step_ratio, improvement_ratio, points, ax=ax)
    ax.set_title(f"the batch-size laws ({p.name}, B_noise = {b_noise:.0f})", fontsize=9)
    return fig


def parabolas(d: int = 1000, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """The exact one-step improvement E[ΔL](ε) for four batch sizes, vertices marked, simulated steps on them."""
    p = _problem(d, problem)
    theta = _mid_run_point(p, seed, init_var)
    b_noise, eps_max = float(theory.noise_scale(p, theta)), float(theory.max_step(p, theta))
    best = float(theory.max_improvement(p, theta))
    batch = np.maximum(1, np.round(b_noise * np.array([0.25, 1.0, 4.0, 16.0])))
    lr = np.linspace(0, 2.2, 221)[1:] * eps_max
    curves = {f"B = {b:g}": theory.expected_improvement(p, theta, lr, b) / best for b in batch}
    vertices = {
        f"B = {b:g}": (
            float(theory.optimal_step(p, theta, b)) / eps_max,
            float(theory.optimal_improvement(p, theta, b)) / best,
        )
        for b in batch
    }
    eps = np.linspace(0.2, 2.0, 7) * eps_max
    sim = one_step_improvement(p, theta, eps[None, :], batch[:, None], 2000, seed=seed + 2)
    points = [(None, eps / eps_max, m / best, s / best) for m, s in zip(sim.mean, sim.sem)]
    fig, (ax,) = plots.new_axes(1, width=5.0)
    plots.one_step_parabolas(lr / eps_max, curves, points, vertices=vertices, ax=ax, xlabel="ε / ε_max")
    ax.set_ylabel("E[ΔL] / ΔL_max")
    ax.set_ylim(-1.0, 1.1)
    return fig


def pareto(d: int = 10_000, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """The steps/examples frontier of tuned constant-step SGD (and P = H^−½) with the fitted B_crit."""
    p = _problem(d, problem)
    _check_target(p, target, init_var)
    batch = 2.0 ** np.arange(2, 22)
    fig, (ax,) = plots.new_axes(1, width=6.6)
    for i, (label, pre) in enumerate((("SGD", None), ("SGD, P = H^−½", p.h**-0.5))):
        r = dynamics.optimal_steps_to_target(p, target, batch, precond=pre, init_var=init_var)
        s_min, e_min, _ = dynamics.fit_frontier(r.batch_sizes, r.steps)
        plots.pareto_frontier(r.steps, r.examples, s_min, e_min, label=label, ax=ax, index=i)
    ax.set_title(f"steps vs examples to E[L] ≤ {target:g} ({p.name})", fontsize=9)
    return fig


def steps(d: int = 10_000, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """Steps to three targets against batch size (exact optima), regimes marked around B_crit of ``target``."""
    p = _problem(d, problem)
    _check_target(p, target, init_var, largest=10 * target)
    batch = 2.0 ** np.arange(2, 22)
    curves, b_crit = {}, None
    for tgt in (10 * target, target, target / 10):
        r = dynamics.optimal_steps_to_target(p, tgt, batch, init_var=init_var)
        curves[f"target {tgt:g}"] = r.steps
        if tgt == target:
            s_min, e_min, _ = dynamics.fit_frontier(r.batch_sizes, r.steps)
            b_crit = e_min / s_min
    fig, (ax,) = plots.new_axes(1, width=5.0)
    plots.steps_vs_batch(batch, curves, b_crit=b_crit, ax=ax)
    ax.set_title(f"steps vs batch size ({p.name}; B_crit of target {target:g})", fontsize=9)
    return fig


def noise_scale(
    d: int = 2000, seed: int = 0, target: float = 0.05, problem: NoisyQuadratic | None = None, init_var=1.0
):
    """B_noise(t) and B_simple(t) along the expected run of tuned SGD at B = 256 to ``target``."""
    p = _problem(d, problem)
    _require_noise(p, "noise-scale")
    _check_target(p, target, init_var)
    r = dynamics.optimal_steps_to_target(p, target, [256], init_var=init_var)
    n = int(r.steps[0])
    at = np.unique(np.round(np.geomspace(1, n, 120)))
    scales = dynamics.noise_scales_along(p, r.optimizer(0), 256, n, at=at, init_var=init_var)
    fig, (ax,) = plots.new_axes(1, width=5.0)
    plots.noise_scale_over_training(at, scales[:, 0], scales[:, 1], ax=ax)
    ax.set_xscale("log")
    ax.set_title(f"noise scales over a run to E[L] ≤ {target:g} (B = 256, ε = {r.lr[0]:.3g}, {p.name})", fontsize=9)
    return fig


def simulation(d: int = 1000, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """Exact E[L_t] of SGD at three batch sizes with simulated runs (mean ± SE of 200 replicas) on them."""
    p = _problem(d, problem)
    record = np.unique(np.round(np.geomspace(1, 2000, 25))).astype(int)
    fig, (ax,) = plots.new_axes(1, width=5.0)
    groups, curves = [], []
    lr = 1.0 / p.h.max()
    for b in (4, 32, 256):
        curves.append(dynamics.expected_loss(p, lr, b, 2000, at=record, init_var=init_var))
        r = simulate(p, lr, b, 2000, 200, seed=seed + b, at=record, init_var=init_var, progress=False)
        groups.append((f"simulated, B = {b}", r.steps, r.mean, r.sem))
    plots.theory_vs_simulation(
        record,
        np.array(curves),
        groups,
        ax=ax,
        xscale="log",
        yscale="log",
        xlabel="step t",
        ylabel="loss",
        title=f"exact E[L_t] and simulated runs (ε = {lr:.3g}, {p.name})",
        theory_label="exact E[L_t]",
    )
    return fig


def sign_surge(d: int = 100, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """Sign descent's exact optimal step against B: the surge on a rotated problem, none with H diagonal in x."""
    h = 1.0 / np.arange(1, d + 1) if problem is None else problem.h  # a given problem lends its spectrum
    d = h.size
    rotated = NoisyQuadratic.with_parameter_noise(h, spectra.random_rotation(d, seed=seed), "hessian_diagonal")
    diagonal = NoisyQuadratic(h, np.diag(rotated.parameter_sigma).copy())  # the same noise per parameter, H diagonal
    theta = np.random.default_rng(seed).standard_normal(d)
    batch = np.geomspace(1, 1e9, 300)
    curves = {}
    cases = [(rotated, "rotated H", scale) for scale in (1.0, 0.1, 0.01)] + [(diagonal, "H diagonal in x", 0.1)]
    for problem, name, scale in cases:
        th = scale * (theta if problem is diagonal else rotated.basis.T @ theta)  # the same x in both
        limit = float(theory.sign_optimal_step(problem, th, np.inf))
        curves[f"{name}, |θ| × {scale:g}"] = theory.sign_optimal_step(problem, th, batch) / limit
    fig, (ax,) = plots.new_axes(1, width=5.6)
    plots.labelled_curves(batch, curves, ax=ax, xscale="log", xlabel="batch size B", ylabel="ε_opt(B) / ε_∞")
    spectrum = "h = 1/i" if problem is None else f"h of {problem.name}"
    ax.set_title(f"sign descent's optimal step: the surge ({spectrum}, Σ_x = diag(H_x), d = {d})", fontsize=9)
    return fig


def critical_batch(
    d: int = 1000, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0
):
    """Each definition of the critical batch size against the target loss (exact optimal SGD runs): McCandlish's
    E_min/S_min, Zhang et al. 2024's 20% rule, the frontier's two limits, and B_noise at θ₀, at the target and
    averaged over the run."""
    p = _problem(d, problem)
    _require_noise(p, "critical-batch")
    _check_target(p, target, init_var, largest=10 * target)
    targets = target * np.geomspace(10, 0.1, 7)
    rows = [dynamics.critical_batch_sizes(p, t, init_var=init_var) for t in targets]
    limits = [
        dynamics.small_batch_examples(p, t, init_var=init_var).examples
        / dynamics.large_batch_steps(p, t, init_var=init_var)
        for t in targets
    ]
    curves = {
        "E_min/S_min (fitted frontier)": [r.mccandlish for r in rows],
        "E_min/S_min (the two limits)": limits,
        "B_20% (Zhang et al. 2024)": [r.linear_scaling for r in rows],
        "B_noise at the target": [r.b_noise_end for r in rows],
        "B_noise, run average": [r.b_noise_mean for r in rows],
        "B_noise at θ₀": [r.b_noise_start for r in rows],
    }
    fig, (ax,) = plots.new_axes(1, width=6.6)
    plots.critical_batch_vs_target(targets, curves, ax=ax)
    ax.set_title(f"the critical batch size against the target ({p.name})", fontsize=9)
    return fig


def ramps(d: int = 1000, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """Merrill et al.'s local critical batch along a B = 64 greedy run (exact branches, τ = 0.2) beside B_noise,
    and the batch ramps that follow it: doubling at it, and a geometric ramp to the same final batch."""
    p = _problem(d, problem)
    _check_target(p, target, init_var)
    loss0 = 0.5 * float(np.sum(p.h * init_var))
    local = dynamics.local_critical_batch(p, 64, np.geomspace(0.5 * loss0, target, 8), init_var=init_var)
    doubling = dynamics.doubling_batches(local)
    k = local.critical.size
    geometric = 64 * (doubling[-1] / 64) ** (np.arange(k + 1) / k)
    fig, (ax,) = plots.new_axes(1, width=6.6)
    plots.local_critical_batch(
        local.milestones[:-1],
        local.critical,
        local.b_noise,
        local.one_step,
        {"doubling ramp (Merrill)": doubling, "geometric ramp": geometric},
        final_loss=local.milestones[-1],
        ax=ax,
    )
    ax.set_title(f"local critical batch and batch ramps (B₀ = 64, {p.name})", fontsize=9)
    return fig


def weight_decay(
    d: int = 300, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0
):
    """Weight decay with an optimum θ* ~ N(0, I) drawn from ``seed``: the stationary loss against λ (its noise and
    its bias, coupled and decoupled with P = H^-1/2), and the fewest steps with λ tuned over those with λ = 0
    against B, at the target and 4 and 16 times it (exact)."""
    base = _problem(d, problem)
    _check_target(base, target, init_var, largest=16 * target)
    optimum = np.random.default_rng([seed, 21]).standard_normal(base.d)
    p = NoisyQuadratic(base.h, base.c, optimum=optimum, name=f"{base.name}, θ* ~ N(0, I)")
    pre, lr, batch = p.h**-0.5, 0.5 / float(np.max(p.h**0.5)), 8.0
    # up to 90% of the largest λ at which both runs stay stable: εp(h + λ) < 2 and ε(ph + λ) < 2
    top = 0.9 * min(float(np.min(2 / (lr * pre) - p.h)), 2 / lr - float(np.max(pre * p.h)))
    decays = np.geomspace(1e-4 * top, top, 60)
    bare = NoisyQuadratic(p.h, p.c)  # θ* = 0: the noise's floor alone
    curves = {}
    for decoupled in (False, True):
        runs = [optim.sgd(lr, pre, lam, decoupled) for lam in decays]
        total = np.array([dynamics.steady_state_loss(p, opt, batch) for opt in runs])
        noise = np.array([dynamics.steady_state_loss(bare, opt, batch) for opt in runs])
        name = "decoupled" if decoupled else "coupled"
        curves[f"{name}: stationary E[L]"] = total
        curves[f"{name}: its bias ½Σh x∞²"] = total - noise
    batches = 2.0 ** np.arange(0, 13, 2)
    saved = {}
    for goal in target * np.array([16.0, 4.0, 1.0]):
        plain = dynamics.optimal_steps_to_target(p, goal, batches, init_var=init_var)
        tuned = dynamics.optimal_steps_to_target(p, goal, batches, init_var=init_var, weight_decay="tune")
        saved[f"target {goal:.3g}"] = tuned.steps / plain.steps
    fig, axes = plots.new_axes(2, width=4.8)
    plots.labelled_curves(decays, curves, ax=axes[0], xscale="log", yscale="log", xlabel="weight decay λ",
                          ylabel="stationary E[L]", title=f"SGD, P = H^-1/2, ε = {lr:.3g}, B = {batch:g}")  # fmt: skip
    plots.labelled_curves(
        batches, saved, ax=axes[1], xscale="log", xlabel="batch size B", ylabel="fewest steps, λ tuned / λ = 0",
        title="what tuning λ with ε saves (exact)",
    )  # fmt: skip
    fig.suptitle(f"weight decay pulls towards 0, not θ* ({p.name})", fontsize=9)
    return fig


def finite_data(d: int = 100, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """A training set of N = 256 examples: the batch noise against B with and without replacement, and the
    training and population losses per epoch of SGD with independent batches (exact) and shuffled epochs
    (simulated)."""
    p = _problem(d, problem)
    _require_noise(p, "finite-data")
    data = FiniteDataset.draw(p, 256, seed=[seed, 22])
    trace = float(np.trace(data.h[:, None] * data.sigma))
    batches = np.arange(1, data.n + 1)
    noise = {
        "B distinct examples: tr(HΣ_N)(N − B)/(B(N − 1))": [trace * data.batch_factor(b) for b in batches],
        "with replacement: tr(HΣ_N)/B": [trace * data.batch_factor(b, "replacement") for b in batches],
    }
    b = 16
    per_epoch = data.n // b
    epochs = np.arange(0, 17)
    at = epochs * per_epoch
    opt = optim.sgd(0.5 / float(p.h.max()))
    train, test = data.expected_losses(opt, b, int(at[-1]), sampling="batches", init_var=init_var, at=at)
    sim_train, sim_test = data.simulate(opt, b, int(at[-1]), 400, sampling="epochs", seed=seed, init_var=init_var,
                                        at=at)  # fmt: skip
    fig, axes = plots.new_axes(2, width=4.8)
    plots.labelled_curves(batches, noise, ax=axes[0], xscale="log", yscale="log", xlabel="batch size B",
                          ylabel="E[(g_B − g_N)ᵀH(g_B − g_N)]", title=f"batch noise, N = {data.n}")  # fmt: skip
    losses = {
        "training, independent batches (exact)": train.mean,
        "population, independent batches (exact)": test.mean,
        "training, shuffled epochs (simulated)": sim_train.mean,
        "population, shuffled epochs (simulated)": sim_test.mean,
    }
    plots.labelled_curves(epochs, losses, ax=axes[1], yscale="log", xlabel="epoch", ylabel="excess loss",
                          title=f"SGD, B = {b}")  # fmt: skip
    axes[1].axhline(0.5 * data.h @ data.optimum**2, color="0.6", linewidth=0.8)
    fig.suptitle(f"a finite training set ({data.name})", fontsize=9)
    return fig


def real_sweep(d: int = 300, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None, init_var=1.0):
    """Zhang et al. 2024's real sweeps (five language models, arXiv:2410.21676): steps against batch size with the
    fitted hyperbola, the NQM's tuned-SGD curve fitted with its units free (of ``problem``; default h_i = 1/i with
    c ∝ h, dimension ``d``), McCandlish's B_crit and the table's 20% batch marked. ``target`` is not used: the
    NQM's target is fitted; ``seed`` seeds the (unused here) bootstrap."""
    from .real_sweeps import fit_sweep, nqm_curves, power_law_problem, summary, zhang2024

    sweep = zhang2024()
    fits = [fit_sweep(sweep, g, draws=2, seed=seed) for g in sweep.groups()]  # the figure needs point estimates
    curves = nqm_curves(power_law_problem(d) if problem is None else problem, shapes=("sgd",), init_var=init_var)
    return summary.draw_frontier(fits, summary.all_shape_fits(fits, curves))


REAL_NETWORK_BATCHES = (16, 256, 1536)
REAL_NETWORK_STEPS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)  # ε/s_B, as V23


def real_network(d: int = 300, seed: int = 0, target: float = 0.01, problem: NoisyQuadratic | None = None,
                 init_var=1.0):  # fmt: skip
    """The digits MLP (64–32–10, scikit-learn's bundled digits; needs ``nqm[real]``) after 100 real SGD steps from
    ``seed``: H's spectrum as measured (SLQ bulk, top 10 exact) with its true B_noise and B_simple, and one real
    SGD step at three batch sizes (300 minibatches each) against the quadratic law from the measured ``|G|²``, GᵀHG
    and tr(HΣ). A real model: ``d``, ``target``, ``problem`` and ``init_var`` do not apply."""
    from .measure import (
        digits,
        measure,
        normalised_improvements,
        one_step_changes,
        predicted_coefficients,
        sgd_point,
        step_grid,
    )

    if problem is not None:
        raise ValueError(f"real-network {NOT_ON_A_PROBLEM['real-network']}: leave out --problem")
    model = digits.mlp(seed=0)
    theta = sgd_point(model, model.initial, 0.5, 32, 100, seed=[seed, 1])
    m = measure(model, theta, top_k=10, probes=4, lanczos_steps=30, estimator_draws=0, seed=[seed, 2])
    batches = np.array(REAL_NETWORK_BATCHES)
    lrs, _ = step_grid(m, batches, REAL_NETWORK_STEPS)
    changes = one_step_changes(model, theta, lrs, batches, 300, seed=[seed, 3])
    u, y, se = normalised_improvements(lrs, changes, *predicted_coefficients(m, batches))
    fig, (left, right) = plots.new_axes(2)
    title = f"{model.name}: H at θ (B_noise = {m.b_noise:.0f}, B_simple = {m.b_simple:.0f})"
    plots.hessian_spectrum(m.density_nodes, m.density_weights, m.eigenvalues, ax=left, title=title)
    points = [(f"B = {b}", u[j], y[j], se[j]) for j, b in enumerate(batches)]
    plots.normalised_one_step(points, ax=right, title="one real SGD step, ±1 SE")
    return fig


NOT_ON_A_PROBLEM = {"real-network": "measures a real network (the digits MLP), not a quadratic"}
"""Figures that draw no problem, and why: ``nqm plot all --problem FILE`` draws the others."""

NEEDS = {"real-network": ("jax", "sklearn")}
"""Figures that need an optional extra's modules (``nqm[real]``)."""

FIGURES = {
    "laws": laws,
    "parabolas": parabolas,
    "pareto": pareto,
    "steps": steps,
    "noise-scale": noise_scale,
    "simulation": simulation,
    "sign-surge": sign_surge,
    "critical-batch": critical_batch,
    "ramps": ramps,
    "weight-decay": weight_decay,
    "finite-data": finite_data,
    "real-sweep": real_sweep,
    "real-network": real_network,
}
"""The gallery's figures by name (``nqm plot NAME``): each draws one figure and returns it."""


NEEDS_NOISE = {
    "laws": "draws the laws in units of B_noise",
    "noise-scale": "draws the gradient noise scale",
    "critical-batch": "draws batch sizes set by the noise",
    "finite-data": "draws a training set's examples, which differ only by their noise",
}
"""Figures of the noise's effects, which a noiseless problem cannot draw."""
NO_TARGET = ("laws", "parabolas", "simulation", "sign-surge", "real-sweep", "real-network")
"""Figures that draw no run to a target loss: ``target`` does not apply to them."""


def cannot_draw(name: str, problem: NoisyQuadratic | None = None) -> str | None:
    """Why figure ``name`` cannot be drawn here, or on ``problem``: a missing extra, a real model's figure given a
    problem, a noise figure given a noiseless problem; None when it can."""
    if why := missing_extra(name):
        return why
    if problem is not None and name in NOT_ON_A_PROBLEM:
        return NOT_ON_A_PROBLEM[name]
    if problem is not None and name in NEEDS_NOISE and trace_sigma(problem) == 0:
        return f"{NEEDS_NOISE[name]}; {problem.name} is noiseless (tr Σ = 0)"
    return None


def render(name: str, out=None, **options):
    """Compute and draw one figure; write it to ``out`` (format from the extension) if given, else return it."""
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; choose from {', '.join(FIGURES)}")
    options = {k: v for k, v in options.items() if v is not None}
    fig = FIGURES[name](**options)
    if out is None:
        return fig
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    return plots.save(fig, out)


def render_all(out_dir, fmt: str = "png", **options) -> list[str]:
    """Every figure of :data:`FIGURES` into ``out_dir`` as ``NAME.fmt``; with a ``problem``, those that draw one
    (:data:`NOT_ON_A_PROBLEM`) and, on a noiseless one, those that need no noise (:data:`NEEDS_NOISE`); without
    ``nqm[real]`` those that need none. Each figure left out is named in a warning."""
    drawn = []
    for name in FIGURES:
        if why := cannot_draw(name, options.get("problem")):
            warnings.warn(f"figure {name} not drawn: {name} {why}", stacklevel=2)
            continue
        drawn.append(render(name, Path(out_dir) / f"{name}.{fmt}", **options))
    return drawn


def missing_extra(name: str) -> str | None:
    """Why figure ``name`` cannot be drawn here (an optional extra not installed), or None."""
    import importlib.util

    missing = [m for m in NEEDS.get(name, ()) if importlib.util.find_spec(m) is None]
    return f"needs {' and '.join(missing)}: pip install 'nqm[real]'" if missing else None
