"""The result of a tuner: per batch size, the fewest steps, the examples they cost and the tuned optimiser."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...optim import ema, heavy_ball, nesterov, sgd

__all__ = ["OptimalRuns"]


@dataclass
class OptimalRuns:
    """Per batch size: the fewest steps to the target, the examples they cost, and the tuned optimiser.

    Attributes: batch_sizes, steps (int-valued floats; inf where unreachable), examples = B·steps, lr,
    steps_continuous (the continuous optimum t*, for plots and fits), interior (True where the optimum
    is a stationary point of t(ε); False where it sits on the edge of the searched range), the tuned
    ``momentum`` β (heavy ball, Nesterov) or ``ema`` γ per batch size (None where the family has none), the
    ``family`` and the ``precond`` they were tuned with, and the ``weight_decay`` λ per batch size (tuned or held;
    None without) and whether it is ``decoupled``. ``optimizer(i)`` is the tuned value of batch size i.
    """

    batch_sizes: np.ndarray
    steps: np.ndarray
    examples: np.ndarray
    lr: np.ndarray
    steps_continuous: np.ndarray
    interior: np.ndarray
    momentum: np.ndarray | None = None
    ema: np.ndarray | None = None
    family: str = "sgd"
    precond: np.ndarray | None = None
    weight_decay: np.ndarray | None = None
    decoupled: bool = False

    def optimizer(self, i: int):
        """The tuned optimiser value (:mod:`nqm.optim`) of batch size ``batch_sizes[i]``."""
        lr = float(self.lr[i])
        if self.weight_decay is not None and self.family == "heavy_ball":
            return heavy_ball(lr, float(self.momentum[i]), self.precond, float(self.weight_decay[i]), self.decoupled)
        if self.weight_decay is not None:
            return sgd(lr, self.precond, float(self.weight_decay[i]), self.decoupled)
        if self.family == "heavy_ball":
            return heavy_ball(lr, float(self.momentum[i]), self.precond)
        if self.family == "nesterov":
            return nesterov(lr, float(self.momentum[i]), self.precond)
        if self.family == "ema":
            return ema(sgd(lr, self.precond), float(self.ema[i]))
        return sgd(lr, self.precond)
