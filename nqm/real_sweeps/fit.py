r"""A measured sweep through the critical-batch definitions, with bootstrap errors.

* McCandlish et al. 2018 (arXiv:1812.06162, eq. 2.11): S = S_min + E_min/B fitted by least squares on log S
  (:func:`nqm.dynamics.fit_frontier`, the function the NQM's exact runs use), B_crit = E_min/S_min;
* Zhang et al. 2024 (arXiv:2410.21676, §3): the smallest B whose steps exceed linear scaling from the smallest
  batch B₀ by τ = 20%, S(B)·B > (1 + τ)·S(B₀)·B₀, read off the table by interpolating log(S·B) linearly in log B
  between measured batch sizes, beside the hyperbola's value (1 + τ)B₀ + τ·E_min/S_min
  (:func:`nqm.dynamics.linear_scaling_on_frontier`).

Errors come from a bootstrap: where every batch size has several seeds, the seeds are resampled within each
batch size (log steps about the batch size's mean widened by √(k/(k − 1)), k seeds); otherwise the fit's log
residuals, inflated by √(n/(n − 2)) for the two fitted parameters, are resampled onto the fitted curve (a
residual bootstrap in log space). The standard errors are the replicates' spread; B_crit's interval is
log B_crit ± t·SE(log B_crit) with Student's t on the residual degrees of freedom (Σ(k − 1), or n − 2). Davison &
Hinkley 1997 (Bootstrap Methods and their Application, §2.4, §6.2) give both adjustments.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..checks import check_count, check_real
from ..dynamics import fit_frontier, fit_frontiers, linear_scaling_on_frontier
from .table import Sweep

__all__ = ["PowerLaw", "SweepFrontier", "fit_sweep", "linear_scaling_from_table", "power_law"]


@dataclass(frozen=True)
class SweepFrontier:
    """One group of a sweep through the definitions of :mod:`nqm.real_sweeps.fit`.

    Attributes:
        group, target, parameters: what the rows share (NaN where the file does not say).
        batch_sizes, steps: the points fitted (per batch size and seed, the fewest steps over step sizes).
        s_min, e_min, b_crit: the fitted frontier and B_crit = E_min/S_min (McCandlish et al. 2018).
        s_min_se, e_min_se, b_crit_se: bootstrap standard errors; b_crit_interval: B_crit's interval at
            ``confidence`` (see the module); b_crit_draws: the bootstrap replicates of B_crit (for
            :func:`power_law`).
        residual_rms: root mean square of log(fit/S); residual_max: the largest ``|fit/S − 1|``.
        bootstrap: ``"seeds"`` or ``"residuals"``; draws: how many replicates.
        tolerance, reference_batch: τ and B₀ (the smallest batch size) of Zhang et al.'s definition.
        linear_scaling: B_τ read off the table; linear_scaling_bracket: the measured batch sizes around it
            (upper inf when no batch size exceeds the tolerance); linear_scaling_se: its bootstrap SE.
        linear_scaling_from_frontier: the hyperbola's B_τ, (1 + τ)B₀ + τ·B_crit.
    """

    group: str
    target: float
    parameters: float
    batch_sizes: np.ndarray
    steps: np.ndarray
    s_min: float
    e_min: float
    b_crit: float
    s_min_se: float
    e_min_se: float
    b_crit_se: float
    b_crit_interval: tuple[float, float]
    b_crit_draws: np.ndarray
    residual_rms: float
    residual_max: float
    bootstrap: str
    draws: int
    confidence: float
    tolerance: float
    reference_batch: float
    linear_scaling: float
    linear_scaling_bracket: tuple[float, float]
    linear_scaling_se: float
    linear_scaling_from_frontier: float

    def predict(self, batch_sizes) -> np.ndarray:
        """The fitted S_min + E_min/B."""
        return self.s_min + self.e_min / np.asarray(batch_sizes, dtype=np.float64)


def linear_scaling_from_table(batch_sizes, steps, tolerance: float = 0.2) -> tuple[float, tuple[float, float]]:
    r"""Zhang et al. 2024's B_τ read off a table: the smallest B with S(B)·B > (1 + τ)·S(B₀)·B₀, B₀ the smallest
    batch size, where log(S·B) is linear in log B between measured batch sizes (several entries at one batch size
    are averaged in log). Returns (B_τ, (the measured batch sizes around it)); (inf, (B_max, inf)) when no batch
    size exceeds the tolerance.

    Example:
        >>> b_20, bracket = linear_scaling_from_table([1, 2, 4, 8], [100, 50, 35, 20])  # S·B: 100, 100, 140, 160
        >>> round(b_20, 3), bracket  # log(S·B) crosses log 120 at 2·2^(log(1.2)/log(1.4))
        (2.912, (2.0, 4.0))
    """
    tolerance = check_real("tolerance", tolerance, low=0.0, low_open=True)
    b, s = np.asarray(batch_sizes, dtype=np.float64), np.asarray(steps, dtype=np.float64)
    sizes = np.unique(b)
    log_sb = np.array([np.mean(np.log(s[b == x])) for x in sizes]) + np.log(sizes)
    excess = log_sb - log_sb[0] - np.log1p(tolerance)  # > 0 beyond the tolerance
    over = np.flatnonzero(excess > 0)
    if not over.size:
        return float("inf"), (float(sizes[-1]), float("inf"))
    i = int(over[0])
    lo, hi = np.log(sizes[i - 1]), np.log(sizes[i])
    at = lo + (hi - lo) * (0 - excess[i - 1]) / (excess[i] - excess[i - 1])
    return float(np.exp(at)), (float(sizes[i - 1]), float(sizes[i]))


def fit_sweep(
    sweep: Sweep,
    group: str | None = None,
    *,
    draws: int = 2000,
    seed=0,
    tolerance: float = 0.2,
    confidence: float = 0.95,
) -> SweepFrontier:
    """Fit one group of ``sweep`` (the only one when ``group`` is None) and bootstrap its errors (see the module).

    Example:
        >>> from nqm.real_sweeps import zhang2024
        >>> f = fit_sweep(zhang2024(), "85M", draws=200)
        >>> round(f.b_crit), round(f.linear_scaling)
        (2235, 424)
    """
    draws = check_count("draws", draws, 2)
    tolerance = check_real("tolerance", tolerance, low=0.0, low_open=True)
    confidence = check_real("confidence", confidence, low=0.0, high=1.0, low_open=True, high_open=True)
    if group is None:
        if len(sweep.groups()) != 1:
            raise ValueError(f"the sweep has groups {', '.join(sweep.groups())}: name one (group=...)")
        group = sweep.groups()[0]
    rows = sweep.select(group)
    b, s, _ = rows.best_steps()
    reached = np.isfinite(s)
    b, s = b[reached], s[reached]
    if np.unique(b).size < 3:
        raise ValueError(f"group {group!r} reaches its target at {np.unique(b).size} batch sizes; the fit needs 3")
    s_min, e_min, residual_max = fit_frontier(b, s)
    log_fit = np.log(s_min + e_min / b)
    rng = np.random.default_rng(seed)
    sizes, counts = np.unique(b, return_counts=True)
    if np.all(counts >= 2):
        method, dof = "seeds", int(np.sum(counts - 1))
        order = np.concatenate([np.flatnonzero(b == x) for x in sizes])
        b_rep, log_rep = b[order], np.empty((draws, b.size))
        at = 0
        for x, c in zip(sizes, counts):
            cell = np.log(s[b == x])
            centre = cell.mean()
            # resampled seeds, their spread about the cell's mean widened by √(k/(k − 1)): resampling k seeds
            # alone shrinks the variance of their mean by (k − 1)/k
            log_rep[:, at : at + c] = centre + np.sqrt(c / (c - 1)) * (rng.choice(cell, size=(draws, c)) - centre)
            at += c
        replicates = np.exp(log_rep)
    else:
        method, dof = "residuals", b.size - 2
        residuals = (np.log(s) - log_fit) * np.sqrt(b.size / (b.size - 2))
        replicates = np.exp(log_fit + rng.choice(residuals, size=(draws, b.size)))
        b_rep = b
    rep_s, rep_e = fit_frontiers(b_rep, replicates)
    with np.errstate(divide="ignore", invalid="ignore"):
        rep_crit = rep_e / rep_s  # inf where a replicate's S_min is 0
    # The interval is log B_crit ± t·SE(log B_crit), t Student's with the residuals' degrees of freedom: the
    # bootstrap alone does not see that the noise level is itself estimated from few points (its percentile
    # interval covered 0.90 at a nominal 0.95 over 200 sweeps of 9 points).
    t_quantile = stats.t.ppf(0.5 + 0.5 * confidence, dof)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_se = float(np.std(np.log(rep_crit), ddof=1))
    rep_tau = np.array([linear_scaling_from_table(b_rep, r, tolerance)[0] for r in replicates])
    b_tau, bracket = linear_scaling_from_table(b, s, tolerance)
    return SweepFrontier(
        group=group,
        target=rows.value("target"),
        parameters=rows.value("parameters"),
        batch_sizes=b,
        steps=s,
        s_min=s_min,
        e_min=e_min,
        b_crit=e_min / s_min if s_min > 0 else float("inf"),
        s_min_se=float(np.std(rep_s, ddof=1)),
        e_min_se=float(np.std(rep_e, ddof=1)),
        b_crit_se=float(np.std(rep_crit, ddof=1)) if np.all(np.isfinite(rep_crit)) else float("inf"),
        b_crit_interval=tuple(float(e_min / s_min * np.exp(k * t_quantile * log_se)) for k in (-1, 1)),
        b_crit_draws=rep_crit,
        residual_rms=float(np.sqrt(np.mean((np.log(s) - log_fit) ** 2))),
        residual_max=residual_max,
        bootstrap=method,
        draws=draws,
        confidence=confidence,
        tolerance=tolerance,
        reference_batch=float(b.min()),
        linear_scaling=b_tau,
        linear_scaling_bracket=bracket,
        linear_scaling_se=float(np.std(rep_tau, ddof=1)) if np.all(np.isfinite(rep_tau)) else float("inf"),
        linear_scaling_from_frontier=linear_scaling_on_frontier(s_min, e_min, float(b.min()), tolerance),
    )


@dataclass(frozen=True)
class PowerLaw:
    """B_crit ∝ xᵏ across groups: the exponent k, its bootstrap SE, the prefactor, and what x is."""

    variable: str
    exponent: float
    exponent_se: float
    prefactor: float
    groups: tuple[str, ...]


def power_law(fits: list[SweepFrontier], variable: str = "parameters") -> PowerLaw:
    r"""Least squares of log B_crit = log a + k·log x across groups, x = each group's ``variable`` (``target``
    or ``parameters``); the SE of k is the spread of k over the groups' bootstrap replicates taken together
    (replicate j of every group in one refit; the groups' bootstraps are independent)."""
    if variable not in ("target", "parameters"):
        raise ValueError(f"variable must be 'target' or 'parameters', got {variable!r}")
    if len(fits) < 3:
        raise ValueError(f"a power law across groups needs 3 groups, got {len(fits)}")
    x = np.log([getattr(f, variable) for f in fits])
    if not np.all(np.isfinite(x)):
        raise ValueError(f"every group needs a finite {variable} > 0")
    design = np.stack([np.ones(x.size), x], axis=1)
    (log_a, k), *_ = np.linalg.lstsq(design, np.log([f.b_crit for f in fits]), rcond=None)
    draws = min(f.draws for f in fits)
    replicates = np.log(np.stack([f.b_crit_draws[:draws] for f in fits], axis=0))  # (groups, draws)
    ok = np.all(np.isfinite(replicates), axis=0)
    slopes = np.linalg.lstsq(design, replicates[:, ok], rcond=None)[0][1]
    return PowerLaw(
        variable, float(k), float(np.std(slopes, ddof=1)), float(np.exp(log_a)), tuple(f.group for f in fits)
    )
