r"""False alarms measured, not assumed: ``nqm validate --quick`` over many seeds and the z of every statistical cell.

Each seed runs as a user runs it (``python -m validation --quick --seed s --out DIR/seed-s``), ``--parallel`` seeds at
a time; a seed whose ``results.json`` is there already is read and not run again, so a calibration can be stopped and
resumed (it is meant for the background, not for CI). Then, over every seed's report:

* **per check** (the suite's positive statistical checks): the cells × seeds values of the z each cell is decided
  on and, where the check corrects its means' skewness, the uncorrected z beside it; the counts of z < −3 and z > 3
  against a normal's expectation (Φ(−3) = 0.00135 per cell and side), their Poisson p of an excess, the count of
  |z| > 4 (expected 6.3·10⁻⁵ per cell) and the largest |z|; the runs where the check failed.
* **the suite**: the runs where some check failed (the family-wise false-alarm rate) with its Clopper–Pearson 95%
  interval, beside the stated budget α; the tail counts of all cells together.
* **controls**: the runs where a planted-error control was not rejected (each should be rejected in every run).

A check is flagged miscalibrated where a tail's excess has Poisson p < 0.01/(2 × checks) (Bonferroni over the checks
and both sides). The cells of one check are correlated (one run's checkpoints, one grid's step sizes), which widens
the spread of the counts beyond Poisson: a flag is a lead to look at, and a count near its expectation is the
calibration.

Usage: ``python bench/calibration.py --seeds 30 [--first 0] [--only V4] [--parallel 1] [--jobs N] [--out DIR]``;
writes ``DIR/calibration.md`` and ``DIR/calibration.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from scipy import stats

TAIL = 3.0
FAR = 4.0
P_TAIL = float(stats.norm.sf(TAIL))  # per cell and side
P_FAR = float(2 * stats.norm.sf(FAR))


def run_seed(out: Path, seed: int, only: str | None, jobs: int | None) -> dict:
    """One seed's results.json, running ``validate --quick`` for it unless its report is there already."""
    report = out / f"seed-{seed}" / "results.json"
    if not report.exists():
        args = [sys.executable, "-m", "validation", "--quick", "--seed", str(seed), "--out", str(report.parent)]
        args += [] if only is None else ["--only", only]
        args += [] if jobs is None else ["--jobs", str(jobs)]
        done = subprocess.run(args, capture_output=True, text=True)
        if not report.exists():  # a failing check still writes its report; no report is a crash
            raise RuntimeError(f"seed {seed}: no report (exit {done.returncode})\n{done.stderr[-2000:]}")
    return json.loads(report.read_text())


def poisson_excess(observed: int, expected: float) -> float:
    """P(N ≥ observed) for N ~ Poisson(expected): small where the tail holds more cells than a normal's."""
    return float(stats.poisson.sf(observed - 1, expected)) if observed > 0 else 1.0


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of a rate k/n."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf((1 - level) / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - (1 - level) / 2, k + 1, n - k))
    return lo, hi


def tails(z: np.ndarray) -> dict:
    """Counts of one set of z values in the tails, against a normal's expectation."""
    z = z[np.isfinite(z)]
    n = z.size
    low, high, far = int(np.sum(z < -TAIL)), int(np.sum(z > TAIL)), int(np.sum(np.abs(z) > FAR))
    return {
        "values": n,
        f"z < -{TAIL:g}": low,
        f"z > {TAIL:g}": high,
        "expected per side": n * P_TAIL,
        "p low": poisson_excess(low, n * P_TAIL),
        "p high": poisson_excess(high, n * P_TAIL),
        f"|z| > {FAR:g}": far,
        f"expected |z| > {FAR:g}": n * P_FAR,
        "max |z|": float(np.max(np.abs(z))) if n else float("nan"),
        "mean": float(np.mean(z)) if n else float("nan"),
        "sd": float(np.std(z, ddof=1)) if n > 1 else float("nan"),
    }


