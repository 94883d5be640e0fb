"""nqm.sweep: same results on every executor, resumable after a kill, clear errors for bad sweeps."""

from __future__ import annotations

import functools
import io
import json
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from nqm import sweep
from nqm.progress import Progress

# a fresh interpreter per worker (Python 3.14's default on Linux): forking a process that has started JAX's or
# BLAS's threads (other tests import JAX) can deadlock, and JAX says so with a warning at fork
FORKSERVER = multiprocessing.get_context("forkserver")
SIM_FIXED = {"d": 64, "lr": 0.5, "steps": 30, "replicas": 8, "at": [0, 10, 30]}
SIM_GRID = sweep.grid(batch_size=[2, 32], momentum=[0.0, 0.5], repeat=[0, 1])


def results(r: sweep.SweepResult) -> list:
    return [(rec["params"], rec["seed"], rec["result"]) for rec in r.records]


@pytest.fixture(scope="module")
def inline_simulations():
    return sweep.run("simulate", SIM_GRID, fixed=SIM_FIXED, progress=False)


def test_grid_is_the_cartesian_product_last_axis_fastest():
    assert sweep.grid(a=[1, 2], b=["x", "y"]) == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 2, "b": "x"},
        {"a": 2, "b": "y"},
    ]
    assert sweep.grid(b=np.array([1.5]), c=range(2)) == [{"b": 1.5, "c": 0}, {"b": 1.5, "c": 1}]


@pytest.mark.parametrize(
    "axes, message",
    [
        ({}, "at least one axis"),
        ({"a": []}, "is empty"),
        ({"a": "abc"}, "must be a list"),
        ({"a": 3}, "must be a list"),
        ({"a": [object()]}, "not a number"),
        ({"a": [math.inf]}, "non-finite"),
    ],
)
def test_bad_grids_are_refused(axes, message):
    with pytest.raises(ValueError, match=message):
        sweep.grid(**axes)


@pytest.mark.parametrize(
    "params, kwargs, message",
    [
        ([], {}, "no parameter sets"),
        ([{"x": 1}, {"x": 1}], {}, "repeats an earlier one"),
        ([{"x": 1}, {"y": 1}], {}, "has keys"),
        ([{"seed": 1}], {}, "reserved"),
        ([{"x": 1}], {"fixed": {"x": 2}}, "also given in fixed"),
        ("x", {}, "list of parameter sets"),
        ([3], {}, "not a dict"),
        ([{"x": 1}], {"seed": -1}, "non-negative integer"),
        ([{"x": 1}], {"chunksize": 0}, "chunksize"),
        ([{"x": 1}], {"fixed": {"repeat": 2}}, "grid axis"),
    ],
)
def test_bad_sweeps_are_refused(params, kwargs, message):
    with pytest.raises(ValueError, match=message):
        sweep.run(lambda x, seed: x, params, progress=False, **kwargs)


def test_unknown_tasks_and_parameters_are_refused():
    with pytest.raises(ValueError, match="unknown task"):
        sweep.run("simulat", [{"lr": 1.0}], progress=False)

    def f(x, seed):
        return x

    with pytest.raises(ValueError, match="cannot take the parameters"):
        sweep.run(f, [{"y": 1}], progress=False)
    with ProcessPoolExecutor(1, mp_context=FORKSERVER) as ex, pytest.raises(ValueError, match="must pickle"):
        sweep.run(lambda x: x, [{"x": 1}], executor=ex, progress=False)


def test_seeds_derive_from_parameters_not_from_order_or_chunking(inline_simulations):
    reversed_run = sweep.run("simulate", SIM_GRID[::-1], fixed=SIM_FIXED, chunksize=3, progress=False)
    assert sorted(results(reversed_run), key=str) == sorted(results(inline_simulations), key=str)
    seeds = [rec["seed"] for rec in inline_simulations.records]
    assert len(set(seeds)) == len(seeds)
    assert seeds[0] == sweep.task_seed(0, SIM_GRID[0])
    other = sweep.run("simulate", SIM_GRID[:2], fixed=SIM_FIXED, seed=1, progress=False)
    assert other.records[0]["result"]["mean"] != inline_simulations.records[0]["result"]["mean"]


