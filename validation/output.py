"""Where a report goes: ``nqm validate --out DIR`` is written whole or not at all.

The run writes into a fresh directory beside ``DIR`` and moves it into place only when the report is complete, so an
interrupted or failed run leaves the previous report as it was (and no mixture of old and new files), and a rerun
with ``--only`` leaves no figure of a check it did not run. ``DIR`` may be new, empty, or an earlier report; a
directory that holds anything else is refused, since replacing it would delete the user's files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["REPORT_FILES", "refusal", "atomic_directory"]

REPORT_FILES = ("results.json", "report.md", "report.html")
"""The files of a report; the rest of it is the figures (``*.png``)."""


def _foreign(directory: Path) -> list[str]:
    """The entries of ``directory`` that are not part of an nqm report (all of them if it has no results.json)."""
    names = sorted(p.name for p in directory.iterdir())
    if names and "results.json" not in names:
        return names
    return [n for n in names if n not in REPORT_FILES and not n.endswith(".png")]


def refusal(out_dir) -> str | None:
    """Why a report cannot be written to ``out_dir`` (a file; a directory holding other files), else None."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        return f"--out {str(out_dir)!r} is a file; give a directory"
    if out_dir.is_dir() and (foreign := _foreign(out_dir)):
        return (
            f"--out {str(out_dir)!r} holds files that are not an nqm report ({', '.join(map(repr, foreign[:3]))}"
            f"{', …' if len(foreign) > 3 else ''}); give a new or empty directory, or an earlier report's"
        )
    return None


@contextmanager
def atomic_directory(out_dir) -> Iterator[Path]:
    """A fresh directory beside ``out_dir`` to write into; when the block ends normally it replaces ``out_dir``
    (renames, on the same file system), and when it raises it is deleted and ``out_dir`` is left untouched."""
    out_dir = Path(out_dir)
    if problem := refusal(out_dir):
        raise ValueError(problem)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    try:
        yield work
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        os.replace(out_dir, old / out_dir.name)
    os.replace(work, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
