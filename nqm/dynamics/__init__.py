"""Exact expected training dynamics: no sampling, only second moments.

The public face of the package; the pieces live behind it, in three rooms by role:

* :mod:`.moments` — second moments per coordinate in closed form (SGD, heavy ball, an EMA of SGD, any two-state
  transition) and E[L_t] of any linear optimiser, its steady state and the noise scales along a run;
* :mod:`.runs` — whole runs: exact steps to a target loss, and the hyper-parameters that minimise them;
* :mod:`.studies` — what is built on them: the critical batch size by each definition and its limits, the
  steps/examples frontier, the greedy schedule and adaptive batch size, the local critical batch, staged runs,
  Smith et al.'s equivalence, batch ramps and optimal piecewise schedules.

Arrows point from studies to runs to moments, never back.

References: Zhang et al. 2019 (arXiv:1907.04164); McCandlish et al. 2018 (arXiv:1812.06162).
"""

from .moments import (
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
from .runs import OptimalRuns, optimal_steps_to_target, steps_to_target
from .studies import (
    ConstantMatch,
    CriticalBatchSizes,
    CriticalScaling,
    GreedyRun,
    LocalCriticalBatch,
    PiecewiseSchedule,
    ScalingExponents,
    SmallBatchLimit,
    SmithEquivalence,
    StagedRun,
    adaptive_batch_schedule,
    constant_batch_at_steps,
    critical_batch_scaling,
    critical_batch_sizes,
    doubling_batches,
    fit_frontier,
    fit_frontiers,
    greedy_ramp,
    greedy_schedule,
    large_batch_steps,
    linear_scaling_limit,
    linear_scaling_on_frontier,
    local_critical_batch,
    milestone_ramp,
    optimal_piecewise_schedule,
    scaling_exponents,
    small_batch_examples,
    smith_equivalence,
    staged_run,
)

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
