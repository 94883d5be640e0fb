"""Runs every validation check and writes the report; exit status 0 iff all pass and all controls are rejected."""

from __future__ import annotations

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from .claims import GRID_SIZES, Context, discover
from .families import SHARED, UserProblem
from .output import atomic_directory
from .pool import core_shares, plan, run_claim, run_task, start_worker, usable_cores
from .report import write
from .stats import ALPHA_SUITE, decide, without_power


def _selection(only, ids: list[str]) -> set[str]:
    if only is None:
        return set(ids)
    chosen = {str(c).strip().upper() for c in ([only] if isinstance(only, str) else only)}
    chosen = {c for part in chosen for c in part.split(",") if c}
    if unknown := chosen - set(ids):
        raise ValueError(f"unknown check(s) {sorted(unknown)}; choose from {', '.join(ids)}")
    if not chosen:
        raise ValueError("only selects no checks")
    return chosen


def run(
    out_dir: Path,
    quick: bool = False,
    seed: int = 0,
    log=print,
    only=None,
    problem: UserProblem | None = None,
    jobs: int | None = None,
) -> dict:
    """Runs the registered claims (all, or those named in ``only``, e.g. ``["V4", "V5"]``) and writes the report.

    With ``problem`` (a :class:`~validation.families.UserProblem`) the claims that apply to a given problem run on
    it alone; the others are listed in the report with the reason they do not apply. ``jobs`` processes run the
    claims side by side (default: one per usable core; 1 runs them in this process); the verdicts and every
    simulated number are the same for every ``jobs`` (BLAS's sums round by the cores they run on: V23's real
    network moves at ~1e-13, V13's SLSQP schedules by 0.3%; docs/architecture.md).
    """
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    claims = discover()
    ids = [c.id for c in claims]
    want = _selection(only, ids)
    if problem is not None and only is not None:
        if refused := [c for c in claims if c.id in want and c.run_on_problem is None]:
            raise ValueError("; ".join(f"{c.id} does not run on a problem file: {c.not_on_a_problem}" for c in refused))
    with atomic_directory(out_dir) as work:  # the report appears whole, or the old one stays as it was
        summary, seconds = _run(claims, want, ids, work, quick, seed, log, only, problem, jobs)
    log(
        f"{summary['checks_passed']}/{summary['checks']} checks pass, {summary['controls_rejected']}/"
        f"{summary['controls']} controls rejected; report in {Path(out_dir) / 'report.md'} ({seconds:.1f} s)"
    )
    return summary


def _run(claims, want, ids, work: Path, quick, seed, log, only, problem, jobs) -> tuple[dict, float]:
    """Runs the chosen claims, writing figures and the report into ``work`` (which becomes ``out_dir``)."""
    start = time.perf_counter()
    chosen, not_run = [], []
    for claim in claims:
        if claim.id not in want:
            continue
        if problem is not None and claim.run_on_problem is None:
            not_run.append({"id": claim.id, "title": claim.title, "reason": claim.not_on_a_problem})
        elif problem is not None and (why := claim.cannot_speak(problem)):
            not_run.append({"id": claim.id, "title": claim.title, "reason": why})
        else:
            chosen.append(claim)
    done, workers = _outcomes(chosen, (work, quick, seed, problem), jobs, log, start)
    checks, tables = [], []
    for claim in chosen:  # in the claims' order, whichever finished first
        outcome, _ = done[claim.id]
        checks += outcome.checks
        tables += [replace(t, claim=claim.id) for t in outcome.tables]
    z_crit = decide(checks, ALPHA_SUITE)
    powerless = [c.name for c in checks if problem is not None and without_power(c, z_crit)]
    checks = [c for c in checks if c.name not in powerless]
    meta = {
        "seed": seed,
        "quick": quick,
        "only": sorted(want, key=ids.index) if only is not None else None,
        "alpha": ALPHA_SUITE,
        "z_crit": z_crit,
        "statistical_cells": sum(c.cells for c in checks if c.kind == "check" and not c.exact),
        "seconds": time.perf_counter() - start,
        "jobs": workers,
        "claim_seconds": {c.id: round(done[c.id][1], 2) for c in chosen},
        "budget": {
            "families": SHARED.as_dict(quick),
            "one-step grids": GRID_SIZES.as_dict(quick),
            **{c.id: c.sizes.as_dict(quick) for c in claims if c.id in want and c.sizes.pairs},
        },
    }
    if problem is not None:
        meta["problem"] = {
            "name": problem.problem.name,
            "source": problem.source,
            "d": problem.problem.d,
            "target": problem.target,
            "ran": [c.id for c in claims if c.id in want and c.id not in {n["id"] for n in not_run}],
            "not_run": not_run,
            "controls_without_power": powerless,
        }
    summary = write(checks, work, meta, tables)
    for c in checks:
        if not c.passed:
            log(f"  {'FAILED' if c.kind == 'check' else 'NOT REJECTED'}: {c.name}")
    return summary, meta["seconds"]


