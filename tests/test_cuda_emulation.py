"""The CUDA source itself, run on the CPU: ``nqm/montecarlo/cuda/fused.cu`` compiled by g++ with CUDA's built-ins
emulated (``tests/cuda_emulation/harness.cpp``: one thread per block, or 64 OS threads per block with barriers for
``__syncthreads`` and the warp shuffles), held against nqm's NumPy code.

This checks what no GPU-less test otherwise could: the kernel's counter layout and Philox rounds, its
Box–Muller, its SGD/heavy-ball/Nesterov/EMA arithmetic, its chunk and checkpoint logic, the init kernel and the block
reduction (warp shuffles, shared memory, idle threads past d) — the same source CuPy compiles. What it cannot
check is left to ``bench/gpu_check.py``: the hardware itself (scheduling, atomics under contention), NVRTC,
and speed.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import nqm
from nqm import optim
from nqm.montecarlo import backend, philox
from nqm.montecarlo import counter as counter_sim
from nqm.montecarlo.recurrence import diagonal_recurrence

HERE = Path(__file__).resolve().parent
KAT = philox.KNOWN_ANSWERS

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def _build(directory: Path, threads: int | None) -> ctypes.CDLL:
    lib = directory / f"emu{threads or 1}.so"
    cmd = ["g++", "-O2", "-std=c++20", "-pthread", "-shared", "-fPIC", "-I", str(backend.KERNEL_SOURCE_PATH.parent)]
    cmd += [f"-DNQM_EMU_THREADS={threads}"] if threads else []
    out = subprocess.run(
        [*cmd, "-o", str(lib), str(HERE / "cuda_emulation" / "harness.cpp")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    so = ctypes.CDLL(str(lib))
    ptr, i32, i64, u32, f64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_uint32, ctypes.c_double
    so.emu_philox_words.argtypes = [ptr, ptr, ptr, i64]
    so.emu_init.argtypes = [i32, ptr, ptr, i32, i32, i64, u32, u32]
    so.emu_run.argtypes = [
        i32,
        ptr,
        ptr,
        ptr,
        ptr,
        ptr,
        ptr,
        i32,
        f64,
        i32,
        i32,
        i64,
        i64,
        i64,
        ptr,
        i32,
        ptr,
        i32,
        u32,
        u32,
        ctypes.c_uint,
    ]
    so.emu_adaptive_run.argtypes = [i32, ptr, ptr, ptr, ptr, ptr, ptr, i32, f64, f64, f64, f64, f64]
    so.emu_adaptive_run.argtypes += [i32, i32, i64, i64, i64, ptr, i32, ptr, i32, u32, u32, ctypes.c_uint]
    return so


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    """The kernels built for the CPU with one thread per block."""
    return _build(tmp_path_factory.mktemp("cuda-emulation"), None)


@pytest.fixture(scope="module")
def emu64(tmp_path_factory):
    """The kernels built for the CPU with 64 OS threads per block (two warps)."""
    return _build(tmp_path_factory.mktemp("cuda-emulation-64"), 64)


def _p(a):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def test_kernel_philox_words_equal_numpy(emu):
    rng = np.random.default_rng(1)
    counter = np.concatenate(
        [np.array([c for c, _, _ in KAT], np.uint32), rng.integers(0, 2**32, (5000, 4), dtype=np.uint32)]
    )
    key = np.concatenate(
        [np.array([k for _, k, _ in KAT], np.uint32), rng.integers(0, 2**32, (5000, 2), dtype=np.uint32)]
    )
    out = np.zeros_like(counter)
    emu.emu_philox_words(_p(counter), _p(key), _p(out), len(counter))
    assert out[: len(KAT)].tolist() == [list(e) for _, _, e in KAT]
    np.testing.assert_array_equal(out, philox.philox4x32(np, counter.T, key.T).T)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-14), (np.float32, 1e-6)])
def test_init_kernel_draws_the_mirror_s_theta0(emu, dtype, rtol):
    d, rows, row0, key = 300, 7, 5, philox.seed_key(3)
    sd = np.sqrt(np.linspace(0.5, 2.0, d))
    theta = np.zeros((rows, d), dtype=dtype)
    emu.emu_init(int(dtype == np.float32), _p(theta), _p(sd), d, rows, row0, *key)
    mirror = counter_sim.initial_theta(np, key, None, sd, rows, row0, d, dtype)
    np.testing.assert_allclose(theta, mirror, rtol=rtol)


def _emulated_launch(emu, dtype, grid_y: int = 1):
    """A ``launch`` for :func:`nqm.montecarlo.counter.diagonal_rows` that runs the compiled kernel in place."""

    def launch(key, x, aux, avg, kind, coef, drift, h, gamma, row0, t0, t1, ck, part):
        rows, d = x.shape
        ck = np.ascontiguousarray(ck, dtype=np.int64)
        pointers = [_p(v) for v in (x, aux, avg, coef, drift, h)]
        scalars = [counter_sim.KIND_CODES[kind], gamma, d, rows, row0, t0, t1]
        scalars += [_p(ck) if ck.size else None, ck.size, _p(part), part.shape[1]]
        emu.emu_run(int(dtype == np.float32), *pointers, *scalars, *key, grid_y)
        return x, aux, avg

    return launch


OPTIMUM = np.random.default_rng(4).standard_normal(150)  # weight decay pulls towards 0, not towards it


def _kernel_and_mirror(emu, dtype, opt, chunk, grid_y):
    p = nqm.NoisyQuadratic.zhang2019(150)
    if getattr(opt, "weight_decay", 0.0):
        p = nqm.NoisyQuadratic(p.h, p.c, optimum=OPTIMUM)
    key, steps, rows, row0 = philox.seed_key(8), 50, 6, 3
    record = np.array([0, 1, 2, 3, 4, 7, 20, 49, 50])
    rec = diagonal_recurrence(p, opt, 8.0)
    x0 = counter_sim.initial_theta(np, key, None, np.ones(p.d), rows, row0, p.d, dtype)
    rest = (rec, p.h, record, row0, counter_sim.chunks(steps, chunk))
    launch = _emulated_launch(emu, dtype, grid_y)  # in place, as on the GPU: each run gets its own copy of θ₀
    kernel = counter_sim.diagonal_rows(np, key, x0.copy(), *rest, launch=launch)
    return kernel, counter_sim.diagonal_rows(np, key, x0.copy(), *rest)


OPTIMISERS = {
    "sgd": optim.sgd(0.4),
    "heavy_ball": optim.heavy_ball(0.4, 0.6),
    "sgd+ema": optim.ema(optim.sgd(0.4), 0.9),
    "heavy_ball+ema": optim.ema(optim.heavy_ball(0.4, 0.4), 0.7),
    "nesterov": optim.nesterov(0.4, 0.6),
    "nesterov+ema": optim.ema(optim.nesterov(0.4, 0.5), 0.8),
    "sgd, coupled decay": optim.sgd(0.4, weight_decay=0.3),
    "heavy_ball, decoupled decay": optim.heavy_ball(0.4, 0.6, weight_decay=0.3, decoupled=True),
}
MODES = pytest.mark.parametrize("opt", list(OPTIMISERS.values()), ids=list(OPTIMISERS))
PRECISIONS = pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-11), (np.float32, 2e-5)])


@PRECISIONS
@MODES
@pytest.mark.parametrize("chunk, grid_y", [(1, 1), (3, 2), (50, 6)])
def test_run_kernel_equals_its_numpy_mirror(emu, dtype, rtol, opt, chunk, grid_y):
    """Losses at every checkpoint (including step 0 and chunk edges) and the final state, chunk by chunk;
    grid_y < rows makes blocks loop over replicas."""
    (kernel, kernel_state), (mirror, mirror_state) = _kernel_and_mirror(emu, dtype, opt, chunk, grid_y)
    assert np.all(kernel > 0)
    np.testing.assert_allclose(kernel, mirror, rtol=rtol)
    np.testing.assert_allclose(kernel_state, mirror_state, rtol=rtol * 100, atol=rtol)


@PRECISIONS
@MODES
def test_block_reduction_with_two_warps_equals_the_mirror(emu64, dtype, rtol, opt):
    """64 threads per block: the warp-shuffle and shared-memory reduction, with 42 idle threads past d = 150."""
    (kernel, _), (mirror, _) = _kernel_and_mirror(emu64, dtype, opt, 3, 2)
    np.testing.assert_allclose(kernel, mirror, rtol=rtol)


def test_threaded_philox_and_init_kernels_equal_numpy(emu64):
    counter = np.random.default_rng(2).integers(0, 2**32, (1000, 4), dtype=np.uint32)
    key = np.random.default_rng(3).integers(0, 2**32, (1000, 2), dtype=np.uint32)
    out = np.zeros_like(counter)
    emu64.emu_philox_words(_p(counter), _p(key), _p(out), len(counter))
    np.testing.assert_array_equal(out, philox.philox4x32(np, counter.T, key.T).T)
    theta, sd, k = np.zeros((3, 100)), np.ones(100), philox.seed_key(4)
    emu64.emu_init(0, _p(theta), _p(sd), 100, 3, 0, *k)
    np.testing.assert_allclose(theta, counter_sim.initial_theta(np, k, None, sd, 3, 0, 100, np.float64), rtol=1e-14)


def test_a_planted_kernel_error_is_caught(emu):
    """The comparison has power: the same run with the key's words swapped (other noise) differs."""
    p = nqm.NoisyQuadratic.zhang2019(50)
    key, record = philox.seed_key(8), np.array([0, 10, 20])
    rec = diagonal_recurrence(p, optim.sgd(0.4), 8.0)
    x0 = counter_sim.initial_theta(np, key, None, np.ones(p.d), 4, 0, p.d, np.float64)
    run = _emulated_launch(emu, np.float64)
    kernel, _ = counter_sim.diagonal_rows(np, key, x0.copy(), rec, p.h, record, 0, [(0, 20)], launch=run)
    swapped = (key[1], key[0])
    other, _ = counter_sim.diagonal_rows(np, swapped, x0.copy(), rec, p.h, record, 0, [(0, 20)])
    assert not np.allclose(kernel[:, 1:], other[:, 1:], rtol=1e-3)


