"""nqm.measure: every measured quantity against an independent reference.

* Lanczos' Gauss rule against dense matrix powers (exact to degree 2m − 1, and not beyond);
* an NQM's finite training set wrapped as a model (rotated, so H is dense in the parameters): every measured
  quantity equals the finite set's exact value, written here from the examples themselves, to rounding;
* a JAX logistic regression against its Hessian and per-example gradients written by hand in NumPy (the softmax's
  diag(p) − ppᵀ): HVPs, tr(HΣ), Σ's top block, the top eigenvalues; SLQ's tr Hᵏ within its standard errors;
* the local NQM: |G|² and GᵀHG kept to rounding, noiseless SGD's improvement L₀ − L_t exact for t ≤ m (and not beyond);
* the two-batch estimators' means against their exact expectations without replacement, with a negative control.

Statistical assertions use z = 4.5 (two-sided false alarm 7e-6 each, under 1e-4 for this file's dozen).
"""

import numpy as np
import pytest

import nqm
from nqm import spectra, theory
from nqm.measure import Model, gauss_quadrature, lanczos, local_quadratic, measure, quadratic_model

Z = 4.5

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def test_gauss_quadrature_is_exact_to_degree_2m_minus_1_and_not_beyond():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    a = (q * np.linspace(0.1, 2.0, 40)) @ q.T
    v = rng.standard_normal(40)
    v /= np.linalg.norm(v)
    m = 6
    nodes, weights = gauss_quadrature(*lanczos(lambda x: a @ x, v, m)[:2])
    for k in range(2 * m + 1):
        exact = v @ np.linalg.matrix_power(a, k) @ v
        quad = weights @ nodes**k
        if k <= 2 * m - 1:
            assert quad == pytest.approx(exact, rel=1e-11), k
        else:
            assert abs(quad - exact) > 1e-8 * exact  # degree 2m: a Gauss rule of m nodes is no longer exact


def test_lanczos_basis_stays_orthonormal_and_off_the_deflated_block():
    rng = np.random.default_rng(1)
    h = np.geomspace(1e-4, 1.0, 300)
    u = np.eye(300)[-5:]  # the top five eigenvectors of diag(h)
    alpha, beta, basis = lanczos(lambda x: h * x, rng.standard_normal(300), 120, orthogonal_to=u)
    assert np.abs(basis @ basis.T - np.eye(basis.shape[0])).max() < 1e-12
    assert np.abs(basis @ u.T).max() < 1e-14
    assert gauss_quadrature(alpha, beta)[0].max() < h[-6] * (1 + 1e-12)  # no deflated eigenvalue comes back


def finite_quadratic(n=60, d=12, seed=3):
    h = np.geomspace(0.05, 2.0, d)
    p = nqm.NoisyQuadratic(h, spectra.power_law(d, 1.0) + 0.1)
    data = nqm.FiniteDataset.draw(p, n, seed=seed)
    q = spectra.random_rotation(d, seed=seed)
    return data, q


def test_a_quadratic_model_gives_back_its_exact_quantities():
    data, q = finite_quadratic()
    model = quadratic_model(data, basis=q)
    x = np.random.default_rng(4).standard_normal(data.d)
    m = measure(model, x, top_k=3, probes=4, lanczos_steps=8, seed=0)
    # The exact values, from the examples themselves (not from nqm.measure): x-coordinates, θ = Qᵀx.
    hx = (q * data.h) @ q.T
    per_example = x @ hx + data.examples @ q.T
    g = per_example.mean(axis=0)
    centred = per_example - g
    sigma = centred.T @ centred / data.n  # the population's covariance, normalised by N
    assert m.grad_norm_sq == pytest.approx(g @ g, rel=1e-12)
    assert m.gHg == pytest.approx(g @ hx @ g, rel=1e-12)
    assert m.tr_sigma == pytest.approx(np.trace(sigma), rel=1e-12)
    assert m.tr_h_sigma == pytest.approx(np.trace(hx @ sigma), rel=1e-12)
    assert m.b_noise == pytest.approx(np.trace(hx @ sigma) / (g @ hx @ g), rel=1e-12)
    assert m.b_simple == pytest.approx(np.trace(sigma) / (g @ g), rel=1e-12)
    assert (m.b_noise_se, m.b_simple_se) == (0.0, 0.0)
    np.testing.assert_allclose(m.eigenvalues, np.sort(data.h)[::-1][:3], rtol=1e-10)
    np.testing.assert_allclose(m.sigma_top, m.eigenvectors @ sigma @ m.eigenvectors.T, rtol=1e-9, atol=1e-13)
    # ... and the same through nqm.theory on the NQM of the finite set (H's basis, Σ_N dense)
    p_n = nqm.NoisyQuadratic(data.h, sigma=data.sigma)
    theta = q.T @ x - data.optimum
    assert m.b_noise == pytest.approx(float(theory.noise_scale(p_n, theta)), rel=1e-10)
    assert m.b_simple == pytest.approx(float(theory.simple_noise_scale(p_n, theta)), rel=1e-10)


