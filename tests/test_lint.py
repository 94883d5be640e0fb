"""House style (docs/architecture.md): ruff lint and format are clean (ruff comes with the test extra)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["nqm", "validation", "tests", "bench", "docs", "notebooks", "examples"]


def ruff(*args):
    return subprocess.run([sys.executable, "-m", "ruff", *args, *PATHS], cwd=ROOT, capture_output=True, text=True)


def test_ruff_lint():
    out = ruff("check")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format():
    out = ruff("format", "--check")
    assert out.returncode == 0, out.stdout + out.stderr
