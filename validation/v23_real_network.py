r"""V23 — the one-step law on a real network: real minibatch SGD steps against the measured quadratic law.

McCandlish et al. 2018 (arXiv:1812.06162) wrote their law for real networks. Two models on scikit-learn's bundled
digits (N = 1797 examples; :mod:`nqm.measure.digits`): multinomial logistic regression (convex) and a 64–32–10
tanh MLP (non-convex), each at a point θ after 100 real SGD steps (B = 32) from its initial parameters, the
steps' minibatches drawn from the suite's seed. At θ, :func:`nqm.measure.measure` gives |G|², GᵀHG and tr(HΣ)
exactly (all per-example gradients, exact Hessian-vector products; the training set is the population).

One real SGD step with a minibatch of B distinct examples changes the full training loss by
ΔL(ε) = L(θ − εĝ_B) − L(θ); exactly in its first two orders (:mod:`nqm.measure.one_step`),

    E[ΔL](ε) = −ε|G|² + ½ε²(GᵀHG + tr(HΣ)κ_B) + O(ε³),   κ_B = (N − B)/(B(N − 1)).

For B ∈ {4, …, 1536} and ε ∈ s_B·{¼, ½, ¾, 1, 3/2, 2} with s_B = min(ε_opt(B), ½/λ_max) and
ε_opt(B) = |G|²/(GᵀHG + tr(HΣ)κ_B) (so ε·λ_max ≤ 1), each draw's curve is fitted by least squares with the cubic
and quartic terms free (the network is not a quadratic over that range: the cubic alone leaves a bias of many SEs
at large B on the MLP) and the fits are averaged over draws. The range is where a quartic describes the network:
with s_B capped at 1/λ_max instead (ε·λ_max up to 2) the MLP's quadratic coefficient at seed 7 sat 7.8 SE above
the law at B = 1536 and moved by 8 SE when a quintic term was freed; capped at ½/λ_max it is within 2.2 SE of the
law and moves by under 0.1 SE between degrees 4, 5 and 6:

* **the linear coefficient** against −|G|², per B;
* **the quadratic coefficient** against ½(GᵀHG + tr(HΣ)κ_B), per B. Planted errors: B_simple in place of
  B_noise (½GᵀHG(1 + B_simple·κ_B)); the noise term without 1/B (κ_B·B); the finite-set factor left out
  (κ_B = 1/B, which differs where B is close to N). A control is run only where the budget can tell it from the
  law (its planted error ≥ 8 SE in some cell, decided before looking at the means: B_simple close to B_noise, or
  the largest batches measured too coarsely, leave it without power); the report says which were not run.

The standard errors are the spread of the per-draw fits over √draws (each draw's minibatch is independent).
Findings: the measurement (true B_noise, B_simple, the top curvature, the two-batch estimators beside the truth,
what the local NQM keeps), the fitted ε_opt(B) against the law, the largest ε·λ_max of the grid where the
quadratic still describes the mean measured ΔL within 3 SE, and whole runs: real training of the logistic
regression (and, at the full budget, the MLP) to a target loss at six batch sizes (SGD and heavy ball, the step
tuned per batch size over seeds), its frontier (S_min, E_min, B_crit with bootstrap SEs) against the tuned runs
of the local NQM built at θ₀ and again halfway down in loss.
"""

from __future__ import annotations

import numpy as np

from nqm import plots
from nqm.dynamics import fit_frontier, optimal_steps_to_target
from nqm.finite_data import batch_factor

from .claims import Context, Outcome
from .report import Table
from .sizes import Sizes
from .stats import Check

ID = "V23"
TITLE = "the one-step law on a real network (digits: logistic regression, MLP)"
SECONDS = (120, 340)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(draws=(300, 800))  # minibatches per batch size of one real SGD step
NOT_ON_A_PROBLEM = "it measures real networks, not a quadratic"

CLAIM_LINEAR = "E[ΔL] = −ε|G|² + … on a real network (linear coefficient)"
CLAIM_QUADRATIC = "E[ΔL] = … + ½ε²(GᵀHG + tr(HΣ)(N − B)/(B(N − 1))) on a real network (quadratic coefficient)"

