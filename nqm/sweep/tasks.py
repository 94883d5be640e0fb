"""Built-in sweep tasks and how any task is run on a chunk of parameter sets in a worker.

Tasks are module-level functions, so that process pools and Dask can pickle them by name. Their parameters
are plain values: ``problem`` ("zhang2019", "power_law" or a problem object in ``fixed``), ``d``, ``exponent``,
``noise_exponent``, ``noise_scale`` choose the problem, ``precond_power`` sets P = H^(−power), and ``lr``,
``momentum``, ``nesterov`` and ``ema`` build the optimiser value (:mod:`nqm.optim`).
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping

import numpy as np

from .. import optim
from .records import encode

__all__ = [
    "TASKS",
    "SweepTaskError",
    "simulate_task",
    "expected_loss_task",
    "steps_to_target_task",
    "optimal_steps_to_target_task",
    "resolve_task",
    "task_name",
    "run_chunk",
    "accepts",
    "check_callable",
]


class SweepTaskError(RuntimeError):
    """A task raised; the message names its parameters. Records that landed before it stay in the file."""


def _problem(problem="zhang2019", d=1000, exponent=1.0, noise_exponent=1.0, noise_scale=1.0):
    """The problem a built-in task runs on: an object passed in ``fixed``, or one named by parameters.

    ``"zhang2019"``: h_i = 1/i, C = H (Zhang et al. 2019, arXiv:1907.04164). ``"power_law"``:
    h_i = i^(−exponent), C = noise_scale·h^noise_exponent.
    """
    from .. import spectra
    from ..problem import NoisyQuadratic

    if not isinstance(problem, str):
        return problem
    if problem == "zhang2019":
        return NoisyQuadratic.zhang2019(int(d))
    if problem == "power_law":
        h = spectra.power_law(int(d), exponent)
        return NoisyQuadratic(h, spectra.noise_power(h, noise_scale, noise_exponent), name=f"power_law(d={d})")
    raise ValueError(f"unknown problem {problem!r}: pass a NoisyQuadratic in fixed, or 'zhang2019' / 'power_law'")


_PROBLEM_KEYS = ("problem", "d", "exponent", "noise_exponent", "noise_scale")


def _split_problem(kwargs: dict):
    spec = {k: kwargs.pop(k) for k in _PROBLEM_KEYS if k in kwargs}
    p = _problem(**spec)
    power = kwargs.pop("precond_power", None)
    if power not in (None, 0, 0.0):
        kwargs["precond"] = p.h ** (-float(power))  # P = H^(−power), Zhang et al.'s preconditioning powers
    return p, kwargs


_OPTIMIZER_KEYS = ("lr", "momentum", "nesterov", "ema", "precond")


def _split_optimizer(kwargs: dict):
    """The optimiser value built from plain parameters: ``lr``, ``momentum`` β (heavy ball, or Nesterov with
    ``nesterov=True``), ``ema`` γ and ``precond``; the rest of ``kwargs`` goes to the task's function."""
    spec = {k: kwargs.pop(k) for k in _OPTIMIZER_KEYS if k in kwargs}
    if "lr" not in spec:
        raise ValueError("the task needs lr (and optionally momentum, nesterov, ema, precond_power)")
    family = optim.nesterov if spec.get("nesterov", False) else optim.heavy_ball
    base = family(spec["lr"], spec.get("momentum", 0.0), spec.get("precond"))
    return optim.ema(base, spec.get("ema", 0.0)), kwargs


def simulate_task(*, seed, threads=1, **kwargs) -> dict:
    """:func:`nqm.simulate` (one thread per task: the sweep provides the parallelism).

    Returns ``at`` (recorded steps), ``mean``, ``sem``, ``n``.
    """
    from ..montecarlo import simulate

    p, kwargs = _split_problem(kwargs)
    opt, kwargs = _split_optimizer(kwargs)
    r = simulate(p, opt, seed=seed, threads=threads, progress=False, **kwargs)
    return {"at": r.steps, "mean": r.mean, "sem": r.sem, "n": r.n}


def expected_loss_task(*, seed, steps, at=None, **kwargs) -> dict:
    """:func:`nqm.dynamics.expected_loss` (exact; ``seed`` unused). Returns ``at`` and ``loss``."""
    from ..dynamics import expected_loss

    p, kwargs = _split_problem(kwargs)
    opt, kwargs = _split_optimizer(kwargs)
    at = np.arange(steps + 1) if at is None else np.asarray(at)
    return {"at": at, "loss": expected_loss(p, opt, steps=steps, at=at, **kwargs).mean}


