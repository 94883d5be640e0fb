"""Monte Carlo throughput, measured side by side in one run (the bound is the normal generator: docs/architecture.md).

Coordinate-updates per second of ``nqm.simulate`` (linear optimisers in their fused recurrence, sign descent and
Adam in the compiled fused step of elementwise optimisers, :mod:`nqm.montecarlo.fused`, and in NumPy's passes with
``NQM_COMPILED=0``) against
  * the raw ``standard_normal`` fill rate of SFC64 on 1 and 2 threads (the bound: one normal per update),
  * the naive NumPy loop ``θ = θ − ε(hθ + s·randn)`` on the whole (R, d) array.
Prints a table and the ratios; ``--json`` prints them as JSON.  Usage: ``python bench/mc_throughput.py``.

``--tile-sweep`` instead measures SGD (float64, 1 and 2 threads) against the raw fill at tile sizes 2¹²…2¹⁶
elements, interleaving the two so that drift of the host hits both: smaller tiles mean more NumPy calls per
element (Python overhead, under the GIL), larger ones arrays that leave a core's L2.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import nqm
from nqm import optim
from nqm.montecarlo import sfc64


def measure(rates: dict, slowest: dict, name: str, fn, updates: float, repeats: int) -> None:
    """Updates per second of the fastest of ``repeats`` runs (the least disturbed one) into ``rates[name]``, and
    of the slowest into ``slowest[name]`` (the spread)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    rates[name], slowest[name] = updates / min(times), updates / max(times)


def raw_normal_fill(total: int, threads: int, dtype) -> None:
    per = total // threads
    block = 1 << 14

    def work(i):
        rng = np.random.Generator(np.random.SFC64(i))
        buf = np.empty(block, dtype=dtype)
        for _ in range(per // block):
            rng.standard_normal(out=buf, dtype=dtype)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))


def naive_loop(p, lr, batch, steps, replicas):
    rng = np.random.default_rng(0)
    theta = rng.standard_normal((replicas, p.d))
    s = np.sqrt(p.c / batch)
    for _ in range(steps):
        theta = theta - lr * (p.h * theta + s * rng.standard_normal(theta.shape))
    return theta


