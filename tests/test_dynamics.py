"""Exact expected dynamics: closed forms, published steady states, numerical stability."""

import numpy as np
import pytest

import nqm
from nqm import dynamics, optim


@pytest.fixture
def zhang():
    return nqm.NoisyQuadratic.zhang2019(500)


def test_hand_worked_sgd():
    p = nqm.NoisyQuadratic([2.0], c=[4.0])
    # V_1 = (1 − 0.25·2)²·1 + 0.25²·4/2 = 0.25 + 0.125; E[L_1] = ½·2·V_1
    assert dynamics.expected_loss(p, 0.25, 2, 1)[1] == pytest.approx(0.375)


def test_sgd_steady_state_matches_closed_form(zhang):
    lr, b = 1.5, 16
    expected = np.sum(lr * zhang.c / (2 * b * (2 - lr * zhang.h)))  # Zhang et al. 2019, per-coordinate risk
    assert dynamics.steady_state_loss(zhang, lr, b) == pytest.approx(expected, rel=1e-12)
    # and E[L_t] converges to it
    assert dynamics.expected_loss(zhang, lr, b, 10**7, at=[10**7])[0] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("beta", [0.0, 0.5, 0.9, 0.99])
def test_momentum_steady_state_matches_zhang(zhang, beta):
    lr, b = 0.3 * (1 - beta), 8
    risk = (1 + beta) * lr * zhang.c / (2 * b * (2 * beta + 2 - lr * zhang.h) * (1 - beta))
    assert dynamics.steady_state_loss(zhang, optim.heavy_ball(lr, beta), b) == pytest.approx(risk.sum(), rel=1e-9)


@pytest.mark.parametrize("gamma", [0.3, 0.9, 0.999])
def test_ema_steady_state_reduction_matches_zhang(zhang, gamma):
    lr, b = 0.8, 8
    a = 1 - lr * zhang.h
    sgd = lr * zhang.c / (2 * b * (2 - lr * zhang.h))
    factor = (1 - gamma) * (1 + a * gamma) / ((1 + gamma) * (1 - a * gamma))
    steady = dynamics.steady_state_loss(zhang, optim.ema(optim.sgd(lr), gamma), b)
    assert steady == pytest.approx(np.sum(sgd * factor), rel=1e-8)
    assert np.all(factor < 1)


def test_unstable_step_diverges_to_inf(zhang):
    assert dynamics.steady_state_loss(zhang, 2.5, 1) == np.inf
    assert dynamics.expected_loss(zhang, 2.5, 1, 10**6, at=[10**6])[0] == np.inf
    # heavy ball is stable up to ελ < 2(1 + β) = 3 for β = ½
    assert np.isfinite(dynamics.expected_loss(zhang, optim.heavy_ball(2.5, 0.5), 1, 10**6, at=[10**6])[0])
    assert dynamics.expected_loss(zhang, optim.heavy_ball(3.1, 0.5), 1, 10**6, at=[10**6])[0] == np.inf
    # Nesterov: stable iff ελ < 2(1 + β)/(1 + 2β) = 1.5 for β = ½
    assert np.isfinite(dynamics.expected_loss(zhang, optim.nesterov(1.45, 0.5), 1, 10**6, at=[10**6])[0])
    assert dynamics.expected_loss(zhang, optim.nesterov(1.55, 0.5), 1, 10**6, at=[10**6])[0] == np.inf
    # at the edge εh = 2 the variance grows linearly: V_t = V_0 + t·ε²c/B
    edge = nqm.NoisyQuadratic([1.0], c=[1.0])
    assert dynamics.expected_loss(edge, 2.0, 1, 10)[-1] == pytest.approx(0.5 * (1 + 10 * 4))


