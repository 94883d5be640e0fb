"""The compiled fused step of elementwise optimisers (nqm.montecarlo.fused): the same numbers as NumPy's passes, bit
for bit, for every elementwise optimiser in float64 and float32; used where numba is, and not with NQM_COMPILED=0."""

import numpy as np
import pytest

import nqm
from nqm import optim
from nqm.montecarlo.fused import fused_step

pytest.importorskip("numba")

OPTIMISERS = {
    "sign": optim.sign_sgd(0.01),
    "signum": optim.signum(0.01, 0.9),
    "rmsprop": optim.rmsprop(0.003, 0.99, 1e-8),
    "adam": optim.adam(0.01, 0.9, 0.999, 1e-8),
    "adamw": optim.adamw(0.01, 0.9, 0.99, 1e-6, weight_decay=0.5),
    "lion": optim.lion(0.01, 0.9, 0.99),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", OPTIMISERS)
def test_the_fused_step_gives_numpy_s_numbers_bit_for_bit(name, dtype, monkeypatch):
    """Two tiles wide (d = 20 000 > 2¹⁴ coordinates per tile), an optimum θ* ≠ 0 (AdamW's pull), losses at
    every recorded step and the final states equal with and without the compiled loop."""
    rng = np.random.default_rng(3)
    d = 20_000
    h = 1.0 / np.arange(1, d + 1)
    p = nqm.NoisyQuadratic(h, h * rng.uniform(0.5, 2, d), optimum=rng.standard_normal(d))
    opt = OPTIMISERS[name]
    runs = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("NQM_COMPILED", flag)
        runs[flag] = nqm.simulate(p, opt, 4, 30, 3, seed=5, dtype=dtype, keep_state=True, keep_losses=True)
    assert np.array_equal(runs["0"].losses, runs["1"].losses)
    assert np.array_equal(runs["0"].state, runs["1"].state)
    assert runs["1"].state.dtype == np.float64 and not np.allclose(runs["1"].state, 0)


def test_the_fused_step_is_used_where_numba_is_and_not_with_nqm_compiled_0(monkeypatch):
    monkeypatch.setenv("NQM_COMPILED", "1")
    assert all(fused_step(opt) is not None for opt in OPTIMISERS.values())
    assert fused_step(optim.normalized_sgd(0.1)) is None  # its update couples the coordinates
    monkeypatch.setenv("NQM_COMPILED", "0")
    assert fused_step(OPTIMISERS["adam"]) is None


def test_the_fused_step_runs_its_optimiser_s_own_definition():
    """One element by hand: the kernel forms g = σz + hx and applies the class's ``step`` to it (Adam at t = 1 from
    m = v = 0: m = (1 − β₁)g, v = (1 − β₂)g², x' = x − ε·g/(|g| + eps) up to the bias corrections)."""
    opt = OPTIMISERS["adam"]
    x, m, v = np.array([[0.5]]), np.zeros((1, 1)), np.zeros((1, 1))
    z, h, sd = np.array([[0.3]]), np.array([2.0]), np.array([0.1])
    fused_step(opt)(x, (m, v), z, h, sd, opt.constants(1))
    g = 0.1 * 0.3 + 2.0 * 0.5
    assert m[0, 0] == pytest.approx(0.1 * g, rel=1e-15)
    assert v[0, 0] == pytest.approx(0.001 * g * g, rel=1e-15)
    assert x[0, 0] == pytest.approx(0.5 - 0.01 * g / (abs(g) + 1e-8), rel=1e-12)
