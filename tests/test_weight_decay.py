"""Weight decay (coupled and decoupled) of SGD and heavy ball, with an optimum θ* ≠ 0: exact against an independent
recursion written in the parameters θ, stationary losses against hand-derived closed forms, first hits against a
step-by-step scan, the simulators against the exact curves (with a planted error), and λ = 0 as plain SGD."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import problems
from test_montecarlo import assert_agrees_and_control_rejected

import nqm
from nqm import dynamics, optim

H = np.array([1.0, 0.5, 0.2, 0.05, 0.01])
C = np.array([0.3, 0.2, 0.5, 0.1, 0.05])
OPTIMUM = np.array([1.0, -2.0, 0.5, 3.0, -1.0])
PRE = np.array([1.0, 2.0, 0.5, 3.0, 1.5])
V0 = np.array([0.5, 1.0, 2.0, 0.3, 1.0])
B = 4.0

DECAYING = {
    "sgd coupled": optim.sgd(0.3, weight_decay=0.4),
    "sgd coupled, P": optim.sgd(0.3, PRE, weight_decay=0.4),
    "sgd decoupled, P": optim.sgd(0.3, PRE, weight_decay=0.4, decoupled=True),
    "heavy ball coupled": optim.heavy_ball(0.2, 0.7, weight_decay=0.4),
    "heavy ball coupled, P": optim.heavy_ball(0.2, 0.7, PRE, weight_decay=0.4),
    "heavy ball decoupled, P": optim.heavy_ball(0.2, 0.7, PRE, weight_decay=0.4, decoupled=True),
}


def _problem(optimum=OPTIMUM):
    return nqm.NoisyQuadratic(H, C, optimum=optimum)


def parameter_recursion(opt, steps, optimum=OPTIMUM, v0=V0):
    """E[L_t] step by step on the state (θ, v) in the parameters themselves (not the error θ − θ*): mean and
    covariance of ``v ← βv + P(g + λ_c θ)``, ``θ ← θ − εv − ελ_d θ`` with ``g = H(θ − θ*) + ξ``, θ₀ ~ N(θ*, v0),
    v₀ = 0 (β = 0 for SGD)."""
    d = H.size
    pre = np.ones(d) if opt.precond is None else opt.precond
    eps, lam, beta = opt.lr, opt.weight_decay, getattr(opt, "momentum", 0.0)
    coupled, decoupled = (0.0, lam) if opt.decoupled else (lam, 0.0)
    a, b, n = np.zeros((d, 2, 2)), np.zeros((d, 2)), np.zeros((d, 2))
    a[:, 1, 0], a[:, 1, 1], b[:, 1], n[:, 1] = pre * (H + coupled), beta, -pre * H * optimum, pre
    a[:, 0, 0], a[:, 0, 1] = 1 - eps * a[:, 1, 0] - eps * decoupled, -eps * beta
    b[:, 0], n[:, 0] = -eps * b[:, 1], -eps * pre
    mean = np.stack([np.broadcast_to(optimum, (d,)).astype(float), np.zeros(d)], 1)
    cov = np.zeros((d, 2, 2))
    cov[:, 0, 0] = v0
    out = []
    for _ in range(steps + 1):
        out.append(0.5 * H @ ((mean[:, 0] - optimum) ** 2 + cov[:, 0, 0]))
        mean = np.einsum("dij,dj->di", a, mean) + b
        cov = a @ cov @ np.swapaxes(a, 1, 2) + (C / B)[:, None, None] * n[:, :, None] * n[:, None, :]
    return np.array(out)


@pytest.mark.parametrize("name", DECAYING)
def test_expected_loss_with_weight_decay_equals_a_recursion_in_the_parameters(name):
    opt = DECAYING[name]
    exact = dynamics.expected_loss(_problem(), opt, B, 400, init_var=V0).mean
    np.testing.assert_allclose(exact, parameter_recursion(opt, 400), rtol=1e-12)


def _stationary_by_hand(opt):
    """½Σh(x∞² + Var∞), derived per case: the mean's fixed point of the regularised step and the AR variance."""
    pre = np.ones(H.size) if opt.precond is None else opt.precond
    eps, lam, beta = opt.lr, opt.weight_decay, getattr(opt, "momentum", 0.0)
    q = eps**2 * pre**2 * C / B
    if not opt.decoupled:  # the curvature h + λ, pulled to −λθ*/(h + λ)
        x_inf = -lam * OPTIMUM / (H + lam)
        k = eps * pre * (H + lam)
        var = (1 + beta) * q / ((1 - beta) * k * (2 * (1 + beta) - k))
    elif beta == 0:  # θ ← (1 − ελ − εph)θ + …
        x_inf = -lam * OPTIMUM / (pre * H + lam)
        r = eps * pre * H + eps * lam
        var = q / (r * (2 - r))
    else:  # AR(2) x' = a₁x + a₂x₋ with a₁ = 1 + β − λ − δ, a₂ = −β(1 − δ)
        delta = eps * lam
        x_inf = -lam * (1 - beta) * OPTIMUM / (pre * H + lam * (1 - beta))
        a1, a2 = 1 + beta - eps * pre * H - delta, -beta * (1 - delta)
        var = q * (1 - a2) / ((1 + a2) * ((1 - a2) ** 2 - a1**2))
    return 0.5 * H @ (x_inf**2 + var)


