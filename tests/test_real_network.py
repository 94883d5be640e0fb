"""One real SGD step (nqm.measure.one_step) and the claim V23 built on it.

On an NQM's finite training set wrapped as a model the loss is exactly quadratic, so every draw's ΔL(ε) is exactly
−εGᵀĝ + ½ε²ĝᵀHĝ: the per-draw fits recover it to rounding (higher terms 0), and their mean is held against
−|G|² and ½(GᵀHG + tr(HΣ)(N − B)/(B(N − 1))) within z = 4.5 standard errors (false alarm 7e-6 per cell), while the
finite-set factor left out (1/B) and the noise without 1/B are rejected.
"""

import numpy as np
import pytest

import nqm
from nqm import spectra
from nqm.measure import (
    draw_fits,
    fit_one_step,
    measure,
    normalised_improvements,
    one_step_changes,
    predicted_coefficients,
    quadratic_model,
    step_grid,
    steps_to_loss,
    tuned_steps,
)

Z = 4.5


@pytest.fixture(scope="module")
def quadratic_steps():
    p = nqm.NoisyQuadratic(np.geomspace(0.1, 1.0, 8), np.ones(8))
    data = nqm.FiniteDataset.draw(p, 40, seed=0)
    model = quadratic_model(data, basis=spectra.random_rotation(8, seed=1))
    theta = np.random.default_rng(2).standard_normal(8)
    m = measure(model, theta, top_k=2, probes=2, lanczos_steps=4, estimator_draws=0)
    batches = np.array([2, 8, 36])
    lrs = np.array([0.1, 0.3, 0.6, 1.0, 1.4])
    changes = one_step_changes(model, theta, lrs, batches, 4000, seed=3)
    return model, theta, m, batches, lrs, changes


def test_each_draw_of_a_quadratic_is_exactly_quadratic(quadratic_steps):
    model, theta, m, batches, lrs, changes = quadratic_steps
    fits = draw_fits(lrs, changes, degree=4)
    scale = np.abs(fits[..., :2]).max()
    assert np.abs(fits[..., 2:]).max() < 1e-10 * scale  # no cubic or quartic part, to rounding


def test_the_mean_step_has_the_finite_set_law_and_the_controls_are_rejected(quadratic_steps):
    model, theta, m, batches, lrs, changes = quadratic_steps
    mean, se = fit_one_step(lrs, changes, degree=2)
    c1, c2 = predicted_coefficients(m, batches)
    assert np.all(np.abs(mean[:, 0] - c1) <= Z * se[:, 0])
    assert np.all(np.abs(mean[:, 1] - c2) <= Z * se[:, 1])
    no_finite = 0.5 * (m.gHg + m.tr_h_sigma / batches)
    kappa = (model.n - batches) / (batches * (model.n - 1))
    no_over_b = 0.5 * (m.gHg + m.tr_h_sigma * kappa * batches)
    assert np.any(np.abs(mean[:, 1] - no_finite) > Z * se[:, 1])
    assert np.any(np.abs(mean[:, 1] - no_over_b) > Z * se[:, 1])


def test_the_step_grid_is_centred_on_mccandlish_s_optimal_step(quadratic_steps):
    """ε_opt(B) written as McCandlish et al.'s eq. 2.7 with the finite-set factor: ε_max/(1 + B_noise·κ_B)."""
    model, theta, m, batches, lrs, changes = quadratic_steps
    kappa = (model.n - batches) / (batches * (model.n - 1))
    law = (m.grad_norm_sq / m.gHg) / (1 + m.b_noise * kappa)
    grid, eps_opt = step_grid(m, batches, [0.5, 1.0, 2.0], step_cap=10.0)
    np.testing.assert_allclose(eps_opt, law, rtol=1e-12)
    np.testing.assert_allclose(grid, np.minimum(law, 10.0 / m.eigenvalues[0])[:, None] * [0.5, 1.0, 2.0], rtol=1e-12)
    capped, _ = step_grid(m, batches, [1.0], step_cap=1e-3)
    np.testing.assert_allclose(capped[:, 0], 1e-3 / m.eigenvalues[0], rtol=1e-12)


