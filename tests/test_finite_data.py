"""A finite training set: the without-replacement factor by enumeration, exact training and population losses
against a recursion in θ, the simulator against them (with a planted error), and B = N as full-batch descent."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_montecarlo import assert_agrees_and_control_rejected

import nqm
from nqm import dynamics, optim


def _data(n=64, d=12, seed=1):
    return nqm.FiniteDataset.draw(nqm.NoisyQuadratic.zhang2019(d), n, seed=seed)


@pytest.mark.parametrize("b", [1, 2, 3, 5, 6])
def test_the_batch_covariance_is_the_factor_times_sigma_n_by_enumeration(b):
    """Every batch of b distinct examples (and every ordered b-tuple with replacement), enumerated: the batch
    means' covariance about ξ̄ is Σ_N(N − B)/(B(N − 1)) (and Σ_N/B)."""
    data = nqm.FiniteDataset(np.array([1.0, 0.3]), np.random.default_rng(4).standard_normal((6, 2)) * [1.0, 2.0])
    xi, mean = data.examples, data.mean_noise

    def covariance(batches):
        dev = np.array([xi[list(c)].mean(axis=0) for c in batches]) - mean
        return dev.T @ dev / len(dev)

    np.testing.assert_allclose(
        covariance(itertools.combinations(range(6), b)), data.sigma * data.batch_factor(b), atol=1e-14
    )
    np.testing.assert_allclose(
        covariance(itertools.product(range(6), repeat=b)),
        data.sigma * data.batch_factor(b, "replacement"),
        atol=1e-14,
    )


def _recursion(data, opt, b, steps, factor, v0=1.0):
    """Mean and variance of (θ, v) step by step in θ itself: v ← βv + g_B, θ ← θ − εv with g_B = Hθ + ξ̄ + noise,
    Var noise = factor·diag(Σ_N) (β = 0 for SGD); returns the (training, population) excess losses."""
    h, beta, eps = data.h, getattr(opt, "momentum", 0.0), opt.lr
    a = np.zeros((data.d, 2, 2))
    a[:, 1, 0], a[:, 1, 1] = h, beta
    a[:, 0, 0], a[:, 0, 1] = 1 - eps * h, -eps * beta
    force = np.stack([-eps * data.mean_noise, data.mean_noise], 1)
    gain = np.array([-eps, 1.0])
    q = factor * np.diag(data.sigma)
    mean, cov = np.zeros((data.d, 2)), np.zeros((data.d, 2, 2))
    cov[:, 0, 0] = v0
    train, test = [], []
    for _ in range(steps + 1):
        train.append(0.5 * h @ ((mean[:, 0] - data.optimum) ** 2 + cov[:, 0, 0]))
        test.append(0.5 * h @ (mean[:, 0] ** 2 + cov[:, 0, 0]))
        mean = np.einsum("dij,dj->di", a, mean) + force
        cov = a @ cov @ np.swapaxes(a, 1, 2) + q[:, None, None] * np.outer(gain, gain)
    return np.array(train), np.array(test)


@pytest.mark.parametrize("sampling", ["batches", "replacement"])
@pytest.mark.parametrize("opt", [optim.sgd(0.7), optim.heavy_ball(0.2, 0.8)], ids=["sgd", "heavy_ball"])
def test_exact_training_and_population_losses_equal_a_recursion_in_theta(sampling, opt):
    data = _data()
    train, test = data.expected_losses(opt, 16, 300, sampling=sampling)
    ref_train, ref_test = _recursion(data, opt, 16, 300, data.batch_factor(16, sampling))
    np.testing.assert_allclose(train.mean, ref_train, rtol=1e-12)
    np.testing.assert_allclose(test.mean, ref_test, rtol=1e-12)