@pytest.mark.parametrize("name", DECAYING)
def test_stationary_loss_with_weight_decay_is_the_derived_closed_form(name):
    opt = DECAYING[name]
    assert dynamics.steady_state_loss(_problem(), opt, B) == pytest.approx(_stationary_by_hand(opt), rel=1e-12)


def test_the_bias_is_the_regularised_objective_s_minimiser():
    """Coupled decay's mean settles at argmin ½(θ − θ*)ᵀH(θ − θ*) + ½λ|θ|² = Hθ*/(H + λ), whatever ε, β and P."""
    p, lam = _problem(), 0.4
    for opt in (optim.sgd(0.3, PRE, weight_decay=lam), optim.heavy_ball(0.05, 0.9, weight_decay=lam)):
        lam_t, _ = nqm.noise.step_coefficients(p, opt, B)
        pull = nqm.noise.decay_pull(p, opt)
        theta_inf = OPTIMUM + dynamics.decay_fixed_point(opt, lam_t, pull.step)[:, 0]
        np.testing.assert_allclose(theta_inf, H * OPTIMUM / (H + lam), rtol=1e-13)


@pytest.mark.parametrize("name", ["sgd decoupled, P", "heavy ball decoupled, P", "heavy ball coupled"])
def test_steps_to_target_with_weight_decay_is_the_first_hit_of_the_recursion(name):
    opt = DECAYING[name]
    curve = parameter_recursion(opt, 3000)
    for target in np.quantile(curve, [0.05, 0.3, 0.7]):
        first = int(np.argmax(curve <= target))
        assert dynamics.steps_to_target(_problem(), opt, B, target, init_var=V0) == first
    assert dynamics.steps_to_target(_problem(), opt, B, 0.5 * curve.min(), init_var=V0, max_steps=3000) == np.inf


@settings(max_examples=25, deadline=None)
@given(p=problems(max_d=6), lr=st.floats(0.01, 0.9), beta=st.sampled_from([0.0, 0.5, 0.9]))
def test_no_weight_decay_is_the_plain_optimiser_bit_for_bit(p, lr, beta):
    lr = lr / p.h.max()
    q = nqm.NoisyQuadratic(p.h, p.c, optimum=np.linspace(-1, 2, p.d))
    for decoupled in (False, True):
        plain, zero = optim.heavy_ball(lr, beta), optim.heavy_ball(lr, beta, weight_decay=0.0, decoupled=decoupled)
        assert np.array_equal(dynamics.expected_loss(p, plain, 3, 50).mean, dynamics.expected_loss(q, zero, 3, 50).mean)
    # and decay with θ* = 0 has no pull: the optimum given as zeros is the optimum not given
    decaying = optim.heavy_ball(lr, beta, weight_decay=0.3)
    zero_optimum = nqm.NoisyQuadratic(p.h, p.c, optimum=np.zeros(p.d))
    assert np.array_equal(
        dynamics.expected_loss(p, decaying, 3, 50).mean, dynamics.expected_loss(zero_optimum, decaying, 3, 50).mean
    )


def test_simulation_with_no_weight_decay_is_the_plain_run_bit_for_bit():
    p = _problem()
    for plain, zero in (
        (optim.sgd(0.3, PRE), optim.sgd(0.3, PRE, weight_decay=0.0, decoupled=True)),
        (optim.heavy_ball(0.2, 0.7), optim.heavy_ball(0.2, 0.7, weight_decay=0.0)),
    ):
        a = nqm.simulate(p, plain, B, 30, 64, seed=5, init_var=V0)
        b = nqm.simulate(p, zero, B, 30, 64, seed=5, init_var=V0)
        assert np.array_equal(a.mean, b.mean)


