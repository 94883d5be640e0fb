r"""V15 — sign descent: its exact one-step law, and the surge of its optimal step (Li et al. 2024).

Sign descent ``θ ← θ − ε sign(g_B)`` takes its signs in the parameter coordinates x = Qθ. With Gaussian minibatch
noise its expected improvement is exact (:func:`nqm.theory.sign_improvement`, derived in its docstring):

    E[ΔL](ε, B) = ε G_xᵀE[s] − ½ε² Σ_ij (H_x)_ij E[s_i s_j],   E[s_i] = erf(G_i √B / (√2 σ_i)),

with E[s_i s_j] from the bivariate normal where the noise is correlated. Two rotated problems (h = 1/i with
Σ_x = diag(H_x), independent noise in x as Li et al. assume; a log-uniform spectrum with Σ = H, so that
Σ_x = H_x is correlated in x as the curvature couples the parameters), at points early, mid and late along an SGD
run:

* **the law**: one simulated sign step per replica on a (B, ε) grid around the peak of ε_opt(B). Planted errors:
  √B missing from erf's argument; the noise taken as independent across parameters (correlated problem only).
  At large B the signs against the gradient become rare events: a batch size is checked only where the flips the
  sample cannot see carry at most ½ SE of E[ΔL] (:func:`hidden_flips`; decided from the predictions and the SEs);
* **ε_opt(B)** from weighted quadratic fits of the simulated ΔL(ε) (as V2 does for SGD);
* **a zero gradient in one parameter** at large B: its sign stays a fair coin, so (H_x)_kk stays in the
  denominator of the large-B limit. Planted error: the signs of eq. 17 of Li et al. (s_k = sign(0) = 0).

Findings (exact): where ε_opt(B) peaks and how far above its large-B limit, how the peak moves during training,
the small-B √B regime, no surge when H is diagonal in x, and Li et al.'s small-B approximation against the exact
curve. That approximation is derived here from the expansion E[s_i] ≈ √(2/π)a_i, E[s_i s_j] ≈ (2/π)a_i a_j for
small a = G√B/σ (nqm's reading of Li et al.'s eqs., which were read through secondary material):

    ε_opt ≈ ε_max / (½(√(B_n/B) + √(B/B_n))),   B_n = π Σ_i (H_x)_ii / (2S),   S = Σ_{i≠j} (H_x)_ij G_iG_j/(σ_iσ_j),

with ε_max = Σ_i (G_i²/σ_i) / (2√(S Σ_i (H_x)_ii)) (σ_i the per-example standard deviation).
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, special

import nqm
from nqm import optim, plots, spectra, theory

from .claims import Context, Outcome
from .report import Table, save_figure
from .sizes import Sizes
from .stats import Check, parabola_vertex

ID = "V15"
TITLE = "sign descent: the exact one-step law and the surge"
SECONDS = (19, 78)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(d=(32, 64), replicas=(20_000, 40_000))
NOT_ON_A_PROBLEM = "sign descent's law is held on two problems built with noise in the parameter coordinates"

CLAIM = "E[ΔL] = εG_xᵀE[s] − ½ε²Σ(H_x)_ij E[s_i s_j] (sign descent, exact)"
CLAIM_STEP = "ε_opt(B) = G_xᵀE[s] / Σ(H_x)_ij E[s_i s_j]"
CLAIM_ZERO = "a zero gradient coordinate keeps (H_x)_kk in the large-B law"

EPS_FACTORS = np.array([0.5, 1.0, 2.0])
BATCH_FACTORS = 4.0 ** np.arange(-3, 4)  # around the peak of ε_opt(B)
LARGE_BATCH_FACTORS = np.array([64.0, 1024.0, 16384.0])  # past the peak, for the zero-gradient point
POINT_STEPS = {"early": 2, "mid": 30, "late": 300}
CURVE_B = np.geomspace(1.0, 1e10, 301)


def problems(d: int, seed: int) -> dict:
    """The two rotated problems: independent noise in x (Σ_x = diag(H_x)) and correlated noise in x."""
    h = 1.0 / np.arange(1, d + 1)
    independent = nqm.NoisyQuadratic.with_parameter_noise(
        h, spectra.random_rotation(d, seed=seed + 15), "hessian_diagonal", name=f"h = 1/i, Σ_x = diag(H_x) (d={d})"
    )
    hc = spectra.log_uniform(d, 0.05, 1.0)
    correlated = nqm.NoisyQuadratic(  # Σ = H rotated: Σ_x = H_x, noise correlated as the curvature couples
        hc, hc, basis=spectra.random_rotation(d, seed=seed + 17), name=f"log-uniform h, Σ_x = H_x (d={d})"
    )
    return {"independent": independent, "correlated": correlated}


def training_points(p, seed: int) -> dict:
    """θ (H's basis) after 2, 30 and 300 SGD steps (ε = 1, B = 8) of one run."""
    return {  # the same seed: each run is a prefix of the longest
        name: nqm.simulate(p, 1.0, 8, steps, 2, seed=seed, at=[0, steps], keep_state=True).state[0]
        for name, steps in POINT_STEPS.items()
    }


def peak(p, theta):
    """(B at the peak of ε_opt(B), ε at the peak) over B ≥ 1; (nan, nan) when ε_opt only rises."""
    curve = theory.sign_optimal_step(p, theta, CURVE_B)
    k = int(np.argmax(curve))
    if k == CURVE_B.size - 1 or curve[k] <= curve[-1] * (1 + 1e-9):
        return float("nan"), float("nan")
    lo, hi = np.log(CURVE_B[max(k - 1, 0)]), np.log(CURVE_B[min(k + 1, CURVE_B.size - 1)])
    best = optimize.minimize_scalar(
        lambda u: -float(theory.sign_optimal_step(p, theta, np.exp(u))), bounds=(lo, hi), method="bounded"
    )
    return float(np.exp(best.x)), float(-best.fun)


def small_batch_approximation(p, theta, b):
    """Li et al.'s form from the small-a expansion (module docstring): (ε(B), B_n, ε_max); nan where S ≤ 0."""
    gx = theory.parameter_gradient(p, theta)
    hx, sd = p.parameter_hessian, np.sqrt(np.diag(p.parameter_sigma))
    u = gx / sd
    s = u @ hx @ u - np.sum(np.diag(hx) * u * u)
    trace = np.trace(hx)
    if s <= 0:
        return np.full(np.shape(b), np.nan), float("nan"), float("nan")
    b_n = np.pi * trace / (2 * s)
    e_max = np.sum(gx * gx / sd) / (2 * np.sqrt(s * trace))
    return e_max / (0.5 * (np.sqrt(b_n / b) + np.sqrt(b / b_n))), float(b_n), float(e_max)


def eq17_limit(p, gx):
    """Li et al.'s eq. 17 as nqm reads it, from the parameter-coordinate gradient G_x (its zeros exact):
    Σ|G_i| / (sign(G)ᵀ H_x sign(G)) with sign(0) = 0."""
    s = np.sign(gx)
    return float(np.abs(gx).sum() / (s @ p.parameter_hessian @ s))


MIN_FLIPS = 30.0


def grid_centre(b_peak: float) -> float:
    """The batch size the grids are laid around: the peak of ε_opt(B), or B = 1 where ε_opt(B) only rises (no
    peak, so 'around the peak' and 'past the peak' both start from the smallest batch)."""
    return b_peak if np.isfinite(b_peak) else 1.0


def zero_gradient_batches(p, theta0) -> np.ndarray:
    """The zero-gradient check's batch sizes: LARGE_BATCH_FACTORS past the peak of ε_opt(B) at θ₀ (or past B = 1)."""
    return np.round(max(grid_centre(peak(p, theta0)[0]), 1.0) * LARGE_BATCH_FACTORS)


def _measurable(p, theta, batches, replicas):
    """The batch sizes at which ``replicas`` steps are expected to see at least MIN_FLIPS signs against their
    gradient. Past them the signs are all but certain: a sample then misses the rare flips that the exact law
    counts (a bias of order p·ΔL) and its standard error, blind to them, shrinks to rounding."""
    gx = theory.parameter_gradient(p, theta)
    sd = np.sqrt(np.diag(p.parameter_sigma))
    a = np.abs(gx)[None, :] * np.sqrt(np.asarray(batches, dtype=np.float64))[:, None] / sd
    flips = replicas * special.ndtr(-a).sum(axis=1)
    return np.asarray(batches)[flips >= MIN_FLIPS]


HIDDEN_SE = 0.5  # a batch size is checked where the flips a sample cannot see carry at most ½ SE of E[ΔL]


def hidden_flips(p, theta, eps, batches, replicas) -> np.ndarray:
    r"""Per cell (nB, nε), the part of E[ΔL] carried by flips too rare for ``replicas`` steps to see.

    A flip of coordinate k (probability p_k = Φ(−|G_k|√B/σ_k)) against s = sign(G) changes the improvement by
    Δ_k = 2ε|G_k| − 2ε²(s_k(H_x s)_k − (H_x)_kk). Where R·p_k < MIN_FLIPS a sample of R steps holds a handful of
    them or none, so its mean misses about p_k·Δ_k and its standard error, blind to them, does not say so (seed 19
    found a cell at z = 28.5 with Σ|p_kΔ_k| = 29 SE). The sum over the rare coordinates bounds that bias."""
    gx = theory.parameter_gradient(p, theta)
    sd = np.sqrt(np.diag(p.parameter_sigma))
    hx = p.parameter_hessian
    s = np.sign(gx)
    b = np.asarray(batches, dtype=np.float64)[:, None, None]
    flip = special.ndtr(-np.abs(gx) * np.sqrt(b) / sd)  # (nB, 1, d)
    e = np.asarray(eps, dtype=np.float64)[..., None]  # (nB, nε, 1)
    delta = 2 * e * np.abs(gx) - 2 * e**2 * (s * (hx @ s) - np.diag(hx))
    rare = replicas * flip < MIN_FLIPS
    return np.sum(np.abs(flip * delta) * rare, axis=-1)


def _one_step(p, theta, eps, b, replicas, seed):
    """Mean and SE of L(θ) − L(θ − ε sign(g_B)) over ``replicas`` simulated steps."""
    run = nqm.simulate(p, optim.sign_sgd(eps), b, 1, replicas, theta0=theta, at=[0, 1], seed=seed)
    return run.mean[0] - run.mean[1], run.sem[1]


def _grid(p, theta, batches, replicas, seed):
    """ΔL on the (B, ε) grid (ε = factors × ε_opt(B)): (eps (nB, 3), mean, se), every cell its own stream."""
    eps = EPS_FACTORS[None, :] * theory.sign_optimal_step(p, theta, batches)[:, None]
    mean, se = np.empty_like(eps), np.empty_like(eps)
    for i, j in np.ndindex(eps.shape):
        mean[i, j], se[i, j] = _one_step(p, theta, eps[i, j], batches[i], replicas, [*seed, i, j])
    return eps, mean, se


def zero_gradient_point(p, theta):
    """(θ, k, G_x): the x-gradient of the parameter k of largest curvature set to zero. G_x keeps the exact zero;
    θ = Qᵀ G_x / h gives it back up to rounding (which nqm.theory reads as zero)."""
    gx = theory.parameter_gradient(p, theta)
    k = int(np.argmax(np.diag(p.parameter_hessian)))
    gx[k] = 0.0
    return p.basis.T @ gx / p.h, k, gx


def run(ctx: Context) -> Outcome:
    """V15 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    size = SIZES.at(ctx.quick)
    d, replicas = size.d, size.replicas
    probs = problems(d, ctx.seed)
    checks, curves, rows, edge_rows = [], {}, [], []
    for key, p in probs.items():
        points = training_points(p, ctx.seed + 15)
        measured, se, exact, no_root_b, independent = [], [], [], [], []
        v_meas, v_se, v_exact, v_no_root_b, v_independent = [], [], [], [], []
        rho_free = nqm.NoisyQuadratic.with_parameter_noise(p.h, p.basis, np.diag(np.diag(p.parameter_sigma)))
        curves[key] = []
        for n, (name, theta) in enumerate(points.items()):
            b_peak, e_peak = peak(p, theta)
            centre = grid_centre(b_peak)
            batches = _measurable(p, theta, np.unique(np.maximum(1.0, np.round(centre * BATCH_FACTORS))), replicas)
            eps, mean, sem = _grid(p, theta, batches, replicas, [ctx.seed, 15, n, len(key)])
            # decided from the predictions and the SEs, never from the means: rows whose rare flips the sample
            # cannot see are left out of the checks
            seen = np.all(hidden_flips(p, theta, eps, batches, replicas) <= HIDDEN_SE * sem, axis=1)
            eps, mean, sem, batches = eps[seen], mean[seen], sem[seen], batches[seen]
            measured.append(mean.ravel())
            se.append(sem.ravel())
            exact.append(theory.sign_improvement(p, theta, eps, batches[:, None]).ravel())
            no_root_b.append(theory.sign_improvement(p, theta, eps, 1.0).ravel())
            independent.append(theory.sign_improvement(rho_free, theta, eps, batches[:, None]).ravel())
            fits = [parabola_vertex(eps[i], mean[i], sem[i]) for i in range(batches.size)]
            v_meas.append([f[0] for f in fits])
            v_se.append([f[1] for f in fits])
            v_exact.append(theory.sign_optimal_step(p, theta, batches))
            v_no_root_b.append(np.broadcast_to(theory.sign_optimal_step(p, theta, 1.0), batches.shape))
            v_independent.append(theory.sign_optimal_step(rho_free, theta, batches))
            limit = float(theory.sign_optimal_step(p, theta, np.inf))
            curves[key].append((name, theta, limit, batches, np.array(v_meas[-1]), np.array(v_se[-1])))
            rows.append(_surge_row(p, key, name, theta, b_peak, e_peak, limit))
        cat = np.concatenate
        law = Check(
            name=f"V15 sign descent's one-step law [{key}]",
            claim=CLAIM,
            family=p.name,
            predicted=cat(exact),
            measured=cat(measured),
            se=cat(se),
            notes={"points": list(points), "replicas": replicas, "eps_factors": EPS_FACTORS.tolist()},
        )
        step = Check(
            name=f"V15 sign descent's ε_opt(B) [{key}]",
            claim=CLAIM_STEP,
            family=p.name,
            predicted=cat(v_exact),
            measured=cat(v_meas),
            se=cat(v_se),
            figure=None,
            notes={"fit": "weighted quadratic ΔL = b₁ε + b₂ε² per B, ε = (0.5, 1, 2)·ε_opt(B)"},
        )
        checks += [
            law,
            law.control(f"V15 control: √B missing [{key}]", "planted: E[s_i] = erf(G_i/(√2σ_i))", cat(no_root_b)),
            step,
            step.control(f"V15 control: √B missing in ε_opt [{key}]", "planted: ε_opt(1) at every B", cat(v_no_root_b)),
        ]
        if key == "correlated":
            checks += [
                law.control(f"V15 control: noise independent [{key}]", "planted: ρ_ij = 0", cat(independent)),
                step.control(f"V15 control: ε_opt, noise independent [{key}]", "planted: ρ_ij = 0", cat(v_independent)),
            ]
        else:
            zero_checks, edge_rows = _zero_gradient(p, points["mid"], replicas, ctx.seed)
            checks += zero_checks
    figure = _figure(probs, curves, ctx.out_dir)
    checks[2].figure = figure
    return Outcome(checks=checks, tables=_tables(rows, edge_rows, figure, d))


def _zero_gradient(p, theta, replicas, seed):
    theta0, k, gx = zero_gradient_point(p, theta)
    limit = float(theory.sign_optimal_step(p, theta0, np.inf))
    b_peak = peak(p, theta0)[0]
    batches = zero_gradient_batches(p, theta0)
    eps, mean, sem = _grid(p, theta0, batches, replicas, [seed, 15, 99])
    exact = theory.sign_improvement(p, theta0, eps, batches[:, None])
    s = np.sign(gx)  # s_k = sign(0) = 0: exactly what eq. 17 assumes, where s_k is really a fair coin
    eq17 = eps * np.abs(gx).sum() - 0.5 * eps**2 * (s @ p.parameter_hessian @ s)
    law = Check(
        name="V15 large-B law with a zero gradient coordinate [independent]",
        claim=CLAIM_ZERO,
        family=p.name,
        predicted=exact.ravel(),
        measured=mean.ravel(),
        se=sem.ravel(),
        notes={"zeroed parameter": k, "batch_sizes": batches.tolist(), "replicas": replicas},
    )
    control = law.control(
        "V15 control: eq. 17's signs (s_k = 0) [independent]", "planted: E[ss ᵀ] = sign(G)sign(G)ᵀ", eq17.ravel()
    )
    li = eq17_limit(p, gx)
    where = "" if np.isfinite(b_peak) else " (no peak: B from 64·1)"
    row = [
        f"mid point with (G_x)_{k} = 0{where}",
        limit,
        li,
        f"{(li - limit) / limit:+.1%}",
        float(theory.sign_optimal_step(p, theta0, batches[-1])) / limit,
    ]
    return [law, control], [row]


def _surge_row(p, key, name, theta, b_peak, e_peak, limit):
    slope = np.log(theory.sign_optimal_step(p, theta, 2.0) / theory.sign_optimal_step(p, theta, 1.0)) / np.log(2.0)
    approx, b_n, e_max = small_batch_approximation(p, theta, CURVE_B)
    exact = theory.sign_optimal_step(p, theta, CURVE_B)
    below = CURVE_B <= (b_peak if np.isfinite(b_peak) else CURVE_B[-1])
    err_below = float(np.nanmax(np.abs(approx[below] / exact[below] - 1))) if np.isfinite(b_n) else float("nan")
    err_beyond = float("nan")
    if np.isfinite(b_peak) and np.isfinite(b_n):
        far = 16.0 * b_peak
        err_beyond = float(small_batch_approximation(p, theta, far)[0] / theory.sign_optimal_step(p, theta, far) - 1)
    diag_peak = peak(nqm.NoisyQuadratic(p.h, p.c), theta)[0]  # the same h and c with no rotation: H diagonal in x
    return [
        key,
        name,
        float(theory.noise_scale(p, theta)),
        b_peak,
        e_peak / limit if np.isfinite(e_peak) else float("nan"),
        float(slope),
        b_n,
        e_max / e_peak if np.isfinite(e_peak) else float("nan"),
        err_below,
        err_beyond,
        "none" if not np.isfinite(diag_peak) else diag_peak,
    ]


def _tables(rows, edge_rows, figure, d):
    surge = Table(
        title=f"The surge of sign descent's optimal step (exact, d = {d})",
        columns=[
            "problem",
            "point",
            "B_noise (SGD's)",
            "B at the peak",
            "ε_peak/ε_∞",
            "slope at B = 1",
            "approx. B_n",
            "approx. ε_max/ε_peak",
            "approx. max rel. error, B ≤ peak",
            "approx. rel. error at 16·peak",
            "peak with H diagonal in x",
        ],
        rows=rows,
        note="ε_opt(B) = G_xᵀE[s]/Σ(H_x)_ij E[s_i s_j], exact; ε_∞ its B → ∞ limit; 'nan' where ε_opt(B) only "
        "rises. The slope d ln ε/d ln B tends to ½ where the signs are mostly noise. Scaling θ by s moves the "
        "whole curve to B/s² (a = G√B/σ), so the peak moves to larger B as G shrinks relative to the noise; along "
        "a run the direction of G changes too, and the peak need not move monotonically. 'approx.' is the small-B "
        "expansion in the module's docstring (Li et al.'s form, which assumes independent noise): it falls to 0 "
        "at large B instead of ε_∞. The last column runs the same θ with the same h and c and no rotation (H "
        "diagonal in x): ε_opt(B) then only rises — no surge.",
        figure=figure,
    )
    edge = Table(
        title="The large-B limit with a zero gradient coordinate",
        columns=["point", "exact ε_∞", "eq. 17: Σ|G_i|/(sign(G)ᵀH_x sign(G))", "eq. 17 error", "ε_opt(B_max)/ε_∞"],
        rows=edge_rows,
        note="Where G_k = 0 the sign s_k stays a fair coin at every B, so E[s_k²] = 1 keeps (H_x)_kk in the "
        "denominator; eq. 17 (sign(0) = 0) drops it and overstates the limit.",
    )
    return [surge, edge]


def _figure(probs, curves, out_dir) -> str:
    fig, axes = plots.new_axes(len(curves), width=5.0)
    for ax, (key, entries) in zip(axes, curves.items()):
        p = probs[key]
        theory_y = np.stack([theory.sign_optimal_step(p, th, CURVE_B) / lim for _, th, lim, *_ in entries])
        points = [(f"{name} (fit)", b, e / lim, s / lim) for name, _, lim, b, e, s in entries]
        plots.theory_vs_simulation(
            CURVE_B,
            theory_y,
            points,
            ax=ax,
            xscale="log",
            xlabel="batch size B",
            ylabel="ε_opt(B) / ε_∞",
            title=f"sign descent's optimal step: {key} noise",
            theory_label="exact",
        )
        if key == "independent":
            for i, (_, th, lim, *_rest) in enumerate(entries):
                approx = small_batch_approximation(p, th, CURVE_B)[0] / lim
                ax.plot(CURVE_B, approx, ls="--", lw=0.9, color="0.55", label="small-B approx." if i == 0 else None)
            ax.legend(fontsize=7)
        ax.set_ylim(0, None)
    return save_figure(fig, out_dir, "v15_sign_descent.png")
