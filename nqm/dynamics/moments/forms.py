"""The closed forms an optimiser value picks its second moments from (a linear optimiser's ``closed_form``,
:meth:`nqm.optim.TunedFamily.moments`): the engines hand this module to the value, so that :mod:`nqm.optim`, which
sits below the engines, names its own closed form without importing them.
"""

from .heavy_ball import HeavyBallMoments, heavy_ball_stationary
from .sgd import DecayedSgdMoments, sgd_variance
from .two_state import EmaMoments, TwoStateMoments, ema_stationary, stable_two_state, two_state_stationary

__all__ = [
    "sgd_variance",
    "DecayedSgdMoments",
    "HeavyBallMoments",
    "heavy_ball_stationary",
    "EmaMoments",
    "ema_stationary",
    "TwoStateMoments",
    "two_state_stationary",
    "stable_two_state",
]
