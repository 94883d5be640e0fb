"""Independent references where tests used to compare a thing with itself (each planted bug of bench/mutations.py
that no test caught now has one here):

* the exact first-hit scan against a plain step loop of the moment recursion written here (first hits at chunk
  boundaries and at steps 1, 2, 3; heavy ball, and SGD with a coordinate started just below its stationary level);
* the frontier fit against a brute-force minimisation of its stated loss (relative residuals) on runs that are not
  a hyperbola;
* Adam's preconditioner against a direct average of g² over simulated batches (statistical, with a control);
* B_simple and B_noise along a run against the variance recursion written here;
* the problem file's defaults as its docstring states them.

Statistical assertions use z = 4.5 (two-sided false alarm 7e-6).
"""

import numpy as np
import pytest
from scipy import optimize

import nqm
from nqm import dynamics, optim, spectra, theory
from nqm.dynamics.studies.frontier import fit_frontier

Z = 4.5


def heavy_ball_losses(h, c, init_var, lr, beta, batch, steps):
    """E[L_t], t = 0 … steps, of heavy ball (v ← βv + g, θ ← θ − εv) by its 2×2 second-moment map per coordinate."""
    out = np.empty(steps + 1)
    m_tt, m_tv, m_vv = np.asarray(init_var, dtype=float) * np.ones_like(h), np.zeros_like(h), np.zeros_like(h)
    q = c / batch
    for t in range(steps + 1):
        out[t] = 0.5 * h @ m_tt
        # s' = A s + b ξ with A = [[1 − εh, −εβ], [h, β]], b = (−ε, 1), Var ξ = q
        a11, a12, a21, a22 = 1 - lr * h, -lr * beta, h, beta
        n_tt = a11 * a11 * m_tt + 2 * a11 * a12 * m_tv + a12 * a12 * m_vv + lr * lr * q
        n_tv = a11 * a21 * m_tt + (a11 * a22 + a12 * a21) * m_tv + a12 * a22 * m_vv - lr * q
        n_vv = a21 * a21 * m_tt + 2 * a21 * a22 * m_tv + a22 * a22 * m_vv + q
        m_tt, m_tv, m_vv = n_tt, n_tv, n_vv
    return out


def sgd_losses(h, c, init_var, lr, batch, steps):
    m = np.asarray(init_var, dtype=float) * np.ones_like(h)
    out = np.empty(steps + 1)
    for t in range(steps + 1):
        out[t] = 0.5 * h @ m
        m = (1 - lr * h) ** 2 * m + lr * lr * c / batch
    return out


def first_hit(losses, target):
    hit = np.nonzero(losses <= target)[0]
    return int(hit[0]) if hit.size else float("inf")


@pytest.mark.parametrize("k", [1, 2, 3, 255, 256, 257, 511, 512, 513, 1024, 1025])
def test_dense_first_hit_of_heavy_ball_equals_a_plain_loop_at_chunk_boundaries(k):
    h = np.geomspace(1e-3, 1.0, 12)
    c = h.copy()
    losses = heavy_ball_losses(h, c, 1.0, 0.05, 0.5, 8, 1100)
    target = losses[k] * (1 + 1e-12)  # a hair above: the tie is not decided by summation order
    expected = first_hit(losses, target)
    got = dynamics.steps_to_target(nqm.NoisyQuadratic(h, c), optim.heavy_ball(0.05, 0.5), 8, target)
    assert got == expected


@pytest.mark.parametrize("k", [1, 2, 3, 256, 257])
def test_first_hit_of_sgd_with_a_coordinate_just_below_its_stationary_level(k):
    """L(t) dips below its limit: a fast coordinate decays while a slow one started at 0.99·V∞ rises. The closed
    form (which needs every coordinate to relax downwards) must not be used; the scan gives the first hit."""
    h, c, lr, b = np.array([1.0, 1e-3]), np.array([0.01, 50.0]), 0.5, 4
    v_inf = lr * c / (b * h * (2 - lr * h))
    init = np.array([5.0 * v_inf[0] + 0.2, 0.99 * v_inf[1]])
    losses = sgd_losses(h, c, init, lr, b, 600)
    assert losses[1:].min() < losses[-1] * (1 - 1e-6)  # the dip is there
    target = losses[k] * (1 + 1e-12)
    expected = first_hit(losses, target)
    got = dynamics.steps_to_target(nqm.NoisyQuadratic(h, c), lr, b, target, init_var=init)
    assert got == expected


