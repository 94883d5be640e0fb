"""Whole runs: steps to a target (against brute force), the optimal step size, and simulation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import problems

import nqm
from nqm import dynamics, optim
from nqm.dynamics.runs import crossing, search, tuned_losses
from validation.stats import critical_z


def brute_force_steps(p, opt, b, target, horizon, **kw):
    losses = dynamics.expected_loss(p, opt, b, horizon, **kw)
    hit = np.nonzero(losses <= target)[0]
    return int(hit[0]) if hit.size else None


@given(
    problems(max_d=6), st.floats(0.05, 1.9), st.floats(1.0, 64.0), st.floats(0.02, 0.9), st.sampled_from([1.0, 0.01])
)
def test_sgd_steps_equal_brute_force(p, lr_scaled, b, target_frac, init_var):
    """Closed form + root finding (or the exact scan when coordinates grow) = first step found by brute force."""
    lr = lr_scaled / p.h.max()
    l0 = 0.5 * p.h.sum() * init_var
    target = target_frac * l0
    horizon = 3000
    k = dynamics.steps_to_target(p, lr, b, target, init_var=init_var, max_steps=horizon)
    brute = brute_force_steps(p, lr, b, target, horizon, init_var=init_var)
    if brute is None:
        assert k == np.inf or k > horizon
    else:
        assert k == brute


@given(
    problems(max_d=4),
    st.floats(0.05, 1.0),
    st.floats(0.0, 0.95),
    st.floats(0.0, 0.9),
    st.floats(0.05, 0.9),
    st.sampled_from([optim.heavy_ball, optim.nesterov]),
)
def test_momentum_and_ema_first_hitting_time_equals_brute_force(p, lr_scaled, beta, gamma, target_frac, family):
    opt = optim.ema(family(lr_scaled / p.h.max(), beta), gamma)
    target = target_frac * 0.5 * p.h.sum()
    k = dynamics.steps_to_target(p, opt, 4, target, max_steps=2000)
    brute = brute_force_steps(p, opt, 4, target, 2000)
    if brute is None:
        assert k == np.inf or k > 2000
    else:
        assert k == brute


def test_underdamped_momentum_first_hit_is_not_the_last_crossing():
    """E[L_t] oscillates: the first hitting time comes before the loss settles for good."""
    p = nqm.NoisyQuadratic([1.0], c=[0.0])
    opt = optim.heavy_ball(1.5, 0.9)
    losses = dynamics.expected_loss(p, opt, 1, 60)
    assert np.any(np.diff(losses) > 0)  # really oscillates
    target = 0.05
    first = int(np.nonzero(losses <= target)[0][0])
    assert dynamics.steps_to_target(p, opt, 1, target) == first
    assert np.any(losses[first:] > target)  # it comes back above the target later


def test_unreachable_targets_are_inf():
    p = nqm.NoisyQuadratic.zhang2019(100)
    floor = dynamics.steady_state_loss(p, 1.0, 4)
    assert dynamics.steps_to_target(p, 1.0, 4, 0.9 * floor) == np.inf
    assert dynamics.steps_to_target(p, 2.5, 4, 0.01) == np.inf  # unstable step
    assert dynamics.steps_to_target(p, 1.0, 4, 1e9) == 0
    with pytest.raises(ValueError, match="target"):
        dynamics.steps_to_target(p, 1.0, 4, -1.0)


@pytest.fixture(scope="module")
def zhang_runs():
    p = nqm.NoisyQuadratic.zhang2019(2000)
    return p, dynamics.optimal_steps_to_target(p, 0.05, 2.0 ** np.arange(0, 18, 2))


def test_optimal_step_size_is_optimal(zhang_runs):
    p, r = zhang_runs
    for b, lr, steps in zip(r.batch_sizes, r.lr, r.steps):
        assert dynamics.steps_to_target(p, lr, b, 0.05) == steps
        for f in (0.97, 0.995, 1.005, 1.03):
            assert dynamics.steps_to_target(p, lr * f, b, 0.05) >= steps
    np.testing.assert_array_equal(r.examples, r.batch_sizes * r.steps)


def test_perfect_scaling_then_saturation(zhang_runs):
    """Zhang et al. Z1/Z2: S·B constant and ε ∝ B at small B; steps flat and ε at the stability bound at large B."""
    p, r = zhang_runs
    small = slice(0, 2)  # B = 1, 4
    assert r.examples[1] / r.examples[0] == pytest.approx(1.0, rel=0.03)
    assert r.lr[1] / r.lr[0] == pytest.approx(4.0, rel=0.03)
    noiseless = dynamics.optimal_steps_to_target(p, 0.05, [1e15]).steps[0]  # B → ∞: S_min
    assert r.steps[-1] <= 1.05 * noiseless and r.steps[0] > 100 * noiseless
    assert 1.9 < r.lr[-1] < 2.0 / p.h.max()
    assert np.all(np.diff(r.steps[small]) < 0) and np.all(np.diff(r.steps) <= 0)


@given(st.floats(0.02, 0.5), st.floats(1.05, 3.0))
def test_stricter_targets_need_more_steps(target, factor):
    p = nqm.NoisyQuadratic.zhang2019(200)
    b = np.array([1.0, 16.0, 1024.0])
    loose = dynamics.optimal_steps_to_target(p, target * factor, b)
    strict = dynamics.optimal_steps_to_target(p, target, b)
    assert np.all(strict.steps >= loose.steps)


def test_optimal_solver_rejects_what_it_cannot_do():
    p = nqm.NoisyQuadratic.zhang2019(50)
    with pytest.raises(ValueError, match="family"):
        dynamics.optimal_steps_to_target(p, 0.1, [1, 2], family="adam")
    assert np.all(dynamics.optimal_steps_to_target(p, 0.1, [1.0, 64.0]).interior)
    # A flat, very noisy coordinate starts below its noise floor for all but tiny ε: the searched range ends
    # there, the result says it is not interior, and a larger ε (outside the range) is indeed faster.
    q = nqm.NoisyQuadratic([1.0, 1e-3], c=[0.0, 10.0])
    edge = dynamics.optimal_steps_to_target(q, 0.01, [1.0])
    assert not edge.interior[0]
    assert dynamics.steps_to_target(q, 10 * edge.lr[0], 1.0, 0.01) < edge.steps[0]


def test_simulation_reaches_the_target_at_the_predicted_step():
    """Monte Carlo spot check: at the solver's (B, ε, steps) the simulated mean loss is the target within
    its SE; halving the steps (a planted error) leaves it clearly above."""
    p = nqm.NoisyQuadratic.zhang2019(500)
    r = dynamics.optimal_steps_to_target(p, 0.05, [8.0, 512.0])
    z = critical_z(4, 1e-4)
    for b, lr, steps in zip(r.batch_sizes, r.lr, r.steps.astype(int)):
        sim = nqm.simulate(p, lr, b, steps, 400, seed=9, at=[steps // 2, steps])
        exact = dynamics.expected_loss(p, lr, b, steps, at=[steps // 2, steps])
        assert exact[1] <= 0.05 < exact[0]
        assert abs(sim.mean[1] - exact[1]) <= z * sim.sem[1]
        assert abs(sim.mean[1] - 0.05) <= z * sim.sem[1] + (
            0.05 - dynamics.expected_loss(p, lr, b, steps, at=[steps])[0]
        )
        assert sim.mean[0] - 0.05 > z * sim.sem[0]


def test_greedy_step_is_one_step_optimal_and_moments_are_exact():
    """Each greedy ε maximises the next expected loss decrease given the current moments, and the losses are
    those of the exact recursion under that schedule."""
    p = nqm.NoisyQuadratic.zhang2019(300)
    g = dynamics.greedy_schedule(p, 16, steps=40, precond=p.h**-0.25)
    pre = p.h**-0.25
    v = np.ones(p.d)
    for eps, loss in zip(g.lr, g.loss[1:]):

        def next_loss(e, v=v):
            return 0.5 * p.h @ ((1 - e * pre * p.h) ** 2 * v + e**2 * pre**2 * p.c / 16)

        assert next_loss(eps) <= min(next_loss(eps * 0.99), next_loss(eps * 1.01))
        v = (1 - eps * pre * p.h) ** 2 * v + eps**2 * pre**2 * p.c / 16
        assert loss == pytest.approx(0.5 * p.h @ v, rel=1e-12)
    stopped = dynamics.greedy_schedule(p, 16, target=g.loss[10], steps=1000, precond=pre)
    assert stopped.steps == 10 and stopped.loss[-1] <= g.loss[10]
    assert dynamics.greedy_schedule(p, 16, target=1e-9, steps=5).steps == np.inf
    with pytest.raises(ValueError, match="steps"):
        dynamics.greedy_schedule(p, 16)


TUNED = ("heavy_ball", "ema", "nesterov")


def _member(family, lr, h):
    """The optimiser of ``family`` with step ``lr`` and hyper-parameter h (β or γ)."""
    return {"heavy_ball": optim.heavy_ball, "nesterov": optim.nesterov}.get(family, lambda e, g: optim.ema(e, g))(lr, h)


@pytest.fixture(scope="module")
def tuned_runs():
    p = nqm.NoisyQuadratic.zhang2019(60)
    b = np.array([1.0, 16.0, 256.0, 4096.0])
    return p, b, {f: dynamics.optimal_steps_to_target(p, 0.05, b, family=f) for f in TUNED}


@pytest.mark.parametrize("family", TUNED)
def test_tuned_steps_are_exact_first_hits(tuned_runs, family):
    p, b, runs = tuned_runs
    r = runs[family]
    assert (r.momentum if family == "ema" else r.ema) is None
    for i in range(b.size):
        assert dynamics.steps_to_target(p, r.optimizer(i), b[i], 0.05) == r.steps[i]
    np.testing.assert_array_equal(r.examples, b * r.steps)
    assert np.all(np.diff(r.steps) <= 0)  # less noise never needs more steps


@pytest.mark.parametrize("family", TUNED)
def test_tuned_optimum_beats_a_brute_force_grid(tuned_runs, family):
    """No point of a 24 × 12 grid of (ε, h) (exact first hits) does better than the optimiser, and the grid is
    a real competitor: its best reaches the target within twice the optimiser's steps (4–40% above it)."""
    p, b, runs = tuned_runs
    r = runs[family]
    sgd = dynamics.optimal_steps_to_target(p, 0.05, b)
    hs = 1 - np.geomspace(1e-3, 0.9, 12)
    for i in [0, 2, 3]:
        best = np.inf
        for h in hs:
            edge = optim.stable_lr_bound(family, h) / p.h.max()
            for lr in np.geomspace(edge * 1e-4, edge * 0.999, 24):
                cap = int(2 * r.steps[i])
                best = min(best, dynamics.steps_to_target(p, _member(family, lr, h), b[i], 0.05, max_steps=cap))
        assert r.steps[i] <= best < np.inf
        assert r.steps[i] <= sgd.steps[i]  # h → 0 is SGD, inside the searched range


