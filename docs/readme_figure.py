"""Regenerates the README figure: ``python docs/readme_figure.py`` → docs/one_step_laws.png.

Left: the exact one-step parabolas E[ΔL](ε) for several batch sizes on Zhang et al.'s spectrum, with
simulated steps (mean ± SE). Right: ε_opt(B)/ε_max = 1/(1 + B_noise/B) with the vertex of each
simulated parabola.
"""

from pathlib import Path

import numpy as np

import nqm
from nqm import plots, theory
from validation.stats import parabola_vertex


def main(out=Path(__file__).with_name("one_step_laws.png")):
    p = nqm.NoisyQuadratic.zhang2019(1000)
    theta = nqm.simulate(p, 1.0, 8, 30, replicas=2, seed=3, keep_state=True).state[0]
    b_noise, eps_max = float(theory.noise_scale(p, theta)), float(theory.max_step(p, theta))
    batch = np.round(b_noise * 4.0 ** np.arange(-2, 3))
    eps = theory.optimal_step(p, theta, batch)[:, None] * np.linspace(0.1, 2.4, 10)  # through each vertex
    sim = nqm.one_step_improvement(p, theta, eps, batch[:, None], 3000, seed=1)
    fig, (left, right) = plots.new_axes(2, width=4.6)
    fine = np.linspace(0, 2.4, 200) * eps_max
    curves = np.array([theory.expected_improvement(p, theta, fine[1:], b) for b in batch])
    plots.theory_vs_simulation(
        fine[1:] / eps_max,
        curves / theory.max_improvement(p, theta),
        [
            (f"B = {b:g}", e / eps_max, m / theory.max_improvement(p, theta), s / theory.max_improvement(p, theta))
            for b, e, m, s in zip(batch, eps, sim.mean, sim.sem)
        ],
        ax=left,
        xlabel="ε / ε_max",
        ylabel="E[ΔL] / ΔL_max",
        title=f"one step at B_noise = {b_noise:.0f}",
        theory_label="exact E[ΔL]",
    )
    left.set_ylim(-1.2, 1.1)
    vertices = np.array([parabola_vertex(e, m, s)[:2] for e, m, s in zip(eps, sim.mean, sim.sem)])
    x = np.geomspace(1 / 64, 64, 200)
    plots.theory_vs_simulation(
        x,
        1 / (1 + 1 / x),
        [("simulated vertex", batch / b_noise, vertices[:, 0] / eps_max, vertices[:, 1] / eps_max)],
        ax=right,
        xscale="log",
        xlabel="B / B_noise",
        ylabel="ε_opt / ε_max",
        title="optimal step vs batch size",
        theory_label="1/(1 + B_noise/B)",
    )
    plots.save(fig, out)
    return out


if __name__ == "__main__":
    print(main())