def test_process_pool_gives_identical_results(inline_simulations):
    with ProcessPoolExecutor(2, mp_context=FORKSERVER) as ex:
        pooled = sweep.run("simulate", SIM_GRID, fixed=SIM_FIXED, executor=ex, chunksize=2, progress=False)
    assert results(pooled) == results(inline_simulations)


def test_dask_local_cluster_gives_identical_results(inline_simulations):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        on_dask = sweep.run("simulate", SIM_GRID, fixed=SIM_FIXED, executor=client.get_executor(), progress=False)
    assert results(on_dask) == results(inline_simulations)


def test_results_match_direct_calls(inline_simulations):
    import nqm

    rec = inline_simulations.records[3]
    direct = nqm.simulate(
        nqm.NoisyQuadratic.zhang2019(64),
        nqm.optim.heavy_ball(SIM_FIXED["lr"], rec["params"]["momentum"]),
        **{k: v for k, v in SIM_FIXED.items() if k not in ("d", "lr")},
        batch_size=rec["params"]["batch_size"],
        seed=rec["seed"],
    )
    assert rec["result"]["mean"] == direct.mean.tolist()
    assert rec["result"]["at"] == [0, 10, 30]


def test_table_columns_and_non_finite_values_round_trip(tmp_path):
    path = tmp_path / "s.jsonl"
    params = sweep.grid(batch_size=[16, 256], lr=[0.5, 1.0])
    r = sweep.run("steps_to_target", params, fixed={"d": 100, "target": 0.05}, path=path, progress=False)
    t = r.table()
    assert t.dtype.names == ("batch_size", "lr", "seed", "steps", "seconds")
    assert t["batch_size"].dtype == np.int64 and t["steps"].dtype == np.float64
    assert np.isinf(t["steps"][1])  # ε = 1 at B = 16: the stationary loss lies above the target
    for line in path.read_text().splitlines():  # strict JSON: no Infinity/NaN tokens
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert results(sweep.load(path)) == results(r)


def test_result_named_like_a_parameter_gets_a_prefix():
    r = sweep.run(lambda steps, seed: {"steps": steps + 1}, [{"steps": 1}], progress=False)
    assert r.rows()[0]["steps"] == 1 and r.rows()[0]["result_steps"] == 2


def _fails_at_two(x, seed):
    if x == 2:
        raise RuntimeError("boom")
    return x


def test_a_failing_task_names_its_parameters_and_keeps_earlier_records(tmp_path):
    path = tmp_path / "s.jsonl"
    with pytest.raises(sweep.SweepTaskError, match=r"\{'x': 2\}: RuntimeError: boom"):
        sweep.run(_fails_at_two, sweep.grid(x=[0, 1, 2, 3]), path=path, progress=False)
    assert [rec["params"]["x"] for rec in sweep.load(path).records] == [0, 1]


def test_a_file_from_another_sweep_is_refused(tmp_path):
    path = tmp_path / "s.jsonl"
    sweep.run("steps_to_target", [{"lr": 0.5}], fixed={"d": 50, "batch_size": 8, "target": 0.1}, path=path)
    with pytest.raises(ValueError, match="different sweep"):
        sweep.run("steps_to_target", [{"lr": 0.5}], fixed={"d": 50, "batch_size": 8, "target": 0.2}, path=path)
    with pytest.raises(ValueError, match="different sweep"):
        sweep.run("steps_to_target", [{"lr": 0.5}], fixed={"d": 50, "batch_size": 8, "target": 0.1}, path=path, seed=3)


def _scaled(x, seed, f):
    return f(x)


def _double(v):
    return 2 * v


def _times(v, k):
    return k * v


def test_functions_a_file_cannot_identify_are_refused(tmp_path):
    """A sweep file names functions by module:name: a lambda, a local function or a renamed one would resume with
    another function's results, so with a path they are refused (without one nothing is resumed: they run)."""
    path = tmp_path / "s.jsonl"

    def local(x, seed):
        return x

    cases = [
        (_scaled, {"f": lambda v: 2 * v}, r"fixed\['f'\] is a lambda"),
        (local, {}, "task is a function defined inside another"),
        (_scaled, {"f": functools.partial(lambda v, k: k * v, k=2)}, r"fixed\['f'\] \(a partial\)\[0\] is a lambda"),
    ]
    for task, fixed, message in cases:
        with pytest.raises(ValueError, match=message):
            sweep.run(task, sweep.grid(x=[1]), fixed=fixed, path=path, progress=False)
        assert not path.exists()  # refused before the file is made
        assert sweep.run(task, sweep.grid(x=[1]), fixed=fixed, progress=False).loaded == 0  # runs without a file
    done = sweep.run(_scaled, sweep.grid(x=[1, 2]), fixed={"f": _double}, path=path, progress=False)
    assert [rec["result"]["value"] for rec in done.records] == [2, 4]


