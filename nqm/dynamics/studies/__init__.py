"""Studies built on the exact runs: the critical batch size by each of its definitions and its limits, the
steps/examples frontier, the greedy step and the schedules and batch ramps built on it, and optimal piecewise
schedules.

The public face of the package; the pieces live behind it:

* :mod:`.critical` — the critical batch size by each of its definitions, on the same optimal runs;
* :mod:`.critical_scaling` — its two limits (S_min as B → ∞, E_min as B → 0) and how B_crit grows as the target
  falls, with the exponent α_B derived for power-law problems;
* :mod:`.frontier` — the steps/examples frontier S = S_min + E_min/B fitted to optimal runs;
* :mod:`.greedy` — the greedy step on exact second moments; the greedy schedule, McCandlish et al.'s adaptive
  batch size and greedy runs under any batch rule;
* :mod:`.local_critical` — Merrill et al.'s local critical batch along a run, by exact branches;
* :mod:`.ramps` — SGD in stages of constant step and batch size, exactly; Smith et al.'s equivalence of
  decaying the step and growing the batch; batch ramps in loss milestones against the constant batch;
* :mod:`.schedules` — optimal piecewise-constant schedules.
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
from .frontier import fit_frontier, fit_frontiers
from .greedy import GreedyRun, adaptive_batch_schedule, greedy_ramp, greedy_schedule
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
from .schedules import PiecewiseSchedule, optimal_piecewise_schedule

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
    "fit_frontier",
    "fit_frontiers",
    "greedy_schedule",
    "GreedyRun",
    "greedy_ramp",
    "adaptive_batch_schedule",
    "optimal_piecewise_schedule",
    "PiecewiseSchedule",
    "staged_run",
    "StagedRun",
    "smith_equivalence",
    "SmithEquivalence",
    "milestone_ramp",
    "doubling_batches",
    "constant_batch_at_steps",
    "ConstantMatch",
    "local_critical_batch",
    "LocalCriticalBatch",
]
