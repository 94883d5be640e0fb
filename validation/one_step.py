"""The one-step experiment shared by V1 and V2: ΔL on a (B, ε) grid at a point θ.

Batch sizes span [B_noise/64, 64·B_noise] and steps ε ∈ [0.1, 2.5]·ε_opt(B) at each B, so every
B's parabola is sampled through its maximum and past its zero at 2ε_opt.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

import nqm
from nqm import plots, theory

from .families import Family, batch_grid
from .report import save_figure

EPS_FACTORS = np.linspace(0.1, 2.5, 9)


def stream(seed: int, *names: str) -> list[int]:
    """Entropy for an experiment's generator: the suite seed and stable hashes of its names."""
    return [int(seed)] + [zlib.crc32(n.encode()) for n in names]


def improvement_law(moments, eps, batch, noise_factor: float = 1.0, per_batch: bool = True):
    """E[ΔL] = ε|G|² − ½ε²(GᵀHG + f·tr(HΣ)/B) from ``theory.step_moments``; ``noise_factor`` f ≠ 1 or
    ``per_batch=False`` (no 1/B) plant the errors the negative controls must reject."""
    gg, ghg, tr = moments
    return eps * gg - 0.5 * eps**2 * (ghg + noise_factor * tr / (batch if per_batch else 1.0))


@dataclass
class OneStepGrid:
    family: Family
    point: str
    theta: np.ndarray
    batch: np.ndarray  # (nB,)
    eps: np.ndarray  # (nB, nE)
    result: nqm.OneStepResult

    @property
    def moments(self):
        """(GᵀG, GᵀHG, tr(HΣ)) at θ."""
        return theory.step_moments(self.family.theory_problem(self.theta), self.theta)


def run_grid(family: Family, point: str, replicas: int, seed: int) -> OneStepGrid:
    theta = family.points[point]
    p = family.theory_problem(theta)
    batch = batch_grid(float(theory.noise_scale(p, theta)))
    eps = theory.optimal_step(p, theta, batch)[:, None] * EPS_FACTORS[None, :]
    result = family.one_step_improvement(
        theta, eps, batch[:, None], replicas, seed=stream(seed, "one-step", family.key, point)
    )
    return OneStepGrid(family, point, theta, batch, eps, result)


def saturation_figure(panels, ylabel: str, points_label: str, name: str, out_dir) -> str:
    """One panel per point: simulated ``y`` against ``B/B_noise`` on the law ``1/(1 + B_noise/B)``.

    ``panels`` holds ``(title, B/B_noise, y, SE)`` with y already divided by its B → ∞ limit.
    """
    fig, axes = plots.new_axes(len(panels))
    x = np.geomspace(1 / 128, 128, 200)
    for ax, (title, b_ratio, y, se) in zip(axes, panels):
        plots.theory_vs_simulation(
            x,
            1 / (1 + 1 / x),
            [(points_label, b_ratio, y, se)],
            ax=ax,
            xscale="log",
            xlabel="B / B_noise",
            ylabel=ylabel,
            title=title,
            theory_label="1/(1 + B_noise/B)",
        )
    return save_figure(fig, out_dir, name)
