"""The critical batch size by each definition (nqm.dynamics.studies.critical), checked against independent
computations."""

import numpy as np
import pytest

import nqm
from nqm import dynamics, info


def test_the_linear_scaling_limit_on_an_exact_hyperbola_is_the_derived_formula():
    """S(B) = S_min + E_min/B ⇒ S(B)·B/(S(B₀)·B₀) = 1 + τ at B = (1 + τ)B₀ + τ·E_min/S_min (derivation in the
    module docstring); the bisection knows nothing of the hyperbola."""
    s_min, e_min = 300.0, 6e5
    for b0, tau in ((1.0, 0.2), (4.0, 0.5), (64.0, 0.1)):
        found = dynamics.linear_scaling_limit(lambda b: s_min + e_min / b, b0, tau, high=1e7)
        assert found == pytest.approx((1 + tau) * b0 + tau * e_min / s_min, rel=2e-6)
    assert dynamics.linear_scaling_limit(lambda b: 1e6 / b, 1.0, 0.2, high=1e6) == np.inf  # perfect scaling


@pytest.fixture(scope="module")
def zhang_runs():
    p = nqm.NoisyQuadratic.zhang2019(300)
    return p, dynamics.critical_batch_sizes(p, 0.02)


def test_the_definitions_on_the_optimal_runs(zhang_runs):
    p, r = zhang_runs
    assert r.mccandlish == pytest.approx(r.e_min / r.s_min)
    assert r.linear_scaling_from_frontier == pytest.approx(1.2 * 1.0 + 0.2 * r.mccandlish)

    # Zhang et al. 2024: the first batch size past 20% above linear scaling, on fresh solver calls
    def examples(b):
        return dynamics.optimal_steps_to_target(p, 0.02, [b]).steps[0] * b

    limit = 1.2 * examples(1.0)
    assert examples(r.linear_scaling) > limit >= examples(r.linear_scaling * (1 - 3e-6))


def test_the_noise_scales_against_a_step_by_step_recursion(zhang_runs):
    """E[θ_i(t)²] by V ← (1 − εh)²V + ε²c/B step by step (no closed form), then B_noise(t) = tr(HΣ)/Σh³V and its
    average in full-batch-equivalent steps ds = dt/(1 + B_noise/B)."""
    p, r = zhang_runs
    run = dynamics.optimal_steps_to_target(p, 0.02, [r.run_batch])
    lr, steps, b = float(run.lr[0]), int(run.steps[0]), r.run_batch
    v, b_noise = np.ones(p.d), []
    for _ in range(steps + 1):
        b_noise.append(p.trace_h_sigma / (p.h**3 @ v))
        v = (1 - lr * p.h) ** 2 * v + lr**2 * p.c / b
    b_noise = np.array(b_noise)
    ds = 1 / (1 + b_noise[:-1] / b)
    assert r.b_noise_start == pytest.approx(info.summary(p)["B_noise_init"], rel=1e-12)
    assert r.b_noise_end == pytest.approx(b_noise[-1], rel=1e-9)
    assert r.b_noise_mean == pytest.approx(b_noise[:-1] @ ds / ds.sum(), rel=1e-9)


def test_other_families_give_the_frontier_definitions_without_noise_scales():
    p = nqm.NoisyQuadratic.zhang2019(20)
    r = dynamics.critical_batch_sizes(p, 0.05, family="heavy_ball", batch_sizes=2.0 ** np.arange(0, 10))
    assert r.family == "heavy_ball" and np.isfinite(r.mccandlish) and np.isfinite(r.linear_scaling)
    assert r.b_noise_mean is None and r.b_noise_start is None


def test_bad_arguments_are_named():
    p = nqm.NoisyQuadratic.zhang2019(20)
    for kwargs, name in (({"tolerance": 0.0}, "tolerance"), ({"reference_batch": 0.5}, "batch"), ({}, "target")):
        with pytest.raises(ValueError, match=name):
            dynamics.critical_batch_sizes(p, -1.0 if name == "target" else 0.05, **kwargs)


@pytest.mark.parametrize(
    "args, error, name",
    [
        ((-1.0, 1000.0, 1.0, 0.2), ValueError, "s_min"),
        ((100.0, -5.0, 1.0, 0.2), ValueError, "e_min"),
        ((100.0, 1000.0, 0.0, 0.2), ValueError, "reference_batch"),
        ((100.0, 1000.0, 1.0, -1.0), ValueError, "tolerance"),
        ((100.0, 1000.0, 1.0, 1j), TypeError, "tolerance"),
        (("100", 1000.0, 1.0, 0.2), TypeError, "s_min"),
    ],
)
def test_the_frontiers_linear_scaling_limit_refuses_what_is_not_a_frontier(args, error, name):
    with pytest.raises(error, match=name):
        dynamics.linear_scaling_on_frontier(*args)
    assert np.isnan(dynamics.linear_scaling_on_frontier(np.nan, 1000.0, 1.0, 0.2))  # an unfitted frontier: NaN


def test_a_long_runs_average_noise_scale_against_every_step():
    """A run of ~2·10⁵ steps, past the every-step sum (quadrature beyond 2¹⁶ steps): the same recursion, every step."""
    p = nqm.NoisyQuadratic.zhang2019(50)
    r = dynamics.critical_batch_sizes(p, 1e-6, batch_sizes=2.0 ** np.arange(0, 12))
    run = dynamics.optimal_steps_to_target(p, 1e-6, [r.run_batch])
    lr, steps, b = float(run.lr[0]), int(run.steps[0]), r.run_batch
    assert steps > dynamics.studies.critical.EXACT_STEPS
    v, weighted, total = np.ones(p.d), 0.0, 0.0
    a2, q = (1 - lr * p.h) ** 2, lr**2 * p.c / b
    for _ in range(steps):
        b_noise = p.trace_h_sigma / (p.h**3 @ v)
        ds = 1 / (1 + b_noise / b)
        weighted, total = weighted + b_noise * ds, total + ds
        v = a2 * v + q
    assert r.b_noise_end == pytest.approx(p.trace_h_sigma / (p.h**3 @ v), rel=1e-9)
    assert r.b_noise_mean == pytest.approx(weighted / total, rel=1e-9)
