"""The validation suite as a sweep task: ``nqm.sweep.run(validate_task, sweep.grid(repeat=range(n)), ...)``.

It lives here, not in ``nqm.sweep``, because nothing under ``nqm/`` imports the validation suite.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .runner import run as run_suite

__all__ = ["validate_task"]


def validate_task(*, seed, quick=True, only=None, out=None) -> dict:
    """The validation suite (or the checks named in ``only``, e.g. ``["V4"]``) under the task's seed.

    Sweeping it over ``repeat=range(n)`` measures the suite's false-alarm rate. Returns the counts, ``ok``
    and the names of failed checks and unrejected controls. The report goes to ``out/<seed>`` if given.
    """
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(out) / str(seed) if out is not None else Path(tmp)
        # one process per task: the sweep already spreads the seeds over the cores
        s = run_suite(where, quick=quick, seed=seed, log=lambda m: None, only=only, jobs=1)
    keep = ("ok", "checks", "checks_passed", "controls", "controls_rejected", "failed")
    return {k: s[k] for k in keep if k in s}