# -- optimisers that are not linear: nqm_adaptive_run against the mirror that runs their own ``apply`` -----------------
ELEMENTWISE = {
    "sign_sgd": optim.sign_sgd(0.02),
    "signum": optim.signum(0.02, 0.8),
    "rmsprop": optim.rmsprop(0.01, 0.9, 1e-3),
    "adam": optim.adam(0.02, 0.8, 0.95, 1e-3),
    "adamw": optim.adamw(0.02, 0.8, 0.95, 1e-3, weight_decay=0.5),
}


def _emulated_elementwise_launch(emu, dtype, grid_y: int = 1):
    """A ``launch`` for :func:`nqm.montecarlo.counter.elementwise_rows` that runs the compiled kernel in place."""

    def launch(key, x, aux, opt, h, sd, pull, row0, t0, t1, ck, part):
        rows, d = x.shape
        ck = np.ascontiguousarray(ck, dtype=np.int64)
        kind, *scalars = counter_sim.elementwise_parameters(opt)
        mom = aux[0] if kind in (1, 3) else None
        sec = aux[-1] if kind in (2, 3) else None
        sd_t = np.ascontiguousarray(sd, dtype=dtype)
        pointers = [_p(v) for v in (x, mom, sec, sd_t, pull, h)]
        rest = [d, rows, row0, t0, t1, _p(ck) if ck.size else None, ck.size, _p(part), part.shape[1]]
        emu.emu_adaptive_run(int(dtype == np.float32), *pointers, kind, *scalars, *rest, *key, grid_y)
        return x, aux

    return launch


