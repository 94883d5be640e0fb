"""Tiles of work on threads, each with its own SFC64 stream: what makes a CPU simulation reproducible.

A tile's stream is ``SFC64(SeedSequence(seed, spawn_key=key))`` with ``key`` the tile's position (replica
block, coordinate block, …), so a result depends only on (seed, problem, arguments), never on the number of
threads or the order in which tiles finish. NumPy's generators release the GIL while they fill arrays, so
tiles on threads use both cores.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["tile_rng", "thread_count", "run_tasks"]


def tile_rng(seed, *key) -> np.random.Generator:
    """The SFC64 generator of the tile at position ``key`` of a run seeded by ``seed``."""
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=key)))


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
