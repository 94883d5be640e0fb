"""The README tour and the docstring examples run, and print what they say they print."""

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def test_readme_tour(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the sweep example writes its file to the working directory
    result = doctest.testfile(str(ROOT / "README.md"), module_relative=False, optionflags=FLAGS)
    assert result.attempted > 5 and result.failed == 0


@pytest.mark.parametrize(
    "module",
    [
        "nqm.problem",
        "nqm.spectra",
        "nqm.theory",
        "nqm.dynamics",
        "nqm.montecarlo.results",
        "nqm.estimators",
        "nqm.dynamics.expected",
        "nqm.dynamics.whole_runs",
        "nqm.dynamics.schedules",
        "nqm.dynamics.moments",
        "nqm.dynamics.frontier",
        "nqm.optim",
        "nqm.sweep",
        "nqm.progress",
        "nqm.montecarlo.philox",
        "nqm.montecarlo.backend",
        "nqm.montecarlo.skip_ahead",
        "nqm.montecarlo.simulation",
    ],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=FLAGS)
    assert result.failed == 0
