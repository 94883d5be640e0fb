"""Monte Carlo: real runs of an optimiser on many replicas, with standard errors, on the CPU or a GPU.

The public face of the package; behind it:

* :mod:`.simulation` — :func:`~nqm.simulate`, the front door, which checks the arguments and picks an engine;
* :mod:`.sfc64` — the CPU engine on SFC64 streams, tiles of replicas on threads (:mod:`.parallel`, whose
  :func:`tile_rng` gives each tile its stream);
* :mod:`.counter` — the engine on counter-based Philox noise (:mod:`.philox`), the same streams on NumPy and in
  the fused CUDA kernel ``cuda/fused.cu`` (:mod:`.backend` compiles it), which runs an optimiser's per-coordinate
  recurrence (:mod:`.recurrence`);
* :mod:`.skip_ahead` — exact jumps between checkpoints of a linear optimiser;
* :mod:`.one_step` — one step from a point on a grid of (ε, B); :mod:`.norm_trace` — what a noise-scale
  estimator sees along a run;
* :mod:`.tuning` — whole runs by Monte Carlo: steps to target and the step tuned per batch size, for optimisers
  without exact dynamics;
* :mod:`.results` — the result types; :mod:`.basis` — the coordinates a simulation works in.
"""

from .norm_trace import gradient_norm_trace
from .one_step import one_step_improvement
from .parallel import tile_rng
from .results import GradientNormTrace, LossCurve, OneStepResult, default_record, loss_curve, sample_skewness
from .simulation import simulate
from .skip_ahead import simulate_checkpoints
from .tuning import SimulatedSteps, TunedStep, steps_to_target, tune_lr

__all__ = [
    "simulate",
    "simulate_checkpoints",
    "steps_to_target",
    "tune_lr",
    "SimulatedSteps",
    "TunedStep",
    "one_step_improvement",
    "gradient_norm_trace",
    "LossCurve",
    "OneStepResult",
    "sample_skewness",
    "GradientNormTrace",
    "default_record",
    "loss_curve",
    "tile_rng",
]
