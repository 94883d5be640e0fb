"""One command that checks the CuPy backend on a GPU and measures it; prints one JSON object (< 5 min on an H200).

1. Device and versions.
2. Philox4x32-10 words on the GPU against NumPy: the published known answers and 2²⁰ random counters/keys
   (identical, word for word).
3. The fused kernel against its NumPy mirror on the same counters (SGD; momentum + EMA; Nesterov, alone and with
   EMA; weight decay pulling towards 0 with an optimum θ* ≠ 0, coupled SGD, decoupled heavy ball, AdamW; float64
   and float32):
   the largest relative difference of per-replica losses; chunked launches against one launch (identical).
4. Skip-ahead and one-step improvements on CuPy against NumPy.
5. Throughput of the fused kernel (f32 SGD, many steps per launch) in coordinate-updates/s, against the
   device's measured copy bandwidth (8 bytes per f32 update: one read, one write) and against a plain CuPy
   array-op loop (``theta = a*theta - s*cupy.random.standard_normal(...)``).
6. The issue's large run: d = 10⁷, R = 10³, 10³ steps of f32 SGD (``--skip-large`` leaves it out).

Targets (issue 4): fused f32 SGD ≥ 2·10¹¹ updates/s and ≥ 5× the plain loop; the large run under 60 s.
Usage: ``python bench/gpu_check.py [--skip-large]``; exit status 0 iff every correctness check holds.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

import nqm
from nqm import optim
from nqm.montecarlo import backend, philox
from nqm.montecarlo.counter import simulate_counter
from nqm.montecarlo.skip_ahead import simulate_checkpoints

KAT = philox.KNOWN_ANSWERS


def gpu_seconds(cp, fn, repeats: int = 1) -> float:
    """Best device time of ``fn`` over ``repeats`` runs, by CUDA events."""
    best = np.inf
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return best


def philox_words(cp, counter: np.ndarray, key: np.ndarray) -> np.ndarray:
    out = cp.zeros(counter.shape, dtype=cp.uint32)
    n = counter.shape[0]
    backend.kernels(cp).get_function("nqm_philox_words")(
        ((n + 255) // 256,), (256,), (cp.asarray(counter), cp.asarray(key), out, np.int64(n))
    )
    return out.get()


def check_philox(cp) -> dict:
    kat = philox_words(cp, np.array([c for c, _, _ in KAT], np.uint32), np.array([k for _, k, _ in KAT], np.uint32))
    rng = np.random.default_rng(0)
    counter = rng.integers(0, 2**32, (1 << 20, 4), dtype=np.uint32)
    key = rng.integers(0, 2**32, (1 << 20, 2), dtype=np.uint32)
    gpu = philox_words(cp, counter, key)
    cpu = philox.philox4x32(np, counter.T, key.T).T
    return {
        "known answers": kat.tolist() == [list(e) for _, _, e in KAT],
        "random counters": int(counter.shape[0]),
        "words differing GPU vs NumPy": int(np.count_nonzero(gpu != cpu)),
    }


OPTIMISERS = {
    "sgd": optim.sgd(0.5),
    "momentum+ema": optim.ema(optim.heavy_ball(0.5, 0.6), 0.9),
    "nesterov": optim.nesterov(0.5, 0.6),
    "nesterov+ema": optim.ema(optim.nesterov(0.5, 0.6), 0.9),
    "sign-SGD": optim.sign_sgd(0.002),  # the adaptive kernel, nqm_adaptive_run
    "adam": optim.adam(0.002, 0.9, 0.999, 1e-8),
    "sgd, coupled decay": optim.sgd(0.5, weight_decay=0.1),  # the kernel's drift (θ* ≠ 0 below)
    "heavy ball, decoupled decay": optim.heavy_ball(0.5, 0.6, weight_decay=0.1, decoupled=True),
    "adamw": optim.adamw(0.002, 0.9, 0.999, 1e-8, weight_decay=0.1),  # the adaptive kernel's pull
}


def check_fused(cp) -> dict:
    p = nqm.NoisyQuadratic.zhang2019(4096)
    pulled = nqm.NoisyQuadratic(p.h, p.c, optimum=np.random.default_rng(1).standard_normal(p.d))
    out = {}
    for dtype, name in ((np.float64, "f64"), (np.float32, "f32")):
        for label, opt in OPTIMISERS.items():
            q = pulled if getattr(opt, "weight_decay", 0.0) else p
            common = dict(seed=3, at=[0, 1, 7, 100, 200], dtype=dtype, keep_losses=True)
            gpu = nqm.simulate(q, opt, 8, 200, 64, backend="cupy", **common)
            cpu = nqm.simulate(q, opt, 8, 200, 64, backend="numpy", generator="philox", **common)
            out[f"{label}, {name}: max rel. diff of losses"] = float(np.max(np.abs(gpu.losses / cpu.losses - 1)))
    opt = optim.ema(optim.nesterov(0.5, 0.4), 0.7)
    args = (p, opt, 8.0, 23, 10, 5, np.ones(p.d), np.array([0, 1, 4, 5, 22, 23]), np.float32)
    whole, _ = simulate_counter(*args, cp)
    parts, _ = simulate_counter(*args, cp, chunk_steps=3, batch_rows=4)
    out["chunked launches identical"] = bool(np.array_equal(whole, parts))
    a = simulate_checkpoints(p, optim.heavy_ball(1.0, 0.5), 8, [0, 100, 10**5], 64, seed=1, backend="cupy")
    b = simulate_checkpoints(p, optim.heavy_ball(1.0, 0.5), 8, [0, 100, 10**5], 64, seed=1, backend="numpy")
    out["skip-ahead CuPy vs NumPy max rel. diff"] = float(np.max(np.abs(a.mean / b.mean - 1)))
    theta = np.linspace(-1, 1, p.d)
    grid = dict(lr=[[0.5], [1.0]], batch_size=[[4.0, 64.0]], replicas=64, seed=2)
    g = nqm.one_step_improvement(p, theta, backend="cupy", **grid)
    c = nqm.one_step_improvement(p, theta, generator="philox", **grid)
    out["one-step CuPy vs NumPy max rel. diff"] = float(np.max(np.abs(g.mean / c.mean - 1)))
    return out


def throughput(cp) -> dict:
    d, rows, steps = 1 << 24, 64, 256
    p = nqm.NoisyQuadratic.zhang2019(d)
    run = lambda: simulate_counter(  # noqa: E731 - timed below
        p, 0.5, 8.0, steps, rows, 0, np.ones(d), np.array([0, steps]), np.float32, cp, chunk_steps=steps
    )
    run()  # compile and warm up
    fused = rows * d * steps / gpu_seconds(cp, run, repeats=2)
    x = cp.zeros((rows, d), dtype=cp.float32)
    y = cp.empty_like(x)
    copy_bytes_per_s = 2 * x.nbytes / gpu_seconds(cp, lambda: cp.copyto(y, x), repeats=5)
    a = cp.asarray((1 - 0.5 * p.h).astype(np.float32))
    s = cp.asarray((0.5 * np.sqrt(p.c / 8)).astype(np.float32))
    gen = cp.random.default_rng(0)

    def plain(n=16):
        theta = x
        for _ in range(n):
            theta = a * theta - s * gen.standard_normal((rows, d), dtype=cp.float32)

    plain(1)
    plain_rate = rows * d * 16 / gpu_seconds(cp, plain, repeats=2)
    return {
        "problem": f"d = {d}, R = {rows}, {steps} steps per launch, f32 SGD",
        "fused updates/s": fused,
        "copy bandwidth, bytes/s": copy_bytes_per_s,
        "copy-bound rate at 8 bytes/update": copy_bytes_per_s / 8,
        "fused / copy-bound rate": fused / (copy_bytes_per_s / 8),
        "plain CuPy loop updates/s": plain_rate,
        "fused / plain CuPy loop": fused / plain_rate,
    }


def large_run(cp) -> dict:
    d, rows, steps = 10**7, 10**3, 10**3
    p = nqm.NoisyQuadratic.zhang2019(d)
    start = time.perf_counter()
    losses, _ = simulate_counter(p, 0.5, 8.0, steps, rows, 0, np.ones(d), np.array([0, steps]), np.float32, cp)
    cp.cuda.Device().synchronize()
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "updates/s": d * rows * steps / seconds,
        "mean loss at the end": float(losses[:, -1].mean()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-large", action="store_true", help="leave out the d = 1e7, R = 1e3 run")
    args = parser.parse_args()
    cp, reason = backend.cupy_status()
    if cp is None:
        print(json.dumps({"ok": False, "error": reason}))
        return 1
    props = cp.cuda.runtime.getDeviceProperties(0)
    out = {
        "device": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
        "compute capability": f"{props['major']}.{props['minor']}",
        "memory GiB": props["totalGlobalMem"] / 2**30,
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cupy": cp.__version__,
            "cuda runtime": cp.cuda.runtime.runtimeGetVersion(),
            "cuda driver": cp.cuda.runtime.driverGetVersion(),
            "nqm": nqm.__version__,
        },
    }
    out["philox"] = check_philox(cp)
    out["fused vs numpy mirror"] = check_fused(cp)
    out["throughput"] = throughput(cp)
    if not args.skip_large:
        out["large run (d = 1e7, R = 1e3, 1e3 steps)"] = large_run(cp)
    fused = out["fused vs numpy mirror"]
    out["correct"] = bool(
        out["philox"]["known answers"]
        and out["philox"]["words differing GPU vs NumPy"] == 0
        and all(v < (1e-4 if "f32" in k else 1e-12) for k, v in fused.items() if "losses" in k)
        and fused["chunked launches identical"]
        and fused["skip-ahead CuPy vs NumPy max rel. diff"] < 1e-10
        and fused["one-step CuPy vs NumPy max rel. diff"] < 1e-10
    )
    t = out["throughput"]
    out["targets"] = {
        "fused f32 SGD >= 2e11 updates/s": t["fused updates/s"] >= 2e11,
        "fused >= 5x plain CuPy loop": t["fused / plain CuPy loop"] >= 5,
    }
    if not args.skip_large:
        out["targets"]["d=1e7, R=1e3, 1e3 steps under 60 s"] = (
            out["large run (d = 1e7, R = 1e3, 1e3 steps)"]["seconds"] < 60
        )
    print(json.dumps(out, indent=1, default=float))
    return 0 if out["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
