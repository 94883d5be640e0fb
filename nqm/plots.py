"""Figures: theory curves with simulated points. Plot functions draw only; callers compute the physics.

Every function takes ``ax=None`` (a new figure when None) and returns the axes. The style is one for all:
black and greys with distinct line styles and markers, so that figures read in greyscale print; save them as
``.svg`` or ``.pdf`` for vector output (:func:`save` picks the format from the extension).
:mod:`nqm.gallery` computes the data of each standard figure with the theory and dynamics engines and calls
these functions; ``nqm plot NAME`` renders them from the command line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = [
    "theory_vs_simulation",
    "new_axes",
    "save",
    "batch_size_laws",
    "one_step_parabolas",
    "pareto_frontier",
    "steps_vs_batch",
    "noise_scale_over_training",
    "labelled_curves",
    "normalised_one_step",
    "hessian_spectrum",
    "LINES",
]

_MARKERS = "osD^v<>ph*"
LINES = [("0.0", "-"), ("0.45", "--"), ("0.0", ":"), ("0.6", "-."), ("0.25", (0, (5, 1, 1, 1, 1, 1)))]
"""(colour, dash) pairs for curves that stay apart in greyscale: darkness and dash pattern both change."""


def _line(i: int) -> dict:
    colour, dash = LINES[i % len(LINES)]
    return {"color": colour, "linestyle": dash, "lw": 1.4}


def _finish(ax, xlabel, ylabel, title, xscale="linear", yscale="linear", legend="best"):
    ax.set(xscale=xscale, yscale=yscale, xlabel=xlabel, ylabel=ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", lw=0.3, color="0.85")
    if legend and ax.get_legend_handles_labels()[0]:
        if legend == "outside":
            ax.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.01, 0.5))
        else:
            ax.legend(fontsize=7, frameon=False, loc=legend)
    return ax


def new_axes(n: int = 1, width: float = 4.2, height: float = 3.4, max_cols: int = 4):
    """A figure with ``n`` axes, at most ``max_cols`` per row; returns (figure, list of n axes)."""
    import matplotlib.pyplot as plt

    cols = min(n, max_cols)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def theory_vs_simulation(
    theory_x,
    theory_y,
    points=(),
    *,
    ax=None,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    xscale: str = "linear",
    yscale: str = "linear",
    theory_label: str = "theory",
):
    """Draw a theory curve (or several: 2-D ``theory_y`` with one row per curve) and simulated points.

    Args:
        theory_x: (n,) abscissae of the curve(s). theory_y: (n,) or (k, n); None draws points only.
        points: iterable of ``(label, x, y, yerr)`` groups of simulated points with standard errors.
    """
    if ax is None:
        _, (ax,) = new_axes()
    ys = np.atleast_2d(np.asarray(theory_y)) if theory_y is not None else ()
    for i, y in enumerate(ys):
        ax.plot(theory_x, y, color="0.15", lw=1.2, label=theory_label if i == 0 else None, zorder=1)
    _points(ax, points)
    return _finish(ax, xlabel, ylabel, title, xscale, yscale)


def labelled_curves(x, curves: dict, *, ax=None, xlabel="", ylabel="", title="", xscale="linear", yscale="linear"):
    """Curves ``label → y`` over the common abscissae ``x``, one line style each (colour, then dash)."""
    ax = _axes(ax)
    for i, (label, y) in enumerate(curves.items()):
        ax.plot(x, y, label=label, **_line(i))
    return _finish(ax, xlabel, ylabel, title, xscale, yscale)


def _points(ax, points) -> None:
    """Simulated ``(label, x, y, yerr)`` groups as open markers with ±1 SE bars."""
    for j, (label, x, y, yerr) in enumerate(points):
        ax.errorbar(
            x,
            y,
            yerr=yerr,
            fmt=_MARKERS[j % len(_MARKERS)],
            ms=3.5,
            mfc="none",
            capsize=2,
            lw=0.8,
            color=LINES[j % len(LINES)][0],
            label=label,
            zorder=2,
        )


def save(fig, path) -> str:
    """Write a figure to ``path`` (format from the extension: .png, .svg, .pdf) and close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=130, format=Path(path).suffix.lstrip(".").lower() or None)  # LAWS.PNG is a PNG
    plt.close(fig)
    return str(path)


def _axes(ax):
    if ax is None:
        _, (ax,) = new_axes()
    return ax


