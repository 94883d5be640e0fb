r"""The greedy SGD step on exact second moments, for many runs at once.

Given the second moments M_t = E[θ_tθ_tᵀ] (diagonal V in H's basis) the step that maximises the expected
improvement at batch size B is (McCandlish et al. 2018, arXiv:1812.06162, eq. 2.6 in expectation; App. D)

.. math:: \epsilon_t = \frac{\operatorname{tr}(PH^2M_t)}{\operatorname{tr}(P^2H^3M_t)
          + \operatorname{tr}(P^2H\Sigma)/B},

after which the moments update exactly, V ← (1 − ε_t p h)²V + ε_t²p²c/B. The noise scale of the current moments
is B_noise = tr(P²HΣ)/tr(P²H³M_t), and the step gains ΔL_max/(1 + B_noise/B). ``GreedySteps`` holds the
weights of these traces for one problem and steps rows of V, one run per row: the greedy schedule and the
adaptive batch size (:mod:`.schedules`), the branches of the local critical batch (:mod:`.local_critical`) and
the batch ramps (:mod:`.ramps`) are all built on it.
"""

from __future__ import annotations

import numpy as np

from ..noise import injected_variance
from ..problem import NoisyQuadratic, check_precond

__all__ = ["GreedySteps"]


class GreedySteps:
    """The greedy step of one problem (and preconditioner) on rows of second moments V (n, d)."""

    def __init__(self, p: NoisyQuadratic, precond=None):
        pre = check_precond(p, precond)
        self.half_h = 0.5 * p.h
        self.ph = pre * p.h
        self.grad_w = pre * p.h**2  # tr(PH²M) = Σ p h² V
        self.curv_w = pre**2 * p.h**3  # tr(P²H³M) = Σ p² h³ V
        self.noise = float((pre**2 * p.h) @ p.c)  # tr(P²HΣ)
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