def steps_to_target_task(*, seed, **kwargs) -> dict:
    """:func:`nqm.dynamics.steps_to_target` (exact; ``seed`` unused). Returns ``steps`` (inf if never)."""
    from ..dynamics import steps_to_target

    p, kwargs = _split_problem(kwargs)
    opt, kwargs = _split_optimizer(kwargs)
    return {"steps": float(steps_to_target(p, opt, **kwargs))}


def optimal_steps_to_target_task(*, seed, batch_size=None, batch_sizes=None, **kwargs) -> dict:
    """:func:`nqm.dynamics.optimal_steps_to_target` at ``batch_size`` (scalars out) or ``batch_sizes`` (lists).

    Returns ``steps``, ``examples``, ``lr`` and, when tuned, ``momentum`` or ``ema``.
    """
    from ..dynamics import optimal_steps_to_target

    if (batch_size is None) == (batch_sizes is None):
        raise ValueError("give exactly one of batch_size and batch_sizes")
    p, kwargs = _split_problem(kwargs)
    r = optimal_steps_to_target(p, batch_sizes=batch_size if batch_sizes is None else batch_sizes, **kwargs)
    out = {k: getattr(r, k) for k in ("steps", "examples", "lr", "momentum", "ema") if getattr(r, k) is not None}
    return {k: (v[0] if batch_size is not None else v) for k, v in out.items()}


TASKS: dict[str, Callable] = {
    "simulate": simulate_task,
    "expected_loss": expected_loss_task,
    "steps_to_target": steps_to_target_task,
    "optimal_steps_to_target": optimal_steps_to_target_task,
}
"""The sweep tasks by name (:func:`nqm.sweep.run`'s ``task``)."""
"""Built-in tasks by name. Parameters ``problem`` ("zhang2019", "power_law" or a problem object in ``fixed``),
``d``, ``exponent``, ``noise_exponent``, ``noise_scale`` choose the problem and ``precond_power`` sets
P = H^(−power); ``lr``, ``momentum``, ``nesterov`` and ``ema`` build the optimiser (:mod:`nqm.optim`); the rest go
to the function of the same name. The validation suite's task is ``validation.sweep_task.validate_task``."""


def resolve_task(task):
    """The function of a task given by name (a key of :data:`TASKS`) or as a function."""
    if isinstance(task, str):
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; built-in tasks: {sorted(TASKS)}, or pass a function")
        return TASKS[task]
    if not callable(task):
        raise ValueError(f"task must be a name in {sorted(TASKS)} or a function, got {task!r}")
    return task


def task_name(task) -> str:
    """How a task is named in a file's header: its key, or module:qualname of a function."""
    return task if isinstance(task, str) else f"{task.__module__}:{task.__qualname__}"


def _as_result(value) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "__dataclass_fields__"):
        return {k: getattr(value, k) for k in value.__dataclass_fields__ if getattr(value, k) is not None}
    return {"value": value}


def run_chunk(task, fixed: dict, items: list) -> list[str]:
    """Runs a chunk of (params, seed) in a worker; returns the records as JSON lines (cheap to send back)."""
    fn = resolve_task(task)
    takes_seed = accepts(fn, "seed")
    lines = []
    for params, seed in items:
        start = time.perf_counter()
        args = {k: v for k, v in params.items() if k != "repeat"}
        try:
            value = fn(**fixed, **args, **({"seed": seed} if takes_seed else {}))
            result = encode(_as_result(value))
        except Exception as exc:
            raise SweepTaskError(f"task {task_name(task)} failed at {params}: {type(exc).__name__}: {exc}") from exc
        record = {"params": params, "seed": seed, "result": result, "seconds": time.perf_counter() - start}
        lines.append(json.dumps(record, separators=(",", ":"), allow_nan=False))
    return lines


def accepts(fn, name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    return name in sig.parameters or any(q.kind is q.VAR_KEYWORD for q in sig.parameters.values())


def check_callable(fn, fixed: dict, params: dict) -> None:
    """A clear error, before anything runs, when ``fn`` cannot take the fixed arguments and parameters."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    extra = {"seed": 0} if accepts(fn, "seed") else {}
    params = {k: v for k, v in params.items() if k != "repeat"}
    try:
        sig.bind(**fixed, **params, **extra)
    except TypeError as exc:
        names = sorted({**fixed, **params})
        raise ValueError(f"task {task_name(fn)} cannot take the parameters {names}: {exc}") from None
