r"""Growing the batch instead of decaying the step: exact staged runs of SGD, and Smith et al.'s equivalence.

A staged run holds a step ε_j and a batch size B_j for n_j steps, stage after stage. Per coordinate of H's basis
(κ = p·h, ρ = p²c, P = diag(p) the preconditioner) each stage maps the second moment exactly,

.. math:: V \leftarrow A_j (V - W_j) + W_j,\qquad A_j = (1 - \epsilon_j\kappa)^{2n_j},\qquad
          W_j = \frac{\epsilon_j}{B_j}\,\frac{\rho}{\kappa\,(2 - \epsilon_j\kappa)},

so the loss at every stage end and the first step at which E[L] falls to a target are exact.

**Smith et al. 2018** (*Don't Decay the Learning Rate, Increase the Batch Size*, arXiv:1711.00489, §2–3) argue
that what shapes SGD is its noise scale ε/B (times the training-set size), so dividing the step by k at each
stage and multiplying the batch by k instead give the same curve of loss against examples, the second with k^j
times fewer steps in stage j. Take the two schedules with r_j = k^j:

* *decay*: ε₀/r_j at batch B₀ for r_j·n_j steps;
* *growth*: ε₀ at batch r_j·B₀ for n_j steps.

They have the same ε/B = γ_j and the same examples B₀ r_j n_j in every stage, and the same "time" τ_j = ε₀ n_j.
With x = ε₀κ,

.. math:: \log A^\text{growth}_j = 2n_j\log(1 - x) = -2\kappa\tau_j - \kappa\tau_j x + O(x^2),\qquad
          \log A^\text{decay}_j = 2r_jn_j\log(1 - x/r_j) = -2\kappa\tau_j - \kappa\tau_j x/r_j + O(x^2),

.. math:: W^\text{growth}_j = \frac{\gamma_j\rho}{2\kappa}\Bigl(1 + \frac{x}{2} + O(x^2)\Bigr),\qquad
          W^\text{decay}_j = \frac{\gamma_j\rho}{2\kappa}\Bigl(1 + \frac{x}{2r_j} + O(x^2)\Bigr).

So the two runs share one limit, A = e^{−2κτ_j} and W = γ_jρ/(2κ) — the limit ε₀ → 0 at fixed ε₀/B₀ and fixed
examples per stage, in which SGD becomes its stochastic differential equation — and differ from it, and from
each other, at first order in ε₀κ: the growth run contracts faster and settles higher. The equivalence holds
while ε₀κ_max ≪ 1 (and ε₀κ_max·κτ_j ≪ 1, for the contraction). It breaks as ε₀κ_max grows: near ε₀κ = 1 the
growth run's larger steps remove whole coordinates in one step, as ε₀κ → 2 its floor ∝ 1/(2 − ε₀κ) diverges, and
beyond 2 it diverges while the decay run, whose later steps are r_j times smaller, is stable again.
:func:`~nqm.dynamics.smith_equivalence` computes both runs exactly, their common limit, and the first-order gap
ε₀·dL/dε₀ of each (the tangent of the stage maps at ε₀ = 0, propagated through the stages).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...checks import as_real, check_batch_size, check_init_var, check_lr, check_real, check_target
from ...noise import injected_variance
from ...optim import sgd
from ...problem import NoisyQuadratic, check_precond
from ..moments import sgd_variance
from ..runs import steps_to_target
from .greedy import GreedyRun, GreedySteps, greedy_ramp
from .local_critical import LocalCriticalBatch

__all__ = [
    "StagedRun",
    "staged_run",
    "SmithEquivalence",
    "smith_equivalence",
    "milestone_ramp",
    "doubling_batches",
    "ConstantMatch",
    "constant_batch_at_steps",
]


@dataclass(frozen=True)
class StagedRun:
    """An SGD run in stages of constant step and batch size, computed exactly.

    Attributes:
        lr, batch_sizes, steps: (K,) the step, the batch size and the number of steps of each stage.
        loss: (K + 1,) E[L] at the start and at the end of every stage.
        examples: (K + 1,) examples used by those points, Σ B_j n_j.
        steps_to_target, examples_to_target: the first step with E[L] ≤ target and the examples used by then
            (inf when the run ends above the target; None when no target was given).
    """

    lr: np.ndarray
    batch_sizes: np.ndarray
    steps: np.ndarray
    loss: np.ndarray
    examples: np.ndarray
    steps_to_target: float | None
    examples_to_target: float | None


def _stage_vectors(lr, batch_sizes, steps):
    """The three per-stage arrays, checked, as float64 (K,)."""
    lr = np.atleast_1d(check_lr(lr))
    b = np.atleast_1d(check_batch_size(batch_sizes))
    n = _check_stage_steps("steps", steps)
    if lr.ndim != 1 or b.ndim != 1 or not lr.size == b.size == n.size:
        raise ValueError(
            f"lr, batch_sizes and steps must be three 1-D arrays of one length, got {lr.shape}, {b.shape}, {n.shape}"
        )
    if not np.all(np.isfinite(b)):
        raise ValueError(f"batch_sizes must be finite, got {batch_sizes!r}")
    return lr, b, n


def _check_stage_steps(name, steps) -> np.ndarray:
    n = np.atleast_1d(as_real(name, steps))
    if n.ndim != 1 or n.size == 0 or not np.all(np.isfinite(n)) or np.any(n < 0) or np.any(n != np.round(n)):
        raise ValueError(f"{name} must be a 1-D array of integers >= 0, one per stage, got {steps!r}")
    return n


def staged_run(p: NoisyQuadratic, lr, batch_sizes, steps, *, target=None, init_var=1.0, precond=None) -> StagedRun:
    r"""SGD with step ``lr[j]`` and batch ``batch_sizes[j]`` for ``steps[j]`` steps, stage after stage, exactly.

    Each stage is the closed form :math:`V \leftarrow (1 - \epsilon_j\kappa)^{2n_j}(V - W_j) + W_j` per coordinate
    (see :mod:`nqm.dynamics.studies.ramps`); with a ``target``, the first step below it is found inside the stage where
    it lies by :func:`~nqm.dynamics.steps_to_target` started from that stage's moments.

    Example:
        >>> import nqm
        >>> p = nqm.NoisyQuadratic.zhang2019(100)
        >>> run = staged_run(p, [0.5, 0.5], [64, 256], [100, 100], target=0.05)
        >>> run.examples.tolist(), bool(run.loss[2] < run.loss[1])
        ([0.0, 6400.0, 32000.0], True)
    """
    lr, b, n = _stage_vectors(lr, batch_sizes, steps)
    target = None if target is None else check_target(target)
    pre = check_precond(p, precond)
    v = check_init_var(init_var, p.d)
    kappa = pre * p.h
    examples = np.concatenate([[0.0], np.cumsum(b * n)])
    losses, to_target = [0.5 * p.h @ v], (None, None) if target is None else (np.inf, np.inf)
    for j, (eps, batch, count) in enumerate(zip(lr, b, n)):
        if target is not None and to_target[0] == np.inf:
            hit = steps_to_target(p, sgd(eps, precond), batch, target, init_var=v, max_steps=int(count))
            if hit <= count:
                to_target = (float(n[:j].sum() + hit), float(examples[j] + hit * batch))
        v = sgd_variance(eps * kappa, eps**2 * injected_variance(p, batch, pre), v, count)
        losses.append(0.5 * p.h @ v)
    return StagedRun(lr, b, n, np.array(losses), examples, *to_target)


@dataclass(frozen=True)
class SmithEquivalence:
    r"""Decaying the step against growing the batch at equal ε/B (Smith et al. 2018), exactly.

    Attributes:
        decay, growth: the two :class:`StagedRun` (ε₀/k^j at B₀ for k^j·n_j steps; ε₀ at k^j·B₀ for n_j steps).
        limit_loss: (K + 1,) their common limit at the stage ends (ε₀ → 0 at fixed ε₀/B₀ and examples: the SDE).
        first_order_decay, first_order_growth: (K + 1,) ε₀·dL/dε₀ of each run at that limit, at the stage ends.
        step_curvature: ε₀·κ_max, the small parameter of the equivalence.
    """

    decay: StagedRun
    growth: StagedRun
    limit_loss: np.ndarray
    first_order_decay: np.ndarray
    first_order_growth: np.ndarray
    step_curvature: float

    @property
    def gap(self) -> np.ndarray:
        """L_growth − L_decay at the stage ends (at equal examples), exact."""
        return self.growth.loss - self.decay.loss

    @property
    def first_order_gap(self) -> np.ndarray:
        """The same to first order in ε₀κ."""
        return self.first_order_growth - self.first_order_decay


def _first_order(p, pre, v0, lr, gamma, tau, scale):
    """Stage ends of the ε₀ → 0 limit and ε₀·dL/dε₀ there, for a run whose stage j steps ε₀/scale[j].

    Tangent of V ← A(V − W) + W with A = e^{−2κτ}(1 − κτx/s), W = W⁰(1 + x/(2s)), x = ε₀κ, s = scale[j].
    """
    kappa = pre * p.h
    rho = injected_variance(p, 1.0, pre)  # p²c
    v, dv = v0.copy(), np.zeros(p.d)
    limit, first = [0.5 * p.h @ v], [0.0]
    for g, t, s in zip(gamma, tau, scale):
        a = np.exp(-2.0 * kappa * t)
        w = g * rho / (2.0 * kappa)
        da = -a * kappa * t * (lr * kappa) / s  # ε₀·dA/dε₀
        dw = w * (lr * kappa) / (2.0 * s)  # ε₀·dW/dε₀
        v, dv = a * (v - w) + w, a * dv + da * (v - w) + (1.0 - a) * dw
        limit.append(0.5 * p.h @ v)
        first.append(0.5 * p.h @ dv)
    return np.array(limit), np.array(first)


def smith_equivalence(
    p: NoisyQuadratic, lr, batch_size, factor, stage_steps, *, target=None, init_var=1.0, precond=None
) -> SmithEquivalence:
    r"""Decay the step by ``factor`` per stage, or grow the batch by it: both runs, exactly, and their limit.

    Stage j of the *growth* run takes ``stage_steps[j]`` steps of ε₀ = ``lr`` at batch k^j·B₀; the *decay* run
    takes k^j times as many steps of ε₀/k^j at B₀ (k = ``factor``, B₀ = ``batch_size``), so both spend the same
    examples at the same ε/B. The module docstring derives where they agree (ε₀κ_max ≪ 1) and how they part.

    Smith et al. 2018 (arXiv:1711.00489), §2–3: SGD's noise scale is ∝ ε/B, and "increasing the batch size
    during training ... achieves the same test accuracy after the same number of training epochs, but with fewer
    parameter updates".

    Example:
        >>> import nqm
        >>> p = nqm.NoisyQuadratic.zhang2019(100)
        >>> s = smith_equivalence(p, 0.01, 16, 4, [400, 400, 400])
        >>> s.growth.steps.tolist(), s.decay.steps.tolist()
        ([400.0, 400.0, 400.0], [400.0, 1600.0, 6400.0])
        >>> bool(abs(s.gap[-1]) < 0.02 * s.decay.loss[-1])
        True
    """
    eps0 = check_real("lr", lr, low=0.0, low_open=True)
    if np.ndim(batch_size) != 0:
        raise ValueError(f"batch_size must be a single number here, got {batch_size!r}")
    b0 = float(check_batch_size(batch_size, single=True))
    k = check_real("factor", factor, low=1.0)
    n = _check_stage_steps("stage_steps", stage_steps)
    r = k ** np.arange(n.size)
    decay_steps = r * n
    if np.any(decay_steps != np.round(decay_steps)) or not np.all(np.isfinite(decay_steps)):
        raise ValueError(f"factor**j · stage_steps[j] must be integers (the decay run's steps), got factor={factor!r}")
    pre = check_precond(p, precond)
    v0 = check_init_var(init_var, p.d)
    decay = staged_run(p, eps0 / r, np.full(n.size, b0), decay_steps, target=target, init_var=v0, precond=precond)
    growth = staged_run(p, np.full(n.size, eps0), b0 * r, n, target=target, init_var=v0, precond=precond)
    gamma, tau = eps0 / (b0 * r), eps0 * n
    limit, first_decay = _first_order(p, pre, v0, eps0, gamma, tau, r)
    _, first_growth = _first_order(p, pre, v0, eps0, gamma, tau, np.ones(n.size))
    return SmithEquivalence(decay, growth, limit, first_decay, first_growth, float(eps0 * (pre * p.h).max()))


# -- batch ramps in loss milestones, against the constant batch ------------------------------------------------


def milestone_ramp(
    p: NoisyQuadratic, milestones, batch_sizes, target, *, init_var=1.0, precond=None, max_steps: int = 10**7
) -> GreedyRun:
    """Greedy steps at ``batch_sizes[0]`` until E[L] first reaches ``milestones[0]``, then at ``batch_sizes[1]``
    until it reaches ``milestones[1]``, and so on (``batch_sizes`` has one more entry than the decreasing
    ``milestones``), to ``target``.

    A batch-size warmup in the loss rather than in steps: Merrill et al. 2025 (arXiv:2505.23971) grow the batch
    at the points where the local critical batch has grown (:func:`doubling_batches`). The step is the greedy one
    for the current batch (:func:`~nqm.dynamics.greedy_ramp`). Once a milestone is reached the run keeps its
    batch, even if the loss rises again.
    """
    goals = np.asarray([check_target(m) for m in np.atleast_1d(milestones)])
    batches = np.atleast_1d(check_batch_size(batch_sizes))
    if goals.ndim != 1 or np.any(np.diff(goals) >= 0) or batches.shape != (goals.size + 1,):
        raise ValueError(
            f"milestones must decrease and batch_sizes have one more entry, got {goals.size} milestones and "
            f"{batches.size} batch sizes"
        )
    reached = [0]  # milestones reached so far: the rule sees the losses in order

    def rule(b_noise, loss):
        while reached[0] < goals.size and loss <= goals[reached[0]]:
            reached[0] += 1
        return batches[reached[0]]

    return greedy_ramp(p, rule, target, init_var=init_var, precond=precond, max_steps=max_steps)


def doubling_batches(local: LocalCriticalBatch) -> np.ndarray:
    """Merrill et al. 2025's batch-size warmup on a measured local critical batch: the batch before the first
    checkpoint and after each, B₀·2^k with k the largest such that B₀·2^k ≤ the local critical batch there (the
    grid's largest batch where every branch stayed within the tolerance), and never smaller than before (for
    :func:`milestone_ramp` with ``local.milestones[:-1]``)."""
    ratio = np.minimum(local.critical, local.batch_sizes.max()) / local.small_batch  # inf: the whole grid
    doublings = np.maximum.accumulate(np.floor(np.log2(np.maximum(ratio, 1.0))))
    return local.small_batch * 2.0 ** np.concatenate([[0.0], doublings])


@dataclass(frozen=True)
class ConstantMatch:
    """A constant batch size matched to a run: its batch size, and the steps and examples its greedy run takes to
    the target."""

    batch_size: float
    steps: float
    examples: float


def _first_batch_where(ok, lo: float, hi: float, rtol: float = 1e-9):
    """The smallest B in (lo, hi] with ok(B), for ok monotone (False at lo, True at hi), on grids of 33 at once."""
    while hi / lo - 1 > rtol:
        grid = np.geomspace(lo, hi, 33)
        k = int(np.argmax(ok(grid)))  # the first True; the last point is True
        lo, hi = grid[max(k - 1, 0)], grid[k]
        if k == 0:
            break
    return hi


def constant_batch_at_steps(
    p: NoisyQuadratic, steps, target, *, init_var=1.0, precond=None, max_steps: int = 10**7
) -> ConstantMatch:
    """The smallest constant batch size whose greedy run reaches ``target`` within ``steps`` steps (to a relative
    1e-9 in B), with the examples that run uses: what a constant batch must spend to be as fast as a ramp.

    The steps S(B) of the greedy run fall as B grows (less noise in every step), so the batch is found by
    narrowing a bracket on grids of 33 batch sizes. Raises ValueError when even the noise-free run (B = ∞) needs
    more steps.
    """
    goal = check_target(target)
    want = check_real("steps", steps, low=0.0)
    greedy = GreedySteps(p, precond)
    v0 = check_init_var(init_var, p.d)[None, :]

    def steps_at(batch):  # a run is cut off after `want` steps: only whether it gets there in time matters
        batch = np.atleast_1d(np.asarray(batch, dtype=np.float64))
        return greedy.run_to(np.repeat(v0, batch.size, axis=0), batch, goal, min(want, max_steps))[0]

    if steps_at(np.inf)[0] > want:
        raise ValueError(f"no batch size reaches the target within {want!r} steps (not even B = inf)")
    if steps_at(1.0)[0] <= want:
        b = 1.0
    else:
        hi = 2.0
        while steps_at(hi)[0] > want:
            hi *= 2.0
        b = _first_batch_where(lambda grid: steps_at(grid) <= want, hi / 2.0, hi)
    s = float(greedy.run_to(v0, np.array([b]), goal, max_steps)[0][0])
    return ConstantMatch(float(b), s, b * s)