def test_g_measure_is_exact_and_the_spectral_measures_add_up():
    data, q = finite_quadratic(d=12)
    x = np.random.default_rng(5).standard_normal(data.d)
    m = measure(quadratic_model(data, basis=q), x, top_k=2, probes=3, lanczos_steps=12, seed=1)
    hx = (q * data.h) @ q.T
    g = m.gradient
    for k in range(4):  # GᵀHᵏG from the top block plus G^⊥'s Gauss rule, exact (the Krylov space closes at d)
        quad = m.eigenvalues**k @ m.gradient_top**2 + m.gradient_masses @ m.gradient_nodes**k
        assert quad == pytest.approx(g @ np.linalg.matrix_power(hx, k) @ g, rel=1e-10), k


def test_exact_noise_off_gives_hutchinson_with_a_standard_error_that_covers_the_truth():
    data, q = finite_quadratic(n=80, d=30)
    x = np.random.default_rng(6).standard_normal(data.d)
    model = quadratic_model(data, basis=q)
    exact = measure(model, x, top_k=2, probes=2, lanczos_steps=4, estimator_draws=0)
    sampled = measure(model, x, top_k=2, noise_probes=64, probes=2, lanczos_steps=30, exact_noise=False, seed=2)
    assert sampled.tr_h_sigma_se > 0
    assert abs(sampled.tr_h_sigma - exact.tr_h_sigma) <= Z * sampled.tr_h_sigma_se
    assert sampled.b_noise_se == pytest.approx(sampled.tr_h_sigma_se / exact.gHg)


# -- a JAX logistic regression against NumPy by hand -----------------------------------------------------


def tiny_logistic(n=70, features=5, classes=3, l2=0.05, seed=7):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features))
    y = rng.integers(0, classes, n)

    def loss(params, xi, yi):
        logits = xi @ params["w"] + params["b"]
        return jax.nn.logsumexp(logits) - logits[yi] + 0.5 * l2 * jnp.sum(params["w"] ** 2)

    params = {"w": 0.3 * rng.standard_normal((features, classes)), "b": 0.1 * rng.standard_normal(classes)}
    return nqm.measure.JaxModel(loss, params, x, y, name="tiny logistic"), x, y, l2


def softmax_of(theta, x):
    """(n, features, classes, W, the softmax probabilities (n, classes)) of the logistic regression at θ."""
    n, f = x.shape
    k = theta.size // (f + 1)
    b, w = theta[:k], theta[k:].reshape(f, k)
    logits = x @ w + b
    prob = np.exp(logits - logits.max(axis=1, keepdims=True))
    return n, f, k, w, prob / prob.sum(axis=1, keepdims=True)


def logistic_by_hand(theta, x, y, l2, hessian=True):
    """Per-example gradients and the dense Hessian of the mean loss, from the softmax's derivatives.

    θ is ravel_pytree's order of {"b", "w"}: b (classes,) then W (features, classes) row-major.
    """
    n, f, k, w, prob = softmax_of(theta, x)
    r = prob - np.eye(k)[y]  # ∂ℓ/∂logits
    grads = np.concatenate([r, (x[:, :, None] * r[:, None, :]).reshape(n, f * k) + l2 * w.ravel()], axis=1)
    if not hessian:
        return grads, None
    # ∂logits/∂θ for each example: (n, k, D); the Hessian is its Jᵀ(diag p − ppᵀ)J averaged, plus λ on W.
    jac = np.zeros((n, k, k + f * k))
    jac[:, :, :k] = np.eye(k)
    for c in range(k):
        jac[:, c, k + c :: k] = x
    curv = prob[:, :, None] * np.eye(k) - prob[:, :, None] * prob[:, None, :]
    hess = np.einsum("nai,nab,nbj->ij", jac, curv, jac) / n
    hess[k:, k:] += l2 * np.eye(f * k)
    return grads, hess


