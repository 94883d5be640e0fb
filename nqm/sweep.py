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

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
import os
import pickle
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import optim
from .progress import Progress

__all__ = ["grid", "run", "load", "InlineExecutor", "SweepResult", "SweepTaskError", "TASKS", "task_seed"]

_FORMAT = 1
_RESERVED = {"seed"}


class SweepTaskError(RuntimeError):
    """A task raised; the message names its parameters. Records that landed before it stay in the file."""


class InlineExecutor(Executor):
    """Runs each submitted call at once in the calling thread: the default, in-process executor."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future, as executors do
            future.set_exception(exc)
            if isinstance(exc, KeyboardInterrupt):
                raise
        return future


# ---------------------------------------------------------------------------------------------------------------
# parameter sets


def grid(**axes) -> list[dict]:
    """The Cartesian product of the axes, as a list of parameter sets (the last axis varies fastest).

    Each axis is a non-empty list, tuple, range or 1-d array of JSON scalars (numbers, strings, booleans,
    None) or lists of them.

    Example:
        >>> grid(batch_size=[1, 2], lr=[0.1])
        [{'batch_size': 1, 'lr': 0.1}, {'batch_size': 2, 'lr': 0.1}]
    """
    if not axes:
        raise ValueError("grid needs at least one axis, e.g. grid(batch_size=[16, 64])")
    values = []
    for name, axis in axes.items():
        if isinstance(axis, (str, bytes, Mapping)) or not isinstance(axis, (Iterable, np.ndarray)):
            raise ValueError(f"grid axis {name!r} must be a list of values, got {type(axis).__name__}")
        axis = [_plain(v, f"grid axis {name!r}") for v in axis]
        if not axis:
            raise ValueError(f"grid axis {name!r} is empty")
        values.append(axis)
    return [dict(zip(axes, combo)) for combo in itertools.product(*values)]


def _plain(value, where: str):
    """A JSON scalar (or list of them) from Python or NumPy values; a clear error for anything else."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: non-finite value {value!r}")
        return value
    raise ValueError(f"{where}: {value!r} is not a number, string, boolean, None or a list of them")


def _check_params(params, fixed: dict) -> list[dict]:
    if isinstance(params, Mapping):
        params = grid(**params)
    if isinstance(params, (str, bytes)) or not isinstance(params, Iterable):
        raise ValueError("params must be a list of parameter sets (dicts), e.g. sweep.grid(...)")
    params = list(params)
    if not params:
        raise ValueError("the sweep has no parameter sets")
    names = None
    seen = set()
    checked = []
    for i, ps in enumerate(params):
        if not isinstance(ps, Mapping) or not all(isinstance(k, str) for k in ps):
            raise ValueError(f"parameter set {i} is not a dict with string keys: {ps!r}")
        ps = {k: _plain(v, f"parameter set {i}, {k!r}") for k, v in ps.items()}
        if names is None:
            names = list(ps)
        elif set(ps) != set(names):
            raise ValueError(f"parameter set {i} has keys {sorted(ps)}, the first has {sorted(names)}")
        if clash := (set(ps) & (set(fixed) | _RESERVED)):
            raise ValueError(f"parameter(s) {sorted(clash)} also given in fixed, or reserved")
        key = _canonical(ps)
        if key in seen:
            raise ValueError(f"parameter set {i} repeats an earlier one: {ps!r}")
        seen.add(key)
        checked.append(ps)
    return checked


