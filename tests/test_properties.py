"""Property-based tests: identities and invariants that hold for every problem (hypothesis draws problems,
points, batch sizes and steps; it never chooses seeds for a statistical assertion)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import batch_sizes, linear_optimisers, problem_and_point, problems, rotations, sign_problems

import nqm
from nqm import dynamics, optim, theory

RTOL = 1e-10


@given(problem_and_point(), batch_sizes, batch_sizes)
def test_optimal_step_increases_with_batch_and_stays_below_max(pp, b1, b2):
    p, th = pp
    lo, hi = sorted([b1, b2])
    e_lo, e_hi = theory.optimal_step(p, th, lo), theory.optimal_step(p, th, hi)
    assert e_lo <= e_hi * (1 + RTOL)
    assert e_hi <= theory.max_step(p, th) * (1 + RTOL)


@given(problem_and_point(), batch_sizes)
def test_improvement_law_ratio(pp, b):
    p, th = pp
    ratio = theory.optimal_improvement(p, th, b) / theory.max_improvement(p, th)
    assert ratio == pytest.approx(1 / (1 + theory.noise_scale(p, th) / b), rel=RTOL)
    eps_ratio = theory.optimal_step(p, th, b) / theory.max_step(p, th)
    assert eps_ratio == pytest.approx(1 / (1 + theory.noise_scale(p, th) / b), rel=RTOL)


@given(problem_and_point(), batch_sizes, st.floats(0.01, 3.0))
def test_expected_improvement_is_maximal_at_the_optimal_step(pp, b, factor):
    p, th = pp
    e_opt = float(theory.optimal_step(p, th, b))
    best = float(theory.expected_improvement(p, th, e_opt, b))
    assert best == pytest.approx(float(theory.optimal_improvement(p, th, b)), rel=1e-9)
    assert float(theory.expected_improvement(p, th, factor * e_opt, b)) <= best * (1 + 1e-12)
    assert abs(float(theory.expected_improvement(p, th, 2 * e_opt, b))) <= 1e-9 * best


@given(problem_and_point(min_d=2, max_d=6), st.data())
def test_noise_scale_is_rotation_invariant(pp, data):
    """B_noise from dense matrices in any rotated basis equals nqm's eigenbasis formula."""
    p, th = pp
    q = data.draw(rotations(p.d))
    h_w, sigma_w, g_w = (q * p.h) @ q.T, (q * p.c) @ q.T, q @ (p.h * th)
    dense = np.trace(h_w @ sigma_w) / (g_w @ h_w @ g_w)
    assert float(theory.noise_scale(p, th)) == pytest.approx(dense, rel=1e-9)
    assert float(theory.simple_noise_scale(p, th)) == pytest.approx(np.trace(sigma_w) / (g_w @ g_w), rel=1e-9)


@given(problem_and_point(), st.floats(0.05, 20.0), batch_sizes)
def test_curvature_scaling(pp, c, b):
    """H → cH, Σ → c²Σ: B_noise is unchanged, ε_opt scales as 1/c, and E[L_t] at ε/c scales as c."""
    p, th = pp
    q = nqm.NoisyQuadratic(c * p.h, c * c * p.c)
    assert float(theory.noise_scale(q, th)) == pytest.approx(float(theory.noise_scale(p, th)), rel=1e-9)
    assert float(theory.optimal_step(q, th, b)) == pytest.approx(float(theory.optimal_step(p, th, b)) / c, rel=1e-9)
    lr = 0.5 / p.h.max()
    np.testing.assert_allclose(
        dynamics.expected_loss(q, lr / c, b, 20), c * dynamics.expected_loss(p, lr, b, 20), rtol=1e-9
    )


@given(problems(), st.floats(0.01, 1.9), batch_sizes, st.integers(0, 60))
def test_sgd_closed_form_equals_step_by_step_recursion(p, lr_scaled, b, steps):
    lr = lr_scaled / p.h.max()
    v = np.ones(p.d)
    expected = [0.5 * p.h @ v]
    for _ in range(steps):
        v = (1 - lr * p.h) ** 2 * v + lr**2 * p.c / b
        expected.append(0.5 * p.h @ v)
    np.testing.assert_allclose(dynamics.expected_loss(p, lr, b, steps), expected, rtol=1e-9)