BATCH_SIZES = np.array([4, 16, 64, 256, 1024, 1536])
EPS_FACTORS = np.array([0.25, 0.5, 0.75, 1.0, 1.5, 2.0])
DEGREE = 4
POINT = {"logistic": (1.0, 32, 100), "mlp": (0.5, 32, 100)}  # (ε, B, steps) of the SGD run to θ
FIGURE = "v23_real_network.png"
HOLDS_Z = 3.0  # the quadratic "describes" a cell while |mean ΔL − quadratic| ≤ 3 SE (a finding, not a check)
BOOTSTRAP = 200
STEP_CAP = 0.5  # the grid's scale is at most STEP_CAP/λ_max: ε·λ_max ≤ 1, where a quartic describes the MLP
CONTROL_POWER = 8.0  # a control runs where its planted error is this many SEs away (misses 1e-3 at |z| ≤ 5)


def _models():
    from nqm.measure import digits

    return {"logistic": digits.logistic_regression(), "mlp": digits.mlp(seed=0)}


def missing_extra() -> str | None:
    """Why V23 cannot run here (JAX or scikit-learn missing), or None."""
    import importlib.util

    missing = [m for m in ("jax", "sklearn") if importlib.util.find_spec(m) is None]
    return f"needs {' and '.join(missing)}: pip install 'nqm[real]'" if missing else None


