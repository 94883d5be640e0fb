"""How a CPU sweep scales with workers, and what each task costs the executor — measured side by side.

Throughput: a sweep of Monte Carlo tasks (``simulate`` on Zhang et al.'s spectrum, each about 0.3 s on one
core) run by a plain loop of ``nqm.simulate`` calls (the baseline), by ``nqm.sweep.run`` in-process, on a
``ProcessPoolExecutor`` with 1 and 2 workers, and on a Dask ``LocalCluster`` with 2 worker processes (when
dask is installed). The ratio that matters: 2 workers against 1.
Overhead: a sweep of tasks that do nothing, so that the time per task is what the sweep machinery and the
executor add (JSON records, pickling, scheduling), with default chunking and with one task per call.
Every time is the best of three runs. Usage: ``python bench/sweep_scaling.py [--json] [--tasks N]``.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor

import nqm
from nqm import sweep

FIXED = {"d": 4000, "lr": 0.5, "steps": 300, "replicas": 32, "at": [0, 300]}


def nothing(x, seed):
    """A task with no work: what remains is the per-task cost of the sweep."""
    return x


def timed(fn, repeats: int = 3):
    """Best wall time of ``repeats`` runs (this machine's timings wander by about 10 % from run to run)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def dask_executor(workers: int):
    """A Dask LocalCluster's executor (or None without dask), with its start-up time excluded."""
    try:
        import distributed
    except ImportError:
        return None, None
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None)
    client = distributed.Client(cluster)
    client.run(lambda: __import__("nqm"))  # warm imports, as a long-lived cluster would have
    return client, cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tasks", type=int, default=16, help="Monte Carlo tasks (default 16)")
    args = parser.parse_args()
    params = sweep.grid(batch_size=[4, 64], repeat=range(args.tasks // 2))
    p = nqm.NoisyQuadratic.zhang2019(FIXED["d"])
    sim = {k: v for k, v in FIXED.items() if k not in ("d", "lr")}

    def loop():
        for ps in params:
            nqm.simulate(p, FIXED["lr"], batch_size=ps["batch_size"], seed=sweep.task_seed(0, ps), threads=1, **sim)

    seconds = {}
    seconds["plain loop of nqm.simulate (1 core)"], _ = timed(loop)
    seconds["sweep, in-process"], base = timed(lambda: sweep.run("simulate", params, fixed=FIXED, progress=False))
    for workers in (1, 2):
        with ProcessPoolExecutor(workers) as ex:
            ex.submit(sum, [0]).result()  # start the pool outside the timing
            t, r = timed(lambda ex=ex: sweep.run("simulate", params, fixed=FIXED, executor=ex, progress=False))
        seconds[f"sweep, ProcessPoolExecutor({workers})"] = t
        assert [x["result"] for x in r.records] == [x["result"] for x in base.records]
    client, cluster = dask_executor(2)
    if client is not None:
        with cluster, client:
            t, r = timed(
                lambda: sweep.run("simulate", params, fixed=FIXED, executor=client.get_executor(), progress=False)
            )
        seconds["sweep, Dask LocalCluster(2 workers)"] = t
        assert [x["result"] for x in r.records] == [x["result"] for x in base.records]

    trivial = sweep.grid(x=range(2000))
    overhead = {}
    overhead["in-process"], _ = timed(lambda: sweep.run(nothing, trivial, progress=False))
    with ProcessPoolExecutor(2) as ex:
        ex.submit(sum, [0]).result()
        overhead["ProcessPoolExecutor(2), default chunks"], _ = timed(
            lambda: sweep.run(nothing, trivial, executor=ex, progress=False)
        )
        overhead["ProcessPoolExecutor(2), 1 task per call"], _ = timed(
            lambda: sweep.run(nothing, trivial[:500], executor=ex, chunksize=1, progress=False)
        )
        overhead["ProcessPoolExecutor(2), 1 task per call"] *= len(trivial) / 500
    client, cluster = dask_executor(2)
    if client is not None:
        with cluster, client:
            ex = client.get_executor()
            overhead["Dask LocalCluster(2), default chunks"], _ = timed(
                lambda: sweep.run(nothing, trivial, executor=ex, progress=False)
            )
            overhead["Dask LocalCluster(2), 1 task per call"], _ = timed(
                lambda: sweep.run(nothing, trivial[:200], executor=ex, chunksize=1, progress=False)
            )
            overhead["Dask LocalCluster(2), 1 task per call"] *= len(trivial) / 200

    one = seconds["sweep, ProcessPoolExecutor(1)"]
    out = {
        "tasks": len(params),
        "seconds per Monte Carlo task, plain loop": seconds["plain loop of nqm.simulate (1 core)"] / len(params),
        "seconds": seconds,
        "throughput vs ProcessPoolExecutor(1)": {k: one / v for k, v in seconds.items()},
        "speed-up, 2 workers vs 1 (process pool)": one / seconds["sweep, ProcessPoolExecutor(2)"],
        "sweep in-process vs plain loop (time ratio)": seconds["sweep, in-process"]
        / seconds["plain loop of nqm.simulate (1 core)"],
        "overhead per task, microseconds": {k: 1e6 * v / len(trivial) for k, v in overhead.items()},
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{out['tasks']} Monte Carlo tasks of {out['seconds per Monte Carlo task, plain loop']:.3f} s each")
    for k, v in seconds.items():
        print(f"  {k:44s} {v:7.2f} s   throughput ×{one / v:5.2f} of ProcessPoolExecutor(1)")
    print(f"speed-up, 2 workers vs 1: {out['speed-up, 2 workers vs 1 (process pool)']:.2f}")
    print(f"sweep in-process / plain loop: {out['sweep in-process vs plain loop (time ratio)']:.3f}")
    print("overhead per task (a task that does nothing):")
    for k, v in out["overhead per task, microseconds"].items():
        print(f"  {k:44s} {v:9.1f} µs")


if __name__ == "__main__":
    main()
