"""The package as a user gets it: ``python -m build`` makes a wheel and an sdist that hold the package, the claims,
the CUDA source and the licence; the wheel installs in a clean virtual environment, finds every claim there and runs
``nqm validate --quick`` on two of them, one exact and one on the bundled sweep data (outside the source tree, so
nothing is imported from the checkout). The whole quick suite runs once, in the checkout (``tests/conftest.py``):
a claim that imports in the wheel runs there as it does here."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from validation.claims import discover

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _run(args, cwd, timeout=900):
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    (wheel,), (sdist,) = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    return wheel, sdist


def test_wheel_and_sdist_hold_what_a_user_needs(dist):
    wheel, sdist = dist
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "nqm/__init__.py",
        "nqm/montecarlo/cuda/fused.cu",
        "validation/claims.py",
        "validation/v1_one_step_law.py",
    } <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)
    with tarfile.open(sdist) as tar:
        inside = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"LICENSE", "README.md", "pyproject.toml", "nqm/montecarlo/cuda/fused.cu", "validation/runner.py"} <= inside


def test_the_wheel_installs_in_a_clean_venv_and_validates(dist, tmp_path):
    wheel, _ = dist
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if sys.platform == "win32" else "bin")
    _run([bin_dir / "python", "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path)
    found = _run([bin_dir / "python", "-c", "from validation.claims import discover; print(len(discover()))"], tmp_path)
    assert int(found.stdout) == len(discover())  # every claim module is in the wheel and imports there
    report = tmp_path / "report"
    _run([bin_dir / "nqm", "validate", "--quick", "--only", "V5,V24", "--out", str(report)], cwd=tmp_path)
    summary = json.loads((report / "results.json").read_text())["summary"]
    assert summary["ok"] and summary["checks"] > 0
    explorer = tmp_path / "explorer.html"  # the explorer's page, script and style ship as package data
    _run([bin_dir / "nqm", "explore", "--out", str(explorer)], cwd=tmp_path)
    assert "function oneStep" in explorer.read_text() and "/*SCRIPT*/" not in explorer.read_text()
    where = _run([bin_dir / "python", "-c", "import nqm; print(nqm.__file__)"], cwd=tmp_path).stdout
    assert str(env_dir) in where  # the installed package ran, not the checkout