def test_momentum_helps_at_large_batch_and_ema_at_small(tuned_runs):
    """Zhang et al. 2019 (Z3, Z5): momentum (heavy ball or Nesterov) cuts steps at large B, EMA at small B."""
    p, b, runs = tuned_runs
    sgd = dynamics.optimal_steps_to_target(p, 0.05, b)
    assert runs["heavy_ball"].steps[-1] < 0.5 * sgd.steps[-1]
    assert runs["nesterov"].steps[-1] < 0.5 * sgd.steps[-1]
    assert runs["ema"].steps[0] < 0.8 * sgd.steps[0]


@given(problems(max_d=8), st.floats(0.05, 1.5), st.floats(1.0, 256.0), st.floats(0.05, 0.9), st.floats(1.01, 3.0))
def test_steps_at_a_fixed_step_size_are_monotone_in_the_target(p, lr_scaled, b, target_frac, factor):
    lr = lr_scaled / p.h.max()
    target = target_frac * 0.5 * p.h.sum()
    strict = dynamics.steps_to_target(p, lr, b, target)
    loose = dynamics.steps_to_target(p, lr, b, target * factor)
    assert loose <= strict


@given(problems(max_d=8), st.floats(1e-4, 1e-3), st.floats(1.0, 8.0), st.sampled_from([2, 4, 8]))
def test_perfect_scaling_at_small_steps(p, lam_max, b, k):
    """ε → kε with B → kB keeps the noise floor ε tr(...)/B and multiplies the rate by k: S·B is constant.

    With V = V∞ + (V₀ − V∞)(1 − λ)^{2t} and V∞ = εγ/(κ(2 − λ)), the scaled run differs by O(λ_max) in the
    relative rate and the floor. The target, 1.5 × the floor, makes the noise matter: the same run without
    scaling B (a planted error: the floor k times higher) never reaches it.
    """
    lr = lam_max / p.h.max()
    target = 1.5 * dynamics.steady_state_loss(p, k * lr, k * b)
    if not 0 < target < 0.5 * (0.5 * p.h.sum()):
        return  # the floor is not far below the start: nothing to scale
    base = dynamics.steps_to_target(p, lr, b, target)
    scaled = dynamics.steps_to_target(p, k * lr, k * b, target)
    assert abs(k * scaled - base) <= 4 * k * lam_max * base + 2 * k
    assert dynamics.steps_to_target(p, k * lr, b, target) == np.inf  # the planted error is caught


