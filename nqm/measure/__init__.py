r"""A real model at a point θ: its gradient, Hessian spectrum, gradient noise, true noise scales, and local NQM.

McCandlish et al. 2018 (arXiv:1812.06162) state their one-step laws for real networks in terms of
``B_noise = tr(HΣ)/GᵀHG`` and ``B_simple = tr Σ/|G|²``. This package measures those definitions (not the
estimators practitioners use) on a model given as four callables over a finite training set
(:class:`Model`, or :class:`JaxModel` from a per-example loss), and builds the noisy quadratic that has them:

* :func:`measure` → :class:`Measurement`: G, ``|G|²``, GᵀHG, tr Σ, tr(HΣ), B_noise, B_simple (exact from all
  per-example gradients and HVPs, or sampled with standard errors), H's top eigenpairs (Lanczos), its spectral
  density (stochastic Lanczos quadrature), G's and Σ's spectral measures, and the two-batch estimators on the
  same model;
* :func:`local_quadratic` (or ``NoisyQuadratic.from_measurement``): the local NQM, with what it keeps;
* :func:`one_step_changes`, :func:`fit_one_step`, :func:`predicted_coefficients`: one real SGD step, many
  times, its measured E[ΔL](ε) fitted and the quadratic law's coefficients beside it; :func:`step_grid`, steps
  around the law's optimum; :func:`sgd_point`, a point along a real run;
* :func:`tuned_steps`, :func:`steps_to_loss` (:mod:`nqm.measure.training`): whole real runs to a target training
  loss, the step tuned per batch size over seeds;
* :func:`quadratic_model`: an NQM's finite training set as a model, the exact reference;
* :func:`lanczos`, :func:`gauss_quadrature`: the quadratures underneath;
* :mod:`nqm.measure.digits` (needs ``nqm[real]``): scikit-learn's bundled digits with a logistic regression and
  a small MLP, in JAX.
"""

from .jax_model import JaxModel
from .krylov import gauss_quadrature, lanczos
from .local import LocalQuadratic, local_quadratic
from .measurement import Measurement, TwoBatchEstimates, measure
from .model import Model, quadratic_model
from .one_step import (
    draw_fits,
    fit_one_step,
    mean_of_fits,
    normalised_improvements,
    one_step_changes,
    predicted_coefficients,
    sgd_point,
    step_grid,
)
from .training import TunedSteps, steps_to_loss, tuned_steps

# Modules of the face that it does not import, because they need an optional extra: import them by name.
OPTIONAL_MODULES = ("digits",)

__all__ = [
    "JaxModel",
    "LocalQuadratic",
    "Measurement",
    "Model",
    "TunedSteps",
    "TwoBatchEstimates",
    "draw_fits",
    "fit_one_step",
    "mean_of_fits",
    "one_step_changes",
    "predicted_coefficients",
    "sgd_point",
    "step_grid",
    "steps_to_loss",
    "tuned_steps",
    "gauss_quadrature",
    "lanczos",
    "local_quadratic",
    "measure",
    "normalised_improvements",
    "quadratic_model",
]
