"""Sign-based and adaptive optimisers: their updates, where their nonlinearity acts, and sign descent's exact
one-step law against independent computations and Monte Carlo.

The statistical test uses a Bonferroni z over its cells at α = 1e-4, with fixed seeds, and planted errors that
must be rejected."""

import numpy as np
import pytest
from scipy import integrate, special, stats

import nqm
from nqm import dynamics, optim, spectra, theory
from nqm.montecarlo import simulate_checkpoints
from validation.stats import critical_z

ALPHA_TEST = 1e-4


# -- reference updates, written per element as the papers state them ------------------------------------------
def _reference_run(name, hp, x0, grads):
    """Scalar loops over the elements: Adam as Kingma & Ba's Algorithm 1 (m̂, v̂ formed explicitly), the others
    as their papers or PyTorch's documentation write them. ``grads(x)`` gives the gradient at x."""
    x = [float(v) for v in x0]
    d = len(x)
    m, v = [0.0] * d, [0.0] * d
    for t in range(1, len(grads) + 1):
        g = [float(v) for v in grads[t - 1](x)]
        if name == "normalized_sgd":
            norm = sum(gi * gi for gi in g) ** 0.5
        for i in range(d):
            if name == "sign_sgd":
                x[i] -= hp["lr"] * (g[i] > 0) - hp["lr"] * (g[i] < 0)
            elif name == "signum":
                m[i] = hp["momentum"] * m[i] + (1 - hp["momentum"]) * g[i]
                x[i] -= hp["lr"] * ((m[i] > 0) - (m[i] < 0))
            elif name == "rmsprop":
                v[i] = hp["beta2"] * v[i] + (1 - hp["beta2"]) * g[i] ** 2
                x[i] -= hp["lr"] * g[i] / (v[i] ** 0.5 + hp["eps"])
            elif name in ("adam", "adamw"):
                x[i] *= 1 - hp["lr"] * hp.get("weight_decay", 0.0)
                m[i] = hp["beta1"] * m[i] + (1 - hp["beta1"]) * g[i]
                v[i] = hp["beta2"] * v[i] + (1 - hp["beta2"]) * g[i] ** 2
                m_hat, v_hat = m[i] / (1 - hp["beta1"] ** t), v[i] / (1 - hp["beta2"] ** t)
                x[i] -= hp["lr"] * m_hat / (v_hat**0.5 + hp["eps"])
            elif name == "lion":  # Chen et al. 2023, Algorithm 2 (no decay)
                c = hp["beta1"] * m[i] + (1 - hp["beta1"]) * g[i]
                x[i] -= hp["lr"] * ((c > 0) - (c < 0))
                m[i] = hp["beta2"] * m[i] + (1 - hp["beta2"]) * g[i]
            elif name == "normalized_sgd":
                x[i] -= hp["lr"] * g[i] / norm if norm > 0 else 0.0
    return np.array(x)


NONLINEAR = {
    "sign_sgd": dict(lr=0.05),
    "signum": dict(lr=0.05, momentum=0.8),
    "rmsprop": dict(lr=0.01, beta2=0.9, eps=1e-3),
    "adam": dict(lr=0.05, beta1=0.8, beta2=0.95, eps=1e-3),
    "adamw": dict(lr=0.05, beta1=0.8, beta2=0.95, eps=1e-3, weight_decay=0.5),
    "normalized_sgd": dict(lr=0.1),
    "lion": dict(lr=0.02, beta1=0.6, beta2=0.95),
}


def _make(name):
    return getattr(optim, name)(**NONLINEAR[name])


@pytest.mark.parametrize("name", list(NONLINEAR))
def test_update_follows_the_papers_form(name):
    rng = np.random.default_rng(0)
    steps = [rng.normal(size=(3, 5)) for _ in range(12)]
    steps[4][1, 2] = 0.0  # a zero gradient element: sign 0
    opt = _make(name)
    state = opt.init(np.ones((3, 5)))
    for g in steps:
        state = opt.update(state, g)
    for row in range(3):
        ref = _reference_run(name, NONLINEAR[name], np.ones(5), [lambda x, g=g, row=row: list(g[row]) for g in steps])
        np.testing.assert_allclose(opt.readout(state)[row], ref, rtol=1e-12, atol=1e-15)