def test_long_runs_in_high_dimension_are_finite_and_accurate():
    """10⁶ steps, d = 10⁶: checkpoints only, no overflow; SGD's and heavy ball's closed forms agree as β → 0."""
    p = nqm.NoisyQuadratic.zhang2019(10**6)
    at = [0, 1, 1000, 10**5, 10**6]
    sgd = dynamics.expected_loss(p, 1.0, 100, 10**6, at=at)
    assert np.all(np.isfinite(sgd)) and np.all(np.diff(sgd) < 0)
    assert sgd[0] == pytest.approx(0.5 * p.h.sum())
    tiny = dynamics.expected_loss(p, optim.heavy_ball(1.0, 1e-12), 100, 10**6, at=at)
    np.testing.assert_allclose(tiny, sgd, rtol=1e-8)


def test_the_powered_map_in_high_dimension(monkeypatch):
    """10⁶ steps, d = 10⁵ (25 blocks of coordinates, the last one partial): an optimiser with no closed form (EMA of
    heavy ball) runs the powered moment map, which a spy confirms, and with β, γ → 0 it reduces to SGD's closed
    form."""
    from nqm.dynamics.moments import expected

    calls = []
    powered = expected.powered_second_moments
    monkeypatch.setattr(expected, "powered_second_moments", lambda *a: calls.append(a[1].size) or powered(*a))
    p = nqm.NoisyQuadratic.zhang2019(10**5)
    at = [0, 1, 1000, 10**5, 10**6]
    sgd = dynamics.expected_loss(p, 1.0, 100, 10**6, at=at)
    near_sgd = dynamics.expected_loss(p, optim.ema(optim.heavy_ball(1.0, 1e-12), 1e-12), 100, 10**6, at=at)
    assert sum(calls) == p.d and len(calls) > 1  # every coordinate, block by block
    np.testing.assert_allclose(near_sgd, sgd, rtol=1e-8)


def test_no_cancellation_when_eps_h_is_tiny():
    """εh = 1e-12: V_t = V_0(1−εh)^{2t} + ε²c/B·(1 − (1−εh)^{2t})/(εh(2−εh)) ≈ V_0(1 − 2tεh) + tε²c/B."""
    p = nqm.NoisyQuadratic([1e-12], c=[1.0])
    t = 1000
    got = dynamics.expected_loss(p, 1.0, 1, t, at=[t])[0]
    v = (1 - 2 * t * 1e-12) + t * 1.0  # second-order terms are O(t²ε²h²) ~ 1e-18
    assert got == pytest.approx(0.5 * 1e-12 * v, rel=1e-12)


def test_at_may_be_unsorted_and_init_var_per_coordinate(zhang):
    v0 = np.linspace(0.5, 2, zhang.d)
    opt = optim.heavy_ball(1.0, 0.3)
    full = dynamics.expected_loss(zhang, opt, 4, 50, init_var=v0)
    np.testing.assert_allclose(
        dynamics.expected_loss(zhang, opt, 4, 50, init_var=v0, at=[50, 3, 17]),
        full[[50, 3, 17]],
        rtol=1e-12,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(init_var=-1.0), "init_var"),
        (dict(steps=-1), "steps"),
        (dict(at=[7]), "at"),
        (dict(opt=optim.sgd(0.1, precond=np.ones(4))), "precond"),
        (dict(opt="fast"), "optimiser"),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    p = nqm.NoisyQuadratic.zhang2019(3)
    args = dict(opt=0.1, batch_size=1, steps=5) | kwargs
    with pytest.raises((ValueError, TypeError), match=message):
        dynamics.expected_loss(p, **args)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: optim.heavy_ball(0.1, 1.0), "momentum"),
        (lambda: optim.nesterov(0.1, -0.2), "momentum"),
        (lambda: optim.ema(optim.sgd(0.1), -0.1), "ema"),
        (lambda: optim.sgd(0.1, precond=np.zeros(3)), "precond"),
        (lambda: optim.sgd(-1.0), "lr"),
        (lambda: optim.sgd(np.nan), "lr"),
        (lambda: optim.ema(optim.ema(optim.sgd(0.1), 0.5), 0.5), "ema of an ema"),
    ],
)
def test_optimisers_check_their_hyper_parameters(make, message):
    with pytest.raises(ValueError, match=message):
        make()