def _canonical(params: Mapping) -> str:
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def task_seed(sweep_seed: int, params: Mapping) -> int:
    """The seed of one task: 63 bits of SHA-256 over the sweep seed and the canonical parameters."""
    digest = hashlib.sha256(f"{int(sweep_seed)}|{_canonical(params)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1  # 63 bits: fits an int64 column


# ---------------------------------------------------------------------------------------------------------------
# JSON with non-finite floats as strings


def _encode(value):
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a task returned {type(value).__name__}, which a sweep record cannot hold")


_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _decode(value):
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    return value


def _decode_record(record: dict) -> dict:
    return {**record, "result": _decode(record["result"])}


def _describe(value):
    """A JSON description of a fixed argument: itself if plain, else a content digest (for the file header)."""
    try:
        return _plain(value, "")
    except ValueError:
        pass
    if isinstance(value, np.ndarray):
        return {"ndarray": list(value.shape), "sha256": hashlib.sha256(np.ascontiguousarray(value)).hexdigest()}
    if isinstance(value, Mapping):
        return {str(k): _describe(v) for k, v in value.items()}
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{value.__module__}:{value.__qualname__}"
    if hasattr(value, "__dict__"):  # a problem object: its class and the digest of its arrays and settings
        digest = hashlib.sha256(type(value).__qualname__.encode())
        for k, v in sorted(vars(value).items()):
            digest.update(k.encode())
            digest.update(pickle.dumps(_describe(v)) if not isinstance(v, np.ndarray) else np.ascontiguousarray(v))
        return {"object": repr(value), "sha256": digest.hexdigest()}
    return repr(value)


# ---------------------------------------------------------------------------------------------------------------
# built-in tasks (module level, so that process pools and Dask can pickle them by name)


def _problem(problem="zhang2019", d=1000, exponent=1.0, noise_exponent=1.0, noise_scale=1.0):
    """The problem a built-in task runs on: an object passed in ``fixed``, or one named by parameters.

    ``"zhang2019"``: h_i = 1/i, C = H (Zhang et al. 2019, arXiv:1907.04164). ``"power_law"``:
    h_i = i^(−exponent), C = noise_scale·h^noise_exponent.
    """
    from . import spectra
    from .problem import NoisyQuadratic

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
    from .montecarlo import simulate

    p, kwargs = _split_problem(kwargs)
    opt, kwargs = _split_optimizer(kwargs)
    r = simulate(p, opt, seed=seed, threads=threads, progress=False, **kwargs)
    return {"at": r.steps, "mean": r.mean, "sem": r.sem, "n": r.n}


def expected_loss_task(*, seed, steps, at=None, **kwargs) -> dict:
    """:func:`nqm.dynamics.expected_loss` (exact; ``seed`` unused). Returns ``at`` and ``loss``."""
    from .dynamics import expected_loss

    p, kwargs = _split_problem(kwargs)
    opt, kwargs = _split_optimizer(kwargs)
    at = np.arange(steps + 1) if at is None else np.asarray(at)
    return {"at": at, "loss": expected_loss(p, opt, steps=steps, at=at, **kwargs)}


def steps_to_target_task(*, seed, **kwargs) -> dict:
    """:func:`nqm.dynamics.steps_to_target` (exact; ``seed`` unused). Returns ``steps`` (inf if never)."""
    from .whole_runs import steps_to_target

    p, kwargs = _split_problem(kwargs)
    opt, kwargs = _split_optimizer(kwargs)
    return {"steps": float(steps_to_target(p, opt, **kwargs))}


def optimal_steps_to_target_task(*, seed, batch_size=None, batch_sizes=None, **kwargs) -> dict:
    """:func:`nqm.dynamics.optimal_steps_to_target` at ``batch_size`` (scalars out) or ``batch_sizes`` (lists).

    Returns ``steps``, ``examples``, ``lr`` and, when tuned, ``momentum`` or ``ema``.
    """
    from .whole_runs import optimal_steps_to_target

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
"""Built-in tasks by name. Parameters ``problem`` ("zhang2019", "power_law" or a problem object in ``fixed``),
``d``, ``exponent``, ``noise_exponent``, ``noise_scale`` choose the problem and ``precond_power`` sets
P = H^(−power); ``lr``, ``momentum``, ``nesterov`` and ``ema`` build the optimiser (:mod:`nqm.optim`); the rest go
to the function of the same name. The validation suite's task is ``validation.sweep_task.validate_task``."""


def _resolve(task):
    if isinstance(task, str):
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; built-in tasks: {sorted(TASKS)}, or pass a function")
        return TASKS[task]
    if not callable(task):
        raise ValueError(f"task must be a name in {sorted(TASKS)} or a function, got {task!r}")
    return task


def _task_name(task) -> str:
    return task if isinstance(task, str) else f"{task.__module__}:{task.__qualname__}"


def _as_result(value) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "__dataclass_fields__"):
        return {k: getattr(value, k) for k in value.__dataclass_fields__ if getattr(value, k) is not None}
    return {"value": value}