def batch_size_laws(b_over_noise, step_ratio, improvement_ratio, points=(), *, ax=None):
    """ε_opt(B)/ε_max and ΔL_opt(B)/ΔL_max against B/B_noise (McCandlish et al. eqs. 2.7–2.8), with B = B_noise
    marked; ``points`` are ``(label, x, y, yerr)`` simulated values."""
    ax = _axes(ax)
    ax.plot(b_over_noise, step_ratio, label="ε_opt / ε_max", **_line(0))
    ax.plot(b_over_noise, improvement_ratio, label="ΔL_opt / ΔL_max", **_line(1))
    ax.axvline(1.0, color="0.6", lw=0.8, linestyle=":")
    ax.annotate("B = B_noise", (1.0, 0.05), xytext=(4, 0), textcoords="offset points", fontsize=7, color="0.3")
    _points(ax, points)
    return _finish(ax, "B / B_noise", "fraction of the full-batch value", "the batch-size laws", xscale="log")


def one_step_parabolas(lr, curves, points=(), *, vertices=None, ax=None, xlabel="step size ε"):
    """E[ΔL](ε) for several batch sizes: ``curves`` maps a label to values on ``lr``; ``vertices`` (optional)
    maps the same labels to (ε_opt, ΔL_opt), drawn as filled markers."""
    ax = _axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        ax.plot(lr, values, label=label, **_line(i))
        if vertices is not None and label in vertices:
            ax.plot(*vertices[label], marker=_MARKERS[i % len(_MARKERS)], color=_line(i)["color"], ms=5)
    ax.axhline(0.0, color="0.6", lw=0.6)
    _points(ax, points)
    return _finish(ax, xlabel, "expected improvement E[ΔL]", "one step: the improvement parabola")


def pareto_frontier(steps, examples, s_min=None, e_min=None, *, label="optimal runs", ax=None, index=0):
    """Examples E against steps S to reach a target, with the fitted hyperbola (S/S_min − 1)(E/E_min − 1) = 1
    and its critical point (2 S_min, 2 E_min), where B = B_crit = E_min/S_min (McCandlish et al. eq. 2.11)."""
    ax = _axes(ax)
    steps, examples = np.asarray(steps, dtype=float), np.asarray(examples, dtype=float)
    style = _line(index)
    ax.plot(
        steps,
        examples,
        marker=_MARKERS[index % len(_MARKERS)],
        mfc="none",
        ms=4,
        lw=0,
        color=style["color"],
        label=label,
    )
    if s_min is not None and e_min is not None:
        s = np.geomspace(s_min * 1.001, max(steps[np.isfinite(steps)].max(), 3 * s_min) * 1.5, 300)
        ax.plot(s, e_min * s / (s - s_min), **style, label=f"fit: S_min = {s_min:.3g}, E_min = {e_min:.3g}")
        ax.plot(
            [2 * s_min],
            [2 * e_min],
            marker="*",
            ms=10,
            color=style["color"],
            lw=0,
            label=f"B_crit = {e_min / s_min:.3g}",
        )
        ax.axvline(s_min, color="0.7", lw=0.6, linestyle=":")
        ax.axhline(e_min, color="0.7", lw=0.6, linestyle=":")
    return _finish(ax, "steps S", "examples E = B·S", "the steps/examples frontier", "log", "log", "outside")


def steps_vs_batch(batch_sizes, curves, *, b_crit=None, ax=None, ylabel="steps to target"):
    """Steps to a target against batch size (``curves``: label → steps), with the regimes marked around
    ``b_crit``: perfect scaling (S ∝ 1/B) below B_crit/10, diminishing returns up to 10·B_crit, then flat."""
    ax = _axes(ax)
    for i, (label, steps) in enumerate(curves.items()):
        ax.plot(batch_sizes, steps, marker=_MARKERS[i % len(_MARKERS)], ms=3.5, mfc="none", label=label, **_line(i))
    if b_crit is not None:
        lo, hi = np.min(batch_sizes), np.max(batch_sizes)
        for edge in (b_crit / 10, b_crit * 10):
            if lo < edge < hi:
                ax.axvline(edge, color="0.6", lw=0.7, linestyle=":")
        ax.axvline(b_crit, color="0.3", lw=0.8, linestyle="--")
        for x, text in (
            (np.sqrt(lo * b_crit / 10), "perfect\nscaling"),
            (b_crit, "B_crit"),
            (np.sqrt(hi * b_crit * 10), "flat"),
        ):
            if lo <= x <= hi:
                ax.annotate(
                    text, (x, 0.97), xycoords=("data", "axes fraction"), ha="center", va="top", fontsize=7, color="0.25"
                )
    return _finish(ax, "batch size B", ylabel, "steps vs batch size", "log", "log")


