"""Closed-form heavy-ball, Nesterov and EMA second moments against step-by-step moment recursions."""

from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from moment_recursions import iterate_covariance

from nqm import optim
from nqm.dynamics.moments import EmaMoments, TwoStateMoments, ema_variance, heavy_ball_variance
from nqm.dynamics.moments.expected import powered_second_moments

STEPS = np.array([0, 1, 2, 3, 7, 50, 400, 3000])


def heavy_ball_loop(lam, q, v0, beta, steps):
    """E[x_t²] by iterating the exact recursion of (E x_t², E x_t x_{t−1}, E x_{t−1}²)."""
    a = 1 + beta - lam
    x, c, y, out = v0, v0, v0, [v0]
    for _ in range(steps):
        x, c, y = a * a * x - 2 * a * beta * c + beta * beta * y + q, a * x - beta * c, x
        out.append(x)
    return np.array(out)


def ema_loop(lam, q, v0, gamma, steps):
    """E[y_t²] by iterating (E x², E x y, E y²) with x ← ux − n, y ← γy + (1 − γ)x."""
    u = 1 - lam
    x, c, y, out = v0, v0, v0, [v0]
    for _ in range(steps):
        x_new = u * u * x + q
        c_new = gamma * u * c + (1 - gamma) * x_new
        y = gamma**2 * y + 2 * gamma * (1 - gamma) * u * c + (1 - gamma) ** 2 * x_new
        x, c = x_new, c_new
        out.append(y)
    return np.array(out)


@given(
    beta=st.floats(0.01, 0.995),
    frac=st.floats(1e-3, 0.999),
    q=st.floats(0.0, 10.0),
    v0=st.floats(0.0, 10.0),
)
def test_heavy_ball_closed_form_matches_recursion(beta, frac, q, v0):
    lam = frac * 2 * (1 + beta)  # every stable step, over- and underdamped
    ref = heavy_ball_loop(lam, q, v0, beta, STEPS[-1])[STEPS]
    got = heavy_ball_variance(lam, q, v0, beta, STEPS.astype(float))
    # absolute scale: the terms of the closed form are of size X∞ + V0 (cancellation is bounded by it)
    x_inf = (1 + beta) * q / ((1 - beta) * lam * (2 * (1 + beta) - lam))
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12 * (x_inf + v0) + 1e-300)


def heavy_ball_exact(lam, q, v0, beta, steps, number=Fraction):
    """E[x_t²] for t ≤ steps by the moment recursion in exact rational arithmetic (``Fraction``) or in 60-digit
    decimals (long runs, where fractions grow too large; its rounding, ≤ 10⁻⁶⁰ per step amplified by at most
    t² ≈ 10⁹, is far below any tolerance here)."""
    with localcontext() as ctx:
        ctx.prec = 60
        lam, q, v0, beta = (number(float(x)) for x in (lam, q, v0, beta))
        a = 1 + beta - lam
        x, c, y, out = v0, v0, v0, [v0]
        for _ in range(steps):
            x, c, y = a * a * x - 2 * a * beta * c + beta * beta * y + q, a * x - beta * c, x
            out.append(x)
    return np.array([float(v) for v in out])


def _near_unit_momentum_cases():
    """(β, λ) at and around critical damping λ = (1 − ρ)², over- and underdamped, and tiny λ, for β → 1."""
    for beta in (0.9, 0.999, 0.9999, 1 - 1e-6):
        crit = ((1 - beta) / (1 + np.sqrt(beta))) ** 2
        for lam in (crit, crit * (1 + 1e-9), crit * (1 - 1e-9), 0.5 * crit, 2 * crit, 1e-3 * crit, 1e-12, 1 - beta):
            yield beta, lam


