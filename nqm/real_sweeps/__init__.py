r"""Real batch-size sweeps: steps to a target against batch size, through the critical-batch definitions.

* :func:`~nqm.real_sweeps.read_sweep` reads a sweep file (:mod:`nqm.real_sweeps.table` gives the format) into
  a :class:`~nqm.real_sweeps.Sweep`; :func:`~nqm.real_sweeps.zhang2024` is Zhang et al. 2024's table
  (arXiv:2410.21676), shipped with the package;
* :func:`~nqm.real_sweeps.fit_sweep` → :class:`~nqm.real_sweeps.SweepFrontier`: S = S_min + E_min/B by least
  squares on log S (the function the NQM's exact runs use), B_crit = E_min/S_min, Zhang et al.'s 20% rule read
  off the table and on the hyperbola, bootstrap errors; :func:`~nqm.real_sweeps.power_law`: B_crit against
  target loss or model size across groups;
* :func:`~nqm.real_sweeps.shape_fits` with :func:`~nqm.real_sweeps.nqm_curves` (:mod:`nqm.real_sweeps.shape`): how
  well the NQM's optimal-run curve S(B) describes a sweep, beside the hyperbola, with held-out errors;
* :mod:`nqm.real_sweeps.summary`: the table ``nqm frontier`` prints and the figure it draws.
"""

from . import summary
from .fit import PowerLaw, SweepFrontier, fit_sweep, linear_scaling_from_table, power_law
from .shape import SHAPES, NqmCurve, ShapeFit, nqm_curves, power_law_problem, shape_fits
from .table import COLUMNS, Sweep, SweepFileError, read_sweep, zhang2024

__all__ = [
    "summary",
    "COLUMNS",
    "SHAPES",
    "NqmCurve",
    "PowerLaw",
    "ShapeFit",
    "Sweep",
    "SweepFileError",
    "SweepFrontier",
    "fit_sweep",
    "linear_scaling_from_table",
    "nqm_curves",
    "power_law",
    "power_law_problem",
    "read_sweep",
    "shape_fits",
    "zhang2024",
]