def test_normalised_improvements_put_the_law_on_one_parabola(quadratic_steps):
    """Changes that follow the law exactly land on u(2 − u); the measured mean steps of an exact quadratic lie on it
    within Z standard errors."""
    model, theta, m, batches, lrs, changes = quadratic_steps
    c1, c2 = predicted_coefficients(m, batches)
    exact = np.broadcast_to(c1[:, None] * lrs + c2[:, None] * lrs**2, (2, *changes.shape[1:]))
    u, y, se = normalised_improvements(lrs, exact, c1, c2)
    np.testing.assert_allclose(y, u * (2 - u), rtol=1e-12, atol=1e-14)
    assert np.all(se == 0)
    u, y, se = normalised_improvements(lrs, changes, c1, c2)
    assert np.all(np.abs(y - u * (2 - u)) <= Z * se)
    assert np.any(np.abs(y - u * (1 - u)) > Z * se)  # a wrong parabola is told apart


def test_one_step_changes_checks_its_arguments(quadratic_steps):
    model, theta, *_ = quadratic_steps
    with pytest.raises(ValueError, match="batch_sizes must be integers in"):
        one_step_changes(model, theta, [0.1], [model.n + 1], 4)
    with pytest.raises(ValueError, match="lrs must be finite and > 0"):
        one_step_changes(model, theta, [0.0], [2], 4)
    with pytest.raises(ValueError, match="needs at least 4 step sizes"):
        fit_one_step([0.1, 0.2], np.zeros((3, 1, 2)), degree=4)


def test_v23_says_why_it_did_not_run_without_the_extra(monkeypatch, tmp_path):
    from validation import v23_real_network as v23
    from validation.claims import Context

    monkeypatch.setattr(v23, "missing_extra", lambda: "needs jax: pip install 'nqm[real]'")
    out = v23.run(Context(tmp_path, True, 0))
    assert out.checks == [] and "nqm[real]" in out.tables[0].rows[0][0]


def test_real_full_batch_runs_hit_the_target_when_the_recursion_does():
    """At B = N a real run is deterministic gradient descent (heavy ball): its first hit equals a plain loop here."""
    h = np.geomspace(0.05, 1.0, 6)
    data = nqm.FiniteDataset.draw(nqm.NoisyQuadratic(h, np.ones(6)), 30, seed=5)
    model = quadratic_model(data)
    theta0 = np.ones(6)
    x0 = theta0 - data.optimum  # the error from the training loss's minimiser
    floor = model.loss(data.optimum, model.everything)
    target = floor + 0.01 * 0.5 * h @ x0**2
    for lr, beta in ((1.0, 0.0), (0.3, 0.8)):
        x, v, expected = x0.copy(), np.zeros(6), None
        for t in range(1, 2000):
            v = beta * v + h * x
            x = x - lr * v
            if floor + 0.5 * h @ x**2 <= target:
                expected = t
                break
        got = steps_to_loss(model, theta0, lr, model.n, target, momentum=beta, max_steps=5000)
        assert got == expected
    runs = tuned_steps(model, theta0, target, [model.n], [0.5, 1.0, 1.9], seeds=(0, 1), max_steps=5000)
    assert runs.lr[0] == 1.9 and np.all(runs.per_seed == runs.steps[0])  # no noise: every seed alike


def test_a_fused_real_run_takes_the_same_steps_as_one_call_a_step():
    pytest.importorskip("jax")
    from test_measure import tiny_logistic

    model, *_ = tiny_logistic()
    stepwise = nqm.measure.Model(
        n=model.n,
        dim=model.dim,
        loss=model.loss,
        gradient=model.gradient,
        per_example_gradients=model.per_example_gradients,
        hvp=model.hvp,
        losses_at=model.losses_at,
        gradients_on=model.gradients_on,
    )
    start = model.loss(model.initial, model.everything)
    for beta, target in ((0.0, 0.95 * start), (0.9, 0.95 * start), (0.0, 0.0)):
        fused = steps_to_loss(model, model.initial, 0.3, 8, target, momentum=beta, max_steps=300, seed=4)
        plain = steps_to_loss(stepwise, model.initial, 0.3, 8, target, momentum=beta, max_steps=300, seed=4)
        assert fused == plain and (np.isfinite(fused) or target == 0.0)