def _rotated_noiseless(d=5, seed=3):
    h = spectra.log_uniform(d, 0.2, 1.0)
    q = spectra.random_rotation(d, seed=seed)
    return nqm.NoisyQuadratic(h, np.zeros(d), basis=q), q, h


@pytest.mark.parametrize("name", list(NONLINEAR))
@pytest.mark.parametrize("generator", ["sfc64", "philox"])
def test_nonlinearity_acts_in_the_parameter_coordinates(name, generator):
    """Without noise a run is deterministic: the simulator's run of a rotated problem equals the reference loop
    on x = Qθ with gradient H_x x. The same loop in H's eigenbasis gives other losses (the test's power), except
    for normalised SGD, whose update commutes with rotations."""
    p, q, h = _rotated_noiseless()
    theta0 = np.linspace(1.0, -0.6, p.d)
    steps = 15
    sim = nqm.simulate(p, _make(name), 4, steps, 2, theta0=theta0, at=[0, steps], generator=generator)
    hx = p.parameter_hessian
    x = _reference_run(name, NONLINEAR[name], q @ theta0, [lambda x: list(hx @ np.array(x))] * steps)
    np.testing.assert_allclose(sim.mean[-1], 0.5 * x @ hx @ x, rtol=1e-10)
    th = _reference_run(name, NONLINEAR[name], theta0, [lambda t: list(h * np.array(t))] * steps)
    differs = abs(0.5 * th @ (h * th) - sim.mean[-1]) > 1e-6 * sim.mean[-1]
    assert differs == (name != "normalized_sgd")


@pytest.mark.parametrize("name", list(NONLINEAR))
def test_diagonal_problem_runs_the_update_on_both_engines(name):
    """On a diagonal noiseless problem both engines run the update elementwise and agree with the reference."""
    h = spectra.log_uniform(6, 0.2, 1.0)
    p = nqm.NoisyQuadratic(h, np.zeros(6))
    theta0 = np.linspace(1.0, -0.6, 6)
    x = _reference_run(name, NONLINEAR[name], theta0, [lambda t: list(h * np.array(t))] * 9)
    for generator in ("sfc64", "philox"):
        sim = nqm.simulate(p, _make(name), 4, 9, 2, theta0=theta0, at=[9], generator=generator, keep_state=True)
        np.testing.assert_allclose(sim.state[0], x, rtol=1e-12, atol=1e-15)


def test_noisy_runs_are_reproducible_and_dtype_follows():
    p = nqm.NoisyQuadratic.zhang2019(50)
    a = nqm.simulate(p, optim.adam(0.01), 4, 30, 8, seed=5, keep_losses=True)
    b = nqm.simulate(p, optim.adam(0.01), 4, 30, 8, seed=5, keep_losses=True, threads=2)
    np.testing.assert_array_equal(a.losses, b.losses)
    c = nqm.simulate(p, optim.adam(0.01), 4, 30, 8, seed=5, dtype=np.float32, keep_state=True)
    assert np.all(np.isfinite(c.mean)) and c.state.dtype == np.float64  # state reported on the host in float64


def test_exact_engines_refuse_them_and_name_the_alternative():
    p = nqm.NoisyQuadratic.zhang2019(20)
    opt = optim.sign_sgd(0.01)
    calls = [
        lambda: dynamics.expected_loss(p, opt, 4, 10),
        lambda: dynamics.steps_to_target(p, opt, 4, 0.5),
        lambda: dynamics.steady_state_loss(p, opt, 4),
        lambda: simulate_checkpoints(p, opt, 4, [5], 4),
        lambda: optim.ema(opt, 0.5),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="nqm.simulate"):
            call()
    with pytest.raises(ValueError, match="sign_improvement"):
        dynamics.expected_loss(p, opt, 4, 10)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: optim.adam(0.1, beta1=1.0), "beta1"),
        (lambda: optim.adam(0.1, beta2=-0.1), "beta2"),
        (lambda: optim.adam(0.1, eps=0.0), "eps"),
        (lambda: optim.rmsprop(0.1, eps=float("nan")), "eps"),
        (lambda: optim.adamw(0.1, weight_decay=-1.0), "weight_decay"),
        (lambda: optim.adamw(0.1, weight_decay=10.0), "weight_decay"),
        (lambda: optim.signum(0.1, 1.5), "momentum"),
        (lambda: optim.sign_sgd(-0.1), "lr"),
        (lambda: optim.normalized_sgd(float("inf")), "lr"),
        (lambda: optim.lion(0.1, beta1=1.0), "beta1"),
        (lambda: optim.lion(0.1, beta2=-0.5), "beta2"),
        (lambda: optim.lion(0.0), "lr"),
    ],
)
def test_bad_hyper_parameters_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