@pytest.mark.parametrize(("beta", "lam"), list(_near_unit_momentum_cases()))
def test_heavy_ball_exact_near_unit_momentum(beta, lam):
    """At 10⁻⁹ against exact rational arithmetic, with and without initial variance. The classic form
    X∞ + (V₀ − X∞)·(decay) failed this by up to 3·10⁻³ at β = 0.9999 and by 300× the value at β = 1 − 10⁻⁶
    (it subtracts numbers of size X∞ ∝ 1/((1 − β)λ) from each other early in a run)."""
    steps = np.array([0, 1, 2, 3, 5, 10, 30, 63, 64, 65, 100, 150, 200])
    for v0, q in ((1.0, 0.3), (0.0, 0.3)):
        ref = heavy_ball_exact(lam, q, v0, beta, int(steps[-1]))[steps]
        got = heavy_ball_variance(lam, q, v0, beta, steps.astype(float))
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0)


@pytest.mark.parametrize(
    ("beta", "lam"),
    [(0.9999, None), (0.9999, 1e-12), (1 - 1e-6, None), (1 - 1e-6, 3.0), (0.999, 0.5), (0.3, 2.395)],
)
def test_heavy_ball_long_runs(beta, lam):
    """Over 2·10⁴ steps (past the relaxation time 1/(1 − ρ) ≈ 2·10⁴ at β = 0.9999) at 10⁻⁹ against the
    60-digit recursion; None is critical damping, where every form of the sum is used along the run."""
    lam = ((1 - beta) / (1 + np.sqrt(beta))) ** 2 if lam is None else lam
    steps = np.array([1, 10, 64, 65, 100, 300, 1000, 3000, 10000, 20000])
    ref = heavy_ball_exact(lam, 0.3, 1.0, beta, int(steps[-1]), number=Decimal)[steps]
    got = heavy_ball_variance(lam, 0.3, 1.0, beta, steps.astype(float))
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0)


@pytest.mark.parametrize("beta", [0.9, 0.999, 0.9999])
def test_heavy_ball_at_the_edge_double_root_is_exact_for_a_neighbouring_step(beta):
    """At λ = (1 + ρ)² (a double root −ρ, a hair inside the stability edge 2(1 + β)) E[x_t²] is itself
    ill-conditioned: one unit in the last place of λ moves it by 3·10⁻⁸ at β = 0.9999, t = 2·10⁴. There
    the closed form is held to what rounding allows: its value lies between the exact values at λ two units
    either side (backward stability)."""
    lam = (1 + np.sqrt(beta)) ** 2
    steps = np.array([1, 100, 3000, 20000])
    lo, hi = (np.nextafter(np.nextafter(lam, side), side) for side in (0.0, 8.0))
    bounds = [heavy_ball_exact(x, 0.3, 1.0, beta, int(steps[-1]), number=Decimal)[steps] for x in (lo, hi)]
    got = heavy_ball_variance(lam, 0.3, 1.0, beta, steps.astype(float))
    assert np.all((got >= np.minimum(*bounds) * (1 - 1e-12)) & (got <= np.maximum(*bounds) * (1 + 1e-12)))


@given(
    gamma=st.floats(0.01, 0.999),
    lam=st.floats(1e-3, 1.999),
    q=st.floats(0.0, 10.0),
    v0=st.floats(0.0, 10.0),
)
def test_ema_closed_form_matches_recursion(gamma, lam, q, v0):
    ref = ema_loop(lam, q, v0, gamma, STEPS[-1])[STEPS]
    got = ema_variance(lam, q, v0, gamma, STEPS.astype(float))
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12 * (q / (lam * (2 - lam)) + v0) + 1e-300)


def test_ema_at_unit_step():
    """λ = 1 (u = 0) solves the coordinate in one step; u^t must be 1 at t = 0 (not 0·∞)."""
    ref = ema_loop(1.0, 0.5, 1.0, 0.9, STEPS[-1])[STEPS]
    np.testing.assert_allclose(ema_variance(1.0, 0.5, 1.0, 0.9, STEPS.astype(float)), ref, rtol=1e-12)


