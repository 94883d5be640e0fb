"""Independent tasks on threads: how many threads, and their results in order (used by the simulators, which run
tiles of work whose NumPy generators release the GIL, and by the compiled tuner, whose kernels release it)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

__all__ = ["thread_count", "run_tasks"]


def thread_count(threads, n_tasks: int) -> int:
    """Worker threads for ``n_tasks`` tasks: ``threads`` (default: all usable cores), at most one per task."""
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if int(threads) < 1:
        raise ValueError("threads must be >= 1")
    return max(1, min(int(threads), n_tasks))


def run_tasks(tasks, threads: int) -> list:
    """Results of the zero-argument callables ``tasks``, in their order, on ``threads`` threads."""
    if threads == 1:
        return [task() for task in tasks]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(lambda task: task(), tasks))
