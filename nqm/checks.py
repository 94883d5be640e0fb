"""Argument checks shared by every module: each input is checked once, here, with an error that names it."""

from __future__ import annotations

import os

import numpy as np

__all__ = [
    "as_real",
    "check_real",
    "as_vector",
    "check_point",
    "check_positive_vector",
    "check_batch_size",
    "check_batch_sizes",
    "check_steps_at",
    "check_lr",
    "check_unit_interval",
    "check_replicas",
    "check_count",
    "check_init_var",
    "available_memory",
    "check_memory",
]


def as_real(name: str, value) -> np.ndarray:
    """``value`` as a float64 array; a TypeError naming ``name`` for what is not a real number or an array of them
    (complex numbers, strings such as "0.5", None, objects), which NumPy would otherwise convert or cast silently."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":  # signed and unsigned integers, floats (True is not a number here)
        raise TypeError(f"{name} must be a real number (or an array of them), got {value!r}")
    return arr.astype(np.float64)


def check_real(name: str, value, *, low=-np.inf, high=np.inf, low_open=False, high_open=False) -> float:
    """One finite real number in [low, high] (an end excluded when its ``*_open``), else an error naming ``name``."""
    arr = as_real(name, value)
    if arr.ndim != 0:
        raise ValueError(f"{name} must be a single number, got {value!r}")
    v = float(arr)
    inside = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not (np.isfinite(v) and inside):
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name} must be finite and in {left}{low:g}, {high:g}{right}, got {value!r}")
    return v


def as_vector(name: str, values, d: int | None = None) -> np.ndarray:
    """``values`` as a finite 1-D float64 array (a scalar is broadcast to length ``d`` when d is given)."""
    arr = as_real(name, values)
    if arr.ndim == 0 and d is not None:
        arr = np.full(d, float(arr))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {arr.shape}")
    if d is not None and arr.shape[0] != d:
        raise ValueError(f"{name} has length {arr.shape[0]} but the Hessian has d = {d} eigenvalues")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values")
    return arr


def check_point(name: str, value, d: int, *, batched: bool = False) -> np.ndarray:
    """A point θ of the problem: a finite real array of shape (d,) (or (..., d) when ``batched``), else an error
    naming ``name``."""
    arr = as_real(name, value)
    if arr.shape[-1:] != (d,) or (arr.ndim != 1 and not batched):
        raise ValueError(f"{name} must have shape ({'..., ' if batched else ''}{d},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values")
    return arr


def check_positive_vector(name: str, values, d: int | None = None) -> np.ndarray:
    """A finite 1-D array of values > 0 (a preconditioner's diagonal, say), of length ``d`` when given."""
    arr = as_vector(name, values, d)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0")
    return arr


def check_batch_size(batch_size, *, integer: bool = False, single: bool = False) -> np.ndarray:
    """Return ``batch_size`` as a float64 array, raising ValueError unless every B ≥ 1 (and, with ``single``, unless
    it is one number: where a function takes one batch size, an array of them is refused by name)."""
    b = as_real("batch size", batch_size)
    if single and b.ndim != 0:
        raise ValueError(f"batch size must be a single number here, got {batch_size!r}")
    if np.any(np.isnan(b)) or np.any(b < 1):
        shown = repr(batch_size) if b.size <= 8 else f"an array with minimum {float(np.nanmin(b))!r} (or NaN)"
        raise ValueError(f"batch size must be >= 1, got {shown}")
    if integer and (np.any(~np.isfinite(b)) or np.any(b != np.round(b))):
        raise ValueError(f"batch size must be a finite integer when examples are sampled, got {batch_size!r}")
    return b


def check_batch_sizes(batch_sizes) -> np.ndarray:
    """A non-empty 1-D float64 array of batch sizes ≥ 1 (a single number is one batch size)."""
    b = np.atleast_1d(check_batch_size(batch_sizes))
    if b.ndim != 1 or b.size == 0:
        raise ValueError(f"batch_sizes must be a number or a non-empty 1-D list of them, got shape {b.shape}")
    return b


def check_steps_at(steps: int, at) -> np.ndarray:
    """Steps asked for, ``at``, as int64 in the order given (repeats kept): a non-empty 1-D list of integers in
    [0, steps]; booleans, strings, complex numbers and NaN are refused, naming ``at``."""
    r = np.asarray(at)
    if r.ndim != 1 or r.size == 0 or r.dtype.kind not in "iuf":
        raise ValueError(f"at must be a non-empty 1-D list of integer steps in [0, {steps}], got {at!r}")
    if not np.all(np.isfinite(r)) or np.any(r != np.round(r)) or r.min() < 0 or r.max() > steps:
        raise ValueError(f"at must hold integer steps in [0, {steps}], got {at!r}")
    return r.astype(np.int64)


def check_lr(lr) -> np.ndarray:
    """Return ``lr`` as a float64 array, raising ValueError unless every step is finite and > 0."""
    e = as_real("step size (lr)", lr)
    if np.any(~np.isfinite(e)) or np.any(e <= 0):
        raise ValueError(f"step size (lr) must be finite and > 0, got {lr!r}")
    return e


def check_unit_interval(name: str, value) -> float:
    """A momentum β or EMA γ: a float in [0, 1)."""
    return check_real(name, value, low=0.0, high=1.0, high_open=True)


def check_target(target) -> float:
    """A target loss: finite and > 0."""
    return check_real("target loss", target, low=0.0, low_open=True)


def check_count(name: str, value, minimum: int = 0) -> int:
    """A count (steps, replicas, a batch of real examples): an integer ≥ ``minimum``."""
    try:
        ok = np.asarray(value).dtype.kind in "iuf" and int(value) == value and value >= minimum
    except (TypeError, ValueError, OverflowError):  # None, "10", NaN, ±inf
        ok = False
    if not ok:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_replicas(replicas) -> int:
    """A replica count: an integer ≥ 2 (a standard error needs two)."""
    return check_count("replicas", replicas, 2)


def check_init_var(init_var, d: int) -> np.ndarray:
    """E[θ_0²] per coordinate as (d,) float64, from a scalar or a (d,) array of finite values ≥ 0."""
    v = as_real("init_var", init_var)
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
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")
    k = 0
    while nbytes >= 1024 and k < len(units) - 1:
        nbytes, k = nbytes / 1024, k + 1
    return f"{nbytes:.3g} {units[k]}"


def check_memory(nbytes: float, what: str, fix: str) -> None:
    """Raise MemoryError at once, before anything is allocated, when ``what`` needs more than the memory available
    (the message says how much, and ``fix``: how to split the work)."""
    available = available_memory()
    if available is not None and nbytes > available:
        raise MemoryError(f"{what} needs about {_size(nbytes)}, more than the {_size(available)} available; {fix}")