def test_ema_at_u_equal_gamma():
    """u = γ is the removable singularity of (u^t − γ^t)/(u − γ); the closed form is smooth through it."""
    gamma = 0.9
    for lam in [0.1, 0.1 * (1 + 1e-13), 0.1 * (1 - 1e-9)]:
        ref = ema_loop(lam, 0.5, 1.0, gamma, STEPS[-1])[STEPS]
        np.testing.assert_allclose(ema_variance(lam, 0.5, 1.0, gamma, STEPS.astype(float)), ref, rtol=1e-9)


def test_closed_forms_agree_with_the_moment_map():
    """The powered moment map (the general engine) and the closed forms are two derivations of one thing."""
    rng = np.random.default_rng(1)
    lam, q, v0 = rng.uniform(0.01, 1.9, 50), rng.uniform(0, 1, 50), rng.uniform(0, 2, 50)
    for opt, fn, par in [
        (optim.heavy_ball(1.0, 0.7), heavy_ball_variance, 0.7),
        (optim.ema(1.0, 0.8), ema_variance, 0.8),
    ]:
        ref = powered_second_moments(opt, lam, np.sqrt(q), v0, STEPS)
        np.testing.assert_allclose(fn(lam, q, v0, par, STEPS[:, None].astype(float)), ref, rtol=1e-9)


def test_expected_loss_is_accurate_for_heavy_momentum():
    """β = 0.999, λ near the stability edge: repeated squaring of the moment map had lost every digit here
    (relative error 56 at t = 12345); expected_loss now uses the closed form."""
    import nqm

    beta, lam = 0.999, (1 + np.sqrt(0.999)) ** 2
    p = nqm.NoisyQuadratic([lam], c=[0.3])
    got = nqm.dynamics.expected_loss(p, optim.heavy_ball(1.0, beta), 1, 12345, at=[12345])[0]
    assert got == pytest.approx(0.5 * lam * heavy_ball_loop(lam, 0.3, 1.0, beta, 12345)[-1], rel=1e-6)


def nesterov_loop(lr, lam, sigma, v0, beta, steps):
    """E[θ_t²] of PyTorch's Nesterov, v ← βv + g, θ ← θ − ε(g + βv), with g = (λθ + σz)/ε, written on (θ, v) in
    gradient units (not nqm's (θ, εv) transition) and iterated as S ← ASAᵀ + nnᵀ, one step at a time."""
    a = np.array([[1 - (1 + beta) * lam, -lr * beta * beta], [lam / lr, beta]])
    n = np.array([-(1 + beta) * sigma, sigma / lr])
    return iterate_covariance(a, n, v0, steps)


@given(
    beta=st.floats(0.01, 0.995),
    frac=st.floats(1e-3, 0.999),
    sigma=st.floats(0.0, 3.0),
    v0=st.floats(0.0, 10.0),
)
def test_nesterov_closed_form_matches_its_recursion(beta, frac, sigma, v0):
    """Every stable step (λ < 2(1 + β)/(1 + 2β)): over- and underdamped, and λ > 1, where det F = β(1 − λ) < 0."""
    lam = frac * optim.stable_lr_bound("nesterov", beta)
    opt = optim.nesterov(0.37, beta)
    ref = nesterov_loop(opt.lr, lam, sigma, v0, beta, STEPS[-1])[STEPS]
    f, g = opt.transition(np.array([lam]))
    got = TwoStateMoments(f[0], g[0] * sigma, v0, opt.initial).at(STEPS.astype(float))
    scale = v0 + sigma**2 / (lam * (2 - lam) * (1 - beta) ** 2)  # bounds the terms of the closed form
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-11 * scale + 1e-300)
    powered = powered_second_moments(opt, np.array([lam]), np.array([sigma]), np.array([v0]), STEPS)[:, 0]
    np.testing.assert_allclose(powered, ref, rtol=1e-6, atol=1e-9 * scale + 1e-300)


