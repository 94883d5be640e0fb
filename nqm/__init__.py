"""nqm — theory and simulation of the noisy quadratic model of large-batch training.

Three engines share one problem description (:class:`NoisyQuadratic`):

* :mod:`nqm.optim` — optimisers as values (SGD, heavy ball, Nesterov, iterate averaging; sign descent, Adam and
  other adaptive ones for Monte Carlo), which every engine takes;
* :mod:`nqm.theory` — closed-form one-step quantities (McCandlish et al. 2018, arXiv:1812.06162), and sign descent's
  exact one-step law;
* :mod:`nqm.dynamics` — exact expected training dynamics (Zhang et al. 2019, arXiv:1907.04164);
* :func:`nqm.simulate` — Monte Carlo of any optimiser on many replicas, with standard errors
  (:mod:`nqm.montecarlo`, which also tunes the step by simulation);
* :class:`nqm.FiniteDataset` — a finite training set revisited in epochs, minibatches without replacement, and the
  training loss against the population loss (:mod:`nqm.finite_data`).
"""

from . import dynamics, estimators, montecarlo, noise, optim, spectra, theory
from .finite_data import FiniteDataset, FiniteLeastSquares
from .least_squares import LeastSquares
from .montecarlo import (
    GradientNormTrace,
    LossCurve,
    OneStepResult,
    gradient_norm_trace,
    one_step_improvement,
    simulate,
)
from .problem import NoisyQuadratic

__version__ = "0.1.0"

__all__ = [
    "GradientNormTrace",
    "FiniteDataset",
    "FiniteLeastSquares",
    "LeastSquares",
    "NoisyQuadratic",
    "OneStepResult",
    "LossCurve",
    "dynamics",
    "estimators",
    "gradient_norm_trace",
    "montecarlo",
    "noise",
    "one_step_improvement",
    "optim",
    "simulate",
    "spectra",
    "theory",
]