def _run_chunk(task, fixed: dict, items: list) -> list[str]:
    """Runs a chunk of (params, seed) in a worker; returns the records as JSON lines (cheap to send back)."""
    fn = _resolve(task)
    takes_seed = _accepts(fn, "seed")
    lines = []
    for params, seed in items:
        start = time.perf_counter()
        args = {k: v for k, v in params.items() if k != "repeat"}
        try:
            value = fn(**fixed, **args, **({"seed": seed} if takes_seed else {}))
            result = _encode(_as_result(value))
        except Exception as exc:
            raise SweepTaskError(f"task {_task_name(task)} failed at {params}: {type(exc).__name__}: {exc}") from exc
        record = {"params": params, "seed": seed, "result": result, "seconds": time.perf_counter() - start}
        lines.append(json.dumps(record, separators=(",", ":"), allow_nan=False))
    return lines


def _accepts(fn, name: str) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    return name in sig.parameters or any(q.kind is q.VAR_KEYWORD for q in sig.parameters.values())


def _check_callable(fn, fixed: dict, params: dict) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    extra = {"seed": 0} if _accepts(fn, "seed") else {}
    params = {k: v for k, v in params.items() if k != "repeat"}
    try:
        sig.bind(**fixed, **params, **extra)
    except TypeError as exc:
        names = sorted({**fixed, **params})
        raise ValueError(f"task {_task_name(fn)} cannot take the parameters {names}: {exc}") from None


# ---------------------------------------------------------------------------------------------------------------
# results