def noise_scale_over_training(steps, b_noise, b_simple, points=(), *, ax=None):
    """B_noise(t) and B_simple(t) along a run (exact curves), with optional simulated ``points``."""
    ax = _axes(ax)
    ax.plot(steps, b_noise, label="B_noise", **_line(0))
    ax.plot(steps, b_simple, label="B_simple", **_line(1))
    _points(ax, points)
    return _finish(ax, "step t", "noise scale", "the noise scale over training", "symlog", "log")


def critical_batch_vs_target(targets, curves, *, ax=None):
    """Each definition of the critical batch size (``curves``: label → values per target) against the target
    loss, the target falling to the right."""
    ax = _axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        ax.plot(targets, values, marker=_MARKERS[i % len(_MARKERS)], ms=3.5, mfc="none", label=label, **_line(i))
    _finish(ax, "target loss", "batch size", "the critical batch size by each definition", "log", "log", "outside")
    ax.invert_xaxis()
    return ax


def local_critical_batch(losses, critical, b_noise, one_step, ramps=None, *, final_loss=None, ax=None):
    """Merrill et al.'s local critical batch at checkpoint ``losses`` beside B_noise and the one-step law, with
    batch ramps (``ramps``: label → batch per segment, one more than the checkpoints, ending at ``final_loss``)
    drawn as steps; the loss falls to the right."""
    ax = _axes(ax)
    ax.plot(losses, critical, marker="o", ms=4, label="local critical batch (exact branches)", **_line(0))
    ax.plot(losses, b_noise, marker="s", ms=3, label="B_noise at the checkpoint", **_line(1))
    ax.plot(losses, one_step, label="τ·B_noise + (1 + τ)B₀", **_line(2))
    start = losses[0] * (losses[0] / losses[1])  # the segment before the first checkpoint, drawn one step wide
    for i, (label, batches) in enumerate((ramps or {}).items()):
        edges = np.concatenate([[start], losses])
        ax.step(edges, batches[: edges.size], where="post", label=label, **{**_line(3 + i), "lw": 1.0})
        if final_loss is not None:
            ax.plot([losses[-1], final_loss], [batches[-1]] * 2, **{**_line(3 + i), "lw": 1.0})
    _finish(ax, "loss", "batch size", "the local critical batch along a run", "log", "log", "outside")
    ax.invert_xaxis()
    return ax


def normalised_one_step(points, *, ax=None, title="one real SGD step"):
    """Measured one-step improvements against the quadratic law: ``points`` are ``(label, u, y, yerr)`` with
    u = ε/ε_opt(B) and y = E[−ΔL]/ΔL_opt(B), which the law puts on y = u(2 − u) for every B (McCandlish et al.
    2018, eq. 2.6 in units of its vertex)."""
    ax = _axes(ax)
    top = max([float(np.max(u)) for _, u, _, _ in points] + [2.0])
    u = np.linspace(0.0, top, 200)
    ax.plot(u, u * (2 - u), color="0.15", lw=1.2, label="quadratic law u(2 − u)", zorder=1)
    ax.axhline(0.0, color="0.6", lw=0.6)
    _points(ax, points)
    return _finish(ax, "ε / ε_opt(B)", "E[−ΔL] / ΔL_opt(B)", title)


def hessian_spectrum(nodes, weights, top, *, ax=None, bins: int = 60, title="the Hessian's spectrum"):
    """H's spectrum as measured: the bulk from stochastic Lanczos quadrature (Gauss ``nodes`` with ``weights`` in
    eigenvalue counts, any shape) as a histogram, and the ``top`` eigenvalues computed exactly, one count each."""
    ax = _axes(ax)
    nodes, weights, top = (np.ravel(np.asarray(a, dtype=float)) for a in (nodes, weights, top))
    keep = weights > 0  # padded entries carry no weight
    lo = min(nodes[keep].min(), top.min()) if top.size else nodes[keep].min()
    hi = max(nodes[keep].max(), top.max()) if top.size else nodes[keep].max()
    edges = np.linspace(lo, hi, bins + 1)
    ax.hist(nodes[keep], bins=edges, weights=weights[keep], histtype="step", color="0.2", lw=1.2,
            label="bulk (SLQ), eigenvalues per bin")  # fmt: skip
    if top.size:
        ax.plot(top, np.ones_like(top), "v", ms=5, mfc="none", color="0.0", label=f"top {top.size} (exact)")
    return _finish(ax, "eigenvalue λ", "count", title, yscale="log")