def run(ctx: Context) -> Outcome:
    """V23 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    why = missing_extra()
    if why:
        return Outcome(tables=[Table(title="V23 not run", columns=["reason"], rows=[[why]])])
    from nqm.measure import (
        draw_fits,
        mean_of_fits,
        measure,
        normalised_improvements,
        one_step_changes,
        predicted_coefficients,
        sgd_point,
        step_grid,
    )

    quick = ctx.quick
    checks, rows, law_rows, curves, unpowered = [], [], [], {}, []
    for n, (key, model) in enumerate(_models().items()):
        lr, b, steps = POINT[key]
        theta = sgd_point(model, model.initial, lr, b, steps, seed=[ctx.seed, 23, n])
        m = measure(
            model,
            theta,
            top_k=5 if quick else 20,
            probes=4 if quick else 10,
            lanczos_steps=30 if quick else 80,
            seed=[ctx.seed, 23, n, 1],
        )
        kappa = np.array([batch_factor(m.n, bb) for bb in BATCH_SIZES])
        # the grid spans 2·min(ε_opt(B), ½/λ_max): beyond ε·λ_max ≈ 1 a quartic leaves a bias of several SEs
        lrs, eps_opt = step_grid(m, BATCH_SIZES, EPS_FACTORS, STEP_CAP)
        changes = one_step_changes(model, theta, lrs, BATCH_SIZES, SIZES.at(ctx.quick).draws, seed=[ctx.seed, 23, n, 2])
        fits = draw_fits(lrs, changes, DEGREE)
        mean, se = mean_of_fits(fits)
        c1, c2 = predicted_coefficients(m, BATCH_SIZES)
        linear = Check(
            name=f"V23 one real SGD step: linear coefficient [{key}]",
            claim=CLAIM_LINEAR,
            family=model.name,
            predicted=c1,
            measured=mean[:, 0],
            se=se[:, 0],
            notes={"batch_sizes": BATCH_SIZES.tolist(), "draws": SIZES.at(ctx.quick).draws, "fit degree": DEGREE},
        )
        quadratic = Check(
            name=f"V23 one real SGD step: quadratic coefficient [{key}]",
            claim=CLAIM_QUADRATIC,
            family=model.name,
            predicted=c2,
            measured=mean[:, 1],
            se=se[:, 1],
            figure=FIGURE if n == 0 else None,
            notes={"b_noise": m.b_noise, "b_simple": m.b_simple, "eps_factors": EPS_FACTORS.tolist()},
        )
        checks += [linear, quadratic]
        planted = [
            ("B_simple for B_noise", "planted: ½GᵀHG(1 + B_simple·κ_B)", 0.5 * m.gHg * (1 + m.b_simple * kappa)),
            (
                "noise without 1/B",
                "planted: ½(GᵀHG + tr(HΣ)·κ_B·B)",
                0.5 * (m.gHg + m.tr_h_sigma * kappa * BATCH_SIZES),
            ),
            ("finite-set factor left out", "planted: ½(GᵀHG + tr(HΣ)/B)", 0.5 * (m.gHg + m.tr_h_sigma / BATCH_SIZES)),
        ]
        for name, claim, wrong in planted:
            power = float(np.max(np.abs(wrong - c2) / se[:, 1]))
            if power >= CONTROL_POWER:
                checks.append(quadratic.control(f"V23 control: {name} [{key}]", claim, wrong))
            else:
                unpowered.append([key, name, m.b_noise, m.b_simple, power])
        rows.append(_measurement_row(key, m))
        law_rows += _law_rows(key, m, lrs, changes, fits, eps_opt, c1, c2, ctx.seed)
        curves[key] = normalised_improvements(lrs, changes, c1, c2)
    _figure(curves, ctx.out_dir)
    tables = _tables(rows, law_rows) + [_whole_runs(ctx)]
    if unpowered:
        tables.append(
            Table(
                title="V23: controls not run where they have no power",
                columns=["model", "control", "B_noise", "B_simple", "its largest |planted − law|/SE"],
                rows=unpowered,
                note=f"A control is run where its planted error is at least {CONTROL_POWER:g} SE from the law in "
                "some cell (decided from the predictions and SEs, never from the measured means). B_simple's control "
                "has no power where B_simple is close to B_noise; the finite-set factor's where the largest batches' "
                "coefficients are not measured finely enough to see tr(HΣ)/(2(N − 1)).",
            )
        )
    return Outcome(checks=checks, tables=tables)


WHOLE_TARGET = 0.5  # training loss the whole runs reach, from L(θ₀) = ln 10 at W = 0
WHOLE_BATCHES = np.array([4, 16, 64, 256, 1024, 1536])
WHOLE_BETA = 0.9
BOOTSTRAP_WHOLE = 300


def _frontier_with_errors(per_seed, seed):
    """(S_min, E_min, B_crit) and their bootstrap SEs over the seeds of each batch size: the real runs as a sweep
    through :func:`nqm.real_sweeps.fit_sweep`, the path measured sweeps take."""
    from nqm.real_sweeps import Sweep, fit_sweep

    k = per_seed.shape[1]
    n = per_seed.size
    sweep = Sweep(
        group=np.full(n, "real"),
        batch_size=np.repeat(WHOLE_BATCHES, k).astype(np.float64),
        steps=per_seed.ravel(),
        target=np.full(n, WHOLE_TARGET),
        examples_per_step=np.full(n, np.nan),
        parameters=np.full(n, np.nan),
        seed=np.tile(np.arange(k), WHOLE_BATCHES.size),
        lr=np.full(n, np.nan),
    )
    f = fit_sweep(sweep, draws=BOOTSTRAP_WHOLE, seed=seed)
    return (f.s_min, f.e_min, f.b_crit), (f.s_min_se, f.e_min_se, f.b_crit_se)


def _whole_runs(ctx) -> Table:
    """Real training of the digits models to a target loss, tuned per batch size, against the local NQM built
    where the runs start: at θ₀, and again halfway down in loss along a real run (a finding). The quick budget
    trains the logistic regression alone; the full one the MLP too."""
    from nqm.measure import digits

    models = {"logistic": digits.logistic_regression()}
    if not ctx.quick:
        models["mlp"] = digits.mlp(seed=0)
    rows, left_out = [], []
    for n, (key, model) in enumerate(models.items()):
        model_rows, missed = _whole_run_rows(ctx, key, model, stream=10 * n)
        rows += model_rows
        left_out += [key] if missed else []
    grid = _whole_grid(ctx)
    seeds, confirm = _whole_seeds(ctx, 0)
    return Table(
        title="Whole runs on the real network against its local NQM (digits "
        + ("logistic regression" if ctx.quick else "logistic regression and MLP")
        + "), the NQM built where the runs start",
        columns=[
            "model",
            "runs from",
            "L there",
            "B_noise there",
            f"real steps to L = {WHOLE_TARGET:g}, B = {', '.join(map(str, WHOLE_BATCHES))}",
            "local NQM's tuned steps",
            "S_min real",
            "S_min NQM/real",
            "E_min real",
            "E_min NQM/real",
            "B_crit real",
            "B_crit NQM/real",
            "B with the tuned step on the grid's edge",
        ],
        rows=rows,
        note=f"Real: the step tuned per batch size on a grid of {grid.size} for the fewest mean steps over "
        f"{len(seeds)} seeds of real training (fresh batches of B distinct examples each step), then "
        f"{len(confirm)} fresh seeds at the chosen step give the reported steps (the minimum of noisy means is "
        "biased low); the frontier S = S_min + E_min/B fitted on log S of every seed (nqm.real_sweeps.fit_sweep) "
        "with bootstrap SEs over seeds. NQM: the local NQM built where the runs start (θ₀, the model's initial "
        "parameters; and θ_k, the point of a real SGD run at B = 64 with its tuned step that first reaches halfway "
        "from L(θ₀) to the target), asked for the same improvement L(start) − target from its own start, its "
        "steps tuned exactly (optimal_steps_to_target). A finding, not a check: the NQM is second order at its "
        "point and knows nothing of how H and Σ change further along; the rows from θ_k show how much of the gap "
        "building it again closes. Where the local NQM's minimum lies above the target (½Σh·E[θ²] < L − target) it "
        "predicts no run and its ratios are —"
        + (
            f" (left out for {', '.join(left_out)}: the run from θ₀ did not get halfway in 10⁴ steps)."
            if left_out
            else "."
        ),  # fmt: skip
    )


def _whole_grid(ctx) -> np.ndarray:
    """SGD's step sizes of the whole runs' tuning (heavy ball's are these × (1 − β)·4)."""
    return np.geomspace(0.05, 12.8, 8 if ctx.quick else 14)


def _whole_seeds(ctx, stream):
    """The tuning seeds and the confirming seeds of one model's whole runs."""
    seeds = [[ctx.seed, 23, 7 + stream, k] for k in range(2 if ctx.quick else 3)]
    confirm = [[ctx.seed, 23, 9 + stream, k] for k in range(4 if ctx.quick else 8)]
    return seeds, confirm


def _whole_run_rows(ctx, key, model, stream):
    """One model's rows of the whole-run table (SGD and heavy ball from θ₀, SGD from halfway), and whether the
    halfway row was left out. ``stream`` offsets the model's seeds from the other model's."""
    from nqm.measure import measure, sgd_point, steps_to_loss, tuned_steps

    seeds, confirm = _whole_seeds(ctx, stream)
    grid = _whole_grid(ctx)
    bootstraps = iter(np.random.SeedSequence([ctx.seed, 23, 8 + stream]).spawn(3))  # one stream per row

    def local_at(theta):
        m = measure(model, theta, top_k=10 if ctx.quick else 20, probes=4 if ctx.quick else 10, seed=ctx.seed)
        return m, m.local_quadratic()

    def row(name, start, m, local, family, lrs, beta):
        real = tuned_steps(model, start, WHOLE_TARGET, WHOLE_BATCHES, lrs, momentum=beta, seeds=seeds,
                           confirm_seeds=confirm)  # fmt: skip
        (s_min, e_min, b_crit), (se_s, se_e, se_b) = _frontier_with_errors(real.per_seed, next(bootstraps))
        # the NQM is asked for the same improvement from its own start: its L₀ is ½·Σ h·E[θ²], not L(θ)
        depth = 0.5 * float(local.problem.h @ local.init_var)  # how far the local NQM can fall: to its minimum
        if depth > m.loss - WHOLE_TARGET:
            pred = optimal_steps_to_target(local.problem, depth - (m.loss - WHOLE_TARGET), WHOLE_BATCHES,
                                           init_var=local.init_var, family=family).steps  # fmt: skip
            p_s, p_e, _ = fit_frontier(WHOLE_BATCHES, pred)
            predicted = " ".join(f"{s:.0f}" for s in pred)
        else:  # the quadratic bottoms out above the target: it predicts no run at all
            p_s = p_e = float("nan")
            predicted = f"none: its minimum is {depth:.3g} below L, the target {m.loss - WHOLE_TARGET:.3g}"
        edge = WHOLE_BATCHES[np.isin(real.lr, lrs[[0, -1]])].tolist()
        cells = [
            key,
            name,
            f"{m.loss:.3f}",
            f"{m.b_noise:.1f}",
            " ".join(f"{s:.1f}" for s in real.steps),
            predicted,
            f"{s_min:.1f} ± {se_s:.1f}",
            _ratio(p_s / s_min),
            f"{e_min:.0f} ± {se_e:.0f}",
            _ratio(p_e / e_min),
            f"{b_crit:.1f} ± {se_b:.1f}",
            _ratio((p_e / p_s) / b_crit),
            str(edge) if edge else "none",
        ]
        return cells, real

    m0, local0 = local_at(model.initial)
    sgd, sgd_real = row("SGD from θ₀", model.initial, m0, local0, "sgd", grid, 0.0)
    heavy, _ = row(f"heavy ball β = {WHOLE_BETA:g} from θ₀", model.initial, m0, local0, "heavy_ball",
                   grid * (1 - WHOLE_BETA) * 4.0, WHOLE_BETA)  # fmt: skip
    # halfway down in loss along a real SGD run at B = 64 with its tuned step, the local NQM is built again
    lr_64 = float(sgd_real.lr[list(WHOLE_BATCHES).index(64)])
    halfway = 0.5 * (m0.loss + WHOLE_TARGET)
    path = [ctx.seed, 23, 10 + stream]
    k = steps_to_loss(model, model.initial, lr_64, 64, halfway, max_steps=10_000, seed=path)
    if not np.isfinite(k):  # a run that never gets halfway in 10⁴ steps leaves the row out (the note says so)
        return [sgd, heavy], True
    theta_k = sgd_point(model, model.initial, lr_64, 64, int(k), seed=path)
    m_k, local_k = local_at(theta_k)
    name = f"SGD from θ_{int(k)} (B = 64, ε = {lr_64:.3g})"
    return [sgd, heavy, row(name, theta_k, m_k, local_k, "sgd", grid, 0.0)[0]], False


def _ratio(x: float):
    """A table's NQM/real ratio, or — where the NQM predicts no run."""
    return x if np.isfinite(x) else "—"


def _measurement_row(key, m):
    e = m.estimators
    local = m.local_quadratic()
    kept = {k: built / measured for k, (measured, built) in local.kept.items()}
    return [
        key,
        m.dim,
        m.loss,
        m.grad_norm_sq,
        m.gHg,
        m.tr_sigma,
        m.tr_h_sigma,
        m.b_noise,
        m.b_simple,
        float(m.eigenvalues[0]),
        f"{e.b_simple:.4g} ± {e.b_simple_se:.2g} (B = {e.b_small}, {e.b_big})",
        e.expected_tr_sigma / e.expected_grad_norm_sq,
        f"{kept['grad_norm_sq']:.3f} / {kept['gHg']:.3f} / {kept['tr_h_sigma']:.3f}",
        m.seconds,
    ]


def _law_rows(key, m, lrs, changes, fits, eps_opt, c1, c2, seed):
    rng = np.random.default_rng(np.random.SeedSequence([seed, 23, 99]))
    mean_change = changes.mean(axis=0)
    se_change = changes.std(axis=0, ddof=1) / np.sqrt(changes.shape[0])
    rows = []
    for j, b in enumerate(BATCH_SIZES):
        fine = np.linspace(lrs[j, 0], lrs[j, -1], 400)
        powers = fine[:, None] ** np.arange(1, DEGREE + 1)
        best = fine[np.argmin(powers @ fits[:, j].mean(axis=0))]
        boot = [
            fine[np.argmin(powers @ fits[rng.integers(0, fits.shape[0], fits.shape[0]), j].mean(axis=0))]
            for _ in range(BOOTSTRAP)
        ]
        quad = c1[j] * lrs[j] + c2[j] * lrs[j] ** 2
        holds = np.abs(mean_change[j] - quad) <= HOLDS_Z * se_change[j]
        held = lrs[j][: np.argmin(holds)] if not holds.all() else lrs[j]
        rows.append(
            [
                key,
                int(b),
                float(eps_opt[j]),
                f"{best:.4g} ± {np.std(boot, ddof=1):.2g}"
                if best < fine[-1]
                else f"beyond the grid (> {fine[-1]:.3g})",
                best / eps_opt[j] - 1 if best < fine[-1] else float("nan"),
                float(fits[:, j, 2].mean()),
                float(fits[:, j, 3].mean()),
                float(held[-1] * m.eigenvalues[0]) if held.size else 0.0,
                "all" if holds.all() else f"{lrs[j][np.argmin(holds)] * m.eigenvalues[0]:.3g}",
            ]
        )
    return rows


def _tables(rows, law_rows):
    measured = Table(
        title="A real network at θ, measured (digits, N = 1797, at θ after 100 SGD steps)",
        columns=[
            "model",
            "D",
            "L(θ)",
            "|G|²",
            "GᵀHG",
            "tr Σ",
            "tr(HΣ)",
            "B_noise",
            "B_simple",
            "λ_max",
            "two-batch B_simple estimate",
            "its expectation w/o replacement",
            "local NQM kept |G|² / GᵀHG / tr(HΣ)",
            "measure (s)",
        ],
        rows=rows,
        note="Exact: the training set is the population (all per-example gradients, exact HVPs), so B_noise and "
        "B_simple are the definitions, not estimates. The two-batch estimate is the ratio of the mean 𝒮 to the mean "
        "|𝒢|² over 200 pairs of batches drawn without replacement, as in training; its expectation then is "
        "trΣ·N/(N − 1) over |G|² − trΣ/(N − 1). The local NQM (nqm.measure.local_quadratic) drops curvatures at "
        "or below 10⁻⁶λ_max (negative ones of the MLP among them) and samples Σ's bulk: the ratios say what it "
        "keeps of the measured values.",
    )
    law = Table(
        title="The optimal step on the network, and where the quadratic stops",
        columns=[
            "model",
            "B",
            "ε_opt(B) law",
            "ε_opt(B) fitted ± SE",
            "fitted/law − 1",
            "c₃",
            "c₄",
            "largest ε·λ_max where the quadratic holds",
            "first ε·λ_max where it does not",
        ],
        rows=law_rows,
        note="Law: |G|²/(GᵀHG + tr(HΣ)κ_B) = ε_max/(1 + B_noise·κ_B), from the measured quantities. Fitted: the "
        "minimiser of the mean fitted quartic over the grid (bootstrap SE over draws). c₃, c₄: the fitted "
        f"higher-order terms. 'Holds': the mean measured ΔL within {HOLDS_Z:g} SE of −ε|G|² + ½ε²(GᵀHG + "
        "tr(HΣ)κ_B), scanning the grid from the smallest ε.",
        figure=FIGURE,
    )
    return [measured, law]


def _figure(curves, out_dir) -> None:
    fig, axes = plots.new_axes(len(curves))
    for ax, (key, (u, y, se)) in zip(axes, curves.items()):
        points = [(f"B = {b}", u[j], y[j], se[j]) for j, b in enumerate(BATCH_SIZES)]
        plots.normalised_one_step(points, ax=ax, title=f"digits {key}: one real SGD step")
    plots.save(fig, out_dir / FIGURE)
