"""``Optimizer.update`` is the whole rule as PyTorch writes it: preconditioner and weight decay included.

The references below are PyTorch's ``torch.optim.SGD`` / ``AdamW`` steps written out by hand (coupled decay adds
λθ to the gradient before the momentum buffer; decoupled decay multiplies θ by 1 − ελ before the step), so a
decay dropped, applied twice or applied to the new θ instead of the old one fails here."""

import numpy as np
import pytest

from nqm import optim


def _torch_sgd(theta, grads, lr, momentum, weight_decay, decoupled, precond, nesterov=False):
    theta, buf = theta.copy(), None
    for g in grads:
        if decoupled:
            theta = theta * (1.0 - lr * weight_decay)
            d_p = precond * g
        else:
            d_p = precond * (g + weight_decay * theta)
        if momentum:
            buf = d_p.copy() if buf is None else momentum * buf + d_p
            d_p = d_p + momentum * buf if nesterov else buf
        theta = theta - lr * d_p
    return theta


CASES = [
    (0.1, 0.0, 0.5, False),
    (0.1, 0.0, 0.5, True),
    (0.05, 0.9, 0.3, False),
    (0.05, 0.9, 0.3, True),
    (0.2, 0.7, 0.0, False),
]


@pytest.mark.parametrize("lr, momentum, weight_decay, decoupled", CASES)
@pytest.mark.parametrize("preconditioned", [False, True])
def test_update_is_pytorchs_sgd(lr, momentum, weight_decay, decoupled, preconditioned):
    rng = np.random.default_rng(1)
    d = 6
    precond = rng.uniform(0.3, 2.0, d) if preconditioned else None
    opt = optim.heavy_ball(lr, momentum, precond=precond, weight_decay=weight_decay, decoupled=decoupled)
    theta0 = rng.normal(size=(2, d))
    grads = [rng.normal(size=(2, d)) for _ in range(7)]
    state = opt.init(theta0)
    for g in grads:
        state = opt.update(state, g)
    ref = _torch_sgd(theta0, grads, lr, momentum, weight_decay, decoupled, 1.0 if precond is None else precond)
    np.testing.assert_allclose(opt.readout(state), ref, rtol=1e-13, atol=1e-15)


def test_decay_alone_at_a_zero_gradient():
    theta = np.array([[1.0, -2.0, 3.0]])
    for decoupled in (False, True):
        (new,) = optim.sgd(0.1, weight_decay=0.5, decoupled=decoupled).update((theta,), np.zeros_like(theta))
        np.testing.assert_allclose(new, 0.95 * theta, rtol=1e-15)


def test_nesterov_and_ema_update_as_written():
    rng = np.random.default_rng(2)
    theta0, grads = rng.normal(size=(1, 4)), [rng.normal(size=(1, 4)) for _ in range(5)]
    state = optim.nesterov(0.1, 0.8).init(theta0)
    for g in grads:
        state = optim.nesterov(0.1, 0.8).update(state, g)
    ref = _torch_sgd(theta0, grads, 0.1, 0.8, 0.0, False, 1.0, nesterov=True)
    np.testing.assert_allclose(state[0], ref, rtol=1e-13)
    ema = optim.ema(optim.sgd(0.1), 0.5)
    state, avg, theta = ema.init(theta0), theta0.copy(), theta0.copy()
    for g in grads:
        state = ema.update(state, g)
        theta = theta - 0.1 * g
        avg = 0.5 * avg + 0.5 * theta
    np.testing.assert_allclose(ema.readout(state), avg, rtol=1e-13)


def test_adamw_update_decays_the_old_theta_once():
    rng = np.random.default_rng(3)
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.99, 1e-8, 0.1
    theta0, grads = rng.normal(size=(1, 5)), [rng.normal(size=(1, 5)) for _ in range(6)]
    opt = optim.adamw(lr, b1, b2, eps, wd)
    state = opt.init(theta0)
    theta, m, v = theta0.copy(), np.zeros_like(theta0), np.zeros_like(theta0)
    for t, g in enumerate(grads, start=1):
        state = opt.update(state, g)
        theta = theta * (1 - lr * wd)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        theta = theta - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    np.testing.assert_allclose(opt.readout(state), theta, rtol=1e-12)
