"""Tiles of work on threads, each with its own SFC64 stream: what makes a CPU simulation reproducible.

A tile's stream is ``SFC64(SeedSequence(seed, spawn_key=key))`` with ``key`` the tile's position (replica
block, coordinate block, …), so a result depends only on (seed, problem, arguments), never on the number of
threads or the order in which tiles finish. NumPy's generators release the GIL while they fill arrays, so
tiles on threads use both cores (:mod:`nqm.threads` shares them out).
"""

from __future__ import annotations

import numpy as np

from ..threads import run_tasks, thread_count

__all__ = ["tile_rng", "thread_count", "run_tasks"]


def tile_rng(seed, *key) -> np.random.Generator:
    """The SFC64 generator of the tile at position ``key`` of a run seeded by ``seed``."""
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed, spawn_key=key)))