def test_lion_with_equal_betas_is_signum():
    """β₁ = β₂ = β: Lion's interpolation c = βm + (1 − β)g is signum's new momentum, so the two runs are the same run
    on the same noise (the fused loop, several tiles on two threads). Planted: β₁ ≠ β₂ gives another run."""
    p = nqm.NoisyQuadratic.zhang2019(30)
    kw = dict(batch_size=4, steps=60, replicas=300, seed=5, keep_losses=True)
    lion, sign = nqm.simulate(p, optim.lion(0.01, 0.8, 0.8), **kw), nqm.simulate(p, optim.signum(0.01, 0.8), **kw)
    np.testing.assert_array_equal(lion.losses, sign.losses)
    assert not np.array_equal(nqm.simulate(p, optim.lion(0.01, 0.8, 0.9), **kw).losses, sign.losses)


def test_zero_momentum_and_decay_give_the_simpler_optimiser():
    assert isinstance(optim.signum(0.1, 0.0), optim.SignSgd)
    assert optim.adamw(0.1, weight_decay=0.0).weight_decay == 0.0


# -- the problem with noise in parameter coordinates ------------------------------------------------------------
def test_parameter_noise_problem_has_the_requested_covariance_in_x():
    h = spectra.log_uniform(7, 0.1, 1.0)
    q = spectra.random_rotation(7, seed=1)
    p = nqm.NoisyQuadratic.with_parameter_noise(h, q, "hessian_diagonal")
    hx = q @ np.diag(h) @ q.T
    np.testing.assert_allclose(p.parameter_hessian, hx, atol=1e-14)
    np.testing.assert_allclose(p.parameter_sigma, np.diag(np.diag(hx)), atol=1e-14)
    given = np.diag(np.arange(1.0, 8.0))
    given[0, 1] = given[1, 0] = 0.5
    r = nqm.NoisyQuadratic.with_parameter_noise(h, q, given)
    np.testing.assert_allclose(r.parameter_sigma, given, atol=1e-13)
    # the sampled noise has that covariance in x: Σ_x from 20 000 one-step draws (the step is -εξ with θ = 0)
    sim = nqm.simulate(r, 1.0, 1, 1, 20_000, theta0=np.zeros(7), keep_state=True, seed=2)
    xs = sim.state @ q.T
    cov = np.cov(xs.T)
    se = np.sqrt((given**2 + np.outer(np.diag(given), np.diag(given))) / 20_000)  # Var of a sample covariance
    assert np.max(np.abs(cov - given) / se) < critical_z(49, ALPHA_TEST)
    with pytest.raises(ValueError, match="sigma_x"):
        nqm.NoisyQuadratic.with_parameter_noise(h, q, "hessian")
    with pytest.raises(ValueError, match="sigma_x"):
        nqm.NoisyQuadratic.with_parameter_noise(h, q, np.ones((3, 3)))


# -- sign descent's exact law -------------------------------------------------------------------------------------
def _pair_problem(rho):
    """H = I in two parameters with unit noise of correlation ρ: at B = 1, a = θ."""
    return nqm.NoisyQuadratic.with_parameter_noise([1.0, 1.0], np.eye(2), [[1.0, rho], [rho, 1.0]])


