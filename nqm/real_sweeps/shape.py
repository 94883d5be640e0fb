r"""How well does the NQM's curve shape describe a real sweep?

The NQM's optimal runs give a steps-to-target curve S_NQM(B) whose shape depends on the optimiser family, the
spectrum and the target. Fitted to a sweep, its units are free: the data's B is κ·B_NQM and its steps are
a·S_NQM, so the fit is

.. math:: \min_{\log a,\ \log\kappa,\ \text{target}} \sum_i \bigl(\log S_i - \log a
          - \log S_\text{NQM}(B_i/\kappa;\ \text{target})\bigr)^2,

log a in closed form (the mean residual), log κ by a scan and a bounded refinement, the target over a grid of
fractions of the starting loss L₀: three parameters against the hyperbola's two. Both are judged on held-out
batch sizes: leave one batch size out, refit on the rest (the target chosen again), predict the one left out.

The default problem is a power-law spectrum h_i = i^(−α) with noise c ∝ h^q (Zhang et al. 2019,
arXiv:1907.04164, §4, has α = q = 1); the families are SGD, heavy ball (β tuned) and SGD preconditioned by
P = H^(−1/2) (:func:`nqm.dynamics.optimal_steps_to_target`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import interpolate, optimize

from ..checks import as_real, check_batch_sizes
from ..dynamics import fit_frontier, optimal_steps_to_target
from ..problem import NoisyQuadratic
from ..spectra import power_law as power_law_spectrum

__all__ = ["SHAPES", "NqmCurve", "ShapeFit", "nqm_curves", "power_law_problem", "shape_fits"]

SHAPES = ("sgd", "heavy_ball", "preconditioned")
"""The NQM's curve shapes: SGD, heavy ball (β tuned), and SGD preconditioned by P = H^(−1/2)."""
TARGET_FRACTIONS = tuple(10.0 ** -np.arange(0.5, 3.51, 0.5))  # target = fraction·L₀
CURVE_BATCHES = 2.0 ** np.arange(-8, 24.01, 1.0)  # in units where the problem's own noise has B = 1


def power_law_problem(d: int = 1000, exponent: float = 1.0, q: float = 1.0) -> NoisyQuadratic:
    """h_i = i^(−exponent), c_i = h_i^q (per-example noise variance in H's basis), i = 1…d."""
    h = power_law_spectrum(d, exponent)
    return NoisyQuadratic(h, h**q, name=f"power law (d={d}, α={exponent:g}, q={q:g})")


@dataclass(frozen=True)
class NqmCurve:
    """One optimal-run curve: ``shape`` (a family of :data:`SHAPES`), the target as a fraction of L₀, and
    log S against log B where the target is reached."""

    shape: str
    target_fraction: float
    log_batch: np.ndarray
    log_steps: np.ndarray

    def __post_init__(self):
        spline = interpolate.PchipInterpolator(self.log_batch, self.log_steps, extrapolate=False)
        object.__setattr__(self, "_spline", spline)  # built once: the fits call it thousands of times

    def __call__(self, log_batch) -> np.ndarray:
        """log S_NQM at log B (monotone cubic between grid points; NaN outside the grid)."""
        return self._spline(log_batch)


def nqm_curves(problem: NoisyQuadratic | None = None, shapes=SHAPES, target_fractions=TARGET_FRACTIONS,
               batch_sizes=CURVE_BATCHES, init_var=1.0) -> list[NqmCurve]:  # fmt: skip
    """The optimal-run curves of ``problem`` (default :func:`power_law_problem`) for each shape and target.

    ``batch_sizes`` may go below 1: the dynamics depend on Σ/B alone, so B < 1 is run as B·k on the problem with
    its noise Σ·k (k the power of two that lifts the smallest batch size to 1).
    """
    p = power_law_problem() if problem is None else problem
    b = as_real("batch_sizes", batch_sizes)
    if b.ndim != 1 or not np.all(np.isfinite(b) & (b > 0)):
        raise ValueError(f"batch_sizes must be finite and > 0, got {batch_sizes!r}")
    lift = 2.0 ** max(0.0, np.ceil(-np.log2(b.min())))
    p = p.with_noise_scaled(lift)
    start = 0.5 * float(np.sum(p.h * np.broadcast_to(init_var, p.h.shape)))  # L₀ = ½ Σ h_i E[θ_i²] in H's basis
    curves = []
    for shape in shapes:
        if shape not in SHAPES:
            raise ValueError(f"shape must be one of {SHAPES}, got {shape!r}")
        family = "heavy_ball" if shape == "heavy_ball" else "sgd"
        precond = p.h**-0.5 if shape == "preconditioned" else None
        for fraction in target_fractions:
            runs = optimal_steps_to_target(
                p, fraction * start, b * lift, family=family, precond=precond, init_var=init_var
            )
            ok = np.isfinite(runs.steps)
            if ok.sum() >= 4:
                curves.append(NqmCurve(shape, float(fraction), np.log(b[ok]), np.log(runs.steps[ok])))
    return curves


