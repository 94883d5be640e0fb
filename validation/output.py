"""Where a report goes: ``nqm validate --out DIR`` is written whole or not at all.

The run writes into a fresh directory beside ``DIR`` and moves it into place only when the report is complete, so an
interrupted or failed run leaves the previous report as it was (and no mixture of old and new files), and a rerun
with ``--only`` leaves no figure of a check it did not run. ``DIR`` may be new, empty, or an earlier report; a
directory that holds anything else is refused, since replacing it would delete the user's files. A report is known
by its manifest (:data:`MANIFEST`, written last, naming every file of the report): a directory without one, or
with a file the manifest does not name, is the user's. ``DIR`` given as a symbolic link is followed (the link
stays, the report it points to is replaced), the report's directory gets the permissions of the user's umask, and
one run at a time writes a given ``DIR`` (a lock beside it; a second run is refused, not raced).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["MANIFEST", "REPORT_FILES", "refusal", "atomic_directory"]

REPORT_FILES = ("results.json", "report.md", "report.html")
"""The files of a report; the rest of it is the figures (``*.png``)."""

MANIFEST = ".nqm-report.json"
"""The report's own list of its files (``{"generator": "nqm validate", "files": [...]}``), written last."""


def _manifest_files(directory: Path) -> set[str] | None:
    """The files an nqm report in ``directory`` says it wrote, or None if it holds no valid manifest."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if manifest.get("generator") != "nqm validate" or not isinstance(files, list):
        return None
    return {str(f) for f in files} | {MANIFEST}


def _foreign(directory: Path) -> list[str]:
    """The entries of ``directory`` that are not part of an nqm report: all of them without a manifest; else those
    the manifest does not name, and any named one that is no longer a plain file."""
    entries = sorted(directory.iterdir())
    if not entries:
        return []
    ours = _manifest_files(directory)
    if ours is None:
        return [p.name for p in entries]
    return [p.name for p in entries if p.name not in ours or p.is_symlink() or not p.is_file()]


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
    """A fresh directory beside ``out_dir`` to write into; when the block ends normally it gets a manifest and
    replaces ``out_dir`` (renames, on the same file system), and when it raises it is deleted and ``out_dir`` is
    left untouched. ``out_dir`` is resolved first (a symbolic link is followed; ``.`` is the directory itself)."""
    out_dir = Path(os.path.realpath(out_dir))
    if problem := refusal(out_dir):
        raise ValueError(problem)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(out_dir):
        if problem := refusal(out_dir):  # another run may have written it while this one waited to start
            raise ValueError(problem)
        work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
        try:
            os.chmod(work, 0o777 & ~_umask())  # mkdtemp makes it private; a report is as readable as any file
            yield work
            files = sorted(p.name for p in work.iterdir())
            manifest = {"generator": "nqm validate", "files": files}
            (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        _replace(work, out_dir)


def _replace(work: Path, out_dir: Path) -> None:
    """Move ``work`` to ``out_dir``; an earlier report there is moved aside first and deleted only after, or put
    back if the move fails."""
    if not out_dir.exists():
        os.replace(work, out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.replace(out_dir, old / out_dir.name)
    try:
        os.replace(work, out_dir)
    except BaseException:
        os.replace(old / out_dir.name, out_dir)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def _exclusive(out_dir: Path) -> Iterator[None]:
    """Hold ``.DIR.lock`` beside ``out_dir`` for one run; a second run to the same directory is refused. The lock
    file is removed at the end (a run that took the lock of a removed file sees its inode gone and is refused)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock, as before
        yield
        return
    path = out_dir.parent / f".{out_dir.name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = os.stat(path).st_ino == os.fstat(fd).st_ino
        except OSError:
            held = False
        if not held:
            raise ValueError(f"--out {str(out_dir)!r} is being written by another nqm validate; wait for it or give "
                             "another directory")  # fmt: skip
        try:
            yield
        finally:
            os.unlink(path)
    finally:
        os.close(fd)
