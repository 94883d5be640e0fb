"""House style (DESIGN §7): ruff lint and format are clean."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["nqm", "validation", "tests", "bench", "docs"]


def _ruff():
    exe = shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed (it comes with the test extra)")
    return exe


def test_ruff_lint():
    out = subprocess.run([_ruff(), "check", *PATHS], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format():
    out = subprocess.run([_ruff(), "format", "--check", *PATHS], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_python_version_is_supported():
    assert sys.version_info >= (3, 10)
