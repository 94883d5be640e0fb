"""Argument checks shared by every module: each input is checked once, here, with an error that names it."""

from __future__ import annotations

import numpy as np

__all__ = [
    "as_vector",
    "check_positive_vector",
    "check_batch_size",
    "check_lr",
    "check_unit_interval",
    "check_replicas",
]


def as_vector(name: str, values, d: int | None = None) -> np.ndarray:
    """``values`` as a finite 1-D float64 array (a scalar is broadcast to length ``d`` when d is given)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0 and d is not None:
        arr = np.full(d, float(arr))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"{name} has length {arr.shape[0]} but the Hessian has d = {d} eigenvalues")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values")
    return arr


def check_positive_vector(name: str, values, d: int | None = None) -> np.ndarray:
    """A finite 1-D array of values > 0 (a preconditioner's diagonal, say), of length ``d`` when given."""
    arr = as_vector(name, values, d)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0")
    return arr


def check_batch_size(batch_size, *, integer: bool = False) -> np.ndarray:
    """Return ``batch_size`` as a float64 array, raising ValueError unless every B ≥ 1."""
    b = np.asarray(batch_size, dtype=np.float64)
    if np.any(np.isnan(b)) or np.any(b < 1):
        shown = repr(batch_size) if b.size <= 8 else f"an array with minimum {float(np.nanmin(b))!r} (or NaN)"
        raise ValueError(f"batch size must be >= 1, got {shown}")
    if integer and (np.any(~np.isfinite(b)) or np.any(b != np.round(b))):
        raise ValueError(f"batch size must be a finite integer when examples are sampled, got {batch_size!r}")
    return b


def check_lr(lr) -> np.ndarray:
    """Return ``lr`` as a float64 array, raising ValueError unless every step is finite and > 0."""
    e = np.asarray(lr, dtype=np.float64)
    if np.any(~np.isfinite(e)) or np.any(e <= 0):
        raise ValueError(f"step size (lr) must be finite and > 0, got {lr!r}")
    return e


def check_unit_interval(name: str, value) -> float:
    """A momentum β or EMA γ: a float in [0, 1)."""
    v = float(value)
    if not (0.0 <= v < 1.0):
        raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
    return v


def check_replicas(replicas) -> int:
    """A replica count: an integer ≥ 2 (a standard error needs two)."""
    if int(replicas) != replicas or replicas < 2:
        raise ValueError(f"replicas must be an integer >= 2, got {replicas!r}")
    return int(replicas)
