"""Sweeps: one task over many parameter sets, on any executor, resumable, with progress.

A sweep is a *task* (a built-in name from :data:`TASKS` or a function of yours) and a list of parameter
sets (usually :func:`grid`'s Cartesian product). :func:`run` submits the parameter sets in chunks to any
:class:`concurrent.futures.Executor` — in-process by default, a ``ProcessPoolExecutor`` for the cores of one
machine, or a Dask cluster through ``distributed.Client(...).get_executor()`` — and appends one JSON line per
finished task to a file. Re-running the same sweep with the same file skips what is there, so an
interrupted sweep loses at most the chunks in flight.

Seeds: every task receives ``seed`` = 63 bits of SHA-256(sweep seed, the task's parameters in
canonical JSON). A result is therefore a function of (task, parameters, sweep seed) alone — not of the
executor, the worker count, the chunking or the order of completion. To repeat one configuration with
independent streams, add the axis ``repeat=range(8)``: ``repeat`` enters the seed and the table but is not
passed to the task.

File format (JSON lines, strict JSON, readable by ``jq`` or ``pandas.read_json(path, lines=True)``): a header
``{"nqm_sweep": 1, "task": ..., "seed": ..., "fixed": ...}`` then ``{"params": {...}, "seed": n,
"result": {...}, "seconds": t}`` per task. Non-finite floats are written as the strings ``"inf"``, ``"-inf"``
and ``"nan"`` (JSON has no such numbers) and read back as floats.

Example:
    >>> from nqm import sweep
    >>> params = sweep.grid(batch_size=[16, 256], lr=[0.5, 1.0])
    >>> r = sweep.run("steps_to_target", params, fixed={"d": 100, "target": 0.05}, progress=False)
    >>> r.table()[["batch_size", "lr", "steps"]].tolist()
    [(16, 0.5, 313.0), (16, 1.0, inf), (256, 0.5, 154.0), (256, 1.0, 80.0)]
"""

from .engine import InlineExecutor, run
from .params import grid, task_seed
from .records import encode, load
from .table import SweepResult
from .tasks import TASKS, SweepTaskError

__all__ = ["grid", "run", "load", "encode", "InlineExecutor", "SweepResult", "SweepTaskError", "TASKS", "task_seed"]