def tile_sweep(p, args, n: int) -> None:
    """SGD float64 updates/s over raw normals/s, per tile size and thread count. The raw fill is measured
    interleaved with each tile's runs (ABAB…, best of ``repeats`` each), since this host's 2-thread rate drifts
    by ±20% between minutes."""
    default = sfc64.TILE_ELEMENTS
    print(f"zhang2019(d={args.d}), {args.replicas} replicas × {args.steps} steps; SGD float64 / raw normals")
    for threads in (1, 2):
        for tile in (1 << 12, 1 << 13, 1 << 14, 1 << 15, 1 << 16):
            sfc64.TILE_ELEMENTS = tile  # the module reads it per call; restored below
            raw = lambda t=threads: raw_normal_fill(n, t, np.float64)  # noqa: E731
            run = lambda t=threads: nqm.simulate(p, optim.sgd(0.1), 8, args.steps, args.replicas, threads=t)  # noqa: E731
            rates, slowest = {}, {}
            for _ in range(args.repeats):
                measure(rates, slowest, f"raw{len(rates)}", raw, n, 1)
                measure(rates, slowest, f"sgd{len(rates)}", run, n, 1)
            best_raw = max(v for k, v in rates.items() if k.startswith("raw"))
            best_sgd = max(v for k, v in rates.items() if k.startswith("sgd"))
            mark = " (default)" if tile == default else ""
            print(
                f"  {threads} thread(s), tile {tile:6d}: SGD {best_sgd / 1e6:6.1f} M/s, raw {best_raw / 1e6:6.1f} M/s, "
                f"ratio {best_sgd / best_raw:.2f}{mark}"
            )
        sfc64.TILE_ELEMENTS = default


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--d", type=int, default=4096)
    parser.add_argument("--replicas", type=int, default=128)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tile-sweep", action="store_true", help="SGD against the raw fill by tile size")
    args = parser.parse_args()
    p = nqm.NoisyQuadratic.zhang2019(args.d)
    n = args.d * args.replicas * args.steps
    rates, slowest = {}, {}
    if args.tile_sweep:
        tile_sweep(p, args, n)
        return
    for dtype in (np.float64, np.float32):
        tag = np.dtype(dtype).name
        for threads in (1, 2):
            measure(
                rates,
                slowest,
                f"raw normals {tag}, {threads} thread(s)",
                lambda t=threads, dt=dtype: raw_normal_fill(n, t, dt),
                n,
                args.repeats,
            )
    naive = lambda: naive_loop(p, 1.0, 8, args.steps, args.replicas)  # noqa: E731
    measure(rates, slowest, "naive loop float64", naive, n, args.repeats)
    runs = {
        "SGD": optim.sgd(0.1),
        "momentum": optim.heavy_ball(0.1, 0.9),
        "Nesterov": optim.nesterov(0.1, 0.9),
        "EMA": optim.ema(optim.sgd(0.1), 0.9),
        "momentum + EMA": optim.ema(optim.heavy_ball(0.1, 0.9), 0.9),
        "sign-SGD": optim.sign_sgd(0.001),
        "Adam": optim.adam(0.001),
    }
    numpy_runs = {"sign-SGD": "sign-SGD, NumPy", "Adam": "Adam, NumPy"}  # NQM_COMPILED=0: no fused loop
    for dtype in (np.float64, np.float32):
        tag = np.dtype(dtype).name
        for name, opt in runs.items():
            variants = [(name, "1")] + ([(numpy_runs[name], "0")] if name in numpy_runs else [])
            for label, compiled in variants:
                for threads in (1, 2) if name == "SGD" else (2,):

                    def run(t=threads, dt=dtype, opt=opt, compiled=compiled, steps=args.steps):
                        os.environ["NQM_COMPILED"] = compiled
                        nqm.simulate(p, opt, 8, steps, args.replicas, dtype=dt, threads=t, progress=False)

                    run(steps=2)  # the first call of a compiled step compiles it: not timed
                    measure(rates, slowest, f"nqm {label} {tag}, {threads} thread(s)", run, n, args.repeats)
    os.environ.pop("NQM_COMPILED", None)
    ratios = {}
    for dtype in ("float64", "float32"):
        raw2 = rates[f"raw normals {dtype}, 2 thread(s)"]
        for name in [*runs, *numpy_runs.values()]:
            ratios[f"{name} {dtype} / raw 2 threads"] = rates[f"nqm {name} {dtype}, 2 thread(s)"] / raw2
        ratios[f"SGD {dtype} 1 thread / raw 1 thread"] = (
            rates[f"nqm SGD {dtype}, 1 thread(s)"] / rates[f"raw normals {dtype}, 1 thread(s)"]
        )
        ratios[f"SGD {dtype} 2 threads / naive loop"] = (
            rates[f"nqm SGD {dtype}, 2 thread(s)"] / rates["naive loop float64"]
        )
    if args.json:
        print(
            json.dumps(
                {
                    "problem": f"zhang2019(d={args.d})",
                    "replicas": args.replicas,
                    "steps": args.steps,
                    "rates_per_s": rates,
                    "slowest_rates_per_s": slowest,
                    "ratios": ratios,
                },
                indent=1,
            )
        )
        return
    print(f"zhang2019(d={args.d}), {args.replicas} replicas × {args.steps} steps = {n:.3g} coordinate-updates")
    print(f"  {'':40s} {'best':>9s}   {'slowest':>7s} (M updates/s, {args.repeats} runs)")
    for k, v in rates.items():
        print(f"  {k:40s} {v / 1e6:9.1f}   {slowest[k] / 1e6:7.1f}")
    print("ratios:")
    for k, v in ratios.items():
        print(f"  {k:40s} {v:6.2f}")


if __name__ == "__main__":
    main()