@pytest.mark.parametrize("beta", [0.3, 0.9])
def test_nesterov_at_critical_damping_and_a_nilpotent_step(beta):
    """disc = (1 + β)²(1 − λ)² − 4β(1 − λ) = 0 at λ = 1 − 4β/(1 + β)² (a double root) and at λ = 1 (F nilpotent)."""
    opt = optim.nesterov(0.5, beta)
    for lam in [1 - 4 * beta / (1 + beta) ** 2, (1 - 4 * beta / (1 + beta) ** 2) * (1 + 1e-12), 1.0]:
        f, g = opt.transition(np.array([lam]))
        got = TwoStateMoments(f[0], g[0] * 0.3, 1.0, opt.initial).at(STEPS.astype(float))
        np.testing.assert_allclose(got, nesterov_loop(opt.lr, lam, 0.3, 1.0, beta, STEPS[-1])[STEPS], rtol=1e-6)


def test_nesterov_is_not_heavy_ball():
    """The recursion above tells the two apart (so the closed-form test has power): same (ε, β), other law."""
    lam, beta = 0.4, 0.8
    hb = heavy_ball_variance(lam, 0.09, 1.0, beta, STEPS.astype(float))
    ref = nesterov_loop(0.5, lam, 0.3, 1.0, beta, STEPS[-1])[STEPS]
    assert np.max(np.abs(hb[1:] / ref[1:] - 1)) > 0.05


def test_expected_loss_of_nesterov_and_its_ema_equal_the_powered_map():
    """Nesterov runs through its closed form, Nesterov + EMA through the powered map of the 3-state transition;
    the EMA of the recursion above is checked by the powered map of the (θ, εv, θ̃) transition at γ → 0."""
    import nqm

    p = nqm.NoisyQuadratic.zhang2019(40)
    opt = optim.nesterov(0.6, 0.7)
    at = [0, 1, 5, 80, 900]
    got = nqm.dynamics.expected_loss(p, opt, 4, 900, at=at)
    lam, sigma = nqm.noise.step_coefficients(p, opt, 4)
    ref = 0.5 * p.h @ np.array([nesterov_loop(opt.lr, lam[i], sigma[i], 1.0, 0.7, 900)[at] for i in range(p.d)])
    np.testing.assert_allclose(got, ref, rtol=1e-10)
    tiny = nqm.dynamics.expected_loss(p, optim.ema(opt, 1e-12), 4, 900, at=at)
    np.testing.assert_allclose(tiny, ref, rtol=1e-8)


@pytest.mark.parametrize("beta", [0.3, 0.9, 0.999, 1 - 1e-6])
def test_heavy_ball_lower_bound_holds_at_every_step_and_is_tight_on_one_step(beta):
    """HeavyBallMoments.lower_bound(first, last) ≤ E[x_t²] (as ``at`` computes it, which the tuner's scan
    compares with the target) at every integer t in the interval, for over-, under- and critically damped
    coordinates, and equals it (to its 1e-9 shrink) when first = last. Taking the decay at ``first`` rather than
    ``last``, or dropping a zero of the cosine, breaks the first property."""
    rng = np.random.default_rng(int(beta * 1e6))
    from nqm.dynamics.moments.heavy_ball import HeavyBallMoments

    critical = ((1 - beta) / (1 + np.sqrt(beta))) ** 2  # λ at critical damping
    lam = np.concatenate([np.geomspace(1e-6, 2 * (1 + beta) * 0.999, 40), [critical]])
    q, v0 = rng.uniform(0, 1e-3, lam.size), rng.uniform(0.1, 2, lam.size)
    moments = HeavyBallMoments(lam, q, v0, beta)
    values = moments.at(np.arange(3000.0)[:, None])
    for first, last in [(0, 2999), (0, 50), (7, 300), (1000, 1400), (2500, 2999), (40, 41)]:
        bound = moments.lower_bound(first, last)
        assert np.all(bound <= values[first : last + 1].min(axis=0) * (1 + 1e-9) + 1e-300)
    for t in (0, 5, 123, 2999):
        np.testing.assert_allclose(moments.lower_bound(t, t), moments.at(t), rtol=1e-8)


