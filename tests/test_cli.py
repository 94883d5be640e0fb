"""The command line's user errors: one line on stderr that names the argument, exit status 2, no traceback, and no
work done (no report or figure written, no directory left behind where none could be made)."""

import pytest

from nqm.cli import main


def _problem(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[spectrum]\nkind = "power_law"\nd = 50\nexponent = 1.0\n[noise]\nkind = "power"\n')
    return str(path)


CASES = [
    (["validate", "--quick", "--seed", "-1"], "--seed"),
    (["validate", "--quick", "--seed", "abc"], "--seed"),
    (["validate", "--quick", "--jobs", "0"], "--jobs"),
    (["validate", "--quick", "--jobs", "two"], "--jobs"),
    (["validate", "--quick", "--only", "V99"], "--only"),
    (["validate", "--quick", "--out", "/proc/nqm-cannot-be-here"], "--out"),
    (["validate", "--quick", "--out", "{file}"], "--out"),
    (["plot", "laws", "--d", "0"], "--d"),
    (["plot", "laws", "--d", "20", "--out", "{dir}/x.xyz"], "--out"),
    (["plot", "steps", "--d", "50", "--target", "100", "--out", "{dir}/s.png"], "target"),
    (["plot", "laws", "--target", "-1"], "--target"),
    (["plot", "nope"], "unknown figure"),
    (["plot", "all", "--format", "xyz", "--out", "{dir}/figs"], "--format"),
    (["info", "--problem", "{dir}/absent.toml"], "absent.toml"),
    (["validate", "--quick", "--problem", "{dir}/absent.toml"], "absent.toml"),
    (["validate", "--quick", "--problem", "{problem}", "--target", "100"], "--target"),
    (["validate", "--quick", "--problem", "{problem}", "--only", "V9"], "V9 does not run on a problem file"),
    (["validate", "--quick", "--target", "0.1"], "--target needs --problem"),
    (["info", "--problem", "{problem}", "--target", "100"], "target"),
    (["info"], "--problem"),
    ([], "command"),
]


@pytest.mark.parametrize("argv, named", CASES, ids=[" ".join(a) or "(nothing)" for a, _ in CASES])
def test_a_user_error_is_one_line_and_exit_status_2(tmp_path, capsys, monkeypatch, argv, named):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a directory")
    fill = {"file": str(tmp_path / "a-file"), "dir": str(tmp_path), "problem": _problem(tmp_path)}
    argv = [a.format(**fill) for a in argv]
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's own usage errors
        status = e.code
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.startswith("nqm") and captured.err.count("\n") == 1, captured.err
    assert named in captured.err and "Traceback" not in captured.err
    assert not (tmp_path / "nqm-report").exists() and not list(tmp_path.glob("*.png"))
