r"""What a researcher asks first about a problem: its scales, its noise scales at initialisation, and, for a target
loss, the optimal runs and the critical batch size. ``nqm info --problem FILE [--target L] [--json]`` prints it.

:func:`summary` returns a dict with these stable keys (JSON-ready: floats, ints, strings, lists):

``nqm info --json`` writes strict JSON: an infinite or undefined value (B_noise at θ₀ = 0, say) as the string
``"inf"`` or ``"nan"``, the convention of nqm's sweep files.

* ``name``, ``d``, ``h_min``, ``h_max``, ``condition_number``, ``dense_sigma``, ``rotated``;
* ``trace_sigma`` (tr Σ), ``trace_h_sigma`` (tr HΣ), ``init_var_mean`` (the mean of E[θ₀²]), ``L0`` = E[L(θ₀)];
* at initialisation, ratios of expectations over θ₀ ~ N(0, diag(init_var)) (McCandlish et al. 2018,
  arXiv:1812.06162, §2.2): ``B_noise_init`` = tr(HΣ)/E[GᵀHG], ``B_simple_init`` = tr Σ/E|G|² and
  ``eps_max_init`` = E|G|²/E[GᵀHG];
* with a target (below L0), from the exact optimal SGD runs (:func:`nqm.dynamics.optimal_steps_to_target`):
  ``target``, ``batch_sizes``, ``steps``, ``lr``, ``S_min``, ``E_min``, ``B_crit`` = E_min/S_min (the frontier fit
  S = S_min + E_min/B, with ``frontier_residual`` its largest relative residual), ``interior`` (per batch
  size: False where the optimal step sits on the edge of the range the exact solver searches, the steps at which
  every coordinate's variance relaxes downwards; the steps there are an upper bound and a B_crit fitted to them
  is not to be trusted; this happens when the noise in flat directions is large, e.g. c not falling with h), and
  ``along_run``: B_noise and B_simple at five points of the optimal run at the grid's batch size nearest B_crit
  (``batch_size``, ``lr``, ``steps``, ``B_noise``, ``B_simple``).
"""

from __future__ import annotations

import numpy as np

from . import dynamics
from .checks import check_init_var
from .noise import trace_h_sigma, trace_sigma
from .problem import NoisyQuadratic

__all__ = ["summary", "format_summary", "BATCH_SIZES"]

BATCH_SIZES = 2.0 ** np.arange(0, 21)
"""The batch sizes of the optimal runs, 1, 2, 4, …, 2²⁰."""


def summary(p: NoisyQuadratic, *, init_var=1.0, target: float | None = None) -> dict:
    """The facts of :mod:`nqm.info`'s docstring as a dict with stable keys."""
    v = check_init_var(init_var, p.d)
    h = p.h
    g2, ghg = float(h**2 @ v), float(h**3 @ v)  # E|G|², E[GᵀHG] with G = Hθ₀
    loss0 = 0.5 * float(h @ v)
    tr, tr_h = trace_sigma(p), trace_h_sigma(p)
    out = {
        "name": p.name,
        "d": p.d,
        "h_min": float(h.min()),
        "h_max": float(h.max()),
        "condition_number": float(h.max() / h.min()),
        "dense_sigma": p.sigma is not None,
        "rotated": p.basis is not None,
        "trace_sigma": tr,
        "trace_h_sigma": tr_h,
        "init_var_mean": float(v.mean()),
        "L0": loss0,
        "B_noise_init": _ratio(tr_h, ghg),
        "B_simple_init": _ratio(tr, g2),
        "eps_max_init": _ratio(g2, ghg),
    }
    if target is None:
        return out
    target = float(target)
    if not (np.isfinite(target) and 0 < target < loss0):
        raise ValueError(f"target must lie between 0 and the initial loss L0 = {loss0:.6g}, got {target!r}")
    runs = dynamics.optimal_steps_to_target(p, target, BATCH_SIZES, init_var=v)
    reached = np.isfinite(runs.steps)
    s_min, e_min, residual = dynamics.fit_frontier(runs.batch_sizes, runs.steps)
    b_crit = e_min / s_min
    # the run nearest B_crit in log B (B_crit = 0 on a noiseless problem: the smallest batch)
    distance = np.abs(np.log(runs.batch_sizes) - np.log(max(b_crit, runs.batch_sizes[0])))
    i = int(np.argmin(np.where(reached, distance, np.inf)))
    # steps may pass 2⁶³ at a tiny target: the closed form is read at float steps (noise_scales_at), not a count
    at = np.unique(np.round(np.linspace(0.0, float(runs.steps[i]), 5)))
    scales = dynamics.noise_scales_at(p, runs.optimizer(i), runs.batch_sizes[i], at, init_var=v)
    out.update(
        {
            "target": target,
            "batch_sizes": runs.batch_sizes.tolist(),
            "steps": [float(s) for s in runs.steps],
            "lr": [float(e) for e in runs.lr],
            "interior": [bool(x) for x in runs.interior],
            "S_min": s_min,
            "E_min": e_min,
            "B_crit": b_crit,
            "frontier_residual": residual,
            "along_run": {
                "batch_size": float(runs.batch_sizes[i]),
                "lr": float(runs.lr[i]),
                "steps": at.tolist(),
                "B_noise": scales[:, 0].tolist(),
                "B_simple": scales[:, 1].tolist(),
            },
        }
    )
    return out


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den > 0 else float("inf")


def format_summary(facts: dict) -> str:
    """The summary as aligned text lines."""
    lines = [
        f"{facts['name']}: d = {facts['d']}, h ∈ [{facts['h_min']:.4g}, {facts['h_max']:.4g}] "
        f"(condition number {facts['condition_number']:.4g}), Σ {'dense' if facts['dense_sigma'] else 'diagonal'}"
        f"{', rotated basis' if facts['rotated'] else ''}",
        f"  tr Σ = {facts['trace_sigma']:.6g}, tr(HΣ) = {facts['trace_h_sigma']:.6g}, "
        f"L0 = E[L(θ₀)] = {facts['L0']:.6g} (mean E[θ₀²] = {facts['init_var_mean']:.4g})",
        f"  at θ₀: B_noise = {facts['B_noise_init']:.6g}, B_simple = {facts['B_simple_init']:.6g}, "
        f"ε_max = {facts['eps_max_init']:.6g}",
    ]
    if "target" in facts:
        lines.append(f"  target {facts['target']:.6g}: optimal SGD steps (exact)")
        for b, s, e, inside in zip(facts["batch_sizes"], facts["steps"], facts["lr"], facts["interior"]):
            lines.append(f"    B = {b:>9.0f}: {s:>12.6g} steps at ε = {e:.4g}" + ("" if inside else " (edge)"))
        if not all(facts["interior"]):
            lines.append(
                "  (edge): the optimal step is on the edge of the searched range (the steps at which every "
                "coordinate's variance relaxes downwards); those steps are an upper bound, and B_crit fitted "
                "to them is not to be trusted"
            )
        lines.append(
            f"  S_min = {facts['S_min']:.6g}, E_min = {facts['E_min']:.6g}, B_crit = {facts['B_crit']:.6g} "
            f"(frontier fit residual {facts['frontier_residual']:.2g})"
        )
        run = facts["along_run"]
        noise = ", ".join(f"{b:.4g}" for b in run["B_noise"])
        lines.append(f"  B_noise along the optimal run at B = {run['batch_size']:g} (ε = {run['lr']:.4g}): {noise}")
    return "\n".join(lines)
