"""Second moments of a run, exactly: per coordinate of H's basis, the closed forms of each optimiser's moments and
the expected loss built on them.

The public face of the package; the pieces live behind it:

* :mod:`.sgd` — SGD's second moment (with weight decay's pull too), without cancellation;
* :mod:`.heavy_ball` — heavy ball's, formed without cancellation up to β → 1;
* :mod:`.two_state` — an EMA of SGD and any stable two-state transition (Nesterov's momentum);
* :mod:`.expected` — E[L_t] of any linear optimiser (the closed forms, else the moment map powered), its steady
  state, SGD's per-coordinate variance and the noise scales along a run.

References: Zhang et al. 2019 (arXiv:1907.04164), §3 and App. A.
"""

from . import forms, heavy_ball
from .expected import (
    coordinate_variance,
    decay_fixed_point,
    expected_loss,
    mean_path,
    noise_scales_along,
    noise_scales_at,
    powered_second_moments,
    second_moments,
    steady_state_loss,
)
from .heavy_ball import HeavyBallMoments, heavy_ball_stationary, heavy_ball_variance
from .sgd import DecayedSgdMoments, log_abs_one_minus, sgd_variance
from .two_state import (
    EmaMoments,
    TwoStateMoments,
    ema_stationary,
    ema_variance,
    stable_two_state,
    two_state_stationary,
)

__all__ = [
    "forms",  # the module of closed forms an optimiser value picks from
    "heavy_ball",  # the module: its forms' constants are shared with the compiled tuner (runs.heavy_ball_kernels)
    "expected_loss",
    "steady_state_loss",
    "coordinate_variance",
    "noise_scales_along",
    "noise_scales_at",
    "second_moments",
    "powered_second_moments",
    "mean_path",
    "decay_fixed_point",
    "sgd_variance",
    "log_abs_one_minus",
    "DecayedSgdMoments",
    "heavy_ball_variance",
    "heavy_ball_stationary",
    "HeavyBallMoments",
    "ema_variance",
    "ema_stationary",
    "EmaMoments",
    "TwoStateMoments",
    "two_state_stationary",
    "stable_two_state",
]