@given(
    problems(max_d=6), st.floats(0.01, 1.0), batch_sizes, st.floats(0.0, 0.95), st.floats(0.0, 0.95), st.integers(0, 40)
)
def test_momentum_and_ema_dynamics_equal_the_recursion(p, lr_scaled, b, beta, gamma, steps):
    """Powered moment map = the second moments of the scalar recursion, iterated step by step."""
    lr = lr_scaled / p.h.max()
    # exact second moments of (θ_t, θ_{t−1}, θ̃_t), stepped one at a time
    alpha = 1 + beta - lr * p.h
    s2 = lr**2 * p.c / b
    m = {k: np.ones(p.d) for k in ("xx", "xp", "pp", "xa", "pa", "aa")}  # x = θ_t, p = θ_{t−1}, a = θ̃_t
    expected = [0.5 * p.h @ m["aa"]]
    for _ in range(steps):
        xx = alpha**2 * m["xx"] - 2 * alpha * beta * m["xp"] + beta**2 * m["pp"] + s2  # E θ_{t+1}²
        xp = alpha * m["xx"] - beta * m["xp"]  # E θ_{t+1} θ_t
        xa = alpha * m["xa"] - beta * m["pa"]  # E θ_{t+1} θ̃_t
        aa = gamma**2 * m["aa"] + 2 * gamma * (1 - gamma) * xa + (1 - gamma) ** 2 * xx
        new_xa = gamma * xa + (1 - gamma) * xx  # E θ_{t+1} θ̃_{t+1}
        pa = gamma * m["xa"] + (1 - gamma) * xp  # E θ_t θ̃_{t+1}
        m = {"xx": xx, "xp": xp, "pp": m["xx"], "xa": new_xa, "pa": pa, "aa": aa}
        expected.append(0.5 * p.h @ m["aa"])
    got = dynamics.expected_loss(p, optim.ema(optim.heavy_ball(lr, beta), gamma), b, steps)
    np.testing.assert_allclose(got, expected, rtol=1e-8)


@given(problems(), st.floats(0.01, 1.5), batch_sizes, st.floats(-1.0, 1.0))
def test_preconditioning_is_sgd_on_rescaled_problem(p, lr_scaled, b, power):
    """θ ← θ − εPG is SGD on φ = P^{−1/2}θ with h → ph, c → pc (Zhang et al. 2019, §3.2)."""
    pre = p.h**power
    lr = lr_scaled / (pre * p.h).max()
    rescaled = nqm.NoisyQuadratic(pre * p.h, pre * p.c)
    np.testing.assert_allclose(
        dynamics.expected_loss(p, optim.sgd(lr, pre), b, 30),
        dynamics.expected_loss(rescaled, lr, b, 30, init_var=1 / pre),
        rtol=1e-9,
    )


@given(problem_and_point())
def test_noise_scale_ratio_within_condition_number(pp):
    p, th = pp
    kappa = p.h.max() / p.h.min()
    ratio = float(theory.noise_scale(p, th) / theory.simple_noise_scale(p, th))
    assert 1 / kappa * (1 - 1e-12) <= ratio <= kappa * (1 + 1e-12)


@given(problems(noise=False, max_d=8), st.floats(0.01, 1.0), st.integers(0, 30), st.booleans(), st.data())
def test_zero_noise_simulation_equals_deterministic_run(p, lr_scaled, steps, rotated, data):
    """An optimiser's two faces agree: its ``update`` (the general path, with a rotated basis) and the
    transition (the fused path and exact dynamics) give the same noise-free run from the same θ₀."""
    opt = data.draw(linear_optimisers(lr_scaled / p.h.max()))
    theta0 = np.array(data.draw(st.lists(st.floats(-3, 3), min_size=p.d, max_size=p.d)))
    if rotated:
        p = nqm.NoisyQuadratic(p.h, p.c, basis=data.draw(rotations(p.d)))
    sim = nqm.simulate(p, opt, 4, steps, 3, theta0=theta0, at=range(steps + 1))
    exact = dynamics.expected_loss(p, opt, 4, steps, init_var=theta0**2)
    np.testing.assert_allclose(sim.mean, exact, rtol=1e-8, atol=1e-12 * exact[0] + 1e-300)
    assert np.all(sim.sem <= 1e-12 * sim.mean + 1e-300)  # every replica is the same run


