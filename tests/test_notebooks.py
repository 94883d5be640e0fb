"""The teaching notebooks run top to bottom in a real Jupyter kernel, as a user runs them (tiny sizes via their
parameters cell), draw their figures, and their exercises check out.

Notebooks are stored without outputs (nbformat 4). The test executes each one with nbclient in an IPython kernel,
after replacing the cell tagged ``parameters`` with ``SMALL = True`` and ``SHOW_SOLUTION = True``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "notebooks"))
from run_small import execute_small  # noqa: E402  (notebooks/run_small.py, shared with the docs build)


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


def run_in_kernel(path: Path, cwd: Path):
    """The notebook executed at small size with the worked answer, and a last cell that reports the exercise."""
    return execute_small(path, cwd, show_solution=True, extra_cells=["print('exercise answered:', result is True)"])


def _outputs(book, kind: str) -> list:
    return [o for c in book.cells if c.cell_type == "code" for o in c.outputs if o.output_type == kind]


def test_there_are_eight_notebooks_each_with_parameters_and_an_exercise():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07", "08"]
    for path in NOTEBOOKS:
        book = json.loads(path.read_text())
        tags = [t for c in book["cells"] for t in c["metadata"].get("tags", [])]
        assert tags.count("parameters") == 1
        assert "exercises.check(" in code_cells(path)[-1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_a_kernel_and_its_exercise_is_answered(path, tmp_path):
    book = run_in_kernel(path, tmp_path)
    figures = [o for o in _outputs(book, "display_data") if "image/png" in o.data]
    assert figures, "the notebook drew no figure"
    last = "".join(o.text for o in book.cells[-1].outputs if o.output_type == "stream")
    assert "exercise answered: True" in last, "".join(o.get("text", "") for o in _outputs(book, "stream"))


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