def _elementwise_kernel_and_mirror(emu, dtype, opt, chunk, grid_y, optimum=None):
    p = nqm.NoisyQuadratic.zhang2019(150)
    key, steps, rows, row0 = philox.seed_key(8), 50, 6, 3
    record = np.array([0, 1, 2, 3, 4, 7, 20, 49, 50])
    x0 = counter_sim.initial_theta(np, key, None, np.ones(p.d), rows, row0, p.d, dtype)
    rest = (opt, p.h, np.sqrt(p.c / 8.0), record, row0, counter_sim.chunks(steps, chunk))
    pull = None if optimum is None else opt.pull(optimum)
    launch = _emulated_elementwise_launch(emu, dtype, grid_y)
    kernel = counter_sim.elementwise_rows(np, key, x0.copy(), *rest, launch=launch, pull=pull)
    return kernel, counter_sim.elementwise_rows(np, key, x0.copy(), *rest, pull=pull)


@PRECISIONS
@pytest.mark.parametrize("opt", list(ELEMENTWISE.values()), ids=list(ELEMENTWISE))
@pytest.mark.parametrize("chunk, grid_y", [(1, 1), (3, 2), (50, 6)])
def test_adaptive_kernel_equals_its_numpy_mirror(emu, dtype, rtol, opt, chunk, grid_y):
    """Sign descent, signum, RMSprop, Adam and AdamW: losses at every checkpoint and the final θ, chunk by chunk
    (Adam's bias corrections count updates across chunks)."""
    (kernel, kernel_state), (mirror, mirror_state) = _elementwise_kernel_and_mirror(emu, dtype, opt, chunk, grid_y)
    assert np.all(kernel > 0)
    np.testing.assert_allclose(kernel, mirror, rtol=rtol)
    np.testing.assert_allclose(kernel_state, mirror_state, rtol=rtol * 100, atol=rtol)


