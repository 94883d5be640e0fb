"""``nqm validate --jobs N``: claims side by side on N processes give the report one process gives, each worker owns
its share of the cores, and a run that dies stops every worker and leaves the previous report as it was."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest

from validation.claims import discover
from validation.pool import core_shares, plan, start_worker, usable_cores
from validation.runner import run

pytestmark = pytest.mark.slow

ONLY = ["V1", "V2", "V5", "V9"]  # V1 and V2 share the one-step grids


def _report(out) -> dict:
    results = json.loads((out / "results.json").read_text())
    return {"checks": results["checks"], "findings": results["findings"], "summary": results["summary"]}


def test_claims_side_by_side_give_the_report_of_one_process(tmp_path):
    lines = []
    run(tmp_path / "one", quick=True, only=ONLY, log=lambda m: None, jobs=1)
    run(tmp_path / "two", quick=True, only=ONLY, log=lines.append, jobs=2)
    assert _report(tmp_path / "two") == _report(tmp_path / "one")  # every number, cell by cell
    meta = json.loads((tmp_path / "two" / "results.json").read_text())["meta"]
    assert meta["jobs"] == 2 and set(meta["claim_seconds"]) == set(ONLY)
    assert lines[0] == "running 4 claims on 2 processes"
    done = [line.split("] ")[1].split(" ")[0] for line in lines if " done: " in line]
    assert sorted(done) == sorted(ONLY) and "claims, about" in lines[1]  # each named as it ends, with time left
    assert sorted({p.name for p in (tmp_path / "two").glob("*.png")}) == sorted(
        {p.name for p in (tmp_path / "one").glob("*.png")}
    )


def test_claims_sharing_an_experiment_run_in_one_task_longest_first():
    claims = {c.id: c for c in discover()}
    tasks = plan([claims[i] for i in ["V1", "V2", "V5", "V23"]], quick=True)
    assert ("V1", "V2") in tasks and len(tasks) == 3
    expected = [sum(claims[i].expected_seconds(True) for i in task) for task in tasks]
    assert expected == sorted(expected, reverse=True)


@pytest.mark.skipif(len(usable_cores()) < 2, reason="needs two usable cores")
def test_each_worker_owns_its_share_of_the_cores():
    shares = core_shares(2)
    assert len(shares) == 2 and not set(shares[0]) & set(shares[1])
    assert sorted(c for s in shares for c in s) == usable_cores()
    spawn = multiprocessing.get_context("spawn")
    queue = spawn.SimpleQueue()
    for share in shares:
        queue.put(share)
    settings = (None, True, 0, None)
    # both workers must be up at once: two processes, not one twice. The manager's own process is stopped on the way
    # out (left running, it was counted among the next test's children once)
    with spawn.Manager() as manager:
        barrier = manager.Barrier(2)
        with ProcessPoolExecutor(2, mp_context=spawn, initializer=start_worker, initargs=(queue, settings)) as pool:
            seen = list(pool.map(_worker_view, [barrier, barrier]))
    assert len({pid for pid, _, _ in seen}) == 2
    assert sorted(tuple(cores) for _, cores, _ in seen) == sorted(tuple(s) for s in shares)
    assert all(threads == str(len(cores)) for _, cores, threads in seen)


def _worker_view(barrier):
    barrier.wait(timeout=60)
    return os.getpid(), sorted(os.sched_getaffinity(0)), os.environ["OPENBLAS_NUM_THREADS"]


WORKERS: list = []  # the workers a stopped run had, as its log callback saw them
EARLIER: set = set()  # the children this process had before the run (none of the run's)


def _children() -> list:
    return sorted(set(multiprocessing.active_children()) - EARLIER, key=lambda p: p.pid)


def _kill_a_worker(line):
    if line.startswith("running"):  # the workers have started: kill one (as the kernel does when memory runs out)
        WORKERS[:] = _children()
        os.kill(WORKERS[0].pid, signal.SIGKILL)


def _interrupt(line):
    if line.startswith("running"):  # Ctrl-C in the runner while the workers run their claims
        WORKERS[:] = _children()
        raise KeyboardInterrupt


@pytest.mark.parametrize(("stop", "error"), [(_kill_a_worker, BrokenProcessPool), (_interrupt, KeyboardInterrupt)])
def test_a_run_that_dies_stops_every_worker_and_leaves_the_previous_report(tmp_path, stop, error):
    out = tmp_path / "report"
    run(out, quick=True, only=["V5"], log=lambda m: None)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    EARLIER.clear()
    EARLIER.update(multiprocessing.active_children())
    with pytest.raises(error):
        run(out, quick=True, only=ONLY, log=stop, jobs=2)
    assert len(WORKERS) == 2 and not _children()
    assert all(w.exitcode < 0 for w in WORKERS)  # each stopped by a signal, none left to finish its claims
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