def test_tiny_curvatures_still_decay():
    """A curvature far below float resolution of 1 still relaxes: (1 − εh)^(2t) = e^(2t·log1p(−εh)). Formed as
    log|1 − εh| it rounds to 0, and a run whose loss lives in such directions was reported as never arriving."""
    p = nqm.NoisyQuadratic([1e-20], c=[0.0])
    steps = dynamics.steps_to_target(p, 1.0, 1, 0.25, init_var=1e20)  # L₀ = ½·1e-20·1e20 = 0.5
    assert steps != np.inf
    assert steps == pytest.approx(np.log(2.0) / 2e-20, rel=1e-12)
    # below 2⁵² steps the first integer is exact: the root of (1 − εh)^(2t) = ½ is hundreds of steps from where
    # Newton's tolerance (1e-11·t) leaves the continuous crossing at t ~ 3e11
    p = nqm.NoisyQuadratic([1e-12], c=[0.0])
    assert dynamics.steps_to_target(p, 1.0, 1, 0.25, init_var=1e12) == np.ceil(np.log(0.5) / (2 * np.log1p(-1e-12)))
    h, counts = nqm.spectra.power_law_bins(2.0, 1e15)  # coordinates down to h = 1e-30, binned
    runs = dynamics.optimal_steps_to_target(nqm.NoisyQuadratic(h, 0 * h), 0.01, [1.0], init_var=counts)
    small = dynamics.optimal_steps_to_target(
        nqm.NoisyQuadratic(h[h > 1e-12], 0 * h[h > 1e-12]), 0.01, [1.0], init_var=counts[h > 1e-12]
    )
    assert runs.steps[0] == small.steps[0] < np.inf  # the directions below 1e-12 cannot matter at 0.01