@pytest.mark.parametrize("opt", list(ELEMENTWISE.values()), ids=list(ELEMENTWISE))
def test_adaptive_kernel_block_reduction_with_two_warps(emu64, opt):
    (kernel, _), (mirror, _) = _elementwise_kernel_and_mirror(emu64, np.float64, opt, 3, 2)
    np.testing.assert_allclose(kernel, mirror, rtol=1e-11)


@PRECISIONS
@pytest.mark.parametrize("chunk, grid_y", [(1, 1), (50, 6)])
def test_adamw_kernel_carries_the_pull_towards_zero(emu, dtype, rtol, chunk, grid_y):
    """AdamW with an optimum θ* ≠ 0: the kernel adds the same −ελθ* each step as the mirror; planted error: the
    mirror without the pull differs."""
    opt = ELEMENTWISE["adamw"]
    (kernel, state), (mirror, mirror_state) = _elementwise_kernel_and_mirror(emu, dtype, opt, chunk, grid_y, OPTIMUM)
    np.testing.assert_allclose(kernel, mirror, rtol=rtol)
    np.testing.assert_allclose(state, mirror_state, rtol=rtol * 100, atol=rtol)
    (unpulled, _), _ = _elementwise_kernel_and_mirror(emu, dtype, opt, chunk, grid_y)
    assert not np.allclose(kernel[:, -1], unpulled[:, -1], rtol=1e-2)


def test_a_planted_adaptive_kernel_error_is_caught(emu):
    """The comparison has power: RMSprop at the same β₂ (no momentum, no bias corrections) is told apart from Adam."""
    p = nqm.NoisyQuadratic.zhang2019(50)
    key, record = philox.seed_key(8), np.array([0, 10, 20])
    x0 = counter_sim.initial_theta(np, key, None, np.ones(p.d), 4, 0, p.d, np.float64)
    rest = (p.h, np.sqrt(p.c / 8.0), record, 0, [(0, 20)])
    run = _emulated_elementwise_launch(emu, np.float64)
    adam = optim.adam(0.02, 0.8, 0.95, 1e-3)
    kernel, _ = counter_sim.elementwise_rows(np, key, x0.copy(), adam, *rest, launch=run)
    other, _ = counter_sim.elementwise_rows(np, key, x0.copy(), optim.rmsprop(0.02, 0.95, 1e-3), *rest)
    assert not np.allclose(kernel[:, 1:], other[:, 1:], rtol=1e-3)
