"""Running a sweep: chunks of tasks on any executor, records landed as they finish, resume from the file."""

from __future__ import annotations

import itertools
import json
import os
import pickle
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from pathlib import Path

import numpy as np

from ..progress import Progress
from .params import RESERVED, canonical, check_params, task_seed
from .records import decode_record, header, read_file, unidentifiable
from .table import SweepResult
from .tasks import check_callable, resolve_task, run_chunk, task_name

__all__ = ["run", "InlineExecutor"]


class InlineExecutor(Executor):
    """Runs each submitted call at once in the calling thread: the default, in-process executor."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        """Run ``fn(*args, **kwargs)`` now; the returned future holds its result or its exception."""
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future, as executors do
            future.set_exception(exc)
            if isinstance(exc, KeyboardInterrupt):
                raise
        return future


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
            A file written by a different sweep (task, seed or fixed arguments) is refused. Functions in ``task``
            and ``fixed`` are named in the file by module:name, so with a path they must be module-level
            functions: a lambda or a local function is refused (ValueError), since the file could not tell it from
            another of that name. Partials and bound methods are identified by their arguments and object.
        chunksize: tasks per submitted call (default: about 8 calls per worker, at most 64 tasks each;
            1 in-process). Larger chunks cost less scheduling; an interrupt loses the chunks in flight.
        progress: done/total, rate and time left on stderr; default on, silent for the first 2 s.

    Raises:
        SweepTaskError: a task raised (the records finished before it stay in the file).
    """
    fixed = dict(fixed or {})
    if not all(isinstance(k, str) for k in fixed) or (RESERVED | {"repeat"}) & set(fixed):
        raise ValueError("fixed must be a dict with string keys other than 'seed' and 'repeat' (a grid axis)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    sets = check_params(params, fixed)
    fn = resolve_task(task)
    if not isinstance(task, str):
        check_callable(fn, fixed, sets[0])
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
    if path is not None:  # the file's header must tell this sweep from any other
        if why := unidentifiable(task, "task") or unidentifiable(fixed, "fixed"):
            raise ValueError(why)
    head = header(task_name(task), seed, fixed)
    done: dict[str, dict] = {}
    if path is not None:
        old_header, records = read_file(path, repair=True)
        if old_header is not None and old_header != json.loads(json.dumps(head)):
            raise ValueError(
                f"{path} holds a different sweep ({old_header}); this one is {head}. "
                "Use another file, or delete it to start over."
            )
        done = {canonical(r["params"]): r for r in records}
        if old_header is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w") as f:
                f.write(json.dumps(head, separators=(",", ":")) + "\n")

    pending = [(ps, task_seed(seed, ps)) for ps in sets if canonical(ps) not in done]
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
                order[executor.submit(run_chunk, task, fixed, chunk)] = next(numbers)
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
                    rec = decode_record(json.loads(line))
                    new[canonical(rec["params"])] = rec
                bar.update(len(lines))
            if failed:
                failed[0].result()  # raises the first failure, in submission order
    finally:
        for future in order:
            future.cancel()
        if sink is not None:
            sink.close()
    records = [new.get(k) or done[k] for k in map(canonical, sets)]
    return SweepResult(
        records=records, names=list(sets[0]), computed=len(new), loaded=len(sets) - len(pending), path=path
    )