def test_heavy_ball_one_step_per_row_is_the_general_path():
    """``HeavyBallMoments.at`` with one t per row (the solvers' case, which gathers each side's constants once)
    gives bit for bit what the general broadcasting path gives: rows of over-, under-, critically and nearly
    critically damped coordinates (the near-critical forms fire), t = 0, t ≤ 8 and long runs, q = 0 entries."""
    from nqm.dynamics.moments.heavy_ball import HeavyBallMoments

    rng = np.random.default_rng(7)
    beta = np.array([0.3, 0.9, 0.999, 1 - 1e-6, 0.99, 0.5])[:, None]
    critical = ((1 - beta) / (1 + np.sqrt(beta))) ** 2
    lam = np.concatenate(
        [np.geomspace(1e-7, 1.0, 30) * np.ones_like(beta), critical * np.array([1.0, 1 + 1e-9, 1 - 1e-7])], axis=1
    )
    lam[4] = rng.permutation(lam[4])  # the sides interleave within a row
    q = rng.uniform(0, 1e-3, lam.shape)
    q[:, ::7] = 0.0
    v0 = rng.uniform(0.1, 2, lam.shape[1])
    moments = HeavyBallMoments(lam, q, v0, beta)
    t = np.array([0.0, 3.0, 8.0, 150.0, 4321.0, 2.0e6])[:, None]
    general = HeavyBallMoments(lam, q, v0, beta).at(np.broadcast_to(t, lam.shape))
    np.testing.assert_array_equal(moments.at(t), general)
    assert np.all(np.isfinite(general)) and np.all(general[0] == v0)


def test_two_state_moments_by_form_are_the_general_path():
    """``TwoStateMoments.at`` forms each coordinate's ``P_n`` by its own form (real roots with 0 < r and r < 0, a
    double root, a complex pair) where t does not broadcast into the coordinates; it gives bit for bit what the
    general path (every form everywhere, then a selection) gives, with one t per row and with steps × coordinates.
    Nesterov's transitions over a range of β and λ, with a nilpotent step (λ = 1) and t = 0."""
    from nqm.optim import Nesterov

    rng = np.random.default_rng(3)
    beta = np.concatenate([1 - np.geomspace(1e-6, 0.99, 7), [0.5]])[:, None]
    lam = np.concatenate([np.geomspace(1e-9, 1.3, 40), [1.0]]) * np.ones_like(beta)
    f, g = Nesterov(1.0, beta).transition(lam)
    u = g * rng.uniform(0, 1, lam.shape)[..., None]
    v0 = rng.uniform(0.1, 2, lam.shape[1])
    forms = {form for _, form, _ in TwoStateMoments(f, u, v0, Nesterov.initial)._kinds()}
    assert forms == {"pos", "neg", "double", "complex"}  # every form is exercised
    t = np.array([0.0, 1.0, 2.0, 7.0, 300.0, 4.0e6, 5.0, 0.0])[:, None]  # one per row
    moments = TwoStateMoments(f, u, v0, Nesterov.initial)
    per_row = moments.at(t)
    assert moments._cached_kinds is not None  # the by-form path was taken
    # a leading axis of one, against which t's own leading axis broadcasts: the general path
    general = TwoStateMoments(f[None], u[None], v0, Nesterov.initial).at(np.stack([t, t]))[0]
    np.testing.assert_array_equal(per_row, general)
    steps = TwoStateMoments(f[3], u[3], v0, Nesterov.initial).at(t[:, None])
    np.testing.assert_array_equal(steps, TwoStateMoments(f[3][None], u[3][None], v0, Nesterov.initial).at(t[:, None]))
    assert np.all(np.isfinite(steps)) and np.all(steps[0] == v0)


