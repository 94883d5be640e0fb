"""Claims on several processes: each worker owns a share of the cores and runs whole claims.

The claims are independent experiments seeded from the suite seed, so a claim's numbers do not depend on the
process that runs it or on what that process ran before (the shared families are rebuilt from the seed in each
worker: well under a second). Claims that read one costly shared experiment (``SHARES``, e.g. V1 and V2's one-step
grids) run together in one task, so it is computed once. Each worker is pinned to its share of the cores before
NumPy loads, so its BLAS and nqm's simulators (whose default thread count is the usable cores) use that share and
the workers do not oversubscribe the machine; the simulators' results do not depend on their thread count (matrix
products do, at rounding level: BLAS and XLA split their sums by core).

This module imports nothing heavy at the top: a spawned worker imports it first and sets its cores and thread
variables before NumPy starts.
"""

from __future__ import annotations

import os
import signal
import time

# the thread pools of the BLAS libraries NumPy may load read these when they start
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")

_worker: dict = {}


def usable_cores() -> list[int]:
    """The cores this process may run on (all of them where the platform cannot say).

    ``nqm.threads`` counts them the same way; it is not imported from there because importing ``nqm`` loads NumPy,
    which a worker must not do before its cores are set."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def core_shares(jobs: int) -> list[list[int]]:
    """The cores of each of ``jobs`` workers: disjoint shares as equal as the cores allow (shared round-robin
    when there are more workers than cores)."""
    cores = usable_cores()
    if jobs >= len(cores):
        return [[cores[k % len(cores)]] for k in range(jobs)]
    return [cores[k::jobs] for k in range(jobs)]


def plan(chosen, quick: bool) -> list[tuple[str, ...]]:
    """The claims as tasks for the workers, longest expected first: claims that share a costly experiment
    (``SHARES``) form one task, in their order, so that it is computed once."""
    tasks: list[list] = []
    for claim in chosen:
        joined = next((t for t in tasks if set(claim.shares) & {s for c in t for s in c.shares}), None)
        if joined is None:
            tasks.append([claim])
        else:
            joined.append(claim)
    tasks.sort(key=lambda t: -sum(c.expected_seconds(quick) for c in t))
    return [tuple(c.id for c in t) for t in tasks]


def start_worker(shares, settings: tuple) -> None:
    """A worker's initializer: take a share of the cores, then build the claims' context (``settings`` are the
    :class:`~validation.claims.Context`'s arguments)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the runner, which stops every worker
    cores = shares.get()
    for name in _THREAD_VARIABLES:
        os.environ[name] = str(len(cores))
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    from .claims import Context, discover  # after the cores are set: this loads NumPy

    _worker["context"] = Context(*settings)
    _worker["claims"] = {c.id: c for c in discover()}


def run_task(ids: tuple[str, ...]) -> list[tuple[str, object, float]]:
    """Runs the claims ``ids`` in order in this worker: (id, outcome, seconds) for each."""
    return [run_claim(_worker["claims"][i], _worker["context"]) for i in ids]


def run_claim(claim, ctx) -> tuple[str, object, float]:
    """(id, outcome, seconds) of one claim on ``ctx`` (on the user's problem when the context has one)."""
    start = time.perf_counter()
    outcome = (claim.run if ctx.problem is None else claim.run_on_problem)(ctx)
    return claim.id, outcome, time.perf_counter() - start