def _pruned_scan_matches_every_step(moments, p, until):
    """Assert that the tuner's exact scan (``first_hit_pruned``: branch and bound on the moments' lower bound,
    leaves evaluated step by step) returns the first t with E[L_t] ≤ target, as a plain evaluation of every step
    does, for targets taken from the curve itself (quantiles, a hair above the loss at leaf edges and at its
    minimum: the leaf sums its coordinates in another order, and a tie would be decided by rounding), and ``until``
    where the target is never reached; returns, per target, the separate runs of steps below it."""

    losses = moments.at(np.arange(until, dtype=np.float64)[:, None]) @ (0.5 * p.h)
    leaf = crossing.scan_leaf(p.d)
    edges = [losses[k] * (1 + 1e-12) for k in (leaf, 2 * leaf - 1, 5 * leaf + 1)]
    stretches = []
    for target in np.quantile(losses, [0.02, 0.1, 0.3, 0.5]).tolist() + edges + [losses.min() * (1 + 1e-12)]:
        below = losses <= target
        assert crossing.first_hit_pruned(moments, 0.5 * p.h, target, until) == int(np.argmax(below))
        stretches.append(int(below[0]) + np.sum(np.diff(below.astype(int)) == 1))
    assert crossing.first_hit_pruned(moments, 0.5 * p.h, 0.5 * losses.min(), until) == until
    # a scan that would cost more than its budget of coordinate-steps gives up (the tuner keeps its crossing)
    assert crossing.first_hit_pruned(moments, 0.5 * p.h, losses.min(), until, budget=0) is None
    return stretches


@pytest.mark.parametrize("d", [60, 4096])
@pytest.mark.parametrize("beta", [0.9, 0.95, 0.999])
def test_the_pruned_scan_finds_the_first_of_many_hits(beta, d):
    """The tuner's exact scan of heavy-ball runs returns the first hit where the loss oscillates and crosses the
    target many times (three or more separate stretches below some target). Leaves are long on a short spectrum
    (d = 60) and a few steps on a long one (d = 4096)."""
    from nqm.dynamics.moments.heavy_ball import HeavyBallMoments

    p = nqm.NoisyQuadratic.zhang2019(d)
    lam = 0.95 * optim.stable_lr_bound("heavy_ball", beta) * p.h / p.h.max()  # the top coordinates ring
    assert crossing.scan_leaf(d) == (136 if d == 60 else 4)
    moments = HeavyBallMoments(lam, 1e-4 * lam**2 * p.c, np.ones(p.d), beta)
    assert max(_pruned_scan_matches_every_step(moments, p, 6000 if d < 1000 else 1500)) >= 3