@pytest.mark.parametrize("start", [(1.0, 0.0), (1.0, 1.25)])
@pytest.mark.parametrize("beta", [0.3, 0.9, 0.999, 1 - 1e-6])
def test_two_state_lower_bound_holds_at_every_step(beta, start):
    """TwoStateMoments.lower_bound(first, last) ≤ E[x_t²] (as ``at`` computes it, which the tuner's scan compares
    with the target) at every integer t in the interval, for Nesterov's transitions (started as Nesterov starts, and
    at (1, 1.25) as decoupled weight decay starts heavy ball: θ_{−1} = θ₀/(1 − δ)) with real roots of either sign,
    complex pairs and t = 0 in the interval; and it is informative: within a factor 2 of the value for 95% of the
    coordinates on one step. Taking the decay at ``first`` rather than at the interval's worse end, dropping a zero
    of the sine, the noise part at ``last``, or the faster real mode at its smallest, breaks the first property."""
    from nqm.optim import Nesterov

    rng = np.random.default_rng(int(beta * 1e6))
    edge = optim.stable_lr_bound("nesterov", beta)
    lam = np.concatenate([np.geomspace(1e-6, edge * 0.999, 60), [1.0]])
    f, g = Nesterov(1.0, beta).transition(lam)
    u = g * np.sqrt(rng.uniform(0, 1e-3, lam.size))[:, None]
    v0 = rng.uniform(0.1, 2, lam.size)
    moments = TwoStateMoments(f, u, v0, start)
    kinds = {form for _, form, _ in moments._kinds()}
    assert "complex" in kinds and ("pos" in kinds or "neg" in kinds)
    values = moments.at(np.arange(3000.0)[:, None])
    for first, last in [
        (0, 2999),
        (0, 50),
        (7, 300),
        (1000, 1400),
        (2500, 2999),
        (40, 41),
        (0, 0),
        (3, 3),
        (1, 3),
        (2, 6),
    ]:
        bound = moments.lower_bound(first, last)
        assert np.all(bound <= values[first : last + 1].min(axis=0) * (1 + 1e-9) + 1e-300)
    tight = [moments.lower_bound(t, t) / values[t] for t in (1, 5, 123, 2999)]
    assert np.mean(np.concatenate(tight) > 0.5) > 0.95  # 99–100% measured


def _ema_bound_holds(moments, first, last):
    """lower_bound(first, last) ≤ every value ``at`` computes on [first, last]; the only slack is 1e-12 of the
    stationary level and V₀, for values that ``at`` rounds to a hair below 0 where V₀ = 0."""
    values = moments.at(np.arange(first, last + 1, dtype=np.float64)[:, None])
    slack = 1e-12 * (np.abs(moments.y_inf) + moments.v0)
    return np.all(moments.lower_bound(first, last) <= values.min(axis=0) + slack)


@given(
    lam=st.floats(1e-7, 1.9999),
    gamma=st.floats(1e-6, 1 - 1e-6),
    q=st.floats(0.0, 1.0),
    v0=st.floats(0.0, 2.0),
    first=st.integers(0, 400),
    length=st.integers(0, 400),
)
def test_ema_lower_bound_holds_at_every_step(lam, gamma, q, v0, first, length):
    """EmaMoments.lower_bound(first, last) ≤ E[y_t²] as ``at`` computes it at every integer t in the interval, for
    any stable step (u = 1 − λ of either sign), EMA γ, noise and start."""
    assert _ema_bound_holds(EmaMoments(lam, q * lam * lam, v0, gamma), first, first + length)


