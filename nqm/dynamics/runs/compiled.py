"""The heavy-ball tuner's compiled kernels (:mod:`.heavy_ball_kernels`), where numba is installed and
``NQM_COMPILED`` is not ``0``."""

from __future__ import annotations

import functools
import os

__all__ = ["compiled_kernels"]


def compiled_kernels():
    """:mod:`nqm.dynamics.runs.heavy_ball_kernels`, or None: where ``NQM_COMPILED=0``, or numba is not installed or
    cannot be imported (a numba too old for the installed NumPy raises ImportError)."""
    return None if os.environ.get("NQM_COMPILED", "1") == "0" else imported_kernels()


@functools.cache
def imported_kernels():
    """The kernels' module, imported once (None where that fails: it is not retried on every call)."""
    try:
        from . import heavy_ball_kernels
    except ImportError:
        return None
    return heavy_ball_kernels