@pytest.mark.parametrize("d", [60, 4096])
@pytest.mark.parametrize("beta", [0.99, 0.999])
def test_the_pruned_scan_of_nesterov_runs_finds_the_first_hit(beta, d):
    """The same scan on Nesterov's runs (its lower bound: :meth:`TwoStateMoments.lower_bound`); at d = 60 the loss
    crosses some targets three times or more."""
    from nqm.dynamics.moments import TwoStateMoments

    p = nqm.NoisyQuadratic.zhang2019(d)
    lam = 0.2 * optim.stable_lr_bound("nesterov", beta) * p.h / p.h.max()
    f, g = optim.Nesterov(1.0, beta).transition(lam)
    moments = TwoStateMoments(f, g * np.sqrt(1e-4 * lam**2 * p.c)[:, None], np.ones(p.d), optim.Nesterov.initial)
    stretches = _pruned_scan_matches_every_step(moments, p, 6000 if d < 1000 else 1500)
    assert d > 1000 or max(stretches) >= 3


@pytest.mark.parametrize("d", [60, 4096])
@pytest.mark.parametrize("gamma", [0.9, 0.999])
def test_the_pruned_scan_of_ema_runs_finds_the_first_hit(gamma, d):
    """The same scan on runs of SGD's iterate average (its lower bound: :meth:`EmaMoments.lower_bound`); the top
    coordinates take λ > 1, where SGD's iterate alternates in sign."""
    from nqm.dynamics.moments import EmaMoments

    p = nqm.NoisyQuadratic.zhang2019(d)
    lam = 1.9 * p.h / p.h.max()
    moments = EmaMoments(lam, 1e-4 * lam**2 * p.c, np.ones(p.d), gamma)
    _pruned_scan_matches_every_step(moments, p, 6000 if d < 1000 else 1500)


def test_tuned_steps_are_the_first_hit_where_the_loss_rings_at_the_target():
    """The tuner checks every earlier step of its chosen runs, long ones too: on Zhang's d = 10⁴ at B = 1024, heavy
    ball's tuned run still rings at the target and dips below it before the crossing the search brackets (18 steps
    earlier, 5041 against 5059, when only runs of at most 2²⁵ coordinate-steps were checked). Held against every
    step of the closed form at the returned (ε, β)."""
    from nqm.dynamics.moments.heavy_ball import HeavyBallMoments

    p = nqm.NoisyQuadratic.zhang2019(10_000)
    runs = dynamics.optimal_steps_to_target(p, 0.01, [1024.0], family="heavy_ball")
    steps, lr, beta = int(runs.steps[0]), runs.lr[0], runs.momentum[0]
    lam = lr * p.h
    moments = HeavyBallMoments(lam, lr**2 * p.c / 1024.0, np.ones(p.d), beta)
    losses = np.concatenate(
        [moments.at(np.arange(k, min(k + 500, steps + 100), dtype=np.float64)[:, None]) @ (0.5 * p.h)
         for k in range(0, steps + 100, 500)]
    )  # fmt: skip
    below = losses <= 0.01
    assert steps == int(np.argmax(below))
    assert not below[steps:].all()  # the loss comes back above the target after its first hit


@pytest.mark.parametrize("family", TUNED)
def test_a_loose_crossing_brackets_the_exact_one(family):
    """The searches' crossings stop once the bracket is 1e-4 of t (``rel_tol``): the integer returned is then the
    bracket's upper end, at or after the exact first crossing, and the continuous estimate, interpolated across the
    wider bracket, agrees with the exact one's to 1e-9. A crossing grown a step at a time (``stride`` = 1e-9) from a
    guess a third of a step off is the exact one."""

    p = nqm.NoisyQuadratic.zhang2019(60)
    b = np.array([1.0, 2.0, 4.0, 8.0])
    loss = tuned_losses.TunedLoss(p, b, 1.0, None, family)
    hp = np.array([0.999, 0.99, 0.9, 0.5])
    eps = np.array([0.003, 0.01, 0.03, 0.1]) * loss.feasible_lr(hp, 0.02)
    steps, cont = crossing.first_crossing(loss, eps, hp, 0.02)
    loose_steps, loose_cont = crossing.first_crossing(loss, eps, hp, 0.02, rel_tol=1e-4)
    assert np.all(steps > 4000)
    assert np.all(loose_steps >= steps) and np.any(loose_steps > steps)  # the bracket really was loose
    np.testing.assert_allclose(loose_cont, cont, rtol=1e-9)
    near_steps, _ = crossing.first_crossing(loss, eps, hp, 0.02, guess=cont + 0.3, stride=1e-9)
    np.testing.assert_array_equal(near_steps, steps)


