"""A sweep's critical-batch table, as stable-keyed facts (for ``--json``), text, and a figure: what
``nqm frontier`` prints and draws."""

from __future__ import annotations

import numpy as np

from .fit import SweepFrontier, fit_sweep, power_law
from .shape import NqmCurve, ShapeFit, shape_fits
from .table import Sweep

__all__ = [
    "all_shape_fits",
    "draw_frontier",
    "fit_all",
    "format_frontier",
    "frontier_facts",
    "plot_frontier",
    "plus_minus",
]


def all_shape_fits(fits: list[SweepFrontier], curves: list[NqmCurve]) -> list[list[ShapeFit]]:
    """:func:`~nqm.real_sweeps.shape_fits` of every group's points, computed once for the table and the figure."""
    return [shape_fits(f.batch_sizes, f.steps, curves) for f in fits]


def frontier_facts(sweep: Sweep, fits: list[SweepFrontier], shapes: list[list[ShapeFit]] | None = None) -> dict:
    """Every group's fit (keys ``S_min``, ``S_min_se``, ``E_min``, ``E_min_se``, ``B_crit``, ``B_crit_se``,
    ``B_crit_interval``, ``B_20``, ``B_20_bracket``, ``B_20_se``, ``B_20_frontier``, ``residual_rms``,
    ``bootstrap``), the power laws of B_crit across groups where ≥ 3 groups give the variable, and with
    ``shapes`` (:func:`all_shape_fits`) the NQM-shape comparison per group (in-sample and held-out RMS of
    log(fit/S))."""

    def number(x):
        return None if x is None or not np.isfinite(x) else float(x)

    facts = {"source": sweep.source, "groups": []}
    for i, f in enumerate(fits):
        row = {
            "group": f.group,
            "target": number(f.target),
            "parameters": number(f.parameters),
            "points": int(f.batch_sizes.size),
            "S_min": f.s_min,
            "S_min_se": f.s_min_se,
            "E_min": f.e_min,
            "E_min_se": f.e_min_se,
            "B_crit": number(f.b_crit),
            "B_crit_se": number(f.b_crit_se),
            "B_crit_interval": [number(v) for v in f.b_crit_interval],
            "confidence": f.confidence,
            "B_20": number(f.linear_scaling),
            "B_20_bracket": [number(v) for v in f.linear_scaling_bracket],
            "B_20_se": number(f.linear_scaling_se),
            "B_20_frontier": number(f.linear_scaling_from_frontier),
            "tolerance": f.tolerance,
            "reference_batch": f.reference_batch,
            "residual_rms": f.residual_rms,
            "bootstrap": f.bootstrap,
            "draws": f.draws,
        }
        if shapes:
            row["shapes"] = [
                {
                    "shape": s.shape,
                    "target_fraction": number(s.target_fraction),
                    "residual_rms": s.residual_rms,
                    "held_out_rms": s.held_out_rms,
                    "residual_at_largest_batch": float(s.residuals[np.argmax(s.batch_sizes)]),
                }
                for s in shapes[i]
            ]
        facts["groups"].append(row)
    facts["power_laws"] = []
    for variable in ("parameters", "target"):
        usable = [f for f in fits if np.isfinite(getattr(f, variable)) and np.isfinite(f.b_crit)]
        if len(usable) >= 3 and len(usable) == len(fits):
            law = power_law(usable, variable)
            facts["power_laws"].append({"variable": variable, "exponent": law.exponent, "exponent_se": law.exponent_se})
    return facts


def plus_minus(x, se) -> str:
    """``x ± se`` rounded to the SE's second significant digit (1267 ± 62, 2833000 ± 99000)."""
    if x is None or se is None or not np.isfinite(se) or se <= 0:
        return f"{x:.4g} ± {se}" if x is not None else "—"
    places = int(1 - np.floor(np.log10(se)))
    return f"{round(x, places):.{max(places, 0)}f} ± {round(se, places):.{max(places, 0)}f}"


