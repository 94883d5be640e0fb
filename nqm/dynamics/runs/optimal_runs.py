"""The result of a tuner: per batch size, the fewest steps, the examples they cost and the tuned optimiser."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...optim import SGD, TunedFamily

__all__ = ["OptimalRuns"]


@dataclass
class OptimalRuns:
    """Per batch size: the fewest steps to the target, the examples they cost, and the tuned optimiser.

    Attributes: batch_sizes, steps (int-valued floats; inf where unreachable), examples = B·steps, lr,
    steps_continuous (the continuous optimum t*, for plots and fits), interior (True where the optimum
    is a stationary point of t(ε); False where it sits on the edge of the searched range), the tuned
    ``momentum`` β (heavy ball, Nesterov) or ``ema`` γ per batch size (None where the family has none), the
    ``family`` (:class:`nqm.optim.TunedFamily`, equal to its name) and the ``precond`` they were tuned with, and
    the ``weight_decay`` λ per batch size (tuned or held; None without) and whether it is ``decoupled``.
    ``optimizer(i)`` is the tuned value of batch size i.
    """

    batch_sizes: np.ndarray
    steps: np.ndarray
    examples: np.ndarray
    lr: np.ndarray
    steps_continuous: np.ndarray
    interior: np.ndarray
    momentum: np.ndarray | None = None
    ema: np.ndarray | None = None
    family: TunedFamily = SGD
    precond: np.ndarray | None = None
    weight_decay: np.ndarray | None = None
    decoupled: bool = False

    def optimizer(self, i: int):
        """The tuned optimiser value (:mod:`nqm.optim`) of batch size ``batch_sizes[i]``."""
        hp = None if self.family.hyper is None else float(getattr(self, self.family.hyper)[i])
        decay = 0.0 if self.weight_decay is None else float(self.weight_decay[i])
        return self.family.optimizer(float(self.lr[i]), hp, self.precond, decay, self.decoupled)