def test_jax_model_matches_numpy_by_hand():
    model, x, y, l2 = tiny_logistic()
    theta = model.initial
    grads, hess = logistic_by_hand(theta, x, y, l2)
    np.testing.assert_allclose(model.per_example_gradients(theta, np.arange(model.n)), grads, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model.gradient(theta, np.arange(model.n)), grads.mean(axis=0), atol=1e-14)
    v = np.random.default_rng(0).standard_normal((4, model.dim))
    np.testing.assert_allclose(model.hvp(theta, v), v @ hess, rtol=1e-11, atol=1e-14)


def test_measure_on_a_real_logistic_regression_against_the_dense_hessian():
    model, x, y, l2 = tiny_logistic()
    theta = model.initial
    grads, hess = logistic_by_hand(theta, x, y, l2)
    g = grads.mean(axis=0)
    xi = grads - g
    sigma = xi.T @ xi / model.n
    m = measure(model, theta, top_k=4, probes=40, lanczos_steps=model.dim, seed=3)
    assert m.tr_sigma == pytest.approx(np.trace(sigma), rel=1e-11)
    assert m.tr_h_sigma == pytest.approx(np.trace(hess @ sigma), rel=1e-10)
    assert m.gHg == pytest.approx(g @ hess @ g, rel=1e-11)
    assert m.b_noise == pytest.approx(np.trace(hess @ sigma) / (g @ hess @ g), rel=1e-10)
    eig, vec = np.linalg.eigh(hess)
    np.testing.assert_allclose(m.eigenvalues, eig[::-1][:4], rtol=1e-9)
    top = vec[:, ::-1][:, :4].T
    np.testing.assert_allclose(np.abs(m.sigma_top), np.abs(top @ sigma @ top.T), rtol=1e-7, atol=1e-12)
    for k in (1, 2, 3):  # SLQ's tr Hᵏ: exact top part plus the sampled bulk, within its SE
        value, se = m.trace_hessian_power(k)
        exact = np.sum(eig**k)
        assert se > 0
        assert abs(value - exact) <= Z * se, (k, value, exact, se)


