r"""The greedy SGD step on exact second moments, for many runs at once, and the greedy runs built on it.

Given the second moments M_t = E[θ_tθ_tᵀ] (diagonal V in H's basis) the step that maximises the expected
improvement at batch size B is (McCandlish et al. 2018, arXiv:1812.06162, eq. 2.6 in expectation; App. D)

.. math:: \epsilon_t = \frac{\operatorname{tr}(PH^2M_t)}{\operatorname{tr}(P^2H^3M_t)
          + \operatorname{tr}(P^2H\Sigma)/B},

after which the moments update exactly, V ← (1 − ε_t p h)²V + ε_t²p²c/B. The noise scale of the current moments
is B_noise = tr(P²HΣ)/tr(P²H³M_t), and the step gains ΔL_max/(1 + B_noise/B). ``GreedySteps`` holds the
weights of these traces for one problem and steps rows of V, one run per row. Built on it: here, the greedy
schedule at a constant batch size, McCandlish et al.'s adaptive batch size and the greedy run under any batch
rule (:func:`~nqm.dynamics.greedy_ramp`); elsewhere, the branches of the local critical batch
(:mod:`.local_critical`) and the batch ramps in loss milestones (:mod:`.ramps`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...checks import check_batch_size, check_init_var, check_target
from ...noise import injected_variance, trace_h_sigma
from ...problem import NoisyQuadratic, check_precond

__all__ = ["GreedySteps", "GreedyRun", "greedy_run", "greedy_schedule", "greedy_ramp", "adaptive_batch_schedule"]


class GreedySteps:
    """The greedy step of one problem (and preconditioner) on rows of second moments V (n, d)."""

    def __init__(self, p: NoisyQuadratic, precond=None):
        pre = check_precond(p, precond)
        self.half_h = 0.5 * p.h
        self.ph = pre * p.h
        self.grad_w = pre * p.h**2  # tr(PH²M) = Σ p h² V
        self.curv_w = pre**2 * p.h**3  # tr(P²H³M) = Σ p² h³ V
        self.noise = trace_h_sigma(p, pre)  # tr(P²HΣ)
        self.injected = injected_variance(p, 1.0, pre)  # per unit batch

    def loss(self, v) -> np.ndarray:
        """E[L] = ½Σ h V of every row."""
        return v @ self.half_h

    def b_noise(self, v) -> np.ndarray:
        """B_noise = tr(P²HΣ)/tr(P²H³M) of every row."""
        return self.noise / (v @ self.curv_w)

    def step(self, v, batch):
        """One greedy step of every row at its batch size (n,): the new V, the steps ε and B_noise before it."""
        curvature = v @ self.curv_w
        eps = (v @ self.grad_w) / (curvature + self.noise / batch)
        return (
            (1 - eps[:, None] * self.ph) ** 2 * v + (eps**2 / batch)[:, None] * self.injected,
            eps,
            self.noise / curvature,
        )

    def run_to(self, v, batch, target, max_steps):
        """Run every row at its batch size until its E[L] ≤ target.

        Returns the steps each row took (inf past ``max_steps``), the rows' V where they stopped, and ∫B_noise ds
        and ∫ds over each row's run in full-batch-equivalent steps ds = 1/(1 + B_noise/B) (App. D). The rows still
        running are kept contiguous (compacted when some finish), so a step is one pass over them and no gather.
        """
        v, steps = np.array(v, dtype=np.float64), np.full(len(batch), np.inf)
        noise_s, s = np.zeros(len(batch)), np.zeros(len(batch))
        rows = np.nonzero(self.loss(v) > target)[0]
        steps[np.setdiff1d(np.arange(len(batch)), rows)] = 0
        live, live_b, count = v[rows], batch[rows], 0
        while rows.size and count < max_steps:
            live, _, b_noise = self.step(live, live_b)
            ds = 1.0 / (1.0 + b_noise / live_b)
            noise_s[rows] += b_noise * ds
            s[rows] += ds
            count += 1
            done = self.loss(live) <= target
            if np.any(done):
                steps[rows[done]] = count
                v[rows[done]] = live[done]
                rows, live, live_b = rows[~done], live[~done], live_b[~done]
        v[rows] = live
        return steps, v, noise_s, s


@dataclass
class GreedyRun:
    """A greedy run: step sizes (T,), batch sizes (T,), expected losses (T+1,), the steps it took (inf if the
    cap came first) and the examples it used (Σ B_t)."""

    lr: np.ndarray
    loss: np.ndarray
    steps: float
    batch_sizes: np.ndarray
    examples: float


def greedy_run(p, batch_rule, steps, init_var, precond, target) -> GreedyRun:
    """Greedy steps with B_t = batch_rule(b_noise_t, loss_t): B_noise = tr(P²HΣ)/tr(P²H³M_t) and E[L_t] now."""
    if steps is None and target is None:
        raise ValueError("give steps, or target (with steps as an optional cap)")
    if target is not None:
        target = check_target(target)
    greedy = GreedySteps(p, precond)
    cap = int(steps) if steps is not None else 10**7
    v = np.array(check_init_var(init_var, p.d), dtype=np.float64)[None, :]
    lrs, batches, losses = [], [], [float(greedy.loss(v)[0])]
    for _ in range(cap):
        if target is not None and losses[-1] <= target:
            break
        b = float(batch_rule(float(greedy.b_noise(v)[0]), losses[-1]))
        v, eps, _ = greedy.step(v, np.array([b]))
        lrs.append(float(eps[0]))
        batches.append(b)
        losses.append(float(greedy.loss(v)[0]))
    reached = target is None or losses[-1] <= target
    n = len(lrs) if reached else float("inf")
    return GreedyRun(np.array(lrs), np.array(losses), n, np.array(batches), float(np.sum(batches)) if reached else n)


def greedy_schedule(
    p: NoisyQuadratic, batch_size, steps: int | None = None, *, init_var=1.0, precond=None, target=None
) -> GreedyRun:
    """At every step the step size that maximises the expected improvement given the current moments.

    .. math:: \\epsilon_t = \\frac{\\operatorname{tr}(PH^2M_t)}{\\operatorname{tr}(P^2H^3M_t)
              + \\operatorname{tr}(P^2H\\Sigma)/B},\\qquad M_t = \\mathbb E[\\theta_t\\theta_t^\\top]

    (McCandlish et al. 2018, arXiv:1812.06162, eq. 2.6 with ``|G|²`` → ``E|G|²``, and App. D), then the exact SGD
    moment update ``V ← (1 − ε_t p h)²V + ε_t²p²c/B``. Runs ``steps`` steps, or until E[L] ≤ ``target``
    (then ``steps`` caps the run; inf steps when the cap is reached first).
    """
    b = float(check_batch_size(batch_size, single=True))
    return greedy_run(p, lambda b_noise, loss: b, steps, init_var, precond, target)


def greedy_ramp(
    p: NoisyQuadratic, batch_rule, target, *, init_var=1.0, precond=None, max_steps: int = 10**7
) -> GreedyRun:
    """Greedy steps with the batch size chosen before every step by ``batch_rule(b_noise, loss)``, to ``target``.

    ``b_noise`` is B_noise = tr(P²HΣ)/tr(P²H³M_t) of the current second moments and ``loss`` the current E[L];
    the rule returns a batch size ≥ 1 and the step is the greedy one for it (:func:`greedy_schedule`). A rule of
    the loss alone is a batch ramp in loss milestones (:func:`nqm.dynamics.milestone_ramp`); App. D's rule of
    B_noise alone is :func:`adaptive_batch_schedule`. Inf steps when ``max_steps`` comes first.
    """
    if not callable(batch_rule):
        raise TypeError(f"batch_rule must be a callable (b_noise, loss) -> batch size, got {batch_rule!r}")
    target = check_target(target)

    def checked_rule(b_noise, loss):
        return float(check_batch_size(batch_rule(b_noise, loss), single=True))

    return greedy_run(p, checked_rule, max_steps, init_var, precond, target)


def adaptive_batch_schedule(
    p: NoisyQuadratic, exchange_rate, target, *, init_var=1.0, precond=None, max_steps: int = 10**7
) -> GreedyRun:
    """Greedy steps with the batch size of McCandlish et al. App. D: ``B_t = √(r·B_noise(t))``.

    ``B_noise(t) = tr(P²HΣ)/tr(P²H³M_t)`` is the noise scale of the current second moments (ratio of
    expectations) and ``r`` the exchange rate of steps for examples (r = B²/B_noise at the optimum). The
    step size is the greedy one for B_t. In App. D's continuous model this costs
    S/S_min − 1 = γ/(E/E_min − 1) with γ = (∫√B_noise ds)²/(S_min·E_min) ≤ 1 against 1 for any constant B;
    ``nqm validate`` measures how well that holds on the exact dynamics.
    """
    r = float(exchange_rate)
    if not np.isfinite(r) or r <= 0:
        raise ValueError(f"exchange_rate must be finite and > 0, got {exchange_rate!r}")
    return greedy_run(p, lambda b_noise, loss: max(1.0, np.sqrt(r * b_noise)), max_steps, init_var, precond, target)