@pytest.mark.parametrize("sampling", ["batches", "replacement", "epochs"])
def test_simulated_losses_agree_with_the_exact_ones(sampling):
    """Training and population losses, SGD at B = N/4; planted error: another sampling's exact curve (the factor
    (N − B)/(N − 1) = 0.76 left out or put in; for epochs, independent batches: the epoch's covariance left out)."""
    data, at = _data(), [1, 5, 20, 100, 300]
    other = {"batches": "replacement", "replacement": "batches", "epochs": "batches"}[sampling]
    exact = data.expected_losses(optim.sgd(0.7), 16, 300, sampling=sampling, at=at)
    planted = data.expected_losses(optim.sgd(0.7), 16, 300, sampling=other, at=at)
    run = data.simulate(optim.sgd(0.7), 16, 300, 6000, sampling=sampling, seed=2, at=at)
    for simulated, e, wrong in zip(run, exact, planted):
        assert_agrees_and_control_rejected(simulated.mean[2:], simulated.sem[2:], e.mean[2:], wrong.mean[2:])


def test_shuffled_epochs_reach_a_lower_training_loss_than_independent_batches():
    """Each epoch uses every example once, so its batches' noise sums to zero: the floor is far below the
    independent-batch law, exactly."""
    data = _data()
    independent, _ = data.expected_losses(optim.sgd(0.7), 16, 400, sampling="batches", at=[400])
    epochs, _ = data.expected_losses(optim.sgd(0.7), 16, 400, sampling="epochs", at=[400])
    assert epochs.mean[0] < 0.5 * independent.mean[0]


def test_a_training_problem_of_shuffled_epochs_is_refused_saying_why():
    with pytest.raises(ValueError, match="no noisy quadratic with independent noise describes them"):
        _data().training_problem(16, sampling="epochs")


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 40), lr=st.floats(0.05, 1.5), steps=st.integers(1, 30))
def test_the_whole_set_as_one_batch_is_full_batch_gradient_descent(n, lr, steps):
    """B = N: no noise without replacement (an epoch is one full-batch step), so every replica follows
    θ ← θ − ε(Hθ + ξ̄) from its own θ₀."""
    data = _data(n=n, d=5, seed=n)
    assert data.batch_factor(n) == 0.0
    at = np.arange(steps + 1)
    for sampling in ("batches", "epochs"):
        train, test = data.simulate(optim.sgd(lr), n, steps, 3, sampling=sampling, seed=1, at=at)
        theta = np.random.default_rng(np.random.SeedSequence(1)).standard_normal((3, 5))
        expect_train, expect_test = [], []
        for _ in at:
            expect_train.append((0.5 * np.square(theta - data.optimum) @ data.h).mean())
            expect_test.append((0.5 * np.square(theta) @ data.h).mean())
            theta = theta - lr * (data.h * theta + data.mean_noise)
        exact = sampling == "batches"  # epochs average the permuted examples: the same sum in another order
        np.testing.assert_allclose(train.mean, expect_train, rtol=0 if exact else 1e-12, atol=0 if exact else 1e-13)
        np.testing.assert_allclose(test.mean, expect_test, rtol=0 if exact else 1e-12, atol=0 if exact else 1e-13)


