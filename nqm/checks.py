"""Argument checks shared by every module: each input is checked once, here, with an error that names it."""

from __future__ import annotations

import os

import numpy as np

__all__ = [
    "as_vector",
    "check_positive_vector",
    "check_batch_size",
    "check_lr",
    "check_unit_interval",
    "check_replicas",
    "check_count",
    "check_init_var",
    "available_memory",
    "check_memory",
]


def as_vector(name: str, values, d: int | None = None) -> np.ndarray:
    """``values`` as a finite 1-D float64 array (a scalar is broadcast to length ``d`` when d is given)."""
    if np.iscomplexobj(values):
        raise TypeError(f"{name} must be real, got complex values")
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


def check_count(name: str, value, minimum: int = 0) -> int:
    """A count (steps, replicas, a batch of real examples): an integer ≥ ``minimum``."""
    try:
        ok = int(value) == value and value >= minimum
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_replicas(replicas) -> int:
    """A replica count: an integer ≥ 2 (a standard error needs two)."""
    return check_count("replicas", replicas, 2)


def check_init_var(init_var, d: int) -> np.ndarray:
    """E[θ_0²] per coordinate as (d,) float64, from a scalar or a (d,) array of finite values ≥ 0."""
    v = np.asarray(init_var, dtype=np.float64)
    v = np.broadcast_to(v, (d,)) if v.ndim == 0 else v
    if v.shape != (d,) or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError(f"init_var must be a scalar or shape ({d},) of finite values >= 0")
    return v


def available_memory() -> int | None:
    """Bytes of memory a new allocation can still get: Linux's MemAvailable, else the physical memory; None when
    the system says neither."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _size(nbytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} PiB"  # unreachable: the loop returns at PiB


def check_memory(nbytes: float, what: str, fix: str) -> None:
    """Raise MemoryError at once, before anything is allocated, when ``what`` needs more than the memory available
    (the message says how much, and ``fix``: how to split the work)."""
    available = available_memory()
    if available is not None and nbytes > available:
        raise MemoryError(f"{what} needs about {_size(nbytes)}, more than the {_size(available)} available; {fix}")
