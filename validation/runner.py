"""Runs every validation check and writes the report; exit status 0 iff all pass and all controls are rejected."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import (
    v1_one_step_law,
    v2_optimal_step,
    v3_optimal_improvement,
    v4_dynamics,
    v5_identities,
    v6_estimator_bias,
    v7_ratio_estimators,
    v8_tracking,
    v9_misalignment,
    v10_temperature,
    v11_pareto,
    v12_least_squares,
    v13_algorithms,
    v14_greedy_adaptive,
)
from .families import Budget, families
from .one_step import run_grid
from .report import write
from .stats import ALPHA_SUITE, decide

CHECK_IDS = tuple(f"V{i}" for i in range(1, 15))


def _selection(only) -> set[str]:
    if only is None:
        return set(CHECK_IDS)
    chosen = {str(c).strip().upper() for c in ([only] if isinstance(only, str) else only)}
    chosen = {c for part in chosen for c in part.split(",") if c}
    if unknown := chosen - set(CHECK_IDS):
        raise ValueError(f"unknown check(s) {sorted(unknown)}; choose from {', '.join(CHECK_IDS)}")
    if not chosen:
        raise ValueError("only selects no checks")
    return chosen


def run(out_dir: Path, quick: bool = False, seed: int = 0, log=print, only=None) -> dict:
    """Runs the checks (all, or those named in ``only``, e.g. ``["V4", "V5"]``) and writes the report."""
    want = _selection(only)
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    budget = Budget.make(quick)
    fams = {f.key: f for f in families(budget, seed)}
    checks, tables = [], []

    def done(what):
        log(f"[{time.perf_counter() - start:6.1f} s] {what} done")

    for f in fams.values():
        if want & {"V1", "V2"}:
            replicas = budget.one_step_replicas if f.per_example is None else budget.one_step_replicas_examples
            grids = [run_grid(f, point, replicas, seed) for point in f.points]
            checks += v1_one_step_law.checks(grids, out_dir) if "V1" in want else []
            checks += v2_optimal_step.checks(grids, out_dir) if "V2" in want else []
            done(f"V1, V2 for {f.key}")
        if "V3" in want:
            checks += v3_optimal_improvement.checks(f, budget.optimum_replicas, seed, out_dir)
            done(f"V3 for {f.key}")
    if "V4" in want:
        checks += v4_dynamics.checks(fams, budget, seed, out_dir)
        done("V4")
    if "V5" in want:
        checks += v5_identities.checks(seed, out_dir)
    if "V6" in want:
        checks += v6_estimator_bias.checks(
            fams["zhang2019"], fams["student-t-examples"], budget.estimator_replicas, seed, out_dir
        )
    if "V7" in want:
        more_checks, more_tables = v7_ratio_estimators.run(fams["zhang2019"], budget.estimator_replicas, seed, out_dir)
        checks += more_checks
        tables += more_tables
    if "V8" in want:
        tables += v8_tracking.run(fams["zhang2019"], budget, seed, out_dir)
    if "V9" in want:
        tables += v9_misalignment.run(budget.d_dense, seed, out_dir)
    if "V10" in want:
        more_checks, more_tables = v10_temperature.run(budget.temperature_replicas, seed, out_dir)
        checks += more_checks
        tables += more_tables
    if want & {"V5", "V6", "V7", "V8", "V9", "V10"}:
        done("V5–V10 (identities, noise-scale estimators)")
    if "V11" in want:
        more_checks, more_tables = v11_pareto.run(
            budget.d_pareto, budget.d_zhang, budget.noise_scale_replicas, seed, out_dir
        )
        checks += more_checks
        tables += more_tables
        done("V11 (whole runs, Pareto frontier)")
    if "V12" in want:
        more_checks, more_tables = v12_least_squares.run(
            budget.one_step_replicas * 2, budget.one_step_replicas_examples, seed, out_dir
        )
        checks += more_checks
        tables += more_tables
        done("V12 (state-dependent noise)")
    if "V13" in want:
        # Zhang et al.'s claims are about their d = 10⁴ problem; the quick run takes every third batch size
        batches = v13_algorithms.BATCHES[::3] if quick else v13_algorithms.BATCHES
        more_checks, more_tables = v13_algorithms.run(
            10_000, budget.d_zhang, budget.noise_scale_replicas, seed, out_dir, batches
        )
        checks += more_checks
        tables += more_tables
        done("V13 (momentum, EMA, schedules)")
    if "V14" in want:
        tables += v14_greedy_adaptive.run(budget.d_pareto // 10, out_dir)
        done("V14 (greedy frontier, adaptive batch size)")
    z_crit = decide(checks, ALPHA_SUITE)
    meta = {
        "seed": seed,
        "quick": quick,
        "only": sorted(want, key=CHECK_IDS.index) if only is not None else None,
        "alpha": ALPHA_SUITE,
        "z_crit": z_crit,
        "statistical_cells": sum(c.cells for c in checks if c.kind == "check" and not c.exact),
        "seconds": time.perf_counter() - start,
        "budget": budget.__dict__,
    }
    summary = write(checks, out_dir, meta, tables)
    for c in checks:
        if not c.passed:
            log(f"  {'FAILED' if c.kind == 'check' else 'NOT REJECTED'}: {c.name}")
    log(
        f"{summary['checks_passed']}/{summary['checks']} checks pass, {summary['controls_rejected']}/"
        f"{summary['controls']} controls rejected; report in {out_dir / 'report.md'} ({meta['seconds']:.1f} s)"
    )
    return summary


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="nqm validate", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (about 30 s), as the tests run it")
    parser.add_argument("--out", type=Path, default=Path("nqm-report"), help="output directory (default nqm-report)")
    parser.add_argument("--seed", type=int, default=0, help="suite seed (default 0)")
    parser.add_argument("--only", default=None, help="comma-separated checks to run, e.g. V4,V5 (default all)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    summary = run(args.out, quick=args.quick, seed=args.seed, log=lambda m: print(m, file=sys.stderr), only=args.only)
    return 0 if summary["ok"] else 1
