"""The sweep file: JSON lines (strict JSON, non-finite floats as strings), a header line that identifies the
sweep, records appended as tasks finish, and reading it back (a torn last line is cut)."""

from __future__ import annotations

import hashlib
import json
import math
import pickle
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .params import plain_value
from .table import SweepResult

__all__ = ["FORMAT", "encode", "decode_record", "describe", "header", "read_file", "load"]

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


def decode_record(record: dict) -> dict:
    """A record read back, with "inf", "-inf" and "nan" turned into floats again."""
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
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{value.__module__}:{value.__qualname__}"
    if hasattr(value, "__dict__"):  # a problem object: its class and the digest of its arrays and settings
        digest = hashlib.sha256(type(value).__qualname__.encode())
        for k, v in sorted(vars(value).items()):
            digest.update(k.encode())
            digest.update(pickle.dumps(describe(v)) if not isinstance(v, np.ndarray) else np.ascontiguousarray(v))
        return {"object": repr(value), "sha256": digest.hexdigest()}
    return repr(value)


def header(task_name: str, seed: int, fixed: dict) -> dict:
    """The first line of a sweep file: what identifies the sweep (task, seed, fixed arguments by digest)."""
    return {"nqm_sweep": FORMAT, "task": task_name, "seed": int(seed), "fixed": describe(fixed)}


def read_file(path: Path) -> tuple[dict | None, list[dict]]:
    """The header and records of a sweep file; a torn last line (a kill mid-write) is cut off the file.

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
        with open(path, "r+b") as f:
            f.truncate(keep)
        raw = raw[:keep]
    try:
        records = [decode_record(json.loads(line)) for line in raw.decode().splitlines()[1:] if line.strip()]
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: a record is not valid JSON ({exc}); the file was edited or corrupted") from None
    return header, records


def load(path) -> SweepResult:
    """Every record of a sweep file, in file order (for analysis after the fact)."""
    path = Path(path)
    header, records = read_file(path)
    if header is None:
        raise ValueError(f"{path} is empty or missing")
    names = list(records[0]["params"]) if records else []
    return SweepResult(records=records, names=names, loaded=len(records), path=path)
