"""V5 — exact identities of the noise scales and the step-size bound (McCandlish et al. 2018, §2.2).

* H ∝ I ⇒ B_simple = B_noise;
* l·I ≤ H ≤ u·I ⇒ B_noise/B_simple ∈ [l/u, u/l], attained by H = diag(1, κ), G ∝ e₁, Σ ∝ e₂e₂ᵀ (ratio κ);
* E[ΔL](2ε_opt(B)) = 0 and any ε > 2ε_opt(B) raises the expected loss.

These are deterministic: compared to float tolerance, no sampling. The draws are random problems.
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import plots, spectra, theory

from .claims import Context, Outcome
from .report import save_figure
from .stats import Check

ID = "V5"
TITLE = "exact identities of the closed forms"
SECONDS = (1.5, 1.6)  # on one core, (quick, full): longest claims start first
NOT_ON_A_PROBLEM = (
    "its identities hold for every problem; it checks them on random problems and on the bound's extreme "
    "case, which a problem file cannot add to"
)


def checks(seed: int, out_dir, draws: int = 200) -> list[Check]:
    rng = np.random.default_rng([seed, 5])
    iso, iso_simple, ratios, kappas, zero_at_2, above, above_x = [], [], [], [], [], [], []
    for _ in range(draws):
        d = int(rng.integers(2, 40))
        h = spectra.log_uniform(d, 10 ** rng.uniform(-3, 0), 1.0)
        c = rng.exponential(size=d) * (rng.random(d) < 0.8)
        c[0] += 1e-3
        theta = rng.standard_normal(d)
        p_iso = nqm.NoisyQuadratic(np.full(d, h[0]), c)
        iso.append(float(theory.noise_scale(p_iso, theta)))
        iso_simple.append(float(theory.simple_noise_scale(p_iso, theta)))
        p = nqm.NoisyQuadratic(h, c)
        ratios.append(float(theory.noise_scale(p, theta) / theory.simple_noise_scale(p, theta)))
        kappas.append(h.max() / h.min())
        b = float(rng.uniform(1, 1e3))
        e2 = 2 * float(theory.optimal_step(p, theta, b))
        scale = float(theory.optimal_improvement(p, theta, b))
        zero_at_2.append(float(theory.expected_improvement(p, theta, e2, b)) / scale)
        above_x.append(2 * rng.uniform(1.001, 1.5))
        above.append(float(theory.expected_improvement(p, theta, above_x[-1] * e2 / 2, b)) / scale)
    ratios, kappas = np.array(ratios), np.array(kappas)
    kappa = 1e3
    extreme = nqm.NoisyQuadratic([1.0, kappa], c=[0.0, 1.0])
    attained = float(theory.noise_scale(extreme, [1.0, 0.0]) / theory.simple_noise_scale(extreme, [1.0, 0.0]))
    figure = _figure(
        np.array(iso),
        np.array(iso_simple),
        kappas,
        ratios,
        (kappa, attained),
        np.array(zero_at_2),
        np.array(above_x),
        np.array(above),
        out_dir,
    )
    log_pos = np.log(ratios) / np.log(kappas)
    return [
        Check(
            "V5 H ∝ I ⇒ B_simple = B_noise",
            "B_simple = B_noise when H ∝ I",
            "random isotropic",
            predicted=iso,
            measured=iso_simple,
            se=0.0,
            exact=True,
            figure=figure,
        ),
        Check(
            "V5 B_noise/B_simple ≤ κ",
            "log(B_noise/B_simple)/log κ ≤ 1",
            "random spectra",
            predicted=np.ones(draws),
            measured=np.abs(log_pos),
            se=0.0,
            exact=True,
            one_sided=True,
            figure=figure,
            notes={"max |log ratio / log κ|": float(np.abs(log_pos).max())},
        ),
        Check(
            "V5 bound attained",
            "H = diag(1, κ), G ∝ e₁, Σ ∝ e₂e₂ᵀ ⇒ B_noise/B_simple = κ",
            "extreme case",
            predicted=kappa,
            measured=attained,
            se=0.0,
            exact=True,
            figure=figure,
        ),
        Check(
            "V5 E[ΔL](2ε_opt) = 0",
            "E[ΔL](2ε_opt(B)) = 0 (relative to ΔL_opt(B))",
            "random spectra",
            predicted=np.zeros(draws),
            measured=np.abs(zero_at_2),
            se=0.0,
            exact=True,
            one_sided=True,
            atol=1e-12,
            figure=figure,
            notes={"tolerance": "1e-12 of ΔL_opt(B)", "max": float(np.abs(zero_at_2).max())},
        ),
        Check(
            "V5 ε > 2ε_opt raises the loss",
            "E[ΔL](ε) < 0 for ε > 2ε_opt(B)",
            "random spectra",
            predicted=np.zeros(draws),
            measured=np.array(above),
            se=0.0,
            exact=True,
            one_sided=True,
        ),
    ]


def _figure(iso, iso_simple, kappas, ratios, extreme, at_2, above_x, above, out_dir) -> str:
    fig, (a, b, c) = plots.new_axes(3)
    line = np.geomspace(iso.min(), iso.max(), 50)
    plots.theory_vs_simulation(
        line,
        line,
        [("random H ∝ I", iso, iso_simple, None)],
        ax=a,
        xscale="log",
        yscale="log",
        xlabel="B_noise",
        ylabel="B_simple",
        title="H ∝ I",
        theory_label="B_simple = B_noise",
    )
    k = np.geomspace(1, max(kappas.max(), extreme[0]) * 1.5, 100)
    plots.theory_vs_simulation(
        k,
        np.stack([k, 1 / k]),
        [("random problems", kappas, ratios, None), ("extreme case", [extreme[0]], [extreme[1]], None)],
        ax=b,
        xscale="log",
        yscale="log",
        xlabel="κ = h_max/h_min",
        ylabel="B_noise / B_simple",
        title="bounds",
        theory_label="κ^±1",
    )
    x = np.linspace(0, 3.1, 200)
    plots.theory_vs_simulation(
        x,
        2 * x - x**2,
        [("ε = 2ε_opt", np.full(at_2.size, 2.0), at_2, None), ("ε > 2ε_opt", above_x, above, None)],
        ax=c,
        xlabel="ε / ε_opt(B)",
        ylabel="E[ΔL] / ΔL_opt(B)",
        title="steps past 2ε_opt",
        theory_label="2x − x²",
    )
    return save_figure(fig, out_dir, "v5_identities.png")


def run(ctx: Context) -> Outcome:
    """V5 on the suite's families and budget (the claim registry's entry, :mod:`validation.claims`)."""
    return Outcome(checks(ctx.seed, ctx.out_dir))
