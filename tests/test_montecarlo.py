"""Monte Carlo: statistics against exact dynamics (with negative controls), noise modes, determinism.

Statistical assertions use a Bonferroni z over their cells at α = 1e-4 per test (about ten such tests:
α ≈ 1e-3 for the file), with fixed seeds; each has a planted-error control that must be rejected."""

import contextlib
import io

import numpy as np
import pytest

import nqm
from nqm import dynamics, optim, spectra, theory
from nqm.noise import EXAMPLE_DISTRIBUTIONS, unit_examples
from validation.stats import critical_z

ALPHA_TEST = 1e-4


def max_z(measured, se, predicted):
    return float(np.max(np.abs((np.asarray(measured) - predicted) / se)))


def assert_agrees_and_control_rejected(measured, se, predicted, planted):
    z = critical_z(np.size(measured), ALPHA_TEST)
    assert max_z(measured, se, predicted) <= z, "simulation disagrees with theory"
    assert max_z(measured, se, planted) > z, "the planted error was not detected: the test has no power"


OPTIMISERS = {
    "sgd": optim.sgd(1.0),
    "heavy_ball": optim.heavy_ball(0.2, 0.8),
    "ema": optim.ema(optim.sgd(1.0), 0.9),
    "precond": optim.sgd(1.0, nqm.NoisyQuadratic.zhang2019(300).h ** -0.5),
    "nesterov": optim.nesterov(0.2, 0.8),
    "nesterov+ema": optim.ema(optim.nesterov(0.3, 0.6), 0.8),
}