@pytest.mark.parametrize("max_narrowing", [0, 2, 4])
def test_a_capped_crossing_stops_only_within_one_percent_or_one_step(max_narrowing):
    """The searches stop narrowing a crossing after ``max_narrowing`` probes where its bracket is within 1% of t:
    the integer returned (the bracket's upper end) is at or after the exact first crossing and within 1% of it,
    and the continuous estimate is within the bracket. Runs shorter than 100 steps are narrowed to one step, so
    their integer is exact."""

    p = nqm.NoisyQuadratic.zhang2019(60)
    b = np.array([1.0, 2.0, 4.0, 8.0, 4096.0, 4096.0])
    loss = tuned_losses.TunedLoss(p, b, 1.0, None, "heavy_ball")
    hp = np.array([0.999, 0.99, 0.9, 0.5, 0.9, 0.5])
    target = np.array([0.02, 0.02, 0.02, 0.02, 1.0, 1.0])  # the last two: runs of a few dozen steps
    eps = np.array([0.003, 0.01, 0.03, 0.1, 0.5, 0.5]) * loss.feasible_lr(hp, target)
    steps, cont = crossing.first_crossing(loss, eps, hp, target)
    capped, capped_cont = crossing.first_crossing(loss, eps, hp, target, rel_tol=1e-4, max_narrowing=max_narrowing)
    short = steps < 100
    assert short.sum() == 2 and np.all(steps[~short] > 4000)
    np.testing.assert_array_equal(capped[short], steps[short])
    assert np.all(capped >= steps) and np.all(capped <= steps * 1.01 + 1)
    assert np.all(np.abs(capped_cont - cont) <= 0.01 * steps + 1)


def test_the_initial_loss_needs_no_closed_form():
    """E[L_0] = ½Σh·V₀ for every tuned loss (heavy ball, its compressed spectrum, SGD and heavy ball with weight decay
    pulling towards θ* ≠ 0, coupled and decoupled): what the crossing search takes for t = 0."""
    z = nqm.NoisyQuadratic.zhang2019(3000)
    p = nqm.NoisyQuadratic(z.h, z.c, optimum=np.random.default_rng(0).normal(size=z.d))
    b = np.array([4.0, 256.0])
    eps, hp = np.array([0.1, 0.5]), np.array([0.9, 0.5])
    losses = [
        tuned_losses.TunedLoss(p, b, 2.0, None, "heavy_ball"),
        tuned_losses.TunedLoss(p, b, 2.0, None, "heavy_ball").compressed(),
    ]
    losses += [tuned_losses.DecayTunedLoss(p, b, 2.0, None, 0.01, d) for d in (False, True)]
    losses += [tuned_losses.DecayHeavyBallLoss(p, b, 2.0, None, 0.01, d) for d in (False, True)]
    for loss in losses:
        np.testing.assert_allclose(loss.value(eps, hp, np.zeros(2)), loss.initial_loss(), rtol=1e-12)
    assert losses[0].initial_loss() == pytest.approx(0.5 * p.h.sum() * 2.0)


