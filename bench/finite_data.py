"""Drawing batches of B distinct examples out of N: redrawing the rows that repeat an index against ranking N random
keys per row, in one run (best of 5, with the spread). Usage: ``python bench/finite_data.py [--json]``."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from nqm.finite_data import distinct_batches

CASES = [(10_000, 32), (10_000, 100), (1_000, 16), (256, 16)]  # (N, B); b² ≤ N takes the redrawing path
REPLICAS = 1000


def ranked(rng, replicas, n, b):
    return np.argpartition(rng.random((replicas, n)), b - 1, axis=1)[:, :b]


def timed(draw, n, b, repeats=5):
    rng, times = np.random.default_rng(0), []
    for _ in range(repeats):
        t0 = time.perf_counter()
        draw(rng, REPLICAS, n, b)
        times.append(time.perf_counter() - t0)
    return min(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for n, b in CASES:
        fast, slow = timed(distinct_batches, n, b), timed(ranked, n, b)
        rows.append({"N": n, "B": b, "path": "redraw" if b * b <= n else "rank",
                     "seconds, nqm (best, worst)": fast, "seconds, ranking every row (best, worst)": slow,
                     "speed-up (best/best)": slow[0] / fast[0]})  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"N = {r['N']:6d}, B = {r['B']:4d} ({r['path']}): nqm {r['seconds, nqm (best, worst)'][0] * 1e3:.2f} ms, "
              f"ranking {r['seconds, ranking every row (best, worst)'][0] * 1e3:.2f} ms, "
              f"speed-up {r['speed-up (best/best)']:.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