def test_partials_with_other_arguments_are_other_sweeps(tmp_path):
    path = tmp_path / "s.jsonl"
    twice, thrice = functools.partial(_times, k=2), functools.partial(_times, k=3)
    first = sweep.run(_scaled, sweep.grid(x=[1]), fixed={"f": twice}, path=path, progress=False)
    assert first.records[0]["result"] == {"value": 2}
    resumed = sweep.run(_scaled, sweep.grid(x=[1]), fixed={"f": functools.partial(_times, k=2)}, path=path)
    assert resumed.loaded == 1  # the same partial in a new object resumes
    with pytest.raises(ValueError, match="different sweep"):
        sweep.run(_scaled, sweep.grid(x=[1]), fixed={"f": thrice}, path=path, progress=False)


def test_a_header_only_file_without_its_newline_is_read_not_cut(tmp_path):
    path = tmp_path / "s.jsonl"
    fixed = {"d": 50, "batch_size": 8, "target": 0.1}
    sweep.run("steps_to_target", [{"lr": 0.5}], fixed=fixed, path=path)
    head = path.read_text().splitlines()[0]
    path.write_text(head)  # the header alone, its newline lost (an editor, a copy)
    r = sweep.run("steps_to_target", [{"lr": 0.5}], fixed=fixed, path=path)
    lines = path.read_text().splitlines()
    assert lines[0] == head and len(lines) == 2 and r.loaded == 0