def test_fit_frontier_minimises_its_stated_log_loss_on_runs_that_are_no_hyperbola():
    b = 2.0 ** np.arange(0, 14)
    steps = 40 + 3000 / b + 200 / np.sqrt(b) + 5 * np.log1p(b)  # not S_min + E_min/B

    def log_loss(x):
        fitted = x[0] + x[1] / b
        return np.sum(np.log(fitted / steps) ** 2) if np.all(fitted > 0) else np.inf

    s_min, e_min, _ = fit_frontier(b, steps)
    brute = optimize.minimize(log_loss, x0=[steps.min(), steps[0]], method="Nelder-Mead",
                              options={"xatol": 1e-10, "fatol": 1e-16, "maxiter": 20_000})  # fmt: skip
    assert (s_min, e_min) == pytest.approx(tuple(brute.x), rel=1e-6)
    plain, *_ = np.linalg.lstsq(np.stack([np.ones(b.size), 1 / b], 1), steps, rcond=None)
    assert abs(plain[1] / plain[0] - e_min / s_min) > 0.05 * (e_min / s_min)  # the plain fit is another answer
    relative, *_ = np.linalg.lstsq(np.stack([np.ones(b.size), 1 / b], 1) / steps[:, None], np.ones(b.size), rcond=None)
    assert abs(relative[1] / relative[0] - e_min / s_min) > 1e-3 * (e_min / s_min)  # so is the relative-error one


@pytest.mark.parametrize(
    ("steps", "edge"),
    [(lambda b: 50 * b**0.05 * np.exp(0.1 * np.sin(b)), "plateau"), (lambda b: 900 / b**1.05, "hyperbola")],
)
def test_fit_frontier_finds_an_optimum_on_the_edge_of_s_min_e_min_nonnegative(steps, edge):
    b = 2.0 ** np.arange(0, 10)
    s = steps(b)
    s_min, e_min, _ = fit_frontier(b, s)
    grid = np.linspace(0, 2, 401)  # brute force over the closed quadrant, around the edge optimum
    if edge == "plateau":
        scale = np.exp(np.log(s).mean())
        cands = [(scale * u, scale * v) for u in grid for v in grid * 0.05]
    else:
        scale = np.exp(np.mean(np.log(s * b)))
        cands = [(scale * v * 0.05, scale * u) for u in grid for v in grid]
    losses = [np.sum(np.log((p + q / b) / s) ** 2) if p + q / b.max() > 0 else np.inf for p, q in cands]
    best = cands[int(np.argmin(losses))]
    assert (e_min if edge == "plateau" else s_min) == 0.0
    assert np.sum(np.log((s_min + e_min / b) / s) ** 2) <= min(losses) + 1e-15
    assert (s_min, e_min)[edge == "hyperbola"] == pytest.approx(best[edge == "hyperbola"], rel=0.01)


def test_adam_preconditioner_is_the_mean_square_batch_gradient():
    d = 6
    p = nqm.NoisyQuadratic(
        np.geomspace(0.1, 1.0, d), np.geomspace(0.5, 2.0, d), basis=spectra.random_rotation(d, seed=1)
    )
    theta = np.random.default_rng(2).standard_normal(d)
    batch, draws = 16, 40_000
    rng = np.random.default_rng(3)
    gx = theory.parameter_gradient(p, theta)
    chol = np.linalg.cholesky(p.parameter_sigma)
    examples = rng.standard_normal((draws, batch, d)) @ chol.T  # per-example noise, Σ_x
    g2 = (gx + examples.mean(axis=1)) ** 2
    v_hat, v_se = g2.mean(axis=0), g2.std(axis=0, ddof=1) / np.sqrt(draws)
    v_pred = (1.0 / theory.adam_preconditioner(p, theta, batch, eps=0.0)) ** 2
    assert np.all(np.abs(v_hat - v_pred) <= Z * v_se)
    without_b = gx**2 + np.diag(p.parameter_sigma)  # the /B left out: rejected
    assert np.any(np.abs(v_hat - without_b) > Z * v_se)