def test_the_training_optimum_and_sigma_are_the_examples():
    data = _data(n=5, d=3)
    xi = data.examples
    np.testing.assert_allclose(data.optimum, -xi.mean(axis=0) / data.h)
    np.testing.assert_allclose(data.sigma, np.cov(xi.T, bias=True))
    p = data.training_problem(2)
    np.testing.assert_allclose(p.sigma / 2, data.sigma * data.batch_factor(2))
    np.testing.assert_allclose(p.optimum, data.optimum)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: nqm.FiniteDataset(np.ones(3), np.ones((4, 2))), "examples"),
        (lambda: nqm.FiniteDataset(np.ones(3), np.ones((1, 3))), "N >= 2"),
        (lambda: nqm.FiniteDataset(np.ones(3), np.full((4, 3), np.nan)), "non-finite"),
        (lambda: _data().batch_factor(65), "exceeds"),
        (lambda: _data().batch_factor(2.5), "batch"),
        (lambda: _data().simulate(0.1, 4, 3, 4, sampling="shuffle"), "sampling"),
        (lambda: _data().training_problem(4, "epochs"), "epochs"),
        (lambda: _data().expected_losses(optim.sgd(0.1, weight_decay=0.1), 4, 3), "weight decay"),
        (lambda: _data().simulate(0.1, 128, 3, 4, sampling="batches"), "exceeds"),
    ],
)
def test_bad_finite_data_arguments_are_clear_errors(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


def _tiny_least_squares():
    from nqm.finite_data import FiniteLeastSquares

    return FiniteLeastSquares.draw(np.array([1.0, 0.4, 0.1]), 5, 0.3, seed=3)


@pytest.mark.parametrize("sampling", ["batches", "replacement"])
def test_least_squares_moments_equal_an_average_over_every_batch_sequence(sampling):
    """Given the batches, a run is affine in θ₀: θ_t = A θ₀ + c. Averaging A diag(v0) Aᵀ + ccᵀ over every sequence
    of batches (B = 2 of N = 5, three steps) is E[θ_tθ_tᵀ] without any covariance algebra."""
    data, lr, v0 = _tiny_least_squares(), 0.7, np.array([1.0, 0.5, 2.0])
    batches = list(
        itertools.combinations(range(5), 2) if sampling == "batches" else itertools.product(range(5), repeat=2)
    )
    _, seconds = data.moments(lr, 2, 3, sampling=sampling, init_var=v0)
    x, y = data.features, data.labels
    total = np.zeros((3, 3))
    for sequence in itertools.product(batches, repeat=3):
        a, c = np.eye(3), np.zeros(3)
        for batch in sequence:
            xb, yb = x[list(batch)], y[list(batch)]
            step = np.eye(3) - lr * xb.T @ xb / 2
            a, c = step @ a, step @ c + lr * xb.T @ yb / 2
        total += a @ np.diag(v0) @ a.T + np.outer(c, c)
    np.testing.assert_allclose(seconds[3], total / len(batches) ** 3, rtol=1e-12)


@pytest.mark.parametrize("sampling", ["batches", "replacement"])
def test_least_squares_training_set_simulation_agrees_with_its_exact_losses(sampling):
    """Planted error: the other sampling's exact losses (the factor (N − B)/(N − 1) = 0.89 left out or put in)."""
    from nqm.finite_data import FiniteLeastSquares

    data = FiniteLeastSquares.draw(1.0 / np.arange(1, 9), 64, 0.5, seed=1)
    at = [2, 5, 20, 100, 300]
    other = "replacement" if sampling == "batches" else "batches"
    exact = [c.mean[at] for c in data.expected_losses(0.5, 8, 300, sampling=sampling)]
    planted = [c.mean[at] for c in data.expected_losses(0.5, 8, 300, sampling=other)]
    run = data.simulate(optim.sgd(0.5), 8, 300, 8000, sampling=sampling, seed=4, at=at)
    for simulated, e, wrong in zip(run, exact, planted):
        assert_agrees_and_control_rejected(simulated.mean[2:], simulated.sem[2:], e[2:], wrong[2:])


def test_least_squares_with_the_whole_set_as_one_batch_is_gradient_descent_on_the_training_loss():
    data = _tiny_least_squares()
    train, test = data.simulate(optim.sgd(0.4), 5, 20, 2, sampling="epochs", seed=0, at=np.arange(21))
    theta = np.random.default_rng(np.random.SeedSequence(0)).standard_normal((2, 3))
    x, y, opt = data.features, data.labels, data.optimum
    for t in range(21):
        dev = theta - opt
        np.testing.assert_allclose(train.mean[t], np.mean(0.5 * np.einsum("ri,ij,rj->r", dev, data.hessian, dev)),
                                   rtol=1e-10)  # fmt: skip
        theta = theta - 0.4 * ((theta @ x.T - y) @ x) / 5
    exact_train, _ = data.expected_losses(0.4, 5, 20, init_var=1.0)
    assert data.moments(0.4, 5, 1)[1].shape == (2, 3, 3) and exact_train.mean[0] > 0


def test_fewest_epochs_are_exact_first_hits_and_no_step_on_a_grid_does_better():
    data = _data(n=128, d=10)
    batches = [1, 8, 64, 127, 128]
    runs = data.optimal_epochs(0.05, batches)
    start = 1.0 + data.optimum**2
    for i, b in enumerate(batches):
        problem = data.training_problem(b)
        assert dynamics.steps_to_target(problem, runs.optimizer(i), b, 0.05, init_var=start) == runs.steps[i]
        grid = [
            dynamics.steps_to_target(problem, optim.sgd(e), b, 0.05, init_var=start, max_steps=int(runs.steps[i]))
            for e in runs.lr[i] * np.geomspace(0.5, 1.5, 15)
        ]
        assert min(grid) >= runs.steps[i]
    with_replacement = data.optimal_epochs(0.05, batches[:-1], sampling="replacement")
    assert np.all(runs.steps[:-1] <= with_replacement.steps)  # less noise, never more steps


@pytest.mark.parametrize("n, b", [(100, 5), (100, 40)], ids=["redrawn", "ranked"])
def test_distinct_batches_have_no_repeats_and_the_without_replacement_law(n, b):
    """Both paths of the sampler: rows without repeats, and batch means whose spread is the factor law (planted:
    with replacement, 1/B; the two differ by (N − 1)/(N − B))."""
    from nqm.finite_data import distinct_batches

    data = nqm.FiniteDataset(np.array([1.0, 0.5]), np.random.default_rng(9).standard_normal((n, 2)))
    idx = distinct_batches(np.random.default_rng(1), 200_000, n, b)
    ranked = np.sort(idx, axis=1)
    assert not np.any(ranked[:, 1:] == ranked[:, :-1]) and idx.min() >= 0 and idx.max() < n
    s = np.square(data.examples[idx].mean(axis=1) - data.mean_noise) @ data.h
    trace = np.trace(data.h[:, None] * data.sigma)
    assert_agrees_and_control_rejected(
        [s.mean()], [s.std(ddof=1) / np.sqrt(s.size)], trace * data.batch_factor(b), trace / b
    )


def _rotated(d=5, n=40, seed=4):
    h = nqm.spectra.log_uniform(d, 0.3, 1.0)
    q = nqm.spectra.random_rotation(d, seed=seed)
    return nqm.NoisyQuadratic(h, np.linspace(0.5, 2.0, d), basis=q), q


def test_a_drawn_dataset_keeps_the_basis_and_linear_runs_do_not_see_it():
    p, q = _rotated()
    rotated = nqm.FiniteDataset.draw(p, 40, seed=1)
    plain = nqm.FiniteDataset(rotated.h, rotated.examples)
    assert rotated.basis is not None and np.array_equal(rotated.basis, q)
    opt = optim.heavy_ball(0.4, 0.5, precond=1.0 / np.sqrt(rotated.h))
    for a, b in zip(
        rotated.simulate(opt, 4, 30, 8, sampling="epochs", seed=2),
        plain.simulate(opt, 4, 30, 8, sampling="epochs", seed=2),
    ):
        np.testing.assert_allclose([a.mean, a.sem], [b.mean, b.sem], rtol=1e-11, atol=1e-14)


def test_sign_descent_on_a_rotated_dataset_acts_on_the_parameters():
    p, q = _rotated()
    data = nqm.FiniteDataset.draw(p, 40, seed=1)
    lr, b, steps, reps, seed = 0.05, 4, 12, 3, 5
    train = data.simulate(optim.sign_sgd(lr), b, steps, reps, sampling="replacement", seed=seed, at=[steps])[0]
    # the loop written out: θ in H's basis, sign taken on the parameters x = Qθ (rows: x = θQᵀ)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    x = (rng.standard_normal((reps, data.d))) @ q.T
    for _ in range(steps):
        idx = rng.integers(0, data.n, (reps, b))
        g_theta = data.h * (x @ q) + data.examples[idx].mean(axis=1)
        x = x - lr * np.sign(g_theta @ q.T)
    theta = x @ q
    expected = 0.5 * np.square(theta - data.optimum) @ data.h
    np.testing.assert_allclose(
        [train.mean[-1], train.sem[-1]], [expected.mean(), expected.std(ddof=1) / np.sqrt(reps)], rtol=1e-12
    )
    unrotated = nqm.FiniteDataset(data.h, data.examples)
    other = unrotated.simulate(optim.sign_sgd(lr), b, steps, reps, sampling="replacement", seed=seed, at=[steps])[0]
    assert not np.isclose(other.mean[-1], expected.mean(), rtol=1e-3)  # the basis matters for sign descent


def _every_epoch_sequence_average(data, opt, b, steps, v0):
    """E[x_T²] per coordinate by enumerating every permutation of every epoch (independent epochs), the run's
    recursion written out on the mean and second moment of x₀ (x₀ = θ₀ − θ_N, θ₀ ~ N(0, v0)), for SGD and heavy ball
    (positions x_{t+1} = (1 + β − λ)x_t − βx_{t−1} − εp·u_t)."""
    n, k = data.n, data.n // b
    epochs = -(-steps // k)
    lr, beta = opt.lr, getattr(opt, "momentum", 0.0)
    perms = list(itertools.permutations(range(n)))

    # x_T is linear in (x₀, u_0 … u_{T−1}) with a deterministic coefficient c of x₀, so E[x_T²] = c²E[x₀²] +
    # 2cE[x₀]E[noise part] + E[noise part²], E[noise part] = 0 over an epoch's permutations: enumerate the last
    def run(u):
        x_prev, x, c_prev, c = np.zeros(data.d), np.zeros(data.d), np.ones(data.d), np.ones(data.d)
        for t in range(steps):
            x, x_prev = (1 + beta - lr * data.h) * x - beta * x_prev - lr * u[t], x
            c, c_prev = (1 + beta - lr * data.h) * c - beta * c_prev, c
        return x, c

    second = np.zeros(data.d)
    for choice in itertools.product(perms, repeat=epochs):
        u = []
        for perm in choice:
            for j in range(k):
                u.append(data.examples[list(perm[j * b : (j + 1) * b])].mean(axis=0) - data.mean_noise)
        x, c = run(u)
        second += x**2
    second /= len(perms) ** epochs
    mean_x0, second_x0 = -data.optimum, v0 + data.optimum**2
    return c**2 * second_x0 + second, c * mean_x0


@pytest.mark.parametrize("opt", [optim.sgd(0.7), optim.heavy_ball(0.3, 0.6)])
@pytest.mark.parametrize("n, b, steps", [(4, 2, 4), (5, 2, 4), (4, 1, 5)])
def test_shuffled_epochs_exact_losses_equal_an_average_over_every_permutation(opt, n, b, steps):
    p = nqm.NoisyQuadratic([1.0, 0.3], [1.0, 2.0])
    data = nqm.FiniteDataset.draw(p, n, seed=3)
    second, mean = _every_epoch_sequence_average(data, opt, b, steps, 0.5)
    train, test = data.expected_losses(opt, b, steps, sampling="epochs", init_var=0.5, at=[steps])
    np.testing.assert_allclose(train.mean[0], 0.5 * data.h @ second, rtol=1e-12)
    population = 0.5 * data.h @ (data.optimum**2 + 2 * data.optimum * mean + second)
    np.testing.assert_allclose(test.mean[0], population, rtol=1e-12)
    independent, _ = data.expected_losses(opt, b, steps, sampling="batches", init_var=0.5, at=[steps])
    assert abs(independent.mean[0] - train.mean[0]) > 1e-6 * train.mean[0]  # the epochs' covariance matters here
