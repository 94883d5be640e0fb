r"""The critical batch size by each of its definitions, computed exactly on the same optimal runs.

"The critical batch size" names several measurements. On one problem and one target loss this module computes

* **McCandlish et al. 2018** (arXiv:1812.06162, §2.3, eq. 2.11): fit the steps/examples frontier of the optimal runs
  by S = S_min + E_min/B; B_crit = E_min/S_min;
* **Zhang et al. 2024** (arXiv:2410.21676, §3): the smallest B at which the steps to the target exceed linear
  scaling from a small reference batch B₀ by a tolerance τ (20%), i.e. S(B)·B > (1 + τ)·S(B₀)·B₀. On the frontier
  hyperbola this is exactly

  .. math:: B_\tau = (1 + \tau) B_0 + \tau\, E_\text{min}/S_\text{min}
            \approx \tau\, B_\text{crit}\quad (B_0 \ll B_\text{crit}),

  since S(B)·B/(S(B₀)·B₀) = (S_min B + E_min)/(S_min B₀ + E_min); the difference between the measured B_τ and this
  prediction is how far the model's runs depart from the hyperbola;
* **the gradient noise scale** B_noise = tr(HΣ)/E[GᵀHG] (and B_simple = tr Σ/E|G|²), §2.2: at θ₀, at the end of the
  optimal run at the batch size nearest B_crit, and averaged over that run in full-batch-equivalent steps
  ds = dt/(1 + B_noise(t)/B) (App. D), the average that App. D's model says equals E_min/S_min.

Steps are the exact first hits of :func:`~nqm.dynamics.optimal_steps_to_target`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...checks import as_real, check_batch_size, check_batch_sizes, check_real, check_target
from ...optim import TunedFamily, tuned_family
from ..moments import noise_scales_along, noise_scales_at
from ..runs import optimal_steps_to_target
from .frontier import fit_frontier

__all__ = ["CriticalBatchSizes", "critical_batch_sizes", "linear_scaling_limit", "linear_scaling_on_frontier"]

BATCH_SIZES = 2.0 ** np.arange(0, 21)


@dataclass(frozen=True)
class CriticalBatchSizes:
    r"""The definitions of :mod:`nqm.dynamics.studies.critical` on one problem, target and optimiser family.

    Attributes:
        target, family: what the runs aim at and which hyper-parameters they tune.
        batch_sizes, steps: the grid and the fewest steps to the target at each batch size (inf where unreached).
        interior: per batch size, False where the optimum sits on the edge of the solver's search range
            (:func:`~nqm.dynamics.optimal_steps_to_target`): the steps there are upper bounds, and the definitions
            built on them are not to be trusted.
        s_min, e_min, frontier_residual: the fit S = S_min + E_min/B and its largest relative residual.
        mccandlish: E_min/S_min (McCandlish et al. 2018).
        tolerance, reference_batch: τ and B₀ of Zhang et al. 2024's definition.
        linear_scaling: the smallest B (to a relative 1e-6) with S(B)·B > (1 + τ)·S(B₀)·B₀ (Zhang et al. 2024).
        linear_scaling_from_frontier: the hyperbola's value of the same, (1 + τ)B₀ + τ·E_min/S_min.
        run_batch: the grid's batch size nearest B_crit, whose optimal run gives the noise scales below.
        b_noise_start, b_simple_start: at θ₀ (ratios of expectations over θ₀ ~ N(0, diag(init_var))).
        b_noise_end, b_simple_end: at the end of that run (the target).
        b_noise_mean: B_noise averaged over the run in full-batch-equivalent steps, ∫B_noise ds/∫ds.
            The noise scales need the exact second moments of the run: SGD (preconditioned or not); None for
            the other families.
    """

    target: float
    family: TunedFamily
    batch_sizes: np.ndarray
    steps: np.ndarray
    interior: np.ndarray
    s_min: float
    e_min: float
    frontier_residual: float
    mccandlish: float
    tolerance: float
    reference_batch: float
    linear_scaling: float
    linear_scaling_from_frontier: float
    run_batch: float
    b_noise_start: float | None
    b_simple_start: float | None
    b_noise_end: float | None
    b_simple_end: float | None
    b_noise_mean: float | None


def linear_scaling_limit(steps_at, reference_batch: float, tolerance: float, high: float, rtol: float = 1e-6):
    """The smallest B in (B₀, ``high``] with ``steps_at(B)·B > (1 + τ)·steps_at(B₀)·B₀``, by bisection in log B
    (``steps_at`` nondecreasing in B·steps, as the fewest steps to a target are); inf when even ``high`` stays
    within the tolerance."""
    limit = (1 + tolerance) * steps_at(reference_batch) * reference_batch
    if steps_at(high) * high <= limit:
        return float("inf")
    lo, hi = np.log(reference_batch), np.log(high)
    while hi - lo > rtol:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if steps_at(np.exp(mid)) * np.exp(mid) > limit else (mid, hi)
    return float(np.exp(hi))


def linear_scaling_on_frontier(s_min: float, e_min: float, reference_batch: float, tolerance: float) -> float:
    r"""Zhang et al. 2024's B_τ on the hyperbola S = S_min + E_min/B: the B with S(B)·B = (1 + τ)·S(B₀)·B₀,

    .. math:: B_\tau = (1 + \tau) B_0 + \tau\, E_\text{min}/S_\text{min}

    (inf when S_min = 0: on a pure hyperbola S·B never grows).

    Example:
        >>> linear_scaling_on_frontier(100.0, 1000.0, 1.0, 0.2)  # 1.2 + 0.2·10
        3.2

    A NaN (a frontier that could not be fitted) gives NaN; a negative, complex or non-numeric value is refused.
    """
    limits = (("s_min", s_min, False), ("e_min", e_min, False), ("reference_batch", reference_batch, True))
    for name, value, low_open in (*limits, ("tolerance", tolerance, True)):
        v = as_real(name, value)
        if v.ndim != 0 or (v <= 0 if low_open else v < 0):
            raise ValueError(f"{name} must be a single number {'>' if low_open else '>='} 0, got {value!r}")
    if s_min == 0:
        return float("inf")
    return (1 + tolerance) * reference_batch + tolerance * e_min / s_min


def critical_batch_sizes(
    p,
    target,
    *,
    family: str = "sgd",
    init_var=1.0,
    precond=None,
    tolerance: float = 0.2,
    reference_batch: float = 1.0,
    batch_sizes=BATCH_SIZES,
) -> CriticalBatchSizes:
    """Every definition of :mod:`nqm.dynamics.studies.critical` for ``p`` and ``target`` (see there), on optimal runs of
    ``family`` (:data:`nqm.optim.FAMILIES`) at ``batch_sizes`` (default 1, 2, …, 2²⁰)."""
    family = tuned_family(family)
    tolerance = check_real("tolerance", tolerance, low=0.0, low_open=True)
    reference_batch = float(check_batch_size(check_real("reference_batch", reference_batch), single=True))
    batch = check_batch_sizes(batch_sizes)
    runs = optimal_steps_to_target(p, target, batch, family=family, init_var=init_var, precond=precond)
    s_min, e_min, residual = fit_frontier(runs.batch_sizes, runs.steps)
    crit = e_min / s_min

    def steps_at(b):
        return float(
            optimal_steps_to_target(p, target, [b], family=family, init_var=init_var, precond=precond).steps[0]
        )

    reached = np.isfinite(runs.steps)
    i = int(np.argmin(np.where(reached, np.abs(np.log(runs.batch_sizes / crit)), np.inf)))
    scales = [None] * 5
    if family.hyper is None:  # plain SGD: the noise scales of its exact second moments
        scales = _noise_scales(p, runs.optimizer(i), float(runs.batch_sizes[i]), int(runs.steps[i]), init_var)
    return CriticalBatchSizes(
        target=check_target(target),
        family=family,
        batch_sizes=runs.batch_sizes,
        steps=runs.steps,
        interior=runs.interior,
        s_min=s_min,
        e_min=e_min,
        frontier_residual=residual,
        mccandlish=crit,
        tolerance=tolerance,
        reference_batch=reference_batch,
        linear_scaling=linear_scaling_limit(steps_at, reference_batch, tolerance, float(batch[reached].max())),
        linear_scaling_from_frontier=linear_scaling_on_frontier(s_min, e_min, reference_batch, tolerance),
        run_batch=float(runs.batch_sizes[i]),
        b_noise_start=scales[0],
        b_simple_start=scales[1],
        b_noise_end=scales[2],
        b_simple_end=scales[3],
        b_noise_mean=scales[4],
    )


EXACT_STEPS = 1 << 16
"""Runs up to this many steps have their noise scale averaged over every step; longer ones (10⁹ steps at a tiny
target and B = 1) over their first :data:`EXACT_STEPS`/16 steps exactly and the rest by quadrature."""


def _noise_scales(p, opt, batch: float, steps: int, init_var) -> list[float]:
    """(B_noise, B_simple) at the start and the end of the run, and B_noise averaged in ds = dt/(1 + B_noise/B)
    over its steps: Σ_t B_noise(t)·ds_t / Σ_t ds_t over t = 0 … steps − 1 (the step from t to t + 1 is taken at
    θ_t), exact at each step (:func:`_sum_over_steps`)."""
    ends = noise_scales_along(p, opt, batch, steps, at=[0, steps], init_var=init_var)

    def weighted(t):
        b_noise = noise_scales_at(p, opt, batch, t, init_var=init_var)[:, 0]
        ds = 1.0 / (1.0 + b_noise / batch)
        return np.stack([b_noise * ds, ds], axis=1)

    total = _sum_over_steps(weighted, steps)
    return [float(ends[0, 0]), float(ends[0, 1]), float(ends[1, 0]), float(ends[1, 1]), float(total[0] / total[1])]


def _sum_over_steps(values, steps: int, rtol: float = 1e-9) -> np.ndarray:
    r"""Σ_{t=0}^{steps−1} ``values(t)`` (rows per t, columns summed separately).

    Every term where ``steps`` ≤ :data:`EXACT_STEPS`. Beyond, the first EXACT_STEPS/16 terms are summed and the rest
    by Euler–Maclaurin, :math:`\sum_{t=a}^{b} f(t) ≈ \int_a^b f\,dt + \tfrac12(f(a) + f(b))` (f is smooth in t:
    the run's moments are sums of exponentials, and the next term, (f'(b) − f'(a))/12, is below f's change over
    a step), the integral by the trapezoid rule on a grid geometric in t (the exponentials' timescales 1/(εh) span
    decades) with Richardson's step, the grid doubled until two successive estimates agree to ``rtol``."""
    if steps <= EXACT_STEPS:
        return sum(values(np.arange(t0, min(t0 + 4096, steps))).sum(axis=0) for t0 in range(0, steps, 4096))
    head = EXACT_STEPS // 16
    exact = values(np.arange(head)).sum(axis=0)

    def trapezoid(points):
        t = np.geomspace(head, steps - 1, points)
        f = values(t)
        return np.sum(0.5 * (f[1:] + f[:-1]) * np.diff(t)[:, None], axis=0) + 0.5 * (f[0] + f[-1])

    points, coarse = 512, trapezoid(512)
    previous = None
    while True:
        points *= 2
        fine = trapezoid(points)
        estimate = fine + (fine - coarse) / 3.0  # the trapezoid's error falls as (grid step)²
        if previous is not None and np.allclose(estimate, previous, rtol=rtol, atol=0.0):
            return exact + estimate
        if points >= 1 << 18:
            raise RuntimeError(f"the sum over {steps} steps did not settle to {rtol:g} on 2^18 points")
        previous, coarse = estimate, fine
