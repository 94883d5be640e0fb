"""The records of a sweep as rows, a NumPy structured array or a pandas DataFrame."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["SweepResult"]


@dataclass
class SweepResult:
    """The records of a sweep, in the order of its parameter sets.

    Attributes:
        records: dicts with ``params``, ``seed``, ``result`` and ``seconds``.
        names: the parameter names (the first columns of :meth:`table`).
        computed: tasks run by this call. loaded: tasks found already done in the file.
        path: the JSON-lines file, or None.
    """

    records: list[dict]
    names: list[str]
    computed: int = 0
    loaded: int = 0
    path: Path | None = None

    def __len__(self) -> int:
        return len(self.records)

    def rows(self) -> list[dict]:
        """One flat dict per task: parameters, ``seed``, results (a result named like a parameter becomes
        ``result_<name>``) and ``seconds``."""
        rows = []
        for rec in self.records:
            row = dict(rec["params"])
            row["seed"] = rec["seed"]
            for k, v in rec["result"].items():
                row[f"result_{k}" if k in row or k == "seconds" else k] = v
            row["seconds"] = rec["seconds"]
            rows.append(row)
        return rows

    def table(self) -> np.ndarray:
        """A tidy NumPy structured array, one row per task. Numbers become int64/float64 columns (None → nan),
        equal-length lists become sub-array columns, anything else an object column."""
        rows = self.rows()
        columns = list(dict.fromkeys(k for row in rows for k in row))
        data = {c: [row.get(c) for row in rows] for c in columns}
        dtypes = [(c, *_column_dtype(data[c])) for c in columns]
        out = np.empty(len(rows), dtype=[(c, t, s) if s else (c, t) for c, t, s in dtypes])
        for c, t, _ in dtypes:
            if t is object:
                out[c] = np.array(data[c] + [None], dtype=object)[:-1]  # keeps lists as list objects
            else:
                out[c] = np.array([np.nan if v is None else v for v in data[c]], dtype=t)
        return out

    def to_pandas(self):
        """The rows as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.rows())


def _column_dtype(values: list):
    def kind(v):
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int"
        if isinstance(v, float) or v is None:
            return "float"
        if isinstance(v, str):
            return "str"
        if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return "int vector"
        if isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            return "vector"
        return "object"

    kinds = {kind(v) for v in values}
    if kinds == {"bool"}:
        return np.bool_, ()
    if kinds == {"int"}:
        return np.int64, ()
    if kinds <= {"int", "float"} and any(v is not None for v in values):
        return np.float64, ()
    if kinds == {"str"}:
        return f"U{max(len(v) for v in values)}", ()
    if kinds <= {"vector", "int vector"} and len({len(v) for v in values}) == 1 and values[0]:
        return (np.int64 if kinds == {"int vector"} else np.float64), (len(values[0]),)
    return object, ()
