"""The per-coordinate recurrence a diagonal simulator runs, taken from an optimiser's transition.

For a diagonal problem (Σ diagonal in H's basis, no rotation) every coordinate of every replica follows the
optimiser's transition (:mod:`nqm.optim`) with real normals z:

.. math:: s_{t+1} = F\\,s_t + g\\,\\sigma z_t,

and an iterate EMA is a filter on the first component, ``θ̃ ← γ(θ̃ − θ) + θ``, that does not feed back. The
simulators keep their loops fast by the *shape* of F, not by the optimiser's name:

* ``"one"``: one state (SGD, preconditioned SGD): ``x ← f₀₀x + g₀σz``;
* ``"shift"``: two states whose second is the previous first (heavy ball on positions):
  ``x ← f₀₀x + f₀₁y + g₀σz``, ``y ← x``;
* ``"two"``: any other two-state transition (Nesterov): both rows in full.

Weight decay with an optimum θ* ≠ 0 adds a constant ``drift`` to θ's row each step (:func:`nqm.noise.decay_pull`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..noise import decay_pull, step_coefficients
from ..optim import as_optimizer, require_linear, split_average
from ..problem import NoisyQuadratic

__all__ = ["DiagonalRecurrence", "diagonal_recurrence"]


@dataclass(frozen=True)
class DiagonalRecurrence:
    """Per coordinate: transition ``f`` (d, m, m), noise gains ``gain`` (d, m), noise scale ``sigma`` (d,),
    the starting state ``initial`` = e (s₀ = eθ₀), the EMA coefficient ``gamma`` (0: none), the ``kind``, and
    ``drift`` (d,), weight decay's constant pull on θ's row when the optimum is not 0, and ``start`` (d, m),
    what it adds to the starting state (None, None: no pull)."""

    kind: str
    f: np.ndarray
    gain: np.ndarray
    sigma: np.ndarray
    initial: tuple
    gamma: float
    drift: np.ndarray | None = None
    start: np.ndarray | None = None

    @property
    def order(self) -> int:
        return self.f.shape[-1]

    def coefficients(self, dtype) -> np.ndarray:
        """(6, d) rows f₀₀, f₀₁, f₁₀, f₁₁, u₀, u₁ with u = gσ, in ``dtype`` (zeros for a one-state kind): the
        layout of the fused kernel's ``coef`` argument."""
        d, m = self.sigma.size, self.order
        out = np.zeros((6, d))
        out[0] = self.f[:, 0, 0]
        out[4] = self.gain[:, 0] * self.sigma
        if m == 2:
            out[1], out[2], out[3] = self.f[:, 0, 1], self.f[:, 1, 0], self.f[:, 1, 1]
            out[5] = self.gain[:, 1] * self.sigma
        return out.astype(dtype)


def diagonal_recurrence(p: NoisyQuadratic, opt, batch_size) -> DiagonalRecurrence:
    """The recurrence of ``opt`` (an optimiser value or a step ε) at batch size B on a diagonal problem."""
    opt = require_linear(as_optimizer(opt), "the fused diagonal simulators")
    core, gamma = split_average(opt)
    lam, sigma = step_coefficients(p, core, batch_size)
    f, gain = core.transition(lam)
    m = f.shape[-1]
    if m == 1:
        kind = "one"
    elif m == 2 and np.all(f[:, 1, 0] == 1) and np.all(f[:, 1, 1] == 0) and np.all(gain[:, 1] == 0):
        kind = "shift"
    elif m == 2:
        kind = "two"
    else:
        raise ValueError(f"the diagonal simulators run transitions of one or two states; {core!r} has {m}")
    pull = decay_pull(p, core)
    if pull is None:
        return DiagonalRecurrence(kind, f, gain, sigma, tuple(core.initial), float(gamma))
    if np.any(pull.step[:, 1:]) or np.any(pull.start[:, 0]):
        raise ValueError("the diagonal simulators carry a pull on θ's row and a start offset on the second state only")
    return DiagonalRecurrence(kind, f, gain, sigma, tuple(core.initial), float(gamma), pull.step[:, 0], pull.start)