@pytest.mark.parametrize("seed", range(3))
def test_sign_pair_moment_matches_the_bivariate_normal(seed):
    """E[s₁s₂] against scipy's bivariate normal CDF and against Plackett's integral by quadrature."""
    rng = np.random.default_rng(seed)
    for k in range(40):
        a, b = rng.normal(0, 2, 2)
        a = 0.0 if k % 5 == 0 else a
        b = 0.0 if k % 7 == 0 else b
        rho = rng.uniform(-0.995, 0.995)
        mean, second = theory.sign_moments(_pair_problem(rho), [a, b], 1.0)
        both = stats.multivariate_normal([0, 0], [[1, rho], [rho, 1]]).cdf([a, b])
        ref = 4 * both - 2 * special.ndtr(a) - 2 * special.ndtr(b) + 1
        assert second[0, 1] == pytest.approx(ref, abs=1e-7)  # scipy's CDF is accurate to about 1e-8

        # Cov(s₁, s₂) = (2/π)∫₀^{arcsin ρ} exp(−(a² + b² − 2ab sin t)/(2cos²t)) dt (Plackett's identity)
        def integrand(t, a=a, b=b):
            return np.exp(-(a * a + b * b - 2 * a * b * np.sin(t)) / (2 * np.cos(t) ** 2))

        cov = 2 / np.pi * integrate.quad(integrand, 0, np.arcsin(rho), epsabs=1e-14, epsrel=1e-13, limit=200)[0]
        assert second[0, 1] - mean[0] * mean[1] == pytest.approx(cov, abs=1e-13)
        np.testing.assert_allclose(mean, special.erf(np.array([a, b]) / np.sqrt(2)), rtol=1e-15)


def test_sign_pair_moment_at_the_edges():
    """Zero drift gives the arcsine law (2/π)arcsin ρ; ρ = ±1 and infinite drift have their limits."""
    for rho in (-0.9, 0.0, 0.3, 0.99):
        assert theory.sign_moments(_pair_problem(rho), [0.0, 0.0], 1.0)[1][0, 1] == pytest.approx(
            2 / np.pi * np.arcsin(rho), abs=1e-15
        )
    assert theory.sign_moments(_pair_problem(1.0), [0.5, 0.5], 1.0)[1][0, 1] == pytest.approx(1.0)
    assert theory.sign_moments(_pair_problem(-1.0), [0.0, 0.0], 1.0)[1][0, 1] == pytest.approx(-1.0)
    mean, second = theory.sign_moments(_pair_problem(0.5), [1.0, 0.0], np.inf)
    assert mean.tolist() == [1.0, 0.0] and second.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    noiseless = nqm.NoisyQuadratic([1.0, 2.0], [0.0, 1.0])
    mean, second = theory.sign_moments(noiseless, [0.0, 1.0], 4.0)  # no gradient, no noise: s₀ = 0
    assert mean[0] == 0.0 and second[0, 0] == 0.0 and second[1, 1] == 1.0


def test_sign_improvement_without_noise_is_the_deterministic_step():
    p, q, h = _rotated_noiseless(d=6, seed=5)
    theta = np.linspace(-1, 1.3, 6)
    x = q @ theta
    for eps in (0.01, 0.3):
        step = x - eps * np.sign(p.parameter_hessian @ x)
        expected = 0.5 * x @ p.parameter_hessian @ x - 0.5 * step @ p.parameter_hessian @ step
        assert float(theory.sign_improvement(p, theta, eps, 7.0)) == pytest.approx(expected, rel=1e-13)


def _correlated_problem(d=10):
    h = spectra.log_uniform(d, 0.05, 1.0)
    return nqm.NoisyQuadratic(
        h, sigma=4 * spectra.misaligned_sigma(h, 1.0, seed=5), basis=spectra.random_rotation(d, seed=3)
    )


