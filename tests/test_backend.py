"""The GPU backend's CPU-checkable parts: Philox known answers, the fused kernel's NumPy mirror, skip-ahead,
backend selection, the memory plan, and the kernel source compiled by nvcc for sm_90 without spills.

Statistical checks use z = 5 (two-sided false-alarm rate 6·10⁻⁷ per comparison; a few dozen comparisons
here) and each has a planted error that it must reject.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

import nqm
from nqm import dynamics, optim, spectra
from nqm.montecarlo import backend, philox
from nqm.montecarlo.counter import simulate_counter
from nqm.montecarlo.skip_ahead import jump_map, simulate_checkpoints, step_map

Z = 5.0

KAT = philox.KNOWN_ANSWERS


def test_philox_matches_the_published_known_answers():
    counter = np.array([c for c, _, _ in KAT], dtype=np.uint32).T
    key = np.array([k for _, k, _ in KAT], dtype=np.uint32).T
    words = philox.philox4x32(np, counter, key)
    assert words.dtype == np.uint32
    assert words.T.tolist() == [list(e) for _, _, e in KAT]
    # a planted error (9 rounds) misses every vector
    nine = philox.philox4x32(np, counter, key, rounds=9).T.tolist()
    assert all(w != list(e) for w, (_, _, e) in zip(nine, KAT))


def test_cuda_source_uses_the_same_constants():
    src = backend.kernel_source()
    for name, value in (("M0", philox.M0), ("M1", philox.M1), ("W0", philox.W0), ("W1", philox.W1)):
        assert re.search(rf"#define NQM_{name} 0x{value:08X}u", src), name


def test_uniforms_are_exact_and_inside_the_open_interval():
    w = np.array([0, 1, 511, 512, 2**31, 2**32 - 1], dtype=np.uint32)
    u64 = philox.uniforms(np, w, np.float64)
    assert u64.tolist() == [(int(x) + 0.5) / 2**32 for x in w]
    u32 = philox.uniforms(np, w, np.float32)
    assert u32.dtype == np.float32
    assert u32.astype(np.float64).tolist() == [((int(x) >> 9) + 0.5) / 2**23 for x in w]
    assert 0 < u32.min() and u32.max() < 1 and 0 < u64.min() and u64.max() < 1


def _moment_z(z):
    """z-scores of the mean (0), variance (1) and 4th moment (3) of supposedly standard normals."""
    z = z.astype(np.float64).ravel()
    n = z.size
    return np.array(
        [z.mean() * np.sqrt(n), (np.mean(z**2) - 1) / np.sqrt(2 / n), (np.mean(z**4) - 3) / np.sqrt(96 / n)]
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_counter_normals_are_standard_normal_and_independent_across_lanes(dtype):
    z = philox.normal_block(np, philox.seed_key(7), 3, np.arange(50_000)[None, :], np.arange(4)[:, None], 1, dtype)
    assert z.dtype == dtype and z.shape == (4, 4, 50_000)
    assert np.all(np.abs(_moment_z(z)) < Z)
    lanes = z.reshape(4, -1).astype(np.float64)
    corr = np.corrcoef(lanes)[np.triu_indices(4, 1)]
    assert np.all(np.abs(corr) * np.sqrt(lanes.shape[1]) < Z)
    # negative control: the angle without its 2π is not a normal's, and the check sees it
    u = philox.uniforms(np, philox.philox4x32(np, np.zeros((4, 200_000), np.uint32) + np.arange(200_000), (1, 2)))
    r = np.sqrt(-2 * np.log(u[0]))
    assert np.max(np.abs(_moment_z(r * np.cos(u[1])))) > Z


def test_different_keys_replicas_coordinates_and_steps_give_different_words():
    base = philox.normal_block(np, (1, 2), 0, 5, 3, 1)
    for other in (
        philox.normal_block(np, (1, 3), 0, 5, 3, 1),
        philox.normal_block(np, (1, 2), 1, 5, 3, 1),
        philox.normal_block(np, (1, 2), 0, 6, 3, 1),
        philox.normal_block(np, (1, 2), 0, 5, 4, 1),
        philox.normal_block(np, (1, 2), 0, 5, 3, 0),
        philox.normal_block(np, (1, 2), 2**32, 5, 3, 1),  # the block's high word
    ):
        assert not np.any(other == base)


P = nqm.NoisyQuadratic.zhang2019(200)
RECORD = [0, 3, 30, 60]


OPTIMISERS = {
    "sgd": optim.sgd(0.5),
    "momentum": optim.heavy_ball(0.5, 0.6),
    "ema": optim.ema(optim.sgd(0.5), 0.9),
    "momentum+ema": optim.ema(optim.heavy_ball(0.5, 0.3), 0.7),
    "precond": optim.sgd(0.5, P.h**-0.25),
    "nesterov": optim.nesterov(0.5, 0.6),
    "nesterov+ema": optim.ema(optim.nesterov(0.5, 0.3), 0.7),
}
EACH_OPTIMISER = pytest.mark.parametrize("opt", list(OPTIMISERS.values()), ids=list(OPTIMISERS))


@EACH_OPTIMISER
def test_kernel_mirror_matches_exact_dynamics_and_rejects_a_planted_error(opt):
    r = nqm.simulate(P, opt, 8, 60, 600, seed=11, generator="philox", at=RECORD)
    exact = dynamics.expected_loss(P, opt, 8, 60, at=RECORD)
    assert np.all(np.abs(r.mean - exact) <= Z * r.sem)
    planted = dynamics.expected_loss(P, opt, 4, 60, at=RECORD)  # the noise variance doubled
    assert np.any(np.abs(r.mean - planted) > Z * r.sem)


def test_counter_path_on_dense_and_rotated_problems_matches_exact_dynamics():
    q = nqm.NoisyQuadratic(P.h[:40], P.c[:40], basis=nqm.spectra.random_rotation(40, 1.0, seed=2))
    dense = nqm.NoisyQuadratic(P.h[:40], sigma=nqm.spectra.misaligned_sigma(P.c[:40], 0.5, seed=3))
    cases = ((q, optim.heavy_ball(0.5, 0.4)), (dense, optim.ema(optim.sgd(0.5), 0.5)), (q, optim.nesterov(0.5, 0.4)))
    for prob, opt in cases:
        r = nqm.simulate(prob, opt, 8, 40, 600, seed=4, generator="philox", at=[0, 10, 40])
        exact = dynamics.expected_loss(prob, opt, 8, 40, at=[0, 10, 40])
        assert np.all(np.abs(r.mean - exact) <= Z * r.sem)
        planted = dynamics.expected_loss(prob, opt, 2, 40, at=[0, 10, 40])
        assert np.any(np.abs(r.mean - planted) > Z * r.sem)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("opt", [optim.ema(optim.heavy_ball(0.5, 0.4), 0.7), optim.ema(optim.nesterov(0.5, 0.4), 0.7)])
def test_chunking_and_replica_batching_do_not_change_a_single_bit(dtype, opt):
    args = (P, opt, 8.0, 23, 10, 5, np.ones(P.d), np.array([0, 1, 4, 5, 22, 23]), dtype, np)
    whole, state = simulate_counter(*args, keep_state=True)
    for chunk, rows in ((1, 1), (3, 4), (4, 10), (7, 3)):
        parts, parts_state = simulate_counter(*args, chunk_steps=chunk, batch_rows=rows, keep_state=True)
        assert np.array_equal(parts, whole) and np.array_equal(parts_state, state)


def test_the_same_seed_starts_from_the_same_point_and_replicas_differ():
    a = nqm.simulate(P, 0.5, 8, 0, 4, seed=9, generator="philox", at=[0], keep_state=True)
    b = nqm.simulate(P, 0.5, 8, 5, 4, seed=9, generator="philox", at=[0, 5], keep_losses=True)
    assert np.array_equal(a.mean, b.mean[:1])
    assert len(set(a.state[:, 0].tolist())) == 4


def test_without_noise_the_counter_path_is_the_deterministic_recursion():
    quiet = nqm.NoisyQuadratic(P.h, np.zeros(P.d))
    theta0 = np.linspace(-1, 1, P.d)
    r = nqm.simulate(
        quiet, optim.heavy_ball(0.7, 0.5), 8, 25, 2, generator="philox", theta0=theta0, at=[25], keep_state=True
    )
    x, prev = theta0.copy(), theta0.copy()
    a = 1 + 0.5 - 0.7 * P.h
    for _ in range(25):
        x, prev = a * x - 0.5 * prev, x
    np.testing.assert_array_equal(r.state[0], x)
    # Nesterov in PyTorch's form, v ← βv + g, θ ← θ − ε(g + βv), agrees to rounding (the kernel runs (θ, εv))
    r = nqm.simulate(
        quiet, optim.nesterov(0.7, 0.5), 8, 25, 2, generator="philox", theta0=theta0, at=[25], keep_state=True
    )
    x, v = theta0.copy(), np.zeros(P.d)
    for _ in range(25):
        g = P.h * x
        v = 0.5 * v + g
        x = x - 0.7 * (g + 0.5 * v)
    np.testing.assert_allclose(r.state[0], x, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("kind", ["diagonal", "rotated", "dense"])
def test_one_step_on_counter_noise_matches_the_exact_improvement(kind):
    from nqm import theory

    h, c = P.h[:60], P.c[:60]
    prob = {
        "diagonal": nqm.NoisyQuadratic(h, c),
        "rotated": nqm.NoisyQuadratic(h, c, basis=nqm.spectra.random_rotation(60, 1.0, seed=1)),
        "dense": nqm.NoisyQuadratic(h, sigma=nqm.spectra.misaligned_sigma(c, 0.7, seed=2)),
    }[kind]
    theta = np.linspace(-2, 2, 60)
    lr, batch = np.array([[5.0], [20.0], [40.0]]), np.array([[2.0, 8.0, 64.0]])
    r = nqm.one_step_improvement(prob, theta, lr, batch, 2000, seed=4, generator="philox")
    exact = theory.expected_improvement(prob, theta, lr, batch)
    assert np.all(np.abs(r.mean - exact) <= Z * r.sem)
    planted = theory.expected_improvement(prob, theta, lr, batch / 2)  # noise variance doubled
    assert np.any(np.abs(r.mean - planted) > Z * r.sem)
    again = nqm.one_step_improvement(prob, theta, lr, batch, 2000, seed=4, generator="philox")
    np.testing.assert_array_equal(again.mean, r.mean)


def test_per_example_noise_stays_on_numpy_under_the_environment_override(monkeypatch):
    monkeypatch.setattr(backend, "cupy_status", lambda: (None, "no device here"))
    monkeypatch.setenv("NQM_BACKEND", "cupy")
    r = nqm.simulate(P, 0.5, 8, 3, 4, per_example="gaussian", at=[3])  # NumPy's SFC64 path
    assert r.n == 4
    with pytest.raises(backend.BackendUnavailable):
        nqm.simulate(P, 0.5, 8, 3, 4)


def test_per_example_noise_and_bad_rng_are_refused():
    with pytest.raises(ValueError, match="per_example"):
        nqm.simulate(P, 0.5, 8, 5, 4, generator="philox", per_example="gaussian")
    with pytest.raises(ValueError, match="generator must be"):
        nqm.simulate(P, 0.5, 8, 5, 4, generator="mt19937")


# -- skip-ahead ---------------------------------------------------------------------------------------------


JUMPS = {
    "sgd": optim.sgd(1.0),
    "mom": optim.heavy_ball(0.1, 0.9),
    "ema": optim.ema(optim.sgd(1.0), 0.99),
    "both": optim.ema(optim.heavy_ball(0.5, 0.5), 0.9),
    "nesterov": optim.nesterov(0.3, 0.9),
    "nesterov+ema": optim.ema(optim.nesterov(0.5, 0.5), 0.9),
}


@pytest.mark.parametrize("opt", list(JUMPS.values()), ids=list(JUMPS))
def test_jump_maps_carry_the_second_moments_exactly(opt):
    record = [0, 1, 5, 100, 2000]
    exact = dynamics.expected_loss(P, opt, 8, 2000, at=record)
    step = step_map(P, opt, 8)
    e = np.array(opt.initial)
    moments, now, losses = np.outer(e, e) * np.ones((P.d, 1, 1)), 0, []
    for t in record:
        a, q = jump_map(step, t - now)
        moments, now = a @ moments @ np.swapaxes(a, -1, -2) + q, t
        losses.append(0.5 * P.h @ moments[:, opt.loss_index, opt.loss_index])
    np.testing.assert_allclose(losses, exact, rtol=1e-12)


def test_skip_ahead_sampling_matches_exact_dynamics_and_rejects_a_planted_error():
    record = [0, 10, 1000, 10**6]
    for opt in (optim.heavy_ball(1.0, 0.5), optim.nesterov(0.6, 0.5)):
        r = simulate_checkpoints(P, opt, 8, record, 1000, seed=2)
        exact = dynamics.expected_loss(P, opt, 8, 10**6, at=record)
        assert np.all(np.abs(r.mean - exact) <= Z * r.sem)
        planted = dynamics.expected_loss(P, opt.lr, 8, 10**6, at=record)  # momentum forgotten
        assert np.any(np.abs(r.mean - planted) > Z * r.sem)


@pytest.mark.parametrize("batch, planted", [(8, False), (4, True)])
def test_skip_ahead_is_an_oracle_for_the_step_by_step_simulator(batch, planted):
    """θ_T − A_T θ₀ of nqm.simulate, whitened by the exact Q_T, must be N(0, 1) — coordinate by coordinate.

    Both start from the same θ₀ (the same Philox draw); the planted run uses half the batch (twice the noise).
    """
    steps = 40
    r = nqm.simulate(P, 0.5, batch, steps, 200, seed=5, generator="philox", at=[steps], keep_state=True)
    start = nqm.simulate(P, 0.5, batch, 0, 200, seed=5, generator="philox", at=[0], keep_state=True).state
    a, q = jump_map(step_map(P, 0.5, 8), steps)
    white = (r.state - a[:, 0, 0] * start) / np.sqrt(q[:, 0, 0])
    scores = np.abs(_moment_z(white)[:2])
    assert np.any(scores > Z) if planted else np.all(scores < Z)


def test_skip_ahead_refuses_dense_problems():
    dense = nqm.NoisyQuadratic(P.h[:10], sigma=np.eye(10))
    with pytest.raises(ValueError, match="diagonal"):
        simulate_checkpoints(dense, 0.5, 8, [0, 10], 4)


# -- backend selection and the memory plan ------------------------------------------------------------------


def test_backend_names_and_the_environment_override(monkeypatch):
    monkeypatch.delenv("NQM_BACKEND", raising=False)
    assert backend.resolve("numpy") is np
    with pytest.raises(ValueError, match="backend must be one of"):
        backend.resolve("torch")
    monkeypatch.setenv("NQM_BACKEND", "numpy")
    assert backend.resolve("cupy") is np  # the environment wins
    monkeypatch.setenv("NQM_BACKEND", "tpu")
    with pytest.raises(ValueError, match="NQM_BACKEND must be one of"):
        backend.resolve("numpy")


def test_auto_falls_back_to_numpy_with_one_notice_and_cupy_raises(monkeypatch, capsys):
    monkeypatch.delenv("NQM_BACKEND", raising=False)
    monkeypatch.setattr(backend, "cupy_status", lambda: (None, "CuPy finds no CUDA device"))
    backend.notice_once.cache_clear()
    assert backend.resolve("auto") is np
    assert backend.resolve("auto") is np
    err = capsys.readouterr().err
    assert err.count("nqm: backend 'auto' uses NumPy: CuPy finds no CUDA device") == 1
    with pytest.raises(backend.BackendUnavailable, match="no CUDA device"):
        backend.resolve("cupy")
    with pytest.raises(backend.BackendUnavailable):
        nqm.simulate(P, 0.5, 8, 5, 4, backend="cupy")


def _fake_cupy(device_count, compiles):
    runtime = types.SimpleNamespace(getDeviceCount=device_count)

    class RawModule:
        def __init__(self, code, options):
            assert "nqm_run_f32" in code

        def compile(self):
            if not compiles:
                raise RuntimeError("nvrtc: cannot open source file cuda_fp16.h")

    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime), RawModule=RawModule)


def _no_device():
    raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")


@pytest.mark.parametrize(
    "fake, reason",
    [
        (None, "does not import"),
        (_fake_cupy(_no_device, True), "no CUDA device"),
        (_fake_cupy(lambda: 0, True), "no CUDA device"),
        (_fake_cupy(lambda: 1, False), "cannot compile"),
    ],
)
def test_detection_survives_a_cupy_that_cannot_run(monkeypatch, fake, reason):
    monkeypatch.setitem(sys.modules, "cupy", fake)  # None makes "import cupy" fail
    backend.kernels.cache_clear()
    try:
        module, why = backend.cupy_status.__wrapped__()
    finally:
        backend.kernels.cache_clear()
    assert module is None and reason in why


def test_replica_batches_fit_the_free_memory_or_fail_clearly():
    assert backend.replica_batch(1000, 40_000_000, 16 * 2**30) == 343
    assert backend.replica_batch(10, 1000, 2**30) == 10
    with pytest.raises(MemoryError, match="one replica needs"):
        backend.replica_batch(10, 2**31, 2**30)


# -- the CUDA source, compiled for the H200's architecture ---------------------------------------------------


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_kernels_compile_for_sm90_without_register_spills(tmp_path):
    out = subprocess.run(
        [
            "nvcc",
            "-cubin",
            "-arch=sm_90",
            "-std=c++14",
            "-Xptxas",
            "-v",
            "-o",
            str(tmp_path / "fused.cubin"),
            str(backend.KERNEL_SOURCE_PATH),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    log = out.stdout + out.stderr
    entries = re.findall(r"Compiling entry function '(\w+)'", log)
    assert set(entries) == {
        "nqm_philox_words",
        "nqm_init_f32",
        "nqm_init_f64",
        "nqm_run_f32",
        "nqm_run_f64",
        "nqm_adaptive_run_f32",
        "nqm_adaptive_run_f64",
    }
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    # one line per entry, and one per device subroutine they call (Adam's accurate pow)
    assert len(spills) >= len(entries) and all(s == ("0", "0") for s in spills), log
    assert "stack frame" in log and not re.search(r"[1-9]\d* bytes stack frame", log), log


# -- on a GPU -------------------------------------------------------------------------------------------------


@pytest.fixture
def cupy():
    module, reason = backend.cupy_status()
    if module is None:
        pytest.skip(f"no usable GPU: {reason}")  # only the gpu-marked tests below use this fixture
    return module


@pytest.mark.gpu
def test_gpu_philox_words_equal_numpy(cupy):
    counter = np.array([c for c, _, _ in KAT], dtype=np.uint32)
    key = np.array([k for _, k, _ in KAT], dtype=np.uint32)
    out = cupy.zeros_like(cupy.asarray(counter))
    backend.kernels(cupy).get_function("nqm_philox_words")(
        (1,), (32,), (cupy.asarray(counter), cupy.asarray(key), out, np.int64(3))
    )
    assert out.get().tolist() == [list(e) for _, _, e in KAT]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 1e-4)])
@EACH_OPTIMISER
def test_fused_kernel_equals_its_numpy_mirror(cupy, dtype, rtol, opt):
    common = dict(seed=3, at=[0, 1, 7, 50], dtype=dtype, keep_losses=True)
    gpu = nqm.simulate(P, opt, 8, 50, 64, backend="cupy", **common)
    cpu = nqm.simulate(P, opt, 8, 50, 64, backend="numpy", generator="philox", **common)
    np.testing.assert_allclose(gpu.losses, cpu.losses, rtol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "opt, dtype, rtol",
    [
        (optim.sign_sgd(0.02), np.float64, 1e-12),
        (optim.signum(0.02, 0.8), np.float64, 1e-12),
        (optim.rmsprop(0.01, 0.9, 1e-3), np.float32, 1e-4),
        (optim.adamw(0.02, 0.8, 0.95, 1e-3, weight_decay=0.5), np.float64, 1e-12),
        (optim.adam(0.02, 0.8, 0.95, 1e-3), np.float32, 1e-4),
    ],
)
def test_adaptive_kernel_equals_its_numpy_mirror(cupy, opt, dtype, rtol):
    """nqm_adaptive_run against the loop over the optimiser's own ``apply`` on the same counters. Sign-based ones in
    float64 only: the GPU's float32 normals differ from NumPy's in the last bits, enough to flip a rare sign."""
    common = dict(seed=3, at=[0, 1, 7, 50], dtype=dtype, keep_losses=True)
    gpu = nqm.simulate(P, opt, 8, 50, 64, backend="cupy", **common)
    cpu = nqm.simulate(P, opt, 8, 50, 64, backend="numpy", generator="philox", **common)
    np.testing.assert_allclose(gpu.losses, cpu.losses, rtol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "opt",
    [
        optim.sgd(0.5, weight_decay=0.2),
        optim.heavy_ball(0.4, 0.6, weight_decay=0.2, decoupled=True),
        optim.adamw(0.02, 0.8, 0.95, 1e-3, weight_decay=0.5),
    ],
    ids=["sgd coupled", "heavy ball decoupled", "adamw"],
)
@pytest.mark.parametrize("rotated", [False, True])
def test_gpu_weight_decay_pulls_towards_zero_as_numpy_does(cupy, opt, rotated):
    """An optimum θ* ≠ 0: the kernels' drift / pull (diagonal) and the general path's decay on θ (rotated), against
    NumPy on the same counters."""
    q = spectra.random_rotation(P.d, seed=1) if rotated else None
    p = nqm.NoisyQuadratic(P.h, P.c, basis=q, optimum=np.random.default_rng(2).standard_normal(P.d))
    common = dict(seed=5, at=[0, 1, 7, 50], keep_losses=True)
    gpu = nqm.simulate(p, opt, 8, 50, 16, backend="cupy", **common)
    cpu = nqm.simulate(p, opt, 8, 50, 16, backend="numpy", generator="philox", **common)
    np.testing.assert_allclose(gpu.losses, cpu.losses, rtol=1e-12 if q is None else 1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("opt", [optim.adam(0.02, 0.8, 0.95, 1e-3), optim.normalized_sgd(0.05)], ids=["adam", "nsgd"])
def test_gpu_general_path_runs_nonlinear_updates(cupy, opt):
    """A rotated problem runs the optimiser's ``update`` on CuPy arrays (ufuncs with ``out=``), against NumPy."""
    rotated = nqm.NoisyQuadratic(P.h, P.c, basis=spectra.random_rotation(P.d, seed=1))
    common = dict(seed=4, at=[0, 5, 20], keep_losses=True)
    gpu = nqm.simulate(rotated, opt, 8, 20, 16, backend="cupy", **common)
    cpu = nqm.simulate(rotated, opt, 8, 20, 16, backend="numpy", generator="philox", **common)
    np.testing.assert_allclose(gpu.losses, cpu.losses, rtol=1e-9)  # cuBLAS and OpenBLAS sum in other orders


