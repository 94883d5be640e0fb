"""``nqm validate`` on one process against one per core, alternated in one run: wall time, the speed-up, and whether
the verdicts and numbers are the same.

Each round runs ``nqm validate --quick`` (or the full suite with ``--full``) with ``--jobs 1`` and then with the
default (one process per usable core), as a user would, each as its own ``nqm`` process. Reports the best and the
spread of each over the rounds, the ratio of the bests, the checks whose numbers differ between the two (matrix
products round by the cores they run on) and the verdicts, which must be equal.
Usage: ``python bench/validate_jobs.py [--rounds 2] [--full] [--only V4,V5] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_run(out: Path, jobs: int | None, quick: bool, only: str | None) -> tuple[float, dict]:
    """(wall seconds, results.json) of one ``nqm validate`` run in its own process."""
    args = [sys.executable, "-m", "validation", "--out", str(out), "--seed", "0"]
    args += ["--quick"] if quick else []
    args += [] if jobs is None else ["--jobs", str(jobs)]
    args += [] if only is None else ["--only", only]
    start = time.perf_counter()
    subprocess.run(args, check=False, capture_output=True)
    return time.perf_counter() - start, json.loads((out / "results.json").read_text())


def differing(a: dict, b: dict) -> tuple[list, list]:
    """(checks whose numbers differ, checks whose verdicts differ) between two results."""
    left, right = ({c["name"]: c for c in r["checks"]} for r in (a, b))
    numbers = sorted(n for n in left if left[n]["all_cells"] != right[n]["all_cells"])
    verdicts = sorted(n for n in left if left[n]["passed"] != right[n]["passed"])
    return numbers, verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--full", action="store_true", help="the full suite (default: --quick)")
    parser.add_argument("--only", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"one process": [], "one per core": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            t1, r1 = one_run(Path(tmp) / f"one{k}", 1, not args.full, args.only)
            tn, rn = one_run(Path(tmp) / f"many{k}", None, not args.full, args.only)
            times["one process"].append(t1)
            times["one per core"].append(tn)
    numbers, verdicts = differing(r1, rn)
    result = {
        "suite": "full" if args.full else "quick",
        "processes": rn["meta"]["jobs"],
        "best (s)": {k: min(v) for k, v in times.items()},
        "spread (s)": {k: max(v) - min(v) for k, v in times.items()},
        "speed-up": min(times["one process"]) / min(times["one per core"]),
        "checks with numbers differing": numbers,
        "checks with verdicts differing": verdicts,
        "claim seconds, one per core": rn["meta"]["claim_seconds"],
    }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0 if not verdicts else 1


if __name__ == "__main__":
    sys.exit(main())