def test_the_search_reaches_the_high_end_of_momentum_and_below_the_near_decade_of_steps(monkeypatch):
    """Two ends the shortened searches must not miss. At small B the optimum pushes β to the searched range's
    high end (1 − 10⁻⁴), which is evaluated itself: the tuned steps are never more than those of ε alone tuned with
    β held there. And where ε's optimum lies below the decade under the feasible edge that is searched first (here
    forced: a near range of 1%), the rest of the range is searched and the answer is the same. Planted: neither end
    searched (3–13 steps more at the high end; 3% more steps without the rest of the range)."""
    p = nqm.NoisyQuadratic.zhang2019(200)
    b = np.array([1.0, 2.0, 4.0, 4096.0])
    runs = dynamics.optimal_steps_to_target(p, 0.001, b, family="heavy_ball")
    np.testing.assert_allclose(runs.momentum[:3], 1 - 1e-4, rtol=1e-12)
    assert not np.any(runs.interior[:3]) and runs.interior[3]
    monkeypatch.setattr(tuned_losses, "H_LOG_RANGE", (tuned_losses.H_LOG_RANGE[0],) * 2)
    held = dynamics.optimal_steps_to_target(p, 0.001, b[:3], family="heavy_ball")
    assert np.all(runs.steps[:3] <= held.steps)
    monkeypatch.undo()
    monkeypatch.setattr(search, "LR_NEAR", np.log(1.01))
    narrow = dynamics.optimal_steps_to_target(p, 0.001, b, family="heavy_ball")
    assert np.all(narrow.steps <= runs.steps * 1.002)
    np.testing.assert_allclose(narrow.lr, runs.lr, rtol=0.05)


def test_the_patch_beats_the_search_where_the_loss_rings():
    """Zhang's problem binned into 100 geometric bins at B = 64: t(ε, β) is jagged where the loss still rings at
    the target, and the best of the 5 × 5 patch of crossings around the search's optimum needs 74 fewer steps
    (of 79 661) than the search's own point; the steps are the exact first hit at the returned (ε, β). Planted:
    the patch reduced to its centre."""
    full = nqm.NoisyQuadratic.zhang2019(10_000)
    h, counts = nqm.spectra.geometric_bins(full.h, 100)
    p, b = nqm.NoisyQuadratic(h, counts * h), np.array([64.0])
    runs = dynamics.optimal_steps_to_target(p, 0.01, b, init_var=counts, family="heavy_ball")
    assert runs.steps[0] == dynamics.steps_to_target(p, runs.optimizer(0), 64.0, 0.01, init_var=counts)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search, "PATCH_POINTS", 1)
        patch.setattr(search, "PATCH_WIDTH", 0.0)
        centre = dynamics.optimal_steps_to_target(p, 0.01, b, init_var=counts, family="heavy_ball")
    assert runs.steps[0] < centre.steps[0]


@pytest.mark.parametrize("kind", ["heavy_ball", "nesterov", "compressed", "decay", "decoupled decay"])
def test_crossing_repeated_batch_sizes_at_once_equals_crossing_them_apart(kind, monkeypatch):
    """The patch crosses k points per batch size a few at a time (``_cross_points``) on the loss ``tiled`` as many
    times (rows i, i + n, … are batch size i): the same integer crossings as k calls on the loss itself (rows are
    independent in the crossing search), in one call or in groups of two points and one, and the same continuous
    ones up to the ulps of a sum over coordinates taken in another order (the matrix-vector product's blocking
    depends on the number of rows). Planted: rows repeated in place (np.repeat), and the decayed heavy ball's
    per-row decay and curvature not taken with the rows."""
    z = nqm.NoisyQuadratic.zhang2019(3000)
    p = nqm.NoisyQuadratic(z.h, z.c, optimum=np.random.default_rng(1).normal(size=z.d) * 0.1)
    b = np.array([4.0, 64.0, 4096.0])
    family = "nesterov" if kind == "nesterov" else "heavy_ball"
    loss = {
        "decay": lambda: tuned_losses.DecayHeavyBallLoss(p, b, 1.0, None, np.array([1e-3, 1e-2, 1e-4]), False),
        "decoupled decay": lambda: tuned_losses.DecayHeavyBallLoss(p, b, 1.0, None, np.array([1e-3, 1e-2, 1e-4]), True),
        "compressed": lambda: tuned_losses.TunedLoss(p, b, 1.0, None, family).compressed(),
    }.get(kind, lambda: tuned_losses.TunedLoss(p, b, 1.0, None, family))()
    hp = np.array([[0.999, 0.99, 0.9], [0.99, 0.9, 0.5], [0.9, 0.5, 0.2]])  # (k, n)
    target = 0.3 * loss.initial_loss()
    eps = np.array([[0.3], [0.5], [0.8]]) * np.stack([loss.feasible_lr(h, target) for h in hp])
    guess = np.full(hp.shape, 50.0)
    apart = [crossing.first_crossing(loss, e, h, target, g) for e, h, g in zip(eps, hp, guess)]
    steps, cont = (np.stack(parts) for parts in zip(*apart))
    assert np.all(np.isfinite(steps)) and len(set(steps.ravel())) > 3
    together = crossing.first_crossing(loss.tiled(3), eps.ravel(), hp.ravel(), target, guess.ravel())
    monkeypatch.setattr(search, "CROSS_ELEMENTS", 2 * b.size * loss.v0.size)
    grouped = search.cross_points(loss, eps, hp, target, guess)
    for crossed in (np.reshape(together, (2, *hp.shape)), grouped):
        np.testing.assert_array_equal(crossed[0], steps)
        np.testing.assert_allclose(crossed[1], cont, rtol=1e-13)


