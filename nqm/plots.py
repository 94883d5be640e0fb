"""Figures: theory curves with simulated points. Plot functions draw only; callers compute the physics.

Every function takes ``ax=None`` (a new figure when None) and returns the axes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["theory_vs_simulation", "new_axes"]

_MARKERS = "osD^v<>ph*"


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
            label=label,
            zorder=2,
        )
    ax.set(xscale=xscale, yscale=yscale, xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(True, which="major", lw=0.3, color="0.8")
    ax.legend(fontsize=7, frameon=False)
    return ax


def save(fig, path) -> str:
    """Write a figure to ``path`` and close it; returns the path as a string."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=130)
    plt.close(fig)
    return str(path)