@pytest.mark.parametrize("opt", list(OPTIMISERS.values()), ids=list(OPTIMISERS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_trajectory_matches_exact_dynamics(opt, dtype):
    p = nqm.NoisyQuadratic.zhang2019(300)
    sim = nqm.simulate(p, opt, 8, 200, 300, seed=11, dtype=dtype)
    exact = dynamics.expected_loss(p, opt, 8, 200, at=sim.steps)
    planted = dynamics.expected_loss(nqm.NoisyQuadratic(p.h, 2 * p.c), opt, 8, 200, at=sim.steps)
    assert_agrees_and_control_rejected(sim.mean, sim.sem, exact, planted)


@pytest.mark.parametrize("opt", [optim.nesterov(0.2, 0.8), optim.ema(optim.nesterov(0.3, 0.6), 0.8)])
def test_nesterov_on_a_rotated_dense_problem_matches_exact_dynamics(opt):
    """The general path runs Nesterov's own update (PyTorch's velocity form) with matrix products; exact
    dynamics use its (θ, εv) transition on Σ's diagonal. The planted control: heavy ball at the same (ε, β)."""
    h = spectra.log_uniform(24, 0.05, 1.0)
    p = nqm.NoisyQuadratic(h, sigma=spectra.misaligned_sigma(h, 1.0, seed=2), basis=spectra.random_rotation(24, seed=4))
    sim = nqm.simulate(p, opt, 2, 120, 1000, seed=3)
    exact = dynamics.expected_loss(p, opt, 2, 120, at=sim.steps)
    core, gamma = optim.split_average(opt)
    planted = optim.ema(optim.heavy_ball(core.lr, core.momentum), gamma)
    assert_agrees_and_control_rejected(
        sim.mean[1:], sim.sem[1:], exact[1:], dynamics.expected_loss(p, planted, 2, 120, at=sim.steps)[1:]
    )


def test_dense_sigma_trajectory_depends_only_on_its_diagonal():
    h = spectra.log_uniform(24, 0.05, 1.0)
    p = nqm.NoisyQuadratic(h, sigma=spectra.misaligned_sigma(h, 1.0, seed=2))
    sim = nqm.simulate(p, 1.0, 2, 100, replicas=1000, seed=3)
    exact = dynamics.expected_loss(p, 1.0, 2, 100, at=sim.steps)
    planted = dynamics.expected_loss(p, 1.0, 1, 100, at=sim.steps)  # 1/B missing
    assert_agrees_and_control_rejected(sim.mean, sim.sem, exact, planted)


@pytest.mark.parametrize("name", sorted(EXAMPLE_DISTRIBUTIONS))
def test_per_example_one_step_law(name):
    p = nqm.NoisyQuadratic(spectra.log_uniform(8, 0.2, 1.0), spectra.log_uniform(8, 0.2, 1.0))
    th = np.linspace(1, 0.3, 8)
    b = np.array([1, 3, 10, 30])
    eps = theory.optimal_step(p, th, b) * 1.5
    r = nqm.one_step_improvement(p, th, eps, b, 4000, seed=5, per_example=name)
    gg, ghg, tr = theory.step_moments(p, th)
    planted = eps * gg - 0.5 * eps**2 * (ghg + 2 * tr / b)
    assert_agrees_and_control_rejected(r.mean, r.sem, theory.expected_improvement(p, th, eps, b), planted)


@pytest.mark.parametrize("name", sorted(EXAMPLE_DISTRIBUTIONS))
def test_example_distributions_have_zero_mean_and_unit_variance(name):
    x = unit_examples(np.random.default_rng(0), name, 200_000)
    n = x.size
    z = critical_z(2, ALPHA_TEST)
    assert abs(x.mean()) <= z / np.sqrt(n)
    fourth = np.mean((x**2 - 1) ** 2)  # Var(x²), for the SE of the variance estimate
    assert abs(np.mean(x**2) - 1) <= z * np.sqrt(fourth / n)
    assert abs(np.mean(x**2) - 2) > z * np.sqrt(fourth / n)  # control: "noise variance 2×" is rejected


def test_simulate_result_fields_and_record():
    p = nqm.NoisyQuadratic.zhang2019(10)
    r = nqm.simulate(p, 0.5, 2, 1000, replicas=4, keep_losses=True, keep_state=True)
    assert r.steps[0] == 0 and r.steps[-1] == 1000 and np.all(np.diff(r.steps) > 0)
    assert r.mean.shape == r.sem.shape == r.steps.shape
    assert r.losses.shape == (4, r.steps.size) and r.state.shape == (4, 10) and r.n == 4
    np.testing.assert_allclose(r.losses[:, -1], 0.5 * (r.state**2) @ p.h, rtol=1e-12)


@pytest.mark.parametrize("rotated", [False, True])
def test_float32_state_accumulates_loss_in_float64(rotated):
    """A float32 state's loss is taken from float64 squares summed in float64: with θ ~ 1e-25 every square (1e-50)
    underflows to 0 in float32, so the loss is right only if it is accumulated in float64 (no noise: the run is
    (1 − εh)ᵗθ₀ exactly, and float32 rounding of the state alone costs 1e-6)."""
    h = nqm.NoisyQuadratic.zhang2019(50).h
    basis = np.linalg.qr(np.random.default_rng(0).normal(size=(50, 50)))[0] if rotated else None
    p = nqm.NoisyQuadratic(h, 0 * h, basis=basis)
    theta0 = np.full(50, 1e-25)
    a = nqm.simulate(p, 0.5, 2, 5, replicas=3, theta0=theta0, dtype=np.float32)
    assert a.mean.dtype == np.float64
    exact = dynamics.expected_loss(p, 0.5, 2, 5, at=a.steps, init_var=theta0**2)
    assert 0 < exact[-1] < np.finfo(np.float32).smallest_subnormal  # a loss float32 cannot hold
    np.testing.assert_allclose(a.mean, exact, rtol=1e-6)


def test_progress_is_reported_on_stderr_when_asked():
    p = nqm.NoisyQuadratic.zhang2019(10)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        nqm.simulate(p, 0.5, 2, 200, replicas=2, progress=True)
    assert "nqm.simulate" in err.getvalue() and "100.0%" in err.getvalue()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(replicas=1), "replicas"),
        (dict(steps=2.5), "steps"),
        (dict(backend="torch"), "backend must be one of"),
        (dict(per_example="cauchy"), "distribution"),
        (dict(per_example="gaussian", batch_size=2.5), "integer"),
        (dict(at=[0, 99]), "at must"),
        (dict(dtype=np.int32), "dtype"),
        (dict(theta0=np.ones(3)), "theta0"),
        (dict(opt=-1.0), "step size"),
        (dict(opt="sgd"), "optimiser"),
        (dict(opt=optim.sgd(0.1, np.ones(4))), "precond"),
    ],
)
def test_simulate_rejects_bad_input(kwargs, message):
    p = nqm.NoisyQuadratic.zhang2019(5)
    args = dict(opt=0.1, batch_size=2, steps=10, replicas=2) | kwargs
    with pytest.raises((ValueError, TypeError), match=message):
        nqm.simulate(p, **args)