def format_frontier(facts: dict) -> str:
    """The facts as text: one line per group, then the power laws and the shape comparison."""

    def g(x, digits=4):
        return "—" if x is None else f"{x:.{digits}g}"

    pm = plus_minus

    lines = [f"source: {facts['source']}", ""]
    header = f"{'group':>8} {'target':>7} {'S_min':>15} {'E_min':>19} {'B_crit':>15} {'B_20 (bracket)':>24} {'hyperbola B_20':>15} {'rms':>6}"  # noqa: E501
    lines.append(header)
    for r in facts["groups"]:
        bracket = f"{g(r['B_20'])} ({g(r['B_20_bracket'][0])}–{g(r['B_20_bracket'][1])})"
        lines.append(
            f"{r['group']:>8} {g(r['target']):>7} {pm(r['S_min'], r['S_min_se']):>15} "
            f"{pm(r['E_min'], r['E_min_se']):>19} {pm(r['B_crit'], r['B_crit_se']):>15} "
            f"{bracket:>24} {g(r['B_20_frontier']):>15} {r['residual_rms']:>6.3f}"
        )
    first = facts["groups"][0]
    lines += [
        "",
        f"S = S_min + E_min/B by least squares on log S; ± are bootstrap SEs ({first['bootstrap']}, "
        f"{first['draws']} draws); B_crit = E_min/S_min. B_20: the smallest B with S·B > {1 + first['tolerance']:g}·"
        "S(B0)·B0, B0 the smallest batch, read off the table (log-log interpolation); hyperbola B_20 = "
        f"{1 + first['tolerance']:g}·B0 + {first['tolerance']:g}·B_crit. rms: of log(fit/S).",
    ]
    for law in facts["power_laws"]:
        lines.append(
            f"B_crit ∝ {law['variable']}^k across groups: k = {law['exponent']:.3f} ± {law['exponent_se']:.3f}"
        )
    if "shapes" in first:
        lines += ["", "RMS of log(fit/S), in sample / held out (leave one batch size out):"]
        names = [s["shape"] for s in first["shapes"]]
        lines.append(f"{'group':>8} " + " ".join(f"{n:>22}" for n in names))
        for r in facts["groups"]:
            cells = [f"{s['residual_rms']:.3f} / {s['held_out_rms']:.3f}" for s in r["shapes"]]
            lines.append(f"{r['group']:>8} " + " ".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


def draw_frontier(fits: list[SweepFrontier], shapes: list[list[ShapeFit]] | None = None):
    """Steps against batch size per group: the points, the fitted hyperbola, the best NQM SGD curve (from
    ``shapes``, :func:`all_shape_fits`), B_crit (dashed) and the table's B_20 (dotted) marked. Returns the
    figure."""
    from .. import plots

    fig, (ax,) = plots.new_axes(1, width=6.0)
    for i, f in enumerate(fits):
        colour = f"C{i % 10}"
        b = np.geomspace(f.batch_sizes.min(), f.batch_sizes.max(), 200)
        ax.plot(f.batch_sizes, f.steps, "o", color=colour, label=f.group)
        ax.plot(b, f.predict(b), "-", color=colour, lw=1)
        sgd = [s for s in shapes[i] if s.shape == "sgd"] if shapes else []
        if sgd:
            ax.plot(f.batch_sizes, f.steps * np.exp(sgd[0].residuals), ":", color=colour, lw=1)
        for x, style in ((f.b_crit, "--"), (f.linear_scaling, ":")):
            if np.isfinite(x):
                ax.axvline(x, color=colour, ls=style, lw=0.8, alpha=0.6)
    ax.set(xscale="log", yscale="log", xlabel="batch size B", ylabel="steps to target S")
    ax.set_title("steps to target: hyperbola (—), NQM SGD (⋯)\nB_crit (- -), B_20 read off the table (⋯)", fontsize=9)
    ax.legend(fontsize="small")
    return fig


def plot_frontier(fits: list[SweepFrontier], shapes: list[list[ShapeFit]] | None, path) -> None:
    """:func:`draw_frontier` written to ``path``."""
    from .. import plots

    plots.save(draw_frontier(fits, shapes), path)


def fit_all(sweep: Sweep, groups=None, *, draws: int = 2000, seed=0) -> list[SweepFrontier]:
    """:func:`~nqm.real_sweeps.fit_sweep` for each group (all of them by default), each group's bootstrap on its
    own stream spawned from ``seed`` (an int or a list of ints)."""
    names = sweep.groups() if groups is None else list(groups)
    streams = np.random.SeedSequence(seed).spawn(len(names))
    return [fit_sweep(sweep, g, draws=draws, seed=s) for g, s in zip(names, streams)]
