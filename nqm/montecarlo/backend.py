"""Which array backend simulates: NumPy on the CPU, or CuPy on an NVIDIA GPU.

``backend="numpy" | "cupy" | "auto"``; the environment variable ``NQM_BACKEND`` overrides the argument (so a
whole program or sweep can be moved to the GPU without edits). CuPy is imported only when asked for. "auto"
takes CuPy when it imports, sees a device and can compile nqm's kernels (NVRTC and its headers present), and
otherwise falls back to NumPy with a one-line notice on stderr; asking for "cupy" explicitly raises instead.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import numpy as np

BACKENDS = ("numpy", "cupy", "auto")
KERNEL_SOURCE_PATH = Path(__file__).parent / "cuda" / "fused.cu"


class BackendUnavailable(RuntimeError):
    """CuPy was asked for but cannot run here; the message says why."""


def kernel_source() -> str:
    """The CUDA source of nqm's kernels (Philox4x32-10, initial draws, the fused diagonal run)."""
    return KERNEL_SOURCE_PATH.read_text()


@functools.lru_cache(maxsize=1)
def cupy_status() -> tuple[object | None, str]:
    """(the cupy module, "") when CuPy can run nqm's kernels here, else (None, the reason)."""
    try:
        import cupy
    except Exception as exc:  # noqa: BLE001 - ImportError, or a CUDA library that fails to load
        return None, f"cupy does not import ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - no driver, no device
        return None, f"CuPy finds no CUDA device ({type(exc).__name__}: {exc})"
    if count < 1:
        return None, "CuPy finds no CUDA device"
    try:
        kernels(cupy)
    except Exception as exc:  # noqa: BLE001 - NVRTC or its headers missing
        return None, f"CuPy cannot compile nqm's kernels ({type(exc).__name__}: {exc})"
    return cupy, ""


@functools.lru_cache(maxsize=1)
def kernels(cupy):
    """nqm's compiled ``cupy.RawModule`` (compiled once per process, cached by CuPy on disk)."""
    module = cupy.RawModule(code=kernel_source(), options=("-std=c++14",))
    module.compile()
    return module


def choice(backend: str = "numpy") -> str:
    """The backend name in force: ``NQM_BACKEND`` if set, else ``backend``; a clear error for an unknown one."""
    if backend not in BACKENDS:  # an override never hides an invalid argument
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    chosen = os.environ.get("NQM_BACKEND", "").strip().lower() or backend
    if chosen not in BACKENDS:
        source = "NQM_BACKEND" if os.environ.get("NQM_BACKEND") else "backend"
        raise ValueError(f"{source} must be one of {BACKENDS}, got {chosen!r}")
    return chosen


def resolve(backend: str = "numpy"):
    """The array module to simulate with: ``numpy`` or ``cupy``.

    ``NQM_BACKEND`` (if set) replaces ``backend``. "auto" falls back to NumPy with a notice when CuPy cannot
    run; "cupy" raises :class:`BackendUnavailable` instead.
    """
    chosen = choice(backend)
    if chosen == "numpy":
        import numpy

        return numpy
    cupy, reason = cupy_status()
    if cupy is not None:
        return cupy
    if chosen == "cupy":
        raise BackendUnavailable(f"backend 'cupy' cannot run: {reason}")
    notice_once(f"nqm: backend 'auto' uses NumPy: {reason}")
    import numpy

    return numpy


@functools.cache
def notice_once(message: str) -> None:
    print(message, file=sys.stderr)  # once per reason and process


def replica_batch(replicas: int, bytes_per_replica: int, free_bytes: int, fraction: float = 0.8) -> int:
    """How many replicas to process at once so that their state fits in ``fraction`` of the free memory.

    Raises MemoryError when even one replica does not fit.

    Example:
        >>> replica_batch(1000, 40_000_000, 16 * 2**30)   # 40 MB per replica, 16 GiB free
        343
    """
    budget = int(fraction * free_bytes)
    if bytes_per_replica > budget:
        raise MemoryError(
            f"one replica needs {bytes_per_replica / 2**20:.1f} MiB of device memory but only "
            f"{budget / 2**20:.1f} MiB ({fraction:.0%} of the free {free_bytes / 2**20:.1f} MiB) is available; "
            "use float32, a smaller problem, or the NumPy backend"
        )
    return max(1, min(int(replicas), budget // max(1, int(bytes_per_replica))))


def to_host(xp, a):
    """``a`` as a NumPy array (copied from the device when ``xp`` is CuPy)."""
    return a.get() if hasattr(a, "get") and xp is not np else np.asarray(a)