def test_loading_a_running_sweeps_file_leaves_its_torn_line_alone(tmp_path):
    path = tmp_path / "s.jsonl"
    fixed = {"d": 50, "batch_size": 8, "target": 0.1}
    sweep.run("steps_to_target", [{"lr": 0.5}], fixed=fixed, path=path, progress=False)
    torn = '{"params":{"lr":0.25},"seed":1'  # the running sweep is mid-write
    with open(path, "a") as f:
        f.write(torn)
    before = path.read_bytes()
    assert sweep.load(path).loaded == 1
    assert path.read_bytes() == before  # a reader never cuts the file under a writer
    with open(path, "a") as f:  # the writer finishes its line: the file is whole and resumes
        f.write(',"result":{"steps":3.0},"seconds":0.1}\n')
    assert sweep.load(path).loaded == 2


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"params":{"lr":0.5},"seed":1,"seconds":0.1}', "line 2: a sweep record lacks 'result'"),
        ('{"seed":1,"result":{},"seconds":0.1}', "line 2: a sweep record lacks 'params'"),
        ("[1, 2]", "line 2: a sweep record must be a JSON object"),
        ('{"params":3,"seed":1,"result":{},"seconds":0.1}', "'params' must be an object"),
    ],
)
def test_a_record_missing_its_keys_is_refused_by_line(tmp_path, line, message):
    path = tmp_path / "s.jsonl"
    sweep.run(
        "steps_to_target", [{"lr": 0.5}], fixed={"d": 50, "batch_size": 8, "target": 0.1}, path=path, progress=False
    )
    head = path.read_text().splitlines()[0]
    path.write_text(head + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        sweep.load(path)


def test_a_file_that_is_not_a_sweep_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("my notes, no newline at the end")
    with pytest.raises(ValueError, match="not an nqm sweep file"):
        sweep.run("steps_to_target", [{"lr": 0.5}], fixed={"d": 50, "batch_size": 8, "target": 0.1}, path=path)
    assert path.read_text() == "my notes, no newline at the end"


KILLABLE = """
import os, sys, time
import numpy as np
from nqm import sweep

def work(x, seed):
    with open(os.environ["CALLS"], "a") as f:
        f.write(f"{x}\\n")
    time.sleep(0.15)
    return {"y": float(np.random.default_rng(seed).standard_normal())}

if __name__ == "__main__":
    sweep.run(work, sweep.grid(x=list(range(12))), path=sys.argv[1], progress=False)
"""


def _run_script(script, path, calls, kill_after=None):
    env = {**os.environ, "CALLS": str(calls)}
    proc = subprocess.Popen([sys.executable, str(script), str(path)], env=env)
    if kill_after is None:
        assert proc.wait(timeout=120) == 0
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= 1 + kill_after:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def test_a_killed_sweep_resumes_losing_nothing_and_repeating_nothing(tmp_path):
    script = tmp_path / "killable.py"
    script.write_text(textwrap.dedent(KILLABLE))
    whole, cut = tmp_path / "whole.jsonl", tmp_path / "cut.jsonl"
    _run_script(script, whole, tmp_path / "whole.calls")
    _run_script(script, cut, tmp_path / "first.calls", kill_after=4)
    landed = {rec["params"]["x"] for rec in _lines(cut)}
    assert 4 <= len(landed) < 12, "the kill came too late to test anything"
    with open(cut, "a") as f:  # a torn write: the kill came in the middle of a line
        f.write('{"params":{"x":11},"seed":1')
    _run_script(script, cut, tmp_path / "second.calls")
    second = [int(x) for x in (tmp_path / "second.calls").read_text().split()]
    assert sorted(second) == sorted(set(range(12)) - landed)  # repeats nothing that landed
    records = _lines(cut)
    assert sorted(rec["params"]["x"] for rec in records) == list(range(12))  # loses nothing, no duplicates
    by_x = {rec["params"]["x"]: (rec["seed"], rec["result"]) for rec in records}
    assert by_x == {rec["params"]["x"]: (rec["seed"], rec["result"]) for rec in _lines(whole)}


def test_validation_checks_run_as_a_sweep_task():
    from validation.sweep_task import validate_task

    r = sweep.run(validate_task, sweep.grid(repeat=[0]), fixed={"only": ["V5"]}, progress=False)
    row = r.rows()[0]
    assert row["ok"] and row["checks"] == row["checks_passed"] > 0 and row["failed"] == []
    with pytest.raises(sweep.SweepTaskError, match="unknown check"):
        sweep.run(validate_task, [{"only": "V99"}], progress=False)


def test_optimal_steps_task_matches_the_solver():
    from nqm import NoisyQuadratic, dynamics

    r = sweep.run("optimal_steps_to_target", [{"batch_sizes": [4, 64]}], fixed={"d": 200, "target": 0.05})
    direct = dynamics.optimal_steps_to_target(NoisyQuadratic.zhang2019(200), 0.05, [4, 64])
    assert r.records[0]["result"]["steps"] == direct.steps.tolist()
    assert r.records[0]["result"]["lr"] == direct.lr.tolist()


def test_tasks_build_the_optimiser_from_plain_parameters():
    """lr, momentum, nesterov and ema in a grid become one optimiser value; the numbers are those of the
    direct call with that value."""
    from nqm import NoisyQuadratic, dynamics, optim

    params = sweep.grid(momentum=[0.0, 0.5], nesterov=[False, True], ema=[0.0, 0.9])
    r = sweep.run("expected_loss", params, fixed={"d": 50, "lr": 0.4, "batch_size": 4, "steps": 20}, progress=False)
    p = NoisyQuadratic.zhang2019(50)
    for rec in r.records:
        q = rec["params"]
        family = optim.nesterov if q["nesterov"] else optim.heavy_ball
        opt = optim.ema(family(0.4, q["momentum"]), q["ema"])
        assert rec["result"]["loss"] == dynamics.expected_loss(p, opt, 4, 20).tolist()
    losses = {tuple(rec["params"].values()): rec["result"]["loss"][-1] for rec in r.records}
    assert len(set(losses.values())) == 6  # β = 0 makes Nesterov plain SGD: 8 settings, 6 distinct runs


def test_progress_reports_counts_rate_and_time_left():
    stream = io.StringIO()
    bar = Progress(10, "nqm.sweep", unit="tasks", stream=stream, initial=4)
    bar.update(6)
    line = stream.getvalue()
    assert line.startswith("nqm.sweep: 10/10 tasks (100%)") and "/s" in line and "left" in line
    quiet = io.StringIO()
    Progress(10, "x", unit="tasks", stream=quiet, delay=60).update(10)
    assert quiet.getvalue() == ""