def test_measure_names_an_inconsistent_model():
    model, *_ = tiny_logistic()
    broken = Model(
        n=model.n,
        dim=model.dim,
        loss=model.loss,
        gradient=lambda theta, idx: model.gradient(theta, idx[: len(idx) // 2]),  # a planted error
        per_example_gradients=model.per_example_gradients,
        hvp=model.hvp,
    )
    with pytest.raises(ValueError, match="not the mean of model.per_example_gradients"):
        measure(broken, model.initial, top_k=1, probes=2, lanczos_steps=3)
    with pytest.raises(ValueError, match="theta must have shape"):
        measure(model, np.zeros(3))
    with pytest.raises(ValueError, match="top_k must be <"):
        measure(model, model.initial, top_k=model.dim)


# -- the local NQM ---------------------------------------------------------------------------------------


def test_local_quadratic_keeps_the_gradient_and_its_improvement_is_exact_for_t_up_to_m():
    h = np.geomspace(0.01, 1.0, 40)
    data = nqm.FiniteDataset(h, np.zeros((3, 40)))  # no noise: the start's part alone
    x = np.random.default_rng(8).standard_normal(40)
    steps = 5
    m = measure(quadratic_model(data), x, top_k=3, probes=2, lanczos_steps=steps, estimator_draws=0, seed=0)
    local = local_quadratic(m, curvature_floor=1e-12)
    for key in ("grad_norm_sq", "gHg"):
        measured, built = local.kept[key]
        assert built == pytest.approx(measured, rel=1e-12)
    lr = 1.5
    curve = nqm.dynamics.expected_loss(local.problem, lr, 1, 8, init_var=local.init_var, at=np.arange(9)).mean
    for t in range(1, 9):
        exact = 0.5 * np.sum(h * (1 - (1 - lr * h) ** (2 * t)) * x**2)  # G = Hx: the start sits at x
        if t <= steps:
            assert curve[0] - curve[t] == pytest.approx(exact, rel=1e-10), t
        else:
            assert abs(curve[0] - curve[t] - exact) > 1e-8 * exact  # past the rule's degree: an approximation


def test_from_measurement_and_the_noise_scale_of_the_local_nqm():
    data, q = finite_quadratic()
    x = np.random.default_rng(9).standard_normal(data.d)
    m = measure(quadratic_model(data, basis=q), x, top_k=data.d - 1, probes=2, lanczos_steps=4, seed=0)
    local = m.local_quadratic()
    p = nqm.NoisyQuadratic.from_measurement(m)
    np.testing.assert_array_equal(p.h, local.problem.h)
    # with every direction but one exact, the NQM's tr(HΣ) misses only the last direction's sampled part
    built = float(theory.noise_scale(local.problem, local.theta0))
    assert built == pytest.approx(local.kept["tr_h_sigma"][1] / local.kept["gHg"][1], rel=1e-12)
    assert abs(built / m.b_noise - 1) < 0.05


def test_local_quadratic_drops_negative_curvature_and_says_so():
    h = np.array([1.0, 0.5, -0.2])  # a saddle: the third direction cannot be in an NQM
    hess = np.diag(h)
    xi = np.random.default_rng(10).standard_normal((20, 3))
    xi -= xi.mean(axis=0)
    model = Model(
        n=20,
        dim=3,
        loss=lambda t, i: 0.0,
        gradient=lambda t, i: hess @ t + xi[i].mean(axis=0),
        per_example_gradients=lambda t, i: (hess @ t)[None, :] + xi[i],
        hvp=lambda t, v: v @ hess,
    )
    m = measure(model, np.ones(3), top_k=2, probes=2, lanczos_steps=2, estimator_draws=0)
    local = local_quadratic(m)
    assert np.all(local.problem.h > 0)
    measured, built = local.kept["grad_norm_sq"]
    assert built == pytest.approx(measured - 0.2**2, rel=1e-12)  # the saddle's G² = (h·1)² is reported lost


# -- the two-batch estimators on a real finite set ----------------------------------------------------------


def test_two_batch_estimators_have_their_finite_set_expectations():
    data, q = finite_quadratic(n=10, d=6, seed=11)
    x = np.random.default_rng(12).standard_normal(data.d)
    m = measure(
        quadratic_model(data, basis=q), x, top_k=1, probes=2, lanczos_steps=2, estimator_batches=(1, 5),
        estimator_draws=20_000, seed=4,
    )  # fmt: skip
    e = m.estimators
    assert abs(e.grad_norm_sq - e.expected_grad_norm_sq) <= Z * e.grad_norm_sq_se
    assert abs(e.tr_sigma - e.expected_tr_sigma) <= Z * e.tr_sigma_se
    # negative control: the with-replacement expectations (|G|², tr Σ) are rejected at N = 10
    assert abs(e.tr_sigma - m.tr_sigma) > Z * e.tr_sigma_se
    assert abs(e.grad_norm_sq - m.grad_norm_sq) > Z * e.grad_norm_sq_se


def logistic_hvp_by_hand(theta, x, l2, v):
    """Hv for the logistic regression without forming H: J v per example, (diag p − ppᵀ), then Jᵀ."""
    n, f, k, w, prob = softmax_of(theta, x)
    vb, vw = v[:k], v[k:].reshape(f, k)
    jv = x @ vw + vb
    cjv = prob * jv - prob * np.sum(prob * jv, axis=1, keepdims=True)
    return np.concatenate([cjv.sum(axis=0) / n, (x.T @ cjv / n + l2 * vw).ravel()])


def test_digits_logistic_regression_is_the_softmax_regression_written_by_hand():
    pytest.importorskip("sklearn")
    from nqm.measure import digits

    model = digits.logistic_regression(l2=1e-3)
    x, y = digits.load()
    assert (model.n, model.dim) == (1797, 650) and x.min() == 0 and x.max() == 1
    theta = 0.1 * np.random.default_rng(13).standard_normal(model.dim)
    idx = np.arange(0, model.n, 7)
    grads = logistic_by_hand(theta, x[idx], y[idx], 1e-3, hessian=False)[0]
    np.testing.assert_allclose(model.per_example_gradients(theta, idx), grads, rtol=1e-11, atol=1e-14)
    v = np.random.default_rng(14).standard_normal(model.dim)
    np.testing.assert_allclose(model.hvp(theta, v[None])[0], logistic_hvp_by_hand(theta, x, 1e-3, v), rtol=1e-10)