@dataclass(frozen=True)
class ShapeFit:
    """A curve fitted to a sweep: ``shape`` ("hyperbola" or one of :data:`SHAPES`), the target fraction
    (NaN for the hyperbola), the scales (a, κ; S_min and E_min for the hyperbola), the in-sample RMS of
    log(fit/S), the held-out RMS over leave-one-batch-size-out refits, and the per-point residuals
    log(fit/S) in the order of ``batch_sizes``."""

    shape: str
    target_fraction: float
    scales: tuple[float, float]
    residual_rms: float
    held_out_rms: float
    batch_sizes: np.ndarray
    residuals: np.ndarray
    held_out: np.ndarray


def _fit_curve(curve: NqmCurve, log_b, log_s) -> tuple[float, float, float]:
    """(log a, log κ, sum of squares) for one curve; inf where no κ keeps every batch size inside the curve."""
    lo, hi = log_b.max() - curve.log_batch[-1], log_b.min() - curve.log_batch[0]  # κ range inside the grid
    if lo > hi:
        return 0.0, 0.0, float("inf")

    def sse(kappa):
        g = curve(log_b - kappa)
        return float(np.sum((log_s - g - np.mean(log_s - g)) ** 2)) if np.all(np.isfinite(g)) else np.inf

    grid = np.linspace(lo, hi, 200)
    g = curve(log_b[None, :] - grid[:, None])
    r = log_s - g
    values = np.where(np.all(np.isfinite(g), axis=1), np.sum((r - r.mean(axis=1, keepdims=True)) ** 2, axis=1), np.inf)
    i = int(np.argmin(values))
    best = optimize.minimize_scalar(sse, bounds=(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]),
                                    method="bounded", options={"xatol": 1e-10})  # fmt: skip
    kappa, value = (best.x, best.fun) if best.fun <= values[i] else (grid[i], values[i])
    return float(np.mean(log_s - curve(log_b - kappa))), float(kappa), float(value)


def _best(curves, log_b, log_s):
    fits = [(_fit_curve(c, log_b, log_s), c) for c in curves]
    (log_a, kappa, _), curve = min(fits, key=lambda f: f[0][2])
    return log_a, kappa, curve


def shape_fits(batch_sizes, steps, curves: list[NqmCurve]) -> list[ShapeFit]:
    """The hyperbola and each shape's best curve (over its targets) fitted to (batch_sizes, steps), with
    leave-one-batch-size-out held-out errors (see the module)."""
    b, s = check_batch_sizes(batch_sizes), as_real("steps", steps)
    if b.shape != s.shape or not np.all(np.isfinite(s)):
        raise ValueError("batch_sizes and steps must be the same length, steps finite (the reached points)")
    log_b, log_s = np.log(b), np.log(s)
    sizes = np.unique(b)
    out = []

    def hyperbola(train):
        s_min, e_min, _ = fit_frontier(b[train], s[train])
        return (s_min, e_min), lambda x: np.log(s_min + e_min / np.exp(x))

    def family(shape):
        def fit(train):
            log_a, kappa, curve = _best([c for c in curves if c.shape == shape], log_b[train], log_s[train])
            return (np.exp(log_a), np.exp(kappa), curve.target_fraction), lambda x: log_a + curve(x - kappa)

        return fit

    fitters = {"hyperbola": hyperbola} | {k: family(k) for k in SHAPES if any(c.shape == k for c in curves)}
    for shape, fitter in fitters.items():
        params, predict = fitter(np.ones(b.size, dtype=bool))
        residuals = predict(log_b) - log_s
        held = np.empty(b.size)
        for x in sizes:
            out_mask = b == x
            _, predict_rest = fitter(~out_mask)
            held[out_mask] = predict_rest(log_b[out_mask]) - log_s[out_mask]  # NaN where outside the curve
        out.append(
            ShapeFit(
                shape=shape,
                target_fraction=float("nan") if shape == "hyperbola" else params[2],
                scales=(float(params[0]), float(params[1])),
                residual_rms=float(np.sqrt(np.mean(residuals**2))),
                held_out_rms=float(np.sqrt(np.mean(held**2))),
                batch_sizes=b,
                residuals=residuals,
                held_out=held,
            )
        )
    return out
