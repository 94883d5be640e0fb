"""Exact expected training dynamics: no sampling, only second moments.

The public face of the package; the pieces live behind it:

* :mod:`.expected` — E[L_t] of any linear optimiser (:mod:`nqm.optim`), its steady state, SGD's per-coordinate
  variance and the noise scales along an expected run;
* :mod:`.moments` — closed forms of the second moments (heavy ball, an EMA of SGD, any two-state transition);
* :mod:`.whole_runs` — exact steps to a target loss, and the hyper-parameters that minimise them;
* :mod:`.schedules` — the greedy schedule, optimal piecewise-constant schedules, McCandlish et al.'s adaptive
  batch size;
* :mod:`.greedy` — the greedy step on exact second moments, for many runs at once;
* :mod:`.local_critical` — Merrill et al.'s local critical batch along a run, by exact branches;
* :mod:`.ramps` — SGD in stages of constant step and batch size, exactly; Smith et al.'s equivalence of
  decaying the step and growing the batch; batch ramps in loss milestones against the constant batch;
* :mod:`.frontier` — the steps/examples frontier S = S_min + E_min/B fitted to optimal runs;
* :mod:`.critical` — the critical batch size by each of its definitions, on the same optimal runs;
* :mod:`.critical_scaling` — its two limits (S_min as B → ∞, E_min as B → 0) and how B_crit grows as the target
  falls, with the exponent α_B derived for power-law problems.

References: Zhang et al. 2019 (arXiv:1907.04164); McCandlish et al. 2018 (arXiv:1812.06162).
"""

from .critical import CriticalBatchSizes, critical_batch_sizes, linear_scaling_limit, linear_scaling_on_frontier
from .critical_scaling import (
    CriticalScaling,
    ScalingExponents,
    SmallBatchLimit,
    critical_batch_scaling,
    large_batch_steps,
    scaling_exponents,
    small_batch_examples,
)
from .expected import (
    DecayedSgdMoments,
    coordinate_variance,
    decay_fixed_point,
    expected_loss,
    mean_path,
    noise_scales_along,
    noise_scales_at,
    sgd_variance,
    steady_state_loss,
)
from .frontier import fit_frontier, fit_frontiers
from .local_critical import LocalCriticalBatch, local_critical_batch
from .ramps import (
    ConstantMatch,
    SmithEquivalence,
    StagedRun,
    constant_batch_at_steps,
    doubling_batches,
    milestone_ramp,
    smith_equivalence,
    staged_run,
)
from .schedules import (
    GreedyRun,
    PiecewiseSchedule,
    adaptive_batch_schedule,
    greedy_ramp,
    greedy_schedule,
    optimal_piecewise_schedule,
)
from .whole_runs import OptimalRuns, optimal_steps_to_target, steps_to_target

__all__ = [
    "critical_batch_sizes",
    "CriticalBatchSizes",
    "linear_scaling_limit",
    "linear_scaling_on_frontier",
    "large_batch_steps",
    "small_batch_examples",
    "SmallBatchLimit",
    "scaling_exponents",
    "ScalingExponents",
    "critical_batch_scaling",
    "CriticalScaling",
    "expected_loss",
    "steady_state_loss",
    "sgd_variance",
    "coordinate_variance",
    "decay_fixed_point",
    "mean_path",
    "DecayedSgdMoments",
    "noise_scales_along",
    "noise_scales_at",
    "fit_frontier",
    "fit_frontiers",
    "steps_to_target",
    "optimal_steps_to_target",
    "OptimalRuns",
    "greedy_schedule",
    "GreedyRun",
    "optimal_piecewise_schedule",
    "PiecewiseSchedule",
    "adaptive_batch_schedule",
    "staged_run",
    "StagedRun",
    "smith_equivalence",
    "SmithEquivalence",
    "greedy_ramp",
    "milestone_ramp",
    "doubling_batches",
    "constant_batch_at_steps",
    "ConstantMatch",
    "local_critical_batch",
    "LocalCriticalBatch",
]
