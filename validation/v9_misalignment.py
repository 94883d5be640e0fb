"""V9 — how far B_simple misleads about B_noise when Σ's eigenbasis is rotated away from H's (§2.2).

On a log-uniform spectrum (κ = 100) with c ∝ √h, Σ is rotated from H's eigenbasis by a geodesic towards a
Haar-random rotation (strength 0 … 1). Along the expected SGD run (ε = 1, B = 8, θ₀ ~ N(0, I)) the ratio of
B_noise = tr(HΣ)/E[GᵀHG] to B_simple = tr Σ/E|G|² is computed exactly; the extreme case
H = diag(1, κ), G ∝ e₁, Σ ∝ e₂e₂ᵀ attains κ. Reported, not judged (V5 checks the bounds exactly).
"""

from __future__ import annotations

import numpy as np

import nqm
from nqm import dynamics, plots, spectra, theory

from .claims import Context, Outcome
from .report import Table, save_figure
from .sizes import Sizes

ID = "V9"
TITLE = "B_simple against B_noise under misalignment"
SECONDS = (1.0, 1.2)  # on one core, (quick, full): longest claims start first
SIZES = Sizes(d=(32, 64))
NOT_ON_A_PROBLEM = "it sweeps Σ's rotation away from H's basis on a problem of its own; a problem file fixes Σ"

STRENGTHS = (0.0, 0.1, 0.3, 1.0)
STEPS = (1, 10, 100, 1000)


def compute(d: int, seed: int, out_dir):
    h = spectra.log_uniform(d, 0.01, 1.0)
    c = spectra.noise_power(h, 1.0, 0.5)
    rows, curves = [], []
    for strength in STRENGTHS:
        sigma = spectra.misaligned_sigma(c, strength, seed=seed + 7)
        p = nqm.NoisyQuadratic(h, sigma=sigma)
        # Ratio-of-expectations noise scales along the expected run: E|G_t|² = Σ h²E[θ_i²],
        # E[G_tᵀHG_t] = Σ h³E[θ_i²], with E[θ_i²] exact (only Σ's diagonal in H's basis enters).
        ratios = []
        for steps in STEPS:
            v = dynamics.coordinate_variance(p, 1.0, 8, steps)
            ratios.append(float((p.trace_h_sigma / (h**3 @ v)) / (p.trace_sigma / (h**2 @ v))))
        rows.append([f"{strength:g}", f"{p.trace_h_sigma / p.trace_sigma:.4g}", *ratios])
        curves.append((f"strength {strength:g}", np.array(STEPS), np.array(ratios), None))
    kappa = h.max() / h.min()
    # The extreme case of the bound (McCandlish et al. §2.2): H = diag(1, κ), G ∝ e₁, Σ ∝ e₂e₂ᵀ.
    extreme = nqm.NoisyQuadratic([1.0, kappa], c=[0.0, 1.0])
    attained = float(theory.noise_scale(extreme, [1.0, 0.0]) / theory.simple_noise_scale(extreme, [1.0, 0.0]))
    rows.append([f"extreme case H = diag(1, {kappa:.0f}), G ∝ e₁, Σ ∝ e₂e₂ᵀ", "—", attained, "", "", ""])
    figure = _figure(curves, kappa, out_dir)
    table = Table(
        title=f"B_noise/B_simple along the expected SGD run (d = {d}, κ = {kappa:.0f}, ε = 1, B = 8)",
        columns=["rotation strength", "tr(HΣ)/tr Σ", *[f"t = {s}" for s in STEPS]],
        rows=rows,
        note=f"B_simple = B_noise would read 1; the bounds are 1/κ = {1 / kappa:.3g} and κ = {kappa:.0f}, and the "
        "extreme case attains κ. Rotating Σ away from H lowers tr(HΣ)/tr Σ here (noise moves into flat "
        "directions), and B_simple overstates B_noise by that much more.",
        figure=figure,
    )
    return [table]


def _figure(curves, kappa, out_dir) -> str:
    fig, (ax,) = plots.new_axes(1, width=5.0)
    x = np.array([STEPS[0], STEPS[-1]])
    plots.theory_vs_simulation(
        x,
        np.stack([np.ones(2), np.full(2, kappa), np.full(2, 1 / kappa)]),
        curves,
        ax=ax,
        xscale="log",
        yscale="log",
        xlabel="step t",
        ylabel="B_noise / B_simple",
        title="B_simple vs B_noise under misalignment",
        theory_label="1 and the bounds κ^±1",
    )
    return save_figure(fig, out_dir, "v9_misalignment.png")


def run(ctx: Context) -> Outcome:
    """V9 with the suite's budget (the claim registry's entry, :mod:`validation.claims`)."""
    return Outcome(tables=compute(SIZES.at(ctx.quick).d, ctx.seed, ctx.out_dir))
