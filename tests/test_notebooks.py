"""The teaching notebooks run top to bottom (tiny sizes via their parameters cell) and their exercises check out.

Notebooks are plain JSON (nbformat 4): the test runs their code cells in order in one namespace, as a kernel
would, after replacing the cell tagged ``parameters`` with ``SMALL = True`` and ``SHOW_SOLUTION = True``.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def code_cells(path: Path) -> list[str]:
    book = json.loads(path.read_text())
    cells = []
    for cell in book["cells"]:
        if cell["cell_type"] != "code":
            continue
        assert cell.get("outputs") == [] and cell.get("execution_count") is None, "stored with outputs"
        source = "".join(cell["source"])
        if "parameters" in cell["metadata"].get("tags", []):
            source = "SMALL = True\nSHOW_SOLUTION = True"
        cells.append(source)
    return cells


def run_notebook(path: Path) -> dict:
    namespace: dict = {"__name__": "__main__"}
    for i, source in enumerate(code_cells(path)):
        try:
            exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{path.name}, code cell {i} failed: {exc!r}\n{source}") from exc
    plt.close("all")
    return namespace


def test_there_are_six_notebooks_each_with_parameters_and_an_exercise():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06"]
    for path in NOTEBOOKS:
        book = json.loads(path.read_text())
        tags = [t for c in book["cells"] for t in c["metadata"].get("tags", [])]
        assert tags.count("parameters") == 1
        assert "exercises.check(" in code_cells(path)[-1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_and_its_exercise_is_answered(path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace = run_notebook(path)
    assert namespace["result"] is True, capsys.readouterr().out


def test_an_unanswered_exercise_says_so_and_a_wrong_answer_is_not_accepted(capsys):
    import nqm
    from nqm import exercises

    p = nqm.NoisyQuadratic.zhang2019(50)
    theta = p.h * 0 + 1.0
    assert exercises.check("noise-scale-by-hand", None, p=p, theta=theta) is False
    assert "Put your answer" in capsys.readouterr().out
    truth = exercises.solution("noise-scale-by-hand", p=p, theta=theta)
    assert exercises.check("noise-scale-by-hand", truth, p=p, theta=theta) is True
    assert exercises.check("noise-scale-by-hand", truth * 1.01, p=p, theta=theta) is False
    with pytest.raises(ValueError, match="unknown exercise"):
        exercises.check("nope", 1.0)