def test_sign_improvement_matches_monte_carlo_with_controls():
    """One simulated sign step per replica from a fixed θ, on a rotated problem with correlated noise in x.
    Planted errors: the noise taken as independent across parameters; √B missing from erf's argument."""
    p = _correlated_problem()
    theta = np.random.default_rng(1).normal(size=p.d) * 0.6
    grid = [(b, f) for b in (1, 4, 16, 64) for f in (0.5, 1.0, 2.0)]
    measured, se, exact, independent, no_root_b = [], [], [], [], []
    rho_free = nqm.NoisyQuadratic.with_parameter_noise(
        p.h, p.basis, np.diag(np.diag(p.parameter_sigma))
    )  # same marginals, no correlation
    for k, (b, factor) in enumerate(grid):
        eps = factor * float(theory.sign_optimal_step(p, theta, b))
        run = nqm.simulate(p, optim.sign_sgd(eps), b, 1, 40_000, theta0=theta, at=[0, 1], seed=100 + k)
        measured.append(run.mean[0] - run.mean[1])
        se.append(run.sem[1])
        exact.append(float(theory.sign_improvement(p, theta, eps, b)))
        independent.append(float(theory.sign_improvement(rho_free, theta, eps, b)))
        no_root_b.append(float(theory.sign_improvement(p, theta, eps, 1.0)))
    measured, se = np.array(measured), np.array(se)
    z = critical_z(len(grid), ALPHA_TEST)
    assert np.max(np.abs(measured - exact) / se) <= z
    assert np.max(np.abs(measured - independent) / se) > z, "independence was not rejected: no power"
    assert np.max(np.abs(measured - no_root_b) / se) > z, "the missing √B was not rejected: no power"


def test_optimal_step_regimes():
    """Independent noise: ε_opt ∝ √B while the signs are mostly noise; with H diagonal in x it only rises (no
    surge); a rotated H gives a peak above the large-B limit, which ``batch_size=inf`` gives."""
    h = 1.0 / np.arange(1, 41)
    theta = np.random.default_rng(2).normal(size=40)
    diagonal = nqm.NoisyQuadratic(h, h)
    tiny = 1e-7 * theta
    ratio = theory.sign_optimal_step(diagonal, tiny, 4.0) / theory.sign_optimal_step(diagonal, tiny, 1.0)
    assert float(ratio) == pytest.approx(2.0, rel=1e-9)
    b = np.geomspace(1, 1e8, 60)
    rising = theory.sign_optimal_step(diagonal, theta, b)
    assert np.all(np.diff(rising) >= 0) and rising[-1] == pytest.approx(rising.max(), rel=1e-15)
    rotated = nqm.NoisyQuadratic.with_parameter_noise(h, spectra.random_rotation(40, seed=0), "hessian_diagonal")
    curve = theory.sign_optimal_step(rotated, theta, b)
    limit = float(theory.sign_optimal_step(rotated, theta, np.inf))
    assert curve.max() > 1.02 * limit and np.argmax(curve) < b.size - 10  # a peak at finite B, then down
    assert curve[-1] == pytest.approx(limit, rel=1e-6)


def test_large_batch_limit_counts_zero_gradient_coordinates():
    """With G_k = 0 in x, s_k stays a fair coin: the limit's denominator keeps (H_x)_kk, which
    Σ|G_i|/(sign(G)ᵀH_x sign(G)) drops. Independent noise here, so no arcsine terms."""
    h = spectra.log_uniform(5, 0.1, 1.0)
    q = spectra.random_rotation(5, seed=7)
    p = nqm.NoisyQuadratic.with_parameter_noise(h, q, "hessian_diagonal")
    hx = p.parameter_hessian
    gx = np.array([0.3, -0.2, 0.0, 0.5, -0.1])
    theta = q.T @ gx / h  # G = Hθ = Qᵀ G_x, so (G_x)₂ is zero up to rounding (about 1e-17)
    s = np.sign(gx)
    exact = np.abs(gx).sum() / (s @ hx @ s + hx[2, 2])
    assert float(theory.sign_optimal_step(p, theta, 1e14)) == pytest.approx(exact, rel=1e-6)
    assert abs(np.abs(gx).sum() / (s @ hx @ s) - exact) > 0.01 * exact
    assert float(theory.sign_optimal_step(p, theta, np.inf)) == pytest.approx(exact, rel=1e-12)  # rounding is 0
    # a permutation basis keeps G_x exact; H_x is diagonal, so every coordinate adds (H_x)_ii
    perm = np.eye(5)[[3, 0, 4, 1, 2]]
    exact_zero = nqm.NoisyQuadratic.with_parameter_noise(h, perm, "hessian_diagonal")
    theta = perm.T @ gx / h
    expected = np.abs(gx).sum() / (perm @ h).sum()
    assert float(theory.sign_optimal_step(exact_zero, theta, np.inf)) == pytest.approx(expected, rel=1e-14)


