"""The sweep file: JSON lines (strict JSON, non-finite floats as strings), a header line that identifies the
sweep, records appended as tasks finish, and reading it back (a torn last line is cut; a whole one missing only its
newline is kept)."""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import math
import pickle
import types
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .params import plain_value
from .table import SweepResult

__all__ = [
    "FORMAT",
    "RECORD_KEYS",
    "encode",
    "decode_record",
    "describe",
    "unidentifiable",
    "header",
    "read_file",
    "load",
]

FORMAT = 1
"""The version written in a sweep file's header line."""


def encode(value):
    """A task's result as strict JSON values: arrays as lists, non-finite floats as "inf", "-inf", "nan"."""
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a task returned {type(value).__name__}, which a sweep record cannot hold")


_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _decode(value):
    if isinstance(value, dict):
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    return value


RECORD_KEYS = ("params", "seed", "result", "seconds")


def decode_record(record: dict) -> dict:
    """A record read back, with "inf", "-inf" and "nan" turned into floats again; a record that lacks one of
    :data:`RECORD_KEYS` (or is not an object) is refused with a ValueError naming what it lacks."""
    if not isinstance(record, dict):
        raise ValueError(f"a sweep record must be a JSON object, got {type(record).__name__}")
    if missing := [k for k in RECORD_KEYS if k not in record]:
        raise ValueError(f"a sweep record lacks {', '.join(map(repr, missing))} (it has {sorted(record)})")
    if not isinstance(record["params"], dict):
        raise ValueError(f"a sweep record's 'params' must be an object, got {record['params']!r}")
    return {**record, "result": _decode(record["result"])}


def describe(value):
    """A JSON description of a fixed argument: itself if plain, else a content digest (for the file header)."""
    try:
        return plain_value(value, "")
    except ValueError:
        pass
    if isinstance(value, np.ndarray):
        return {"ndarray": list(value.shape), "sha256": hashlib.sha256(np.ascontiguousarray(value)).hexdigest()}
    if isinstance(value, Mapping):
        return {str(k): describe(v) for k, v in value.items()}
    if isinstance(value, functools.partial):
        return {"partial": describe(value.func), "args": describe(list(value.args)), "kw": describe(value.keywords)}
    if isinstance(value, types.MethodType):
        return {"method": describe(value.__func__), "self": describe(value.__self__)}
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{value.__module__}:{value.__qualname__}"
    if hasattr(value, "__dict__"):  # a problem object: its class and the digest of its arrays and settings
        digest = hashlib.sha256(type(value).__qualname__.encode())
        for k, v in sorted(vars(value).items()):
            digest.update(k.encode())
            digest.update(pickle.dumps(describe(v)) if not isinstance(v, np.ndarray) else np.ascontiguousarray(v))
        return {"object": repr(value), "sha256": digest.hexdigest()}
    return repr(value)


def _importable(fn) -> bool:
    """Whether module:qualname leads back to ``fn`` (so the name in a file's header identifies it)."""
    try:
        obj = importlib.import_module(fn.__module__)
        for part in fn.__qualname__.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, TypeError):
        return False
    return obj is fn


def unidentifiable(value, where: str) -> str | None:
    """Why a function inside ``value`` (the task, or a fixed argument) cannot be told from another one of the same
    name in a sweep file's header, else None. Such a file would resume with the other function's results."""
    if isinstance(value, Mapping):
        return next((why for k, v in value.items() if (why := unidentifiable(v, f"{where}[{k!r}]"))), None)
    if isinstance(value, (list, tuple)):
        return next((why for i, v in enumerate(value) if (why := unidentifiable(v, f"{where}[{i}]"))), None)
    if isinstance(value, functools.partial):
        return unidentifiable([value.func, *value.args, *value.keywords.values()], f"{where} (a partial)")
    if isinstance(value, types.MethodType):
        return unidentifiable(value.__func__, where)
    if not isinstance(value, types.FunctionType):
        return None
    name = f"{value.__module__}:{value.__qualname__}"
    if "<lambda>" in value.__qualname__:
        kind = "a lambda"
    elif "<locals>" in value.__qualname__:
        kind = "a function defined inside another"
    elif not _importable(value):
        kind = "a function that its module does not hold under that name"
    else:
        return None
    return (
        f"{where} is {kind} ({name}); a sweep file names functions by module:name, so it could not tell this one "
        "from another of that name and would resume with the wrong results. Define it at module level."
    )


def header(task_name: str, seed: int, fixed: dict) -> dict:
    """The first line of a sweep file: what identifies the sweep (task, seed, fixed arguments by digest)."""
    return {"nqm_sweep": FORMAT, "task": task_name, "seed": int(seed), "fixed": describe(fixed)}


def read_file(path: Path, repair: bool = False) -> tuple[dict | None, list[dict]]:
    """The header and records of a sweep file; a torn last line (a kill mid-write, or a line still being written
    by a running sweep) is left out. Only with ``repair`` (the sweep that goes on writing the file) is it cut off
    the file, and a whole last line missing its newline given one: a reader never modifies the file.

    The header is checked first, so that a file that is not a sweep file is refused and never modified.
    """
    if not path.exists() or path.stat().st_size == 0:
        return None, []
    raw = path.read_bytes()
    try:
        header = json.loads(raw.split(b"\n", 1)[0])
    except (json.JSONDecodeError, UnicodeDecodeError):
        header = None
    if not isinstance(header, dict) or header.get("nqm_sweep") != FORMAT:
        raise ValueError(f"{path} is not an nqm sweep file (no header line); use another path")
    if not raw.endswith(b"\n"):
        keep = raw.rfind(b"\n") + 1
        if _complete(raw[keep:]):  # written whole, only the newline is missing (a header-only file, say)
            if repair:
                with open(path, "ab") as f:
                    f.write(b"\n")
            raw += b"\n"
        else:  # torn mid-write
            if repair:
                with open(path, "r+b") as f:
                    f.truncate(keep)
            raw = raw[:keep]
    records = []
    for number, line in enumerate(raw.decode().splitlines()[1:], start=2):
        if not line.strip():
            continue
        try:
            records.append(decode_record(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{path}, line {number}: not valid JSON ({exc}); the file was edited or corrupted"
            ) from None
        except ValueError as exc:
            raise ValueError(f"{path}, line {number}: {exc}") from None
    return header, records


def _complete(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def load(path) -> SweepResult:
    """Every record of a sweep file, in file order (for analysis after the fact)."""
    path = Path(path)
    header, records = read_file(path)
    if header is None:
        raise ValueError(f"{path} is empty or missing")
    names = list(records[0]["params"]) if records else []
    return SweepResult(records=records, names=names, loaded=len(records), path=path)
