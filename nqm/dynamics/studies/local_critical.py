r"""The local critical batch size along a run (Merrill et al. 2025), measured exactly by branching.

Merrill et al. 2025 (*Critical Batch Size Revisited*, arXiv:2505.23971) measure the critical batch size *during*
training: from checkpoints of a small-batch run they branch at larger batch sizes, re-tune the step, and call the
local critical batch the largest B whose examples to the next loss milestone stay within a tolerance of the
small-batch branch's. Here every branch is exact: it starts from the checkpoint's second moments M and runs the
greedy step of McCandlish et al. 2018 (arXiv:1812.06162, eq. 2.6 in expectation) at its batch size,

.. math:: \epsilon_t = \frac{\operatorname{tr}(PH^2M_t)}{\operatorname{tr}(P^2H^3M_t)
          + \operatorname{tr}(P^2H\Sigma)/B},

the step re-tuned at every step rather than once per branch, until E[L] falls to the next milestone.

**What the one-step law predicts.** With that step each step gains ΔL_max/(1 + B_noise/B), B_noise =
tr(P²HΣ)/tr(P²H³M), so the examples per unit of loss are ∝ B + B_noise. Within a segment where B_noise stays
put, E(B)/E(B₀) = (B + B_noise)/(B₀ + B_noise), and the local critical batch with tolerance τ is

.. math:: B_\text{local} = \tau\,B_\text{noise} + (1 + \tau)\,B_0,

the same form as Zhang et al. 2024's rule on McCandlish's hyperbola. Where B_noise moves within the segment,
the examples per unit of loss add up as ∫(B + B_noise)ds, which puts the average of B_noise over the segment in
full-batch-equivalent steps ds = dt/(1 + B_noise/B₀) (McCandlish et al.'s App. D) in place of B_noise. The exact
branches depart from both as their paths differ from the small-batch one and as the larger batches take few,
whole steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...checks import check_batch_size, check_batch_sizes, check_init_var, check_real, check_target
from ...problem import NoisyQuadratic
from .greedy import GreedySteps

__all__ = ["LocalCriticalBatch", "local_critical_batch"]

DEFAULT_BATCH_SIZES = 2.0 ** np.arange(0, 24.25, 0.25)


@dataclass(frozen=True)
class LocalCriticalBatch:
    """Merrill et al.'s local critical batch at checkpoints of a small-batch greedy run.

    Attributes:
        milestones: (M + 1,) the losses: checkpoint m is where the small-batch run first reaches milestones[m], and
            its branches run to milestones[m + 1].
        small_batch, tolerance, batch_sizes: B₀, τ and the grid of branch batch sizes (nB,), B₀ first.
        checkpoint_steps: (M,) the small-batch run's step at each checkpoint.
        branch_steps: (M, nB) steps each branch takes to the next milestone.
        critical: (M,) the largest grid B up to which every branch's examples B·steps stay within (1 + τ) times the
            small-batch branch's (inf when the whole grid does).
        b_noise: (M,) B_noise = tr(P²HΣ)/tr(P²H³M) at the checkpoint.
        b_noise_mean: (M,) B_noise averaged over the small-batch branch in full-batch-equivalent steps,
            ∫B_noise ds/∫ds with ds = dt/(1 + B_noise/B₀).
        one_step, one_step_mean: (M,) the one-step law's τ·B_noise + (1 + τ)·B₀ with either B_noise.
    """

    milestones: np.ndarray
    small_batch: float
    tolerance: float
    batch_sizes: np.ndarray
    checkpoint_steps: np.ndarray
    branch_steps: np.ndarray
    critical: np.ndarray
    b_noise: np.ndarray
    b_noise_mean: np.ndarray
    one_step: np.ndarray
    one_step_mean: np.ndarray

    @property
    def branch_examples(self) -> np.ndarray:
        """(M, nB) examples each branch uses to the next milestone."""
        return self.branch_steps * self.batch_sizes


def local_critical_batch(
    p: NoisyQuadratic,
    small_batch,
    milestones,
    *,
    tolerance=0.2,
    batch_sizes=None,
    init_var=1.0,
    precond=None,
    max_steps: int = 10**7,
) -> LocalCriticalBatch:
    r"""The local critical batch (Merrill et al. 2025) at each milestone of a small-batch greedy run, exactly.

    The reference run takes greedy steps at ``small_batch`` from θ₀ ~ N(0, diag(init_var)); where it first reaches
    ``milestones[m]`` (decreasing losses) its second moments are the checkpoint, from which a greedy branch runs at
    each of ``batch_sizes`` (default 2^(k/4) up to 2²⁴, those ≥ B₀) to ``milestones[m + 1]``. The local critical
    batch is the largest B up to which every branch's examples B·S_m(B) stay within ``(1 + tolerance)`` times the
    small-batch branch's. The module docstring derives the one-step law's value τ·B_noise + (1 + τ)·B₀, returned
    beside it.

    Example:
        >>> import nqm
        >>> p = nqm.NoisyQuadratic.zhang2019(100)
        >>> loss0 = 0.5 * float(p.h.sum())
        >>> local = local_critical_batch(p, 1, loss0 * np.array([0.3, 0.1, 0.03]))
        >>> bool(local.critical[1] > local.critical[0] > 1)
        True
    """
    if np.ndim(small_batch) != 0:
        raise ValueError(f"small_batch must be a single number, got {small_batch!r}")
    b0 = float(check_batch_size(small_batch, single=True))
    if not np.isfinite(b0):
        raise ValueError(f"small_batch must be finite, got {small_batch!r}")
    tau = check_real("tolerance", tolerance, low=0.0, low_open=True)
    goals = np.atleast_1d(np.asarray([check_target(m) for m in np.atleast_1d(milestones)]))
    if goals.ndim != 1 or goals.size < 2 or np.any(np.diff(goals) >= 0):
        raise ValueError(f"milestones must be at least two decreasing losses, got {milestones!r}")
    grid = DEFAULT_BATCH_SIZES if batch_sizes is None else check_batch_sizes(batch_sizes)
    grid = np.concatenate([[b0], np.unique(grid[(grid > b0) & np.isfinite(grid)])])
    greedy = GreedySteps(p, precond)
    v = check_init_var(init_var, p.d)[None, :]
    steps_done, checkpoints, branch_steps, b_noise, b_noise_mean = 0.0, [], [], [], []
    for start, goal in zip(goals[:-1], goals[1:]):
        taken, v, _, _ = greedy.run_to(v, np.array([b0]), start, max_steps)
        steps_done += taken[0]
        if not np.isfinite(steps_done):
            raise ValueError(f"the small-batch run does not reach the milestone {start!r} within max_steps")
        checkpoints.append(steps_done)
        b_noise.append(float(greedy.b_noise(v)[0]))
        steps, _, noise_s, s = greedy.run_to(np.repeat(v, grid.size, axis=0), grid, goal, max_steps)
        branch_steps.append(steps)
        b_noise_mean.append(noise_s[0] / s[0])  # along the small-batch branch
    branch_steps = np.array(branch_steps)
    examples = branch_steps * grid
    within = np.cumprod(examples <= (1 + tau) * examples[:, :1], axis=1).astype(bool)
    last = within.sum(axis=1) - 1
    critical = np.where(within[:, -1], np.inf, grid[last])
    b_noise, b_noise_mean = np.array(b_noise), np.array(b_noise_mean)
    return LocalCriticalBatch(
        goals,
        b0,
        tau,
        grid,
        np.array(checkpoints),
        branch_steps,
        critical,
        b_noise,
        b_noise_mean,
        tau * b_noise + (1 + tau) * b0,
        tau * b_noise_mean + (1 + tau) * b0,
    )