@given(problems(max_d=6), st.integers(0, 2**32 - 1), st.booleans(), st.data())
@settings(max_examples=25, deadline=None)
def test_same_seed_same_result_whatever_the_threads(p, seed, rotated, data):
    """Several tiles, really run on two threads (a spy counts them), give bit-identical losses to one thread."""
    from nqm.montecarlo import sfc64

    opt = data.draw(linear_optimisers(0.5 / p.h.max()))
    if rotated:  # the general path, with its own tile size
        p = nqm.NoisyQuadratic(p.h, p.c, basis=data.draw(rotations(p.d)))
    per_tile = (sfc64.GENERAL_TILE_ELEMENTS if rotated else sfc64.TILE_ELEMENTS) // p.d
    kw = dict(batch_size=3, steps=6, replicas=2 * per_tile + 3, seed=seed, keep_losses=True)  # three tiles
    calls = []

    def spy(tasks, threads):
        calls.append((len(tasks), threads))
        return run_tasks(tasks, threads)

    run_tasks = sfc64.run_tasks
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sfc64, "run_tasks", spy)
        a = nqm.simulate(p, opt, threads=1, **kw)
        b = nqm.simulate(p, opt, threads=2, **kw)
    assert calls == [(3, 1), (3, 2)]
    np.testing.assert_array_equal(a.losses, b.losses)


@given(problem_and_point(min_d=2, max_d=6), st.data())
def test_rotated_simulation_equals_unrotated_one(pp, data):
    """The same noise draws in a rotated basis give the same losses (basis invariance of the simulator)."""
    p, th = pp
    q = data.draw(rotations(p.d))
    lr = 0.5 / p.h.max()
    plain = nqm.NoisyQuadratic(p.h, p.c, basis=np.eye(p.d))
    rotated = nqm.NoisyQuadratic(p.h, p.c, basis=q)
    opt = data.draw(linear_optimisers(lr))
    kw = dict(batch_size=2, steps=10, replicas=4, seed=1, theta0=th, keep_state=True)
    a, b = nqm.simulate(plain, opt, **kw), nqm.simulate(rotated, opt, **kw)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-9)
    np.testing.assert_allclose(a.state, b.state, rtol=1e-8, atol=1e-10)


@given(problems(max_d=4), st.floats(-10, 0.999), st.floats(-10, 0.0))
def test_bad_batch_sizes_and_steps_raise(p, bad_b, bad_lr):
    with pytest.raises(ValueError, match="batch size"):
        theory.optimal_step(p, np.ones(p.d), bad_b)
    with pytest.raises(ValueError, match="step size"):
        dynamics.expected_loss(p, bad_lr, 1, 3)
    assume(bad_b < 1)
    with pytest.raises(ValueError, match="batch size"):
        nqm.simulate(p, 0.1, bad_b, 3, 2)


# -- sign descent's exact law ------------------------------------------------------------------------------------
@given(sign_problems(), batch_sizes)
def test_sign_moments_are_a_second_moment_matrix(pp, b):
    """E[s] ∈ [−1, 1]; E[ssᵀ] has a unit diagonal, entries in [−1, 1], and is positive semi-definite."""
    p, th = pp
    mean, second = theory.sign_moments(p, th, b)
    assert np.all(np.abs(mean) <= 1.0)
    np.testing.assert_array_equal(np.diag(second), 1.0)
    assert np.all(np.abs(second) <= 1.0 + 1e-12)
    assert np.linalg.eigvalsh(second).min() >= -1e-9
    first, total = theory.sign_step_moments(p, th, b)
    assert total == pytest.approx(np.sum(p.parameter_hessian * second), rel=1e-9, abs=1e-12)


@given(problem_and_point(min_d=1, max_d=8))
def test_sign_optimal_step_tends_to_its_large_batch_limit(pp):
    """Where every G_i ≠ 0: ε_opt(B) → Σ|G_i|/Σ h_i (H diagonal in x) as B grows."""
    p, th = pp
    th = np.where(th == 0, 1.0, th)
    limit = np.abs(p.h * th).sum() / p.h.sum()
    assert float(theory.sign_optimal_step(p, th, np.inf)) == pytest.approx(limit, rel=1e-12)
    assert float(theory.sign_optimal_step(p, th, 1e30)) == pytest.approx(limit, rel=1e-9)


@given(sign_problems(), batch_sizes, st.permutations(range(6)))
def test_relabelling_parameters_changes_no_sign_law(pp, b, order):
    """A permutation of the parameter coordinates (rows of Q, with Σ_x permuted alike) is a relabelling."""
    p, th = pp
    perm = np.eye(p.d)[[i for i in order if i < p.d]]
    relabelled = nqm.NoisyQuadratic(p.h, sigma=p.sigma, basis=perm @ p.basis)
    for f in (theory.sign_optimal_step, theory.sign_optimal_improvement):
        assert float(f(relabelled, th, b)) == pytest.approx(float(f(p, th, b)), rel=1e-9, abs=1e-300)
