"""Parameter sets of a sweep: grids, checks, the canonical form that identifies a task, and its seed."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["grid", "plain_value", "check_params", "canonical", "task_seed", "RESERVED"]

RESERVED = {"seed"}
"""Parameter names a sweep passes itself."""


def grid(**axes) -> list[dict]:
    """The Cartesian product of the axes, as a list of parameter sets (the last axis varies fastest).

    Each axis is a non-empty list, tuple, range or 1-d array of JSON scalars (numbers, strings, booleans,
    None) or lists of them.

    Example:
        >>> grid(batch_size=[1, 2], lr=[0.1])
        [{'batch_size': 1, 'lr': 0.1}, {'batch_size': 2, 'lr': 0.1}]
    """
    if not axes:
        raise ValueError("grid needs at least one axis, e.g. grid(batch_size=[16, 64])")
    values = []
    for name, axis in axes.items():
        if isinstance(axis, (str, bytes, Mapping)) or not isinstance(axis, (Iterable, np.ndarray)):
            raise ValueError(f"grid axis {name!r} must be a list of values, got {type(axis).__name__}")
        axis = [plain_value(v, f"grid axis {name!r}") for v in axis]
        if not axis:
            raise ValueError(f"grid axis {name!r} is empty")
        values.append(axis)
    return [dict(zip(axes, combo)) for combo in itertools.product(*values)]


def plain_value(value, where: str):
    """A JSON scalar (or list of them) from Python or NumPy values; a clear error for anything else."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [plain_value(v, where) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: non-finite value {value!r}")
        return value
    raise ValueError(f"{where}: {value!r} is not a number, string, boolean, None or a list of them")


def check_params(params, fixed: dict) -> list[dict]:
    """The parameter sets as plain dicts with the same keys, none repeated and none clashing with ``fixed``."""
    if isinstance(params, Mapping):
        params = grid(**params)
    if isinstance(params, (str, bytes)) or not isinstance(params, Iterable):
        raise ValueError("params must be a list of parameter sets (dicts), e.g. sweep.grid(...)")
    params = list(params)
    if not params:
        raise ValueError("the sweep has no parameter sets")
    names = None
    seen = set()
    checked = []
    for i, ps in enumerate(params):
        if not isinstance(ps, Mapping) or not all(isinstance(k, str) for k in ps):
            raise ValueError(f"parameter set {i} is not a dict with string keys: {ps!r}")
        ps = {k: plain_value(v, f"parameter set {i}, {k!r}") for k, v in ps.items()}
        if names is None:
            names = list(ps)
        elif set(ps) != set(names):
            raise ValueError(f"parameter set {i} has keys {sorted(ps)}, the first has {sorted(names)}")
        if clash := (set(ps) & (set(fixed) | RESERVED)):
            raise ValueError(f"parameter(s) {sorted(clash)} also given in fixed, or reserved")
        key = canonical(ps)
        if key in seen:
            raise ValueError(f"parameter set {i} repeats an earlier one: {ps!r}")
        seen.add(key)
        checked.append(ps)
    return checked


def canonical(params: Mapping) -> str:
    """The canonical JSON of a parameter set: what identifies a task in a file and seeds it."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def task_seed(sweep_seed: int, params: Mapping) -> int:
    """The seed of one task: 63 bits of SHA-256 over the sweep seed and the canonical parameters."""
    digest = hashlib.sha256(f"{int(sweep_seed)}|{canonical(params)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1  # 63 bits: fits an int64 column