def test_decoupled_and_coupled_sgd_agree_without_a_preconditioner():
    p = _problem()
    coupled = dynamics.expected_loss(p, optim.sgd(0.3, weight_decay=0.4), B, 200, init_var=V0).mean
    decoupled = dynamics.expected_loss(p, optim.sgd(0.3, weight_decay=0.4, decoupled=True), B, 200, init_var=V0).mean
    np.testing.assert_allclose(decoupled, coupled, rtol=1e-13)


@pytest.mark.parametrize("name", ["sgd decoupled, P", "heavy ball decoupled, P", "heavy ball coupled, P"])
def test_simulation_with_weight_decay_agrees_with_the_exact_curve(name):
    """Both dtypes against E[L_t]; planted error: the same run without the pull towards 0 (an optimum of 0)."""
    opt, p = DECAYING[name], _problem()
    at = [1, 5, 20, 100, 300]
    exact = dynamics.expected_loss(p, opt, B, 300, init_var=V0, at=at).mean
    planted = dynamics.expected_loss(nqm.NoisyQuadratic(H, C), opt, B, 300, init_var=V0, at=at).mean
    for dtype in (np.float64, np.float32):
        run = nqm.simulate(p, opt, B, 300, 4000, seed=11, init_var=V0, at=at, dtype=dtype)
        assert_agrees_and_control_rejected(run.mean, run.sem, exact, planted)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: optim.sgd(0.5, weight_decay=-1.0), "weight_decay"),
        (lambda: optim.sgd(0.5, weight_decay=np.nan), "weight_decay"),
        (lambda: optim.sgd(0.5, weight_decay=2.0, decoupled=True), "lr·weight_decay"),
        (lambda: optim.heavy_ball(0.5, 0.9, weight_decay=0.1, decoupled="yes"), "decoupled"),
        (lambda: optim.ema(optim.sgd(0.1, weight_decay=0.1), 0.9), "ema"),
        (lambda: nqm.NoisyQuadratic(H, C, optimum=[1.0, 2.0]), "optimum"),
        (lambda: nqm.LeastSquares(H, 0.1).expected_loss(optim.sgd(0.1, weight_decay=0.1), 2, 3), "weight decay"),
        (lambda: dynamics.coordinate_variance(_problem(), optim.sgd(0.1, weight_decay=0.1), B, 3), "weight decay"),
    ],
)
def test_what_weight_decay_does_not_support_is_a_clear_error(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


@pytest.mark.parametrize("name", ["sgd coupled, P", "heavy ball decoupled, P"])
def test_the_counter_engine_runs_weight_decay_towards_zero(name):
    """Philox streams (the CUDA kernel's NumPy mirror) with the pull and decoupled heavy ball's start offset, against
    the exact curve; planted error: the pull towards θ* (an optimum of 0)."""
    opt, p = DECAYING[name], _problem()
    at = [1, 5, 20, 100]
    exact = dynamics.expected_loss(p, opt, B, 100, init_var=V0, at=at).mean
    planted = dynamics.expected_loss(nqm.NoisyQuadratic(H, C), opt, B, 100, init_var=V0, at=at).mean
    run = nqm.simulate(p, opt, B, 100, 4000, seed=3, init_var=V0, at=at, generator="philox")
    assert_agrees_and_control_rejected(run.mean, run.sem, exact, planted)


@pytest.mark.parametrize("name", ["sgd decoupled, P", "heavy ball coupled", "heavy ball decoupled, P"])
def test_skip_ahead_jumps_carry_the_pull_exactly(name):
    """Exact jumps of the deviation from the fixed point, out to 10⁴ steps, against the exact curve; planted error:
    the pull towards θ*."""
    opt, p = DECAYING[name], _problem()
    at = [0, 1, 5, 20, 100, 10**4]
    exact = dynamics.expected_loss(p, opt, B, 10**4, init_var=V0, at=at).mean
    planted = dynamics.expected_loss(nqm.NoisyQuadratic(H, C), opt, B, 10**4, init_var=V0, at=at).mean
    run = nqm.montecarlo.simulate_checkpoints(p, opt, B, at, 4000, seed=6, init_var=V0)
    assert_agrees_and_control_rejected(run.mean, run.sem, exact, planted)


ROTATION = np.linalg.qr(np.random.default_rng(5).standard_normal((5, 5)))[0]


@pytest.mark.parametrize(
    "name, basis", [(n, b) for n in DECAYING for b in ("identity", "rotated")] + [("adamw", "identity")]
)
def test_the_general_path_s_decay_equals_the_fused_recurrence_on_the_same_normals(name, basis):
    """The general path runs the optimiser's update with the decay written on θ = x + θ* (coupled: λθ in the
    gradient; decoupled: θ − δθ after the update); the fused path runs the transition with a constant pull and
    start offset. On the counter engine both draw the same normals, so their losses agree to rounding (Adam is not
    rotation invariant: it is compared in the eigenbasis only)."""
    opt = optim.adamw(0.05, 0.8, 0.95, 1e-3, weight_decay=0.4) if name == "adamw" else DECAYING[name]
    q = np.eye(5) if basis == "identity" else ROTATION  # a basis makes the problem take the general path
    fused, general = _problem(), nqm.NoisyQuadratic(H, C, basis=q, optimum=OPTIMUM)
    assert fused.is_diagonal and not general.is_diagonal
    kw = {"init_var": V0, "generator": "philox", "keep_losses": True, "keep_state": True}
    a, b = nqm.simulate(fused, opt, B, 60, 16, seed=2, **kw), nqm.simulate(general, opt, B, 60, 16, seed=2, **kw)
    np.testing.assert_allclose(b.losses, a.losses, rtol=1e-10)
    np.testing.assert_allclose(b.state, a.state, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["sgd coupled, P", "heavy ball decoupled, P"])
def test_weight_decay_on_dense_noise_and_per_example_draws_agrees_with_the_exact_curve(name):
    """SFC64's general path: a dense Σ in a rotated basis, and per-example draws (Rademacher examples); planted
    error: the pull towards θ*."""
    opt = DECAYING[name]
    sigma = np.diag(C) + 0.02 * np.outer(np.sign(OPTIMUM), np.sign(OPTIMUM))
    at = [1, 5, 20, 60]
    for p, kw in (
        (nqm.NoisyQuadratic(H, sigma=sigma, basis=ROTATION, optimum=OPTIMUM), {}),
        (_problem(), {"per_example": "rademacher"}),
    ):
        plain = nqm.NoisyQuadratic(H, sigma=p.sigma) if p.sigma is not None else nqm.NoisyQuadratic(H, C)
        exact = dynamics.expected_loss(p, opt, B, 60, init_var=V0, at=at).mean
        planted = dynamics.expected_loss(plain, opt, B, 60, init_var=V0, at=at).mean
        run = nqm.simulate(p, opt, B, 60, 3000, seed=4, init_var=V0, at=at, **kw)
        assert_agrees_and_control_rejected(run.mean, run.sem, exact, planted)


def _tuning_problem():
    h = 1.0 / np.arange(1, 41)
    return nqm.NoisyQuadratic(h, h.copy(), optimum=np.random.default_rng(7).standard_normal(40))


@pytest.mark.parametrize("decoupled", [False, True])
def test_tuned_weight_decay_steps_are_exact_first_hits_and_beat_a_grid(decoupled):
    """The tuned (ε, λ) reach the target in exactly the reported steps (an independent scan), and no point of a
    12 × 12 grid (ε around ε*, λ over the searched range) does better among the runs that stay below the target
    (stationary loss under it: the tuner's domain; with decay a run can dip below the target on its way to a floor
    above it)."""
    p = _tuning_problem()
    pre = p.h**-0.25
    target = 0.12 * 0.5 * p.h.sum()
    batches = np.array([1.0, 16.0, 256.0])
    runs = dynamics.optimal_steps_to_target(p, target, batches, precond=pre, weight_decay="tune", decoupled=decoupled)
    assert runs.weight_decay is not None and runs.decoupled is decoupled
    for i, b in enumerate(batches):
        opt = runs.optimizer(i)
        assert opt.weight_decay == runs.weight_decay[i] and opt.decoupled is decoupled
        assert dynamics.steps_to_target(p, opt, b, target) == runs.steps[i]
        candidates = [
            optim.sgd(e, pre, lam, decoupled)
            for e in runs.lr[i] * np.geomspace(0.25, 1.5, 12)
            for lam in np.geomspace(1e-3 * p.h.min(), p.h.max(), 12)  # the searched range
            if not decoupled or e * lam < 1
        ]
        settled = [o for o in candidates if dynamics.steady_state_loss(p, o, b) < target]
        assert len(settled) > 20
        grid = [dynamics.steps_to_target(p, o, b, target, max_steps=int(runs.steps[i])) for o in settled]
        assert min(grid) >= runs.steps[i]


def test_held_weight_decay_is_the_best_step_at_that_decay():
    p = _tuning_problem()
    target = 0.3 * 0.5 * p.h.sum()
    runs = dynamics.optimal_steps_to_target(p, target, [4.0], weight_decay=0.02)
    assert runs.weight_decay[0] == 0.02
    lrs = np.geomspace(0.05, 1.9, 60)
    grid = [dynamics.steps_to_target(p, optim.sgd(e, weight_decay=0.02), 4, target) for e in lrs]
    assert runs.steps[0] <= min(grid)
    assert dynamics.steps_to_target(p, runs.optimizer(0), 4, target) == runs.steps[0]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"weight_decay": "tuned"}, "weight_decay"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"weight_decay": 0.1, "family": "nesterov"}, "family"),
        ({"weight_decay": 0.1, "decoupled": 1}, "decoupled"),
    ],
)
def test_bad_weight_decay_choices_for_the_tuner_are_clear_errors(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        dynamics.optimal_steps_to_target(_tuning_problem(), 1.0, [4.0], **kwargs)


def _adamw_in_theta(h, optimum, theta0, lr, b1, b2, eps, decay, steps, basis=None):
    """AdamW without noise, written in the parameters θ = x + θ* (elementwise in the parameter coordinates)."""
    q = np.eye(h.size) if basis is None else basis
    h_x = (q * h) @ q.T
    theta, star = q @ (theta0 + optimum), q @ optimum
    m, v, out = np.zeros(h.size), np.zeros(h.size), []
    for t in range(1, steps + 1):
        g = h_x @ (theta - star)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        step = (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        theta = (1 - lr * decay) * theta - lr * step
        out.append(0.5 * (theta - star) @ h_x @ (theta - star))
    return np.array(out)


@pytest.mark.parametrize("rotated", [False, True])
def test_adamw_with_an_optimum_decays_towards_zero_not_the_optimum(rotated):
    """No noise, so the run is deterministic: the simulator (the fused elementwise loop, or the general path in a
    rotated basis) against AdamW written in θ itself."""
    basis = np.linalg.qr(np.random.default_rng(3).standard_normal((5, 5)))[0] if rotated else None
    p = nqm.NoisyQuadratic(H, np.zeros(5), basis=basis, optimum=OPTIMUM)
    theta0 = np.array([0.3, -0.2, 0.1, 0.5, -0.4])
    opt = optim.adamw(0.05, 0.9, 0.99, 1e-8, weight_decay=0.3)
    run = nqm.simulate(p, opt, 1, 200, 2, theta0=theta0, at=np.arange(1, 201))
    np.testing.assert_allclose(run.mean, _adamw_in_theta(H, OPTIMUM, theta0, 0.05, 0.9, 0.99, 1e-8, 0.3, 200, basis),
                               rtol=1e-10)  # fmt: skip


@pytest.mark.parametrize("decoupled", [False, True])
def test_heavy_ball_with_a_held_decay_is_tuned_to_exact_first_hits_that_a_grid_does_not_beat(decoupled):
    p = _tuning_problem()
    target = 0.12 * 0.5 * p.h.sum()
    batches = np.array([1.0, 16.0])
    runs = dynamics.optimal_steps_to_target(
        p, target, batches, family="heavy_ball", weight_decay=0.03, decoupled=decoupled
    )
    assert np.all(runs.weight_decay == 0.03) and runs.momentum is not None
    for i, b in enumerate(batches):
        opt = runs.optimizer(i)
        assert opt.weight_decay == 0.03 and opt.momentum == runs.momentum[i] and opt.decoupled is decoupled
        assert dynamics.steps_to_target(p, opt, b, target) == runs.steps[i]
        candidates = [
            optim.heavy_ball(e, beta, weight_decay=0.03, decoupled=decoupled)
            for e in runs.lr[i] * np.geomspace(0.3, 1.5, 10)
            for beta in np.clip(1 - (1 - runs.momentum[i]) * np.geomspace(0.3, 3.0, 10), 0.0, 0.999)
        ]
        settled = [o for o in candidates if dynamics.steady_state_loss(p, o, b) < target]
        assert len(settled) > 20
        grid = [dynamics.steps_to_target(p, o, b, target, max_steps=int(runs.steps[i])) for o in settled]
        assert min(grid) >= runs.steps[i]


@pytest.mark.parametrize("decoupled", [False, True])
def test_heavy_ball_with_a_tuned_decay_hits_exactly_and_no_held_decay_beats_it(decoupled):
    """λ tuned with ε and β: the reported steps are exact first hits (an independent scan), and the (ε, β) tuner
    at any held λ of a grid across the searched range does not reach the target in fewer steps."""
    p = _tuning_problem()
    target = 0.12 * 0.5 * p.h.sum()
    batches = np.array([1.0, 16.0])
    kw = {"family": "heavy_ball", "decoupled": decoupled}
    runs = dynamics.optimal_steps_to_target(p, target, batches, weight_decay="tune", **kw)
    assert runs.weight_decay.shape == (2,) and runs.decoupled is decoupled
    for i, b in enumerate(batches):
        opt = runs.optimizer(i)
        assert opt.weight_decay == runs.weight_decay[i] and opt.momentum == runs.momentum[i]
        assert dynamics.steps_to_target(p, opt, b, target) == runs.steps[i]
    for lam in np.geomspace(1e-3 * p.h.min(), p.h.max(), 6):
        held = dynamics.optimal_steps_to_target(p, target, batches, weight_decay=lam, **kw)
        assert np.all(held.steps >= runs.steps), lam


@pytest.mark.parametrize("decoupled", [False, True])
def test_the_heavy_ball_tuner_s_closed_form_is_the_expected_loss(decoupled):
    """The tuner's E[L_t] for rows of (ε, β) with a held decay (its own assembly: heavy ball's closed form or the
    two-state form with a per-row start, plus the mean's path) against expected_loss, which the θ-recursion test
    holds; at every step of a run and for three rows at once."""
    from nqm.dynamics.runs.tuned_losses import DecayHeavyBallLoss

    p = _problem()
    loss = DecayHeavyBallLoss(p, np.array([B]), V0, PRE, 0.4, decoupled)
    eps, beta = np.array([0.05, 0.1, 0.2]), np.array([0.5, 0.7, 0.9])
    t = np.arange(0, 200)
    got = np.array([loss.curve(eps, beta)(np.full(3, k)) for k in t])
    for j in range(3):
        opt = optim.heavy_ball(eps[j], beta[j], PRE, weight_decay=0.4, decoupled=decoupled)
        np.testing.assert_allclose(got[:, j], dynamics.expected_loss(p, opt, B, 199, init_var=V0).mean, rtol=1e-11)
        assert loss.stationary(eps[j : j + 1], beta[j : j + 1])[0] == pytest.approx(
            dynamics.steady_state_loss(p, opt, B), rel=1e-11
        )


@pytest.mark.parametrize("family", ["sgd", "heavy_ball"])
def test_with_the_optimum_at_zero_a_tuned_decay_runs_to_the_top_of_its_range(family):
    """With θ* = 0 the decay pulls towards the optimum itself, so it only adds curvature: the tuned λ sits at the top
    of the searched range (h_max) or near it, and the runs are far shorter than without decay (the docstring's warning).
    With θ* away from 0 SGD's search settles far below it."""
    h = 1.0 / np.arange(1, 41)
    target = 0.12 * 0.5 * h.sum()
    batches = np.array([4.0])
    at_zero = nqm.NoisyQuadratic(h, h.copy())
    runs = dynamics.optimal_steps_to_target(at_zero, target, batches, family=family, weight_decay="tune")
    assert np.all(runs.weight_decay > 0.5 * h.max())
    plain = dynamics.optimal_steps_to_target(at_zero, target, batches, family=family)
    assert np.all(4 * runs.steps < plain.steps)
    if family == "sgd":  # (heavy ball's search away from 0 is held by the tests above)
        away = dynamics.optimal_steps_to_target(_tuning_problem(), target, batches, weight_decay="tune")
        assert np.all(away.weight_decay < 0.5 * h.max())