def test_ema_lower_bound_is_informative_and_each_part_is_needed():
    """On 4000 random coordinates (λ over seven decades up to 2, 1 − γ over six, u = γ exactly at 20, V₀ = 0 at a
    tenth) the bound holds on intervals from one step to 3000 and is within 2× of the value at one step for 90% of
    them (95% measured). Taking g at ``first`` instead of ``last``, the noise part at ``last``, or the oscillating
    case's modes at the wrong ends breaks it (checked by planting each)."""
    rng = np.random.default_rng(5)
    d = 4000
    lam = np.exp(rng.uniform(np.log(1e-7), np.log(1.9999), d))
    gamma = 1 - np.exp(rng.uniform(np.log(1e-6), np.log(0.99), d))
    lam[:20] = rng.uniform(0.01, 0.99, 20)
    gamma[:20] = 1 - lam[:20]
    q = rng.uniform(0, 1, d) * lam**2 * rng.choice([0, 1e-6, 1], d)
    v0 = rng.uniform(0, 2, d) * rng.choice([0, 1], d, p=[0.1, 0.9])
    moments = EmaMoments(lam, q, v0, gamma)
    for first, last in [(0, 2999), (0, 0), (0, 5), (3, 3), (1, 40), (7, 300), (1000, 1400), (2990, 2999)]:
        assert _ema_bound_holds(moments, first, last)
    values = moments.at(np.arange(3000.0)[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        tight = np.concatenate([moments.lower_bound(t, t) / values[t] for t in (1, 5, 123, 2999)])
    assert np.mean(tight > 0.5) > 0.9


@given(
    roots=st.one_of(
        st.tuples(st.just("real"), st.floats(-0.999, 0.999), st.floats(-0.999, 0.999)),
        st.tuples(st.just("complex"), st.floats(0.05, 0.999), st.floats(0.01, 3.13)),
    ),
    basis=st.tuples(*[st.floats(-2.0, 2.0)] * 4).filter(lambda b: abs(b[0] * b[3] - b[1] * b[2]) > 0.2),
    u=st.tuples(st.floats(-1.0, 1.0), st.floats(-1.0, 1.0)),
    v0=st.floats(0.0, 5.0),
    e=st.tuples(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0)),
    first=st.integers(0, 300),
    length=st.integers(0, 300),
)
# g_t = 0.99^{t−1} − 2·0.5^{t−1}, nearly 0 at t = 2: the faster mode must be taken at its largest
# g_t = 0.9^t cos(0.05t): no zero in [2, 12], so the decay must be taken at 12; a zero at t ≈ 31.4, inside [20, 40]
@example(("complex", 0.9, 0.05), (1.0, 0.0, 0.0, 1.0), (0.0, 0.0), 1.0, (1.0, 0.0), 2, 10)
@example(("complex", 0.9, 0.05), (1.0, 0.0, 0.0, 1.0), (0.0, 0.0), 1.0, (1.0, 0.0), 20, 20)
@example(("real", 0.99, 0.5), (1.0, 1.0, 0.0, 1.0), (0.0, 0.0), 1.0, (1 / 0.99 - 4, -4.0), 1, 9)
def test_two_state_lower_bound_holds_for_any_stable_map(roots, basis, u, v0, e, first, length):
    """The bound's derivation holds for every stable two-state map, not only Nesterov's: F = P·J·P⁻¹ with J two
    real roots of either sign (a double root included) or a rotation-scaling m·R(φ), any noise direction u, start
    V₀·e and interval [first, first + length]: the bound is ≤ every value ``at`` computes there. Taking the decay
    at ``first``, dropping a zero of the sine, the noise part at ``last`` or the faster real mode at its smallest
    breaks it."""
    kind, a, b = roots
    jordan = np.diag([a, b]) if kind == "real" else a * np.array([[np.cos(b), -np.sin(b)], [np.sin(b), np.cos(b)]])
    p = np.array(basis).reshape(2, 2)
    moments = TwoStateMoments(p @ jordan @ np.linalg.inv(p), np.array(u), v0, e)
    last = first + length
    values = moments.at(np.arange(first, last + 1, dtype=np.float64))
    assert moments.lower_bound(first, last) <= values.min() * (1 + 1e-9) + 1e-300