@pytest.mark.gpu
def test_gpu_chunking_does_not_change_the_result(cupy):
    opt = optim.ema(optim.nesterov(0.5, 0.4), 0.7)
    args = (P, opt, 8.0, 23, 10, 5, np.ones(P.d), np.array([0, 1, 4, 5, 22, 23]), np.float32)
    whole, _ = simulate_counter(*args, cupy)
    parts, _ = simulate_counter(*args, cupy, chunk_steps=3, batch_rows=4)
    assert np.array_equal(whole, parts)


@pytest.mark.gpu
def test_gpu_one_step_equals_numpy_on_the_same_counters(cupy):
    theta = np.linspace(-1, 1, P.d)
    a = nqm.one_step_improvement(P, theta, [[0.5], [1.0]], [[4.0, 64.0]], 64, seed=2, backend="cupy")
    b = nqm.one_step_improvement(P, theta, [[0.5], [1.0]], [[4.0, 64.0]], 64, seed=2, generator="philox")
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-10)


@pytest.mark.gpu
def test_gpu_skip_ahead_matches_numpy(cupy):
    opt = optim.nesterov(0.6, 0.5)
    a = simulate_checkpoints(P, opt, 8, [0, 100, 10**5], 64, seed=1, backend="cupy")
    b = simulate_checkpoints(P, opt, 8, [0, 100, 10**5], 64, seed=1, backend="numpy")
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-10)