def test_tuned_steps_never_grow_with_the_batch_size():
    """A larger batch injects less noise, so at the same hyper-parameters it reaches the target no later: the tuned
    steps do not grow with B, in any order of the batch sizes given. On Zhang's problem (d = 200, target 0.02) the
    heavy-ball search alone reaches it in 19 steps at B = 2¹⁶ and 18 at B = 2¹⁵; B = 2¹⁶ then runs B = 2¹⁵'s
    (ε, β), whose exact first hit there is 18. Planted: the smaller batches' runs not tried (19 > 18)."""
    p = nqm.NoisyQuadratic.zhang2019(200)
    b = 2.0 ** np.arange(13, 17)
    for sizes in (b, b[::-1]):
        runs = dynamics.optimal_steps_to_target(p, 0.02, sizes, family="heavy_ball")
        order = np.argsort(sizes)
        assert np.all(np.diff(runs.steps[order]) <= 0)
        for i in range(sizes.size):
            assert dynamics.steps_to_target(p, runs.optimizer(i), sizes[i], 0.02) == runs.steps[i]
            assert runs.steps[i] - 1 < runs.steps_continuous[i] <= runs.steps[i]
    assert runs.steps[0] == 18 and runs.lr[0] == runs.lr[1] and runs.momentum[0] == runs.momentum[1]


def test_short_runs_find_the_troughs_of_the_ringing(monkeypatch):
    """At large B heavy ball's tuned run is short and its top coordinates still ring at the target, so E[L_T]
    ripples in ε and the search's crossing lands in a shallow trough. The fixed-step descent finds deeper ones: on
    Zhang's problem binned (100 bins, as ``bench/steps_to_target.py``) at B = 2¹⁸, 152 steps where the search and
    patch found 158; on the full spectrum (searched compressed, settled on the exact loss) at B = 2²¹, 148 where
    they found 157. Each count is the exact first hit at the returned (ε, β), step by step. Planted: no descent
    (``_RIPPLE_STEPS = 0``) gives 158 and 157 again."""
    full = nqm.NoisyQuadratic.zhang2019(10_000)
    h, counts = nqm.spectra.geometric_bins(full.h, 100)
    binned = nqm.NoisyQuadratic(h, counts * h)
    cases = ((binned, counts, 2.0**18, 152, 158), (full, 1.0, 2.0**21, 148, 157))

    def tuned(p, init_var, b):
        return dynamics.optimal_steps_to_target(p, 0.01, [b], init_var=init_var, family="heavy_ball")

    for p, init_var, b, found, _ in cases:
        runs = tuned(p, init_var, b)
        assert runs.steps[0] == found and runs.interior[0]
        assert dynamics.steps_to_target(p, runs.optimizer(0), b, 0.01, init_var=init_var) == found
    monkeypatch.setattr(search, "RIPPLE_STEPS", 0)
    for p, init_var, b, _, searched in cases:
        assert tuned(p, init_var, b).steps[0] == searched


@given(st.lists(st.floats(1.0, 1e4), min_size=1, max_size=5), st.integers(2, 3000))
def test_fixed_step_descent_finds_the_first_step_that_reaches(scales, start):
    """Rows of E[L_t] = a/t reach target 1 first at t = ⌈min a⌉: the gallop and the bisection below ``start`` find
    that step exactly when it is below ``start``, and nothing otherwise; the rows' values at a step are kept."""
    a = np.array(scales)
    values = search.grid_values(lambda t: a / t, a.size)
    hit = search.fixed_step_descent(lambda t: values(t).min() <= 1.0, start)
    first = int(np.ceil(a.min()))
    if first >= start:
        assert hit is None
    else:
        assert hit == max(first, 1)
        np.testing.assert_array_equal(values(hit), a / hit)
