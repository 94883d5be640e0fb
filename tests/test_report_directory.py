"""Where ``nqm validate --out DIR`` writes (validation.output): never a user's file lost.

An outside audit found a directory holding a file named results.json taken for an old report and replaced, a
symbolic link replaced by a private directory, ``--out .`` failing with leftovers, and concurrent runs each saying
"report in …" while one survived. Each case is reproduced here against the module that writes reports.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nqm.cli import main as cli_main
from validation.output import MANIFEST, atomic_directory, refusal

ROOT = Path(__file__).resolve().parents[1]


def _write_report(out, names=("results.json", "report.md", "v1_a.png")):
    with atomic_directory(out) as work:
        for name in names:
            (work / name).write_text(f"new {name}")


def _contents(directory):
    return {p.name: p.read_text() for p in sorted(directory.iterdir())}


def test_a_directory_with_a_results_json_of_its_own_is_not_taken_for_a_report(tmp_path, capsys):
    out = tmp_path / "d"
    out.mkdir()
    mine = {"results.json": '{"mine": 1}', "fig.png": "x", "report.md": "notes"}
    for name, text in mine.items():
        (out / name).write_text(text)
    assert cli_main(["validate", "--quick", "--only", "V5", "--out", str(out)]) == 2
    assert "not an nqm report" in capsys.readouterr().err
    assert _contents(out) == mine
    with pytest.raises(ValueError, match="not an nqm report"):
        _write_report(out)
    assert _contents(out) == mine


def test_a_report_is_replaced_whole_but_a_file_added_to_it_is_kept_and_refused(tmp_path):
    out = tmp_path / "r"
    _write_report(out, ("results.json", "old.png"))
    _write_report(out, ("results.json", "new.png"))
    assert set(_contents(out)) == {"results.json", "new.png", MANIFEST}  # no stale figure
    (out / "my notes.txt").write_text("mine")
    assert "my notes.txt" in refusal(out)
    with pytest.raises(ValueError, match="my notes.txt"):
        _write_report(out)
    assert _contents(out)["my notes.txt"] == "mine"
    (out / "my notes.txt").unlink()
    (out / MANIFEST).write_text("{not json")  # a damaged manifest is no manifest
    assert refusal(out) is not None


def test_a_symbolic_link_is_followed_and_kept(tmp_path):
    real = tmp_path / "real"
    _write_report(real, ("results.json", "old.png"))
    link = tmp_path / "link"
    link.symlink_to(real)
    _write_report(link, ("results.json", "new.png"))
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert set(_contents(real)) == {"results.json", "new.png", MANIFEST}


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o755), (0o077, 0o700)])
def test_the_report_directory_has_the_users_permissions(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        _write_report(tmp_path / "r")
    finally:
        os.umask(old)
    assert (tmp_path / "r").stat().st_mode & 0o777 == mode


def test_out_dot_inside_a_report_replaces_it_and_leaves_nothing_beside_it(tmp_path, monkeypatch):
    out = tmp_path / "r"
    _write_report(out, ("results.json", "old.png"))
    monkeypatch.chdir(out)
    _write_report(".", ("results.json", "new.png"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]
    assert set(_contents(out)) == {"results.json", "new.png", MANIFEST}


def test_a_second_run_to_the_same_directory_is_refused_while_the_first_writes(tmp_path):
    """The second run is another process (flock is per open file, so this is the real case of two runs)."""
    out = tmp_path / "r"
    second = (
        "import sys; from validation.output import atomic_directory\n"
        "try:\n    with atomic_directory(sys.argv[1]) as w: (w / 'results.json').write_text('second')\n"
        "except ValueError as e:\n    print(e); sys.exit(3)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with atomic_directory(out) as work:
        (work / "results.json").write_text("first")
        done = subprocess.run([sys.executable, "-c", second, str(out)], capture_output=True, text=True, env=env)
        assert done.returncode == 3, done.stderr
        assert "being written by another nqm validate" in done.stdout
    assert (out / "results.json").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no lock or partial directory left
    done = subprocess.run([sys.executable, "-c", second, str(out)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr  # once the first is done, the next one writes
    assert (out / "results.json").read_text() == "second"
