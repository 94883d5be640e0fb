"""Whole training runs, exactly: steps to a target loss, and the hyper-parameters that minimise them.

The public face of the package; the pieces live behind it:

* :mod:`.steps` — the first step at which E[L_t] reaches a target, for any linear optimiser;
* :mod:`.sgd` — SGD's runs in closed form (the loss, its derivatives, the crossing of a target);
* :mod:`.sgd_tuning` — SGD's tuner, by Newton's method on the optimum's two smooth equations;
* :mod:`.tuned_losses` — the closed forms the momentum, EMA and weight-decay tuners search on;
* :mod:`.crossing` — first crossings of a target on them, and the exact scan of every earlier step;
* :mod:`.search` — the tuners' nested search, its descent, patch and constants;
* :mod:`.quadrature` — a long spectrum compressed for the search;
* :mod:`.heavy_ball_kernels` and :mod:`.compiled` — heavy ball's search compiled with numba, and its choice;
* :mod:`.tuning` — :func:`~nqm.dynamics.optimal_steps_to_target`, the front door; :mod:`.optimal_runs` its result.

References: Zhang et al. 2019 (arXiv:1907.04164), §3; McCandlish et al. 2018 (arXiv:1812.06162), §2.3.
"""

from .optimal_runs import OptimalRuns
from .steps import steps_to_target
from .tuning import optimal_steps_to_target

__all__ = ["steps_to_target", "optimal_steps_to_target", "OptimalRuns"]