def test_sign_theory_checks_its_arguments():
    p = nqm.NoisyQuadratic.zhang2019(4)
    with pytest.raises(ValueError, match="batch size"):
        theory.sign_optimal_step(p, np.ones(4), 0.5)
    with pytest.raises(ValueError, match="theta"):
        theory.sign_improvement(p, np.ones(3), 0.1, 2)
    with pytest.raises(ValueError, match="lr"):
        theory.sign_improvement(p, np.ones(4), -0.1, 2)
    with pytest.raises(ValueError, match="one batch size"):
        theory.sign_moments(p, np.ones(4), [1, 2])
    assert theory.sign_step_moments(p, np.ones((3, 1, 4)), [1.0, 2.0])[0].shape == (3, 2)


def test_fused_elementwise_loop_agrees_with_the_general_path():
    """A diagonal problem runs Adam and sign descent in the fused in-place loop; the same problem given with an
    identity basis runs the general path (copies, another stream). Their losses agree within the standard error
    of the difference; doubling the noise is rejected."""
    p = nqm.NoisyQuadratic.zhang2019(40)
    general = nqm.NoisyQuadratic(p.h, p.c, basis=np.eye(p.d))
    noisier = nqm.NoisyQuadratic(p.h, 2 * p.c, basis=np.eye(p.d))
    for opt in (optim.adam(0.02, 0.8, 0.95), optim.signum(0.01, 0.5)):
        kw = dict(batch_size=2, steps=150, replicas=800, at=[10, 50, 150])
        fused = nqm.simulate(p, opt, seed=1, **kw)
        slow, planted = nqm.simulate(general, opt, seed=2, **kw), nqm.simulate(noisier, opt, seed=3, **kw)
        z = critical_z(3, ALPHA_TEST)
        assert np.max(np.abs(fused.mean - slow.mean) / np.hypot(fused.sem, slow.sem)) <= z
        assert np.max(np.abs(fused.mean - planted.mean) / np.hypot(fused.sem, planted.sem)) > z


def test_fused_loop_is_the_same_on_one_or_two_threads():
    """Several tiles (700 replicas of d = 50 make three), run on one and on two threads."""
    p = nqm.NoisyQuadratic.zhang2019(50)
    kw = dict(batch_size=4, steps=20, replicas=700, seed=9, keep_losses=True)
    one = nqm.simulate(p, optim.adam(0.01), threads=1, **kw)
    two = nqm.simulate(p, optim.adam(0.01), threads=2, **kw)
    np.testing.assert_array_equal(one.losses, two.losses)


# -- the noise scale Adam's preconditioner sees (adaptdl's AdamGradientNoiseScale) -----------------------------------
def test_preconditioned_two_batch_estimates_match_the_exact_noise_scale():
    """adaptdl's estimator: two-batch estimates of |G|² and tr Σ on P·g (P from Adam's second moment, diagonal in
    x), averaged over draws, their ratio against tr(PΣ_xP)/|PG_x|². Planted error: the unpreconditioned B_simple."""
    from nqm import estimators, noise
    from validation.stats import ratio_of_means

    p = _correlated_problem(12)
    theta = np.random.default_rng(4).normal(size=p.d) * 0.5
    pre = theory.adam_preconditioner(p, theta, 8)
    g_x = p.basis @ (p.h * theta)
    rng = np.random.default_rng(5)
    draws = 20_000

    def preconditioned_norms(b):
        xi = noise.minibatch_noise(rng, p, b, draws) @ p.basis.T  # the batch noise in x
        return np.sum((pre * (g_x + xi)) ** 2, axis=1)

    g2, trace = estimators.two_batch_estimates(preconditioned_norms(4), preconditioned_norms(64), 4, 64)
    measured, se = ratio_of_means(trace, g2)
    z = critical_z(1, ALPHA_TEST)
    assert abs(measured - float(theory.preconditioned_simple_noise_scale(p, theta, pre))) <= z * se
    assert abs(measured - float(theory.simple_noise_scale(p, theta))) > z * se, "no power against P = I"
    np.testing.assert_allclose(
        theory.preconditioned_simple_noise_scale(p, theta, np.ones(p.d)),
        theory.simple_noise_scale(p, theta),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match="precond_x"):
        theory.preconditioned_simple_noise_scale(p, theta, -np.ones(p.d))