@dataclass
class SweepResult:
    """The records of a sweep, in the order of its parameter sets.

    Attributes:
        records: dicts with ``params``, ``seed``, ``result`` and ``seconds``.
        names: the parameter names (the first columns of :meth:`table`).
        computed: tasks run by this call. loaded: tasks found already done in the file.
        path: the JSON-lines file, or None.
    """

    records: list[dict]
    names: list[str]
    computed: int = 0
    loaded: int = 0
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.records)

    def rows(self) -> list[dict]:
        """One flat dict per task: parameters, ``seed``, results (a result named like a parameter becomes
        ``result_<name>``) and ``seconds``."""
        rows = []
        for rec in self.records:
            row = dict(rec["params"])
            row["seed"] = rec["seed"]
            for k, v in rec["result"].items():
                row[f"result_{k}" if k in row or k == "seconds" else k] = v
            row["seconds"] = rec["seconds"]
            rows.append(row)
        return rows

    def table(self) -> np.ndarray:
        """A tidy NumPy structured array, one row per task. Numbers become int64/float64 columns (None → nan),
        equal-length lists become sub-array columns, anything else an object column."""
        rows = self.rows()
        columns = list(dict.fromkeys(k for row in rows for k in row))
        data = {c: [row.get(c) for row in rows] for c in columns}
        dtypes = [(c, *_column_dtype(data[c])) for c in columns]
        out = np.empty(len(rows), dtype=[(c, t, s) if s else (c, t) for c, t, s in dtypes])
        for c, t, _ in dtypes:
            if t is object:
                out[c] = np.array(data[c] + [None], dtype=object)[:-1]  # keeps lists as list objects
            else:
                out[c] = np.array([np.nan if v is None else v for v in data[c]], dtype=t)
        return out

    def to_pandas(self):
        """The rows as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.rows())


def _column_dtype(values: list):
    def kind(v):
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int"
        if isinstance(v, float) or v is None:
            return "float"
        if isinstance(v, str):
            return "str"
        if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return "int vector"
        if isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            return "vector"
        return "object"

    kinds = {kind(v) for v in values}
    if kinds == {"bool"}:
        return np.bool_, ()
    if kinds == {"int"}:
        return np.int64, ()
    if kinds <= {"int", "float"} and any(v is not None for v in values):
        return np.float64, ()
    if kinds == {"str"}:
        return f"U{max(len(v) for v in values)}", ()
    if kinds <= {"vector", "int vector"} and len({len(v) for v in values}) == 1 and values[0]:
        return (np.int64 if kinds == {"int vector"} else np.float64), (len(values[0]),)
    return object, ()


# ---------------------------------------------------------------------------------------------------------------
# the file


def _header(task, seed: int, fixed: dict) -> dict:
    return {"nqm_sweep": _FORMAT, "task": _task_name(task), "seed": int(seed), "fixed": _describe(fixed)}


def _read(path: Path) -> tuple[dict | None, list[dict]]:
    """The header and records of a sweep file; a torn last line (a kill mid-write) is cut off the file.

    The header is checked first, so that a file that is not a sweep file is refused and never modified.
    """
    if not path.exists() or path.stat().st_size == 0:
        return None, []
    raw = path.read_bytes()
    try:
        header = json.loads(raw.split(b"\n", 1)[0])
    except (json.JSONDecodeError, UnicodeDecodeError):
        header = None
    if not isinstance(header, dict) or header.get("nqm_sweep") != _FORMAT:
        raise ValueError(f"{path} is not an nqm sweep file (no header line); use another path")
    if not raw.endswith(b"\n"):
        keep = raw.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(keep)
        raw = raw[:keep]
    try:
        records = [_decode_record(json.loads(line)) for line in raw.decode().splitlines()[1:] if line.strip()]
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: a record is not valid JSON ({exc}); the file was edited or corrupted") from None
    return header, records


def load(path) -> SweepResult:
    """Every record of a sweep file, in file order (for analysis after the fact)."""
    path = Path(path)
    header, records = _read(path)
    if header is None:
        raise ValueError(f"{path} is empty or missing")
    names = list(records[0]["params"]) if records else []
    return SweepResult(records=records, names=names, loaded=len(records), path=path)


# ---------------------------------------------------------------------------------------------------------------
# running


def _workers(executor) -> int:
    n = getattr(executor, "_max_workers", None)
    if n is None and hasattr(executor, "_client"):  # distributed's ClientExecutor
        try:
            n = sum(executor._client.nthreads().values())
        except Exception:  # noqa: BLE001 - a guess only sizes chunks
            n = None
    return max(1, int(n or os.cpu_count() or 1))


def run(
    task,
    params,
    *,
    fixed: Mapping | None = None,
    seed: int = 0,
    executor: Executor | None = None,
    path=None,
    chunksize: int | None = None,
    progress: bool | None = None,
) -> SweepResult:
    """Run ``task`` on every parameter set and return the records in the order of ``params``.

    Args:
        task: a name in :data:`TASKS` or a function ``f(**fixed, **params, seed=...)`` returning a dict of
            numbers, strings, lists or arrays (or one such value). On a process pool or Dask it must be
            importable by the workers (a module-level function).
        params: a list of parameter sets (dicts with the same keys; see :func:`grid`) or a dict of axes.
        fixed: arguments shared by every task (may hold objects such as a problem; they are recorded in the
            file's header by a content digest, not as columns).
        seed: the sweep seed; each task gets :func:`task_seed` ``(seed, params)``.
        executor: where tasks run (default in-process). The caller owns it and shuts it down.
        path: a JSON-lines file; records are appended as tasks finish and those already there are skipped.
            A file written by a different sweep (task, seed or fixed arguments) is refused.
        chunksize: tasks per submitted call (default: about 8 calls per worker, at most 64 tasks each;
            1 in-process). Larger chunks cost less scheduling; an interrupt loses the chunks in flight.
        progress: done/total, rate and time left on stderr; default on, silent for the first 2 s.

    Raises:
        SweepTaskError: a task raised (the records finished before it stay in the file).
    """
    fixed = dict(fixed or {})
    if not all(isinstance(k, str) for k in fixed) or (_RESERVED | {"repeat"}) & set(fixed):
        raise ValueError("fixed must be a dict with string keys other than 'seed' and 'repeat' (a grid axis)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    sets = _check_params(params, fixed)
    fn = _resolve(task)
    if not isinstance(task, str):
        _check_callable(fn, fixed, sets[0])
    executor_given = executor is not None
    executor = executor if executor_given else InlineExecutor()
    if executor_given and not isinstance(executor, InlineExecutor):
        try:
            pickle.dumps((task, fixed))
        except Exception as exc:  # noqa: BLE001 - reported with the fix
            raise ValueError(
                f"the task and fixed arguments must pickle to run on {type(executor).__name__} "
                f"(use a module-level function): {exc}"
            ) from None

    path = Path(path) if path is not None else None
    header = _header(task, seed, fixed)
    done: dict[str, dict] = {}
    if path is not None:
        old_header, records = _read(path)
        if old_header is not None and old_header != json.loads(json.dumps(header)):
            raise ValueError(
                f"{path} holds a different sweep ({old_header}); this one is {header}. "
                "Use another file, or delete it to start over."
            )
        done = {_canonical(r["params"]): r for r in records}
        if old_header is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w") as f:
                f.write(json.dumps(header, separators=(",", ":")) + "\n")

    pending = [(ps, task_seed(seed, ps)) for ps in sets if _canonical(ps) not in done]
    if chunksize is None:
        workers = _workers(executor)
        chunksize = 1 if isinstance(executor, InlineExecutor) else max(1, min(64, -(-len(pending) // (8 * workers))))
    if int(chunksize) < 1:
        raise ValueError("chunksize must be >= 1")
    chunks = [pending[i : i + int(chunksize)] for i in range(0, len(pending), int(chunksize))]
    bar = Progress(
        len(sets),
        "nqm.sweep",
        progress is not False,
        unit="tasks",
        delay=0.0 if progress else 2.0,
        initial=len(sets) - len(pending),
    )
    # chunks in flight: enough to keep the workers busy, few to lose on an interrupt; in-process, one at a time
    window = 1 if isinstance(executor, InlineExecutor) else 4 * _workers(executor)
    new: dict[str, dict] = {}
    sink = open(path, "a") if path is not None else None  # noqa: SIM115 - closed in finally
    order: dict[Future, int] = {}  # future → submission number, to report failures in submission order
    numbers = itertools.count()
    try:
        todo = iter(chunks)
        while True:
            for chunk in itertools.islice(todo, max(0, window - len(order))):
                order[executor.submit(_run_chunk, task, fixed, chunk)] = next(numbers)
            if not order:
                break
            finished, _ = wait(order, return_when=FIRST_COMPLETED)
            finished = sorted(finished, key=order.pop)
            failed = [f for f in finished if f.exception() is not None]
            for future in finished:
                if future in failed:
                    continue
                lines = future.result()
                if sink is not None:  # land the records before anything else can go wrong
                    sink.write("".join(line + "\n" for line in lines))
                    sink.flush()
                    os.fsync(sink.fileno())
                for line in lines:
                    rec = _decode_record(json.loads(line))
                    new[_canonical(rec["params"])] = rec
                bar.update(len(lines))
            if failed:
                failed[0].result()  # raises the first failure, in submission order
    finally:
        for future in order:
            future.cancel()
        if sink is not None:
            sink.close()
    records = [new.get(k) or done[k] for k in map(_canonical, sets)]
    return SweepResult(
        records=records, names=list(sets[0]), computed=len(new), loaded=len(sets) - len(pending), path=path
    )