def test_noise_scales_along_a_run_equal_the_variance_recursion():
    h = np.geomspace(0.01, 1.0, 20)
    c = h**0.5
    p = nqm.NoisyQuadratic(h, c)
    lr, b, steps = 0.7, 8, 50
    at = [0, 1, 7, 50]
    got = dynamics.noise_scales_along(p, lr, b, steps, at=at, init_var=2.0)
    m = np.full(h.size, 2.0)
    expected = []
    for t in range(steps + 1):
        if t in at:  # E[G_i²] = h_i² m_i: B_noise = Σh c/Σh³m, B_simple = Σc/Σh²m (ratios of expectations)
            expected.append([(h @ c) / (h**3 @ m), c.sum() / (h**2 @ m)])
        m = (1 - lr * h) ** 2 * m + lr * lr * c / b
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_problem_file_defaults_are_the_documented_ones():
    """scale = 1 and q = 1 in [noise], exponent and scale = 1 of a power law, var = 1 in [init], no basis."""
    parsed = nqm.problem_file.parse(
        {"spectrum": {"kind": "power_law", "d": 5, "exponent": 2.0}, "noise": {"kind": "power"}}
    )
    h = 1.0 / np.arange(1, 6) ** 2.0
    np.testing.assert_array_equal(parsed.h, h)
    np.testing.assert_allclose(parsed.c, h, rtol=1e-15)  # c = 1·h^1
    assert parsed.init_var == 1.0 and parsed.basis is None and parsed.optimum is None
    with_q = nqm.problem_file.parse(
        {"spectrum": {"kind": "power_law", "d": 5, "exponent": 2.0}, "noise": {"kind": "power", "scale": 3.0, "q": 0.5}}
    )
    np.testing.assert_allclose(with_q.c, 3.0 * h**0.5, rtol=1e-15)


def test_sign_moments_equal_orthant_probabilities_of_the_batch_gradient():
    """E[s_i] = 2P(g_i > 0) − 1 and E[s_i s_j] = 1 − 2P(the signs differ), from scipy's bivariate normal CDF (Genz's
    algorithm, not the Owen's T of nqm.theory) for g ~ N(G_x, Σ_x/B) in the parameter coordinates."""
    from scipy import stats

    d, batch = 4, 9
    h = np.geomspace(0.2, 1.0, d)
    p = nqm.NoisyQuadratic(h, h, basis=spectra.random_rotation(d, seed=4))  # Σ_x = H_x: correlated in x
    theta = 0.2 * np.random.default_rng(5).standard_normal(d)
    mean, second = theory.sign_moments(p, theta, batch)
    gx, cov = theory.parameter_gradient(p, theta), p.parameter_sigma / batch
    sd = np.sqrt(np.diag(cov))
    up = stats.norm.cdf(gx / sd)  # P(g_i > 0)
    np.testing.assert_allclose(mean, 2 * up - 1, rtol=1e-12, atol=1e-14)
    for i in range(d):
        for j in range(i + 1, d):
            pair = np.ix_([i, j], [i, j])
            both = stats.multivariate_normal.cdf([0.0, 0.0], -gx[[i, j]], cov[pair], abseps=1e-12, releps=1e-12)
            expected = 1 - 2 * (up[i] + up[j] - 2 * both)
            assert second[i, j] == pytest.approx(expected, abs=1e-8), (i, j)


def test_critical_batch_sizes_noise_scales_equal_the_variance_recursion():
    """b_noise_start/end and b_simple_start/end of the run at the grid's batch size nearest B_crit, from a plain
    recursion of SGD's variances over that run (ratios of expectations)."""
    h = np.geomspace(0.01, 1.0, 30)
    c = h**0.7
    p = nqm.NoisyQuadratic(h, c)
    batches = 2.0 ** np.arange(0, 12)
    cb = dynamics.critical_batch_sizes(p, 0.05, batch_sizes=batches, init_var=1.5)
    run = dynamics.optimal_steps_to_target(p, 0.05, [cb.run_batch], init_var=1.5)
    lr, steps = float(run.lr[0]), int(run.steps[0])
    m = np.full(h.size, 1.5)
    start = ((h @ c) / (h**3 @ m), c.sum() / (h**2 @ m))
    for _ in range(steps):
        m = (1 - lr * h) ** 2 * m + lr * lr * c / cb.run_batch
    end = ((h @ c) / (h**3 @ m), c.sum() / (h**2 @ m))
    assert (cb.b_noise_start, cb.b_simple_start) == pytest.approx(start, rel=1e-12)
    assert (cb.b_noise_end, cb.b_simple_end) == pytest.approx(end, rel=1e-9)