def summarise(reports: list[dict]) -> dict:
    """The calibration of every statistical check, of the suite and of the controls over the reports."""
    per_check: dict[str, dict] = {}
    failed_runs = failed_uncorrected = 0
    controls: dict[str, dict] = {}
    for r in reports:
        z_crit = r["meta"]["z_crit"]
        failed_runs += not all(c["passed"] for c in r["checks"] if c["kind"] == "check")
        raw_failed = False
        for c in r["checks"]:
            cells = c["all_cells"]
            # a two-sided reading of the uncorrected z (every corrected check of the suite is two-sided)
            raw = np.asarray(cells.get("z_uncorrected", cells["z"]), dtype=float)
            if c["kind"] == "negative_control":
                k = controls.setdefault(c["name"], {"not rejected": 0, "smallest max |z|": np.inf})
                k["not rejected"] += not c["passed"]
                k["smallest max |z|"] = min(k["smallest max |z|"], float(np.max(np.abs(cells["z"]))))
                if "z_uncorrected" in cells:
                    k["smallest max |z| uncorrected"] = min(k.get("smallest max |z| uncorrected", np.inf),
                                                            float(np.max(np.abs(raw))))  # fmt: skip
                continue
            if c["exact"]:
                raw_failed |= not c["passed"]
                continue
            entry = per_check.setdefault(c["name"], {"z": [], "z_uncorrected": [], "failed": 0, "failed raw": 0})
            entry["z"].append(np.asarray(cells["z"], dtype=float))
            entry["failed"] += not c["passed"]
            if "z_uncorrected" in cells:
                entry["z_uncorrected"].append(raw)
                entry["failed raw"] += bool(np.any(np.abs(raw) > z_crit))
                raw_failed |= bool(np.any(np.abs(raw) > z_crit))
            else:
                raw_failed |= not c["passed"]
        failed_uncorrected += raw_failed
    threshold = 0.01 / (2 * max(len(per_check), 1))
    checks = {}
    for name, e in per_check.items():
        row = {"runs failed": e["failed"], "decided on": tails(np.concatenate(e["z"]))}
        if e["z_uncorrected"]:
            row["uncorrected"] = tails(np.concatenate(e["z_uncorrected"]))
            row["runs failed uncorrected"] = e["failed raw"]
        row["miscalibrated"] = min(row["decided on"]["p low"], row["decided on"]["p high"]) < threshold
        checks[name] = row
    everything = np.concatenate([z for e in per_check.values() for z in e["z"]]) if per_check else np.array([])
    runs = len(reports)
    alpha = reports[0]["meta"]["alpha"] if reports else float("nan")
    return {
        "runs": runs,
        "seeds": [r["meta"]["seed"] for r in reports],
        "alpha": alpha,
        "z_crit": sorted({r["meta"]["z_crit"] for r in reports}),
        "family-wise": {
            "runs with a failed check": failed_runs,
            "rate": failed_runs / runs if runs else float("nan"),
            "95% interval": clopper_pearson(failed_runs, runs) if runs else (float("nan"),) * 2,
            "runs with a failed check, uncorrected": failed_uncorrected,
        },
        "all cells": tails(everything),
        "flag threshold p": threshold,
        "checks": checks,
        "controls not rejected": {k: v["not rejected"] for k, v in controls.items() if v["not rejected"]},
        "controls": controls,
    }


def markdown(s: dict) -> str:
    """The calibration as the tables of the note."""
    fw = s["family-wise"]
    lo, hi = fw["95% interval"]
    t = s["all cells"]
    lines = [
        f"# Calibration over {s['runs']} seeds of `nqm validate --quick`",
        "",
        f"Family-wise: **{fw['runs with a failed check']}/{s['runs']} runs** with a failed check "
        f"(95% interval {lo:.3g}–{hi:.3g}; stated budget α = {s['alpha']:g}; critical |z| "
        f"{', '.join(f'{z:.3f}' for z in s['z_crit'])}); on the uncorrected z: "
        f"{fw['runs with a failed check, uncorrected']}/{s['runs']}.",
        f"All statistical cells together: {t['values']} values; z < −{TAIL:g}: {t[f'z < -{TAIL:g}']}, "
        f"z > {TAIL:g}: {t[f'z > {TAIL:g}']} (expected {t['expected per side']:.1f} each); |z| > {FAR:g}: "
        f"{t[f'|z| > {FAR:g}']} (expected {t[f'expected |z| > {FAR:g}']:.2f}); largest |z| {t['max |z|']:.2f}.",
        f"Controls: {len(s['controls'])}, not rejected in some run: "
        + (", ".join(f"{k} ({v})" for k, v in s["controls not rejected"].items()) or "none")
        + ".",
        "",
        f"| check | values | z < −{TAIL:g} | z > {TAIL:g} | expected each | |z| > {FAR:g} | max |z| | sd z "
        f"| runs failed (uncorrected) | uncorrected z < −{TAIL:g} / > {TAIL:g} | flag |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in sorted(s["checks"].items()):
        failed = f"{row['runs failed']}" + (f" ({row['runs failed uncorrected']})" if "uncorrected" in row else "")
        d = row["decided on"]
        u = row.get("uncorrected")
        raw = f"{u[f'z < -{TAIL:g}']} / {u[f'z > {TAIL:g}']}" if u else "—"
        lines.append(
            f"| {name} | {d['values']} | {d[f'z < -{TAIL:g}']} | {d[f'z > {TAIL:g}']} | {d['expected per side']:.2f} "
            f"| {d[f'|z| > {FAR:g}']} | {d['max |z|']:.2f} | {d['sd']:.2f} | {failed} | {raw} "
            f"| {'**miscalibrated**' if row['miscalibrated'] else ''} |"
        )
    corrected = {k: v for k, v in s["controls"].items() if "smallest max |z| uncorrected" in v}
    if corrected:
        head = "| control (skew-corrected) | smallest worst-cell |z| over the runs | uncorrected |"
        lines += ["", head, "|---|---|---|"]
        lines += [f"| {k} | {v['smallest max |z|']:.1f} | {v['smallest max |z| uncorrected']:.1f} |"
                  for k, v in sorted(corrected.items())]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--only", default=None, help="claims, as for nqm validate --only")
    parser.add_argument("--parallel", type=int, default=1, help="seeds run at a time")
    parser.add_argument("--jobs", type=int, default=None, help="each run's --jobs (default: its cores)")
    parser.add_argument("--out", type=Path, default=Path("calibration"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = range(args.first, args.first + args.seeds)
    start = time.perf_counter()
    reports = []
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        futures = [pool.submit(run_seed, args.out, s, args.only, args.jobs) for s in seeds]
        for k, f in enumerate(futures, 1):
            reports.append(f.result())
            print(f"[{time.perf_counter() - start:7.1f} s] seed {seeds[k - 1]}: {k}/{len(seeds)}", file=sys.stderr)
    summary = summarise(reports)
    text = markdown(summary)
    (args.out / "calibration.json").write_text(json.dumps(summary, indent=1))
    (args.out / "calibration.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