def _workers(jobs: int | None, tasks) -> int:
    """How many processes run the claims: ``jobs`` (default: the usable cores), at most one per task."""
    return max(1, min(len(usable_cores()) if jobs is None else jobs, len(tasks)))


def _outcomes(chosen, settings: tuple, jobs, log, start: float) -> tuple[dict, int]:
    """Each chosen claim's (outcome, seconds), by id, run on ``jobs`` processes (in this one when 1), and how many
    processes ran them; the progress log names each claim as it finishes and estimates the time left from the
    claims' expected costs."""
    quick = settings[1]
    tasks = plan(chosen, quick)
    workers = _workers(jobs, tasks)
    expected = {c.id: c.expected_seconds(quick) for c in chosen}
    titles = {c.id: c.title for c in chosen}
    done: dict = {}

    def finished(claim_id, outcome, seconds):
        done[claim_id] = (outcome, seconds)
        elapsed = time.perf_counter() - start
        left = sum(expected[i] for i in expected if i not in done)
        # this machine's pace against the estimates, from the claims done so far
        pace = sum(t for _, t in done.values()) / sum(expected[i] for i in done)
        eta = f", about {pace * left / workers:.0f} s left" if left else ""
        log(f"[{elapsed:6.1f} s] {claim_id} ({titles[claim_id]}) done: {len(done)}/{len(chosen)} claims{eta}")

    if workers == 1:
        ctx = Context(*settings)
        for claim in chosen:
            finished(*run_claim(claim, ctx))
        return done, workers
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no threads or state inherited
    shares = spawn.SimpleQueue()
    for share in core_shares(workers):
        shares.put(share)
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(workers, mp_context=spawn, initializer=start_worker, initargs=(shares, settings))
    try:
        futures = [pool.submit(run_task, task) for task in tasks]
        log(f"running {len(chosen)} claims on {workers} processes")
        for future in as_completed(futures):
            for result in future.result():
                finished(*result)
    except BaseException:
        # a failed claim (or Ctrl-C) stops the run now: nothing waits for the other workers' claims
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_children(before)
        # the pool's own thread replaces a worker that dies: once it has ended, stop any worker it started meanwhile
        pool.shutdown(wait=True)
        _stop_children(before)
        raise
    pool.shutdown()
    return done, workers


def _stop_children(before: set) -> None:
    """Terminate and reap every child process of this one that was not in ``before``."""
    left = set(multiprocessing.active_children()) - before
    for child in left:
        child.terminate()
    for child in left:
        child.join()


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="nqm validate", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (about 3 min on 2 cores), as tests run it")
    parser.add_argument("--out", type=Path, default=Path("nqm-report"), help="output directory (default nqm-report)")
    parser.add_argument("--seed", type=int, default=0, help="suite seed (default 0)")
    parser.add_argument(
        "--jobs", type=int, default=None, help="processes running claims side by side (default: one per core)"
    )
    parser.add_argument("--only", default=None, help="comma-separated checks to run, e.g. V4,V5 (default all)")
    parser.add_argument(
        "--problem", default=None, help="a TOML problem file: run the claims that apply to it on it alone"
    )
    parser.add_argument(
        "--target", type=float, default=None, help="with --problem: the whole runs' target loss (default L0/100)"
    )
    return parser
