"""Piecewise-constant schedules: gradient, exact integer loss, the lower bound, and Zhang et al.'s Z6."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nqm
from nqm import dynamics
from nqm.dynamics.studies.schedules import PiecewiseLoss, optimal_piecewise_schedule


def loss_by_steps(p, lr, steps, batch):
    """E[L] after running each piece step by step with the one-step moment recursion."""
    v = np.ones(p.d)
    for e, n in zip(lr, steps):
        for _ in range(int(n)):
            v = (1 - e * p.h) ** 2 * v + e**2 * p.c / batch
    return 0.5 * p.h @ v


@given(st.lists(st.floats(0.01, 1.9), min_size=1, max_size=4), st.floats(1.0, 1e3))
def test_gradient_matches_finite_differences(lrs, batch):
    p = nqm.NoisyQuadratic.zhang2019(50)
    model = PiecewiseLoss(p, batch, 1.0, None)
    log_eps = np.log(lrs)
    log_n = np.log(np.linspace(3.0, 40.0, len(lrs)))
    loss, d_eps, d_n = model.loss_and_gradient(log_eps, log_n)
    h = 1e-6
    # central differences: truncation O(h²), round-off about ε_machine·|L|/h (a loss of 5 with a gradient of 4e-5
    # loses five digits of the difference); the tolerance allows both and nothing more
    round_off = 4 * np.finfo(float).eps * abs(loss) / h
    for i in range(len(lrs)):
        e = np.eye(len(lrs))[i] * h
        fd_eps = (model.loss_and_gradient(log_eps + e, log_n)[0] - model.loss_and_gradient(log_eps - e, log_n)[0]) / (
            2 * h
        )
        fd_n = (model.loss_and_gradient(log_eps, log_n + e)[0] - model.loss_and_gradient(log_eps, log_n - e)[0]) / (
            2 * h
        )
        assert d_eps[i] == pytest.approx(fd_eps, rel=1e-5, abs=1e-12 + round_off)
        assert d_n[i] == pytest.approx(fd_n, rel=1e-5, abs=1e-12 + round_off)


@pytest.mark.parametrize("batch", [2.0, 64.0, 4096.0])
def test_schedule_is_exact_and_respects_the_lower_bound(batch):
    p = nqm.NoisyQuadratic.zhang2019(40)  # C = H
    target = 0.05
    const = dynamics.optimal_steps_to_target(p, target, [batch])
    one = optimal_piecewise_schedule(p, target, batch, 1)
    assert one.total_steps == const.steps[0]
    for k in (2, 3):
        s = optimal_piecewise_schedule(p, target, batch, k)
        assert s.total_steps <= const.steps[0]
        # the integer schedule meets the target exactly, and one step less does not
        assert loss_by_steps(p, s.lr, s.steps, batch) == pytest.approx(s.loss, rel=1e-9)
        assert s.loss <= target
        shorter = s.steps.copy()
        shorter[np.nonzero(shorter)[0][-1]] -= 1
        assert loss_by_steps(p, s.lr, shorter, batch) > target
        # no schedule beats the risk of the sample mean of all B·t gradients: t ≥ d/(2·target·B)
        assert s.total_steps >= p.d / (2 * target * batch)
        assert np.all(s.lr < 2.0 / p.h.max())


def test_schedules_close_the_gap_at_small_batch_only():
    """Zhang et al. Z6 on a smaller copy of their set-up: at small B, 3 pieces close most of the gap between
    the constant schedule and the lower bound; at large B they change little, and start at the stability edge."""
    p = nqm.NoisyQuadratic.zhang2019(1000)
    small, large = 4.0, 2.0**16
    const = dynamics.optimal_steps_to_target(p, 0.01, [small, large]).steps
    bound = p.d / (2 * 0.01 * small)
    s = optimal_piecewise_schedule(p, 0.01, small, 3)
    assert (const[0] - s.total_steps) / (const[0] - bound) > 0.5
    big = optimal_piecewise_schedule(p, 0.01, large, 3)
    assert big.total_steps > 0.9 * const[1]


def test_bad_pieces_and_tiny_targets():
    p = nqm.NoisyQuadratic.zhang2019(20)
    with pytest.raises(ValueError, match="pieces"):
        optimal_piecewise_schedule(p, 0.05, 4, 0)
    # any target is reachable with a small enough step; 10¹¹ steps are made integer without a long loop
    s = optimal_piecewise_schedule(p, 1e-9, 1, 2)
    assert 1e10 < s.total_steps < np.inf and s.loss <= 1e-9


def test_adaptive_batch_follows_the_noise_scale_and_costs_what_it_says():
    """B_t = √(r·B_noise(t)) with B_noise(t) = tr(HΣ)/tr(H³M_t) from the exact moments; examples = Σ B_t; the
    moments follow the SGD recursion under (ε_t, B_t); a larger exchange rate buys fewer steps with more examples."""
    p = nqm.NoisyQuadratic.zhang2019(200)
    r = 50.0
    a = dynamics.adaptive_batch_schedule(p, r, 0.02)
    v = np.ones(p.d)
    for eps, b, loss in zip(a.lr, a.batch_sizes, a.loss[1:]):
        assert b == pytest.approx(max(1.0, np.sqrt(r * p.trace_h_sigma / (p.h**3 @ v))), rel=1e-12)
        v = (1 - eps * p.h) ** 2 * v + eps**2 * p.c / b
        assert loss == pytest.approx(0.5 * p.h @ v, rel=1e-12)
    assert a.steps == a.lr.size and a.loss[-1] <= 0.02 < a.loss[-2]
    assert a.examples == pytest.approx(a.batch_sizes.sum())
    assert np.all(np.diff(a.batch_sizes) > 0)  # B_noise grows as the run converges
    more = dynamics.adaptive_batch_schedule(p, 10 * r, 0.02)
    assert more.steps < a.steps and more.examples > a.examples
    with pytest.raises(ValueError, match="exchange_rate"):
        dynamics.adaptive_batch_schedule(p, 0.0, 0.02)


def test_constant_batch_greedy_reports_examples():
    p = nqm.NoisyQuadratic.zhang2019(50)
    g = dynamics.greedy_schedule(p, 8, target=0.05)
    assert g.examples == 8 * g.steps and np.all(g.batch_sizes == 8)
