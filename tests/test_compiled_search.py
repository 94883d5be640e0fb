"""The heavy-ball tuner's search compiled with numba (``nqm[fast]``) against the NumPy search it mirrors: the same
closed form at every step, the same (ε, β) and crossings per batch size, the same tuned steps."""

import math

import numpy as np
import pytest

import nqm
from nqm import dynamics
from nqm.dynamics.moments.heavy_ball import HeavyBallMoments
from nqm.dynamics.runs import compiled, crossing, search, tuned_losses

kernels = pytest.importorskip("nqm.dynamics.runs.heavy_ball_kernels", reason="numba is not installed")


def _zhang_binned(d=2000, bins=60):
    p = nqm.NoisyQuadratic.zhang2019(d)
    h, n = nqm.spectra.geometric_bins(p.h, bins)
    return nqm.NoisyQuadratic(h, n * h), n


def _compiled_loss(eps, beta, kappa, noise, v0, half_h, steps):
    table, form = kernels.new_table(kappa.size)
    kernels.fill_tables(eps, beta, kappa, noise, v0, half_h, table, form)
    return np.array([kernels.loss_at(float(t), table, form) for t in steps])


@pytest.mark.parametrize(
    "beta, lam_scale",
    [
        (0.9, 0.5),  # underdamped top, overdamped tail
        (0.999, 1.0),  # β → 1: small t·|log β| (series and direct forms)
        (1 - 1e-6, 1.0),
        (0.5, 3.0),  # λ near the edge 2(1 + β)
        (0.99, 1e-3),  # mostly overdamped
    ],
)
def test_compiled_closed_form_equals_numpy(beta, lam_scale):
    """E[L_t] at t = 0 … 10⁷ from the compiled forms equals HeavyBallMoments' to 1e-12 relative, including near
    critical damping, where both the forward and the backward forms cancel (curvatures chosen around
    (1 − √β)², the double root). Planted: the underdamped cross term's sign flipped in the kernel fails it."""
    rng = np.random.default_rng(0)
    rho = np.sqrt(beta)
    critical = (1 - rho) ** 2
    lam = np.sort(np.concatenate([critical * (1 + rng.uniform(-1e-3, 1e-3, 20)), rng.uniform(1e-4, 1, 40)]))
    lam = np.minimum(lam * lam_scale, 2 * (1 + beta) * (1 - 1e-6))
    eps = 0.7
    kappa = lam / eps
    half_h = rng.uniform(0.1, 1.0, lam.size)
    noise, v0 = rng.uniform(0, 1e-3, lam.size), rng.uniform(0.5, 2, lam.size)
    # past 2²¹ steps the phases come from the C library's sin and cos, below from the kernels' own
    steps = np.unique(np.concatenate([np.arange(0, 12), np.geomspace(12, 1e7, 44).round()]))
    assert steps.max() > kernels.PHASES_REDUCED
    got = _compiled_loss(eps, beta, kappa, noise, v0, half_h, steps)
    want = HeavyBallMoments(lam, eps**2 * noise, v0, beta).at(steps[:, None]) @ half_h
    np.testing.assert_allclose(got, want, rtol=1e-12)


def _machin_pi(digits=60):
    """π to ``digits`` decimals as a Fraction, from Machin's formula π = 16 atan(1/5) − 4 atan(1/239) in integers."""
    from fractions import Fraction

    def arctan_inverse(x):
        unit = 10 ** (digits + 10)
        total = term = unit // x
        k, sign = 1, -1
        while term:
            term //= x * x
            k += 2
            total += sign * (term // k)
            sign = -sign
        return total

    return Fraction(16 * arctan_inverse(5) - 4 * arctan_inverse(239), 10 ** (digits + 10))


def test_split_of_half_pi_is_exact_to_its_parts():
    """The three parts of π/2 the phases are reduced by sum to π/2 within 2⁻¹¹⁵ (against π from Machin's formula),
    and the first two have at most 30 significant bits, so n·P₁ and n·P₂ are exact for n < 2²³."""
    from fractions import Fraction

    parts = kernels.HALF_PI
    assert abs(sum(Fraction(x) for x in parts) - _machin_pi() / 2) < Fraction(1, 2**115)
    for x in parts[:2]:
        mantissa = Fraction(x).numerator
        assert abs(mantissa) < 2**30


def _numba_sincos(x):
    import numba

    @numba.njit
    def both(x, s, c):
        for j in range(x.size):
            s[j], c[j] = kernels.sincos(x[j])

    s, c = np.empty(x.size), np.empty(x.size)
    both(x, s, c)
    return s, c


def test_sincos_equals_the_c_library():
    """The phases' sin and cos agree with the C library's to 2.3e-16 (absolute) from 0 to 2²¹π, at random
    points over 14 decades, at the multiples of π/2 (where the reduction cancels most) and at the quadrants'
    edges. Planted: the reduction without its third part of π/2 fails it (error ~1e-12 at large x), so does a
    quadrant's sign flipped."""
    rng = np.random.default_rng(4)
    top = kernels.PHASES_REDUCED * np.pi
    multiples = np.pi / 2 * np.concatenate([np.arange(0, 4000), rng.integers(0, int(top / (np.pi / 2)), 4000)])
    x = np.concatenate([
        rng.uniform(0, 1, 10**5) * 10.0 ** rng.uniform(-7, np.log10(top), 10**5),
        multiples, np.nextafter(multiples, 0), np.nextafter(multiples, np.inf), multiples + np.pi / 4, [top],
    ])  # fmt: skip
    x = x[(x >= 0) & (x <= top)]
    s, c = _numba_sincos(x)
    assert np.max(np.abs(s - [math.sin(v) for v in x])) <= 2.3e-16
    assert np.max(np.abs(c - [math.cos(v) for v in x])) <= 2.3e-16


def _searches(loss, target, lo, hi, monkeypatch):
    monkeypatch.setenv("NQM_COMPILED", "0")
    numpy_seen = search.searched(loss, target, lo, hi)
    monkeypatch.setenv("NQM_COMPILED", "1")
    return numpy_seen, search.searched(loss, target, lo, hi)


@pytest.mark.parametrize("problem", ["binned", "power law, preconditioned", "compressed"])
def test_compiled_search_finds_what_the_numpy_search_finds(problem, monkeypatch):
    """Per batch size the compiled nested search ends at the NumPy search's (ε, s) with the same continuous
    crossing (to 1e-10 relative: the sums over coordinates are added in another order), on a binned Zhang problem,
    a preconditioned power law and a spectrum long enough to be searched compressed. Planted: the compiled bracket
    stride doubled (0.04) fails it on the binned and the compressed problems."""
    b = 2.0 ** np.arange(2, 21, 3)
    if problem == "binned":
        p, init_var = _zhang_binned()
        loss = tuned_losses.TunedLoss(p, b, init_var, None, "heavy_ball")
    elif problem == "power law, preconditioned":
        h = nqm.spectra.power_law(300, 1.5)
        p = nqm.NoisyQuadratic(h, nqm.spectra.noise_power(h, exponent=0.5))
        loss = tuned_losses.TunedLoss(p, b, 1.0, p.h**-0.3, "heavy_ball")
    else:
        p = nqm.NoisyQuadratic.zhang2019(3000)
        loss = tuned_losses.TunedLoss(p, b, 1.0, None, "heavy_ball").compressed(**search.SEARCH_SIZES)
    lo, hi = (np.full(b.size, v) for v in loss.search_range())
    (t_np, s_np, eps_np, cap_np), (t_c, s_c, eps_c, cap_c) = _searches(loss, 0.02, lo, hi, monkeypatch)
    assert np.all(np.isfinite(t_np))
    np.testing.assert_allclose(t_c, t_np, rtol=1e-10)
    np.testing.assert_allclose(s_c, s_np, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(eps_c, eps_np, rtol=1e-10)
    np.testing.assert_allclose(cap_c, cap_np, rtol=1e-12)


def test_tuned_heavy_ball_is_the_same_with_either_search(monkeypatch):
    """optimal_steps_to_target's steps, (ε, β) and continuous crossings are the same with the compiled search and
    with NumPy's, from short ringing runs (B = 2¹⁸) to long ones."""
    p, init_var = _zhang_binned()
    b = 2.0 ** np.arange(2, 21, 2)
    runs = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("NQM_COMPILED", flag)
        runs[flag] = dynamics.optimal_steps_to_target(p, 0.02, b, family="heavy_ball", init_var=init_var)
    np.testing.assert_array_equal(runs["1"].steps, runs["0"].steps)
    np.testing.assert_allclose(runs["1"].lr, runs["0"].lr, rtol=1e-10)
    np.testing.assert_allclose(runs["1"].momentum, runs["0"].momentum, rtol=1e-10)
    np.testing.assert_allclose(runs["1"].steps_continuous, runs["0"].steps_continuous, rtol=1e-10)


def test_rows_the_kernel_leaves_are_searched_with_numpy(monkeypatch):
    """Rows the compiled search gives up on (ok False, NaN) get the NumPy search's result, the others keep the
    kernel's. Planted: the NumPy results written to every row but the left ones fails it."""
    p, init_var = _zhang_binned(bins=30)
    b = 2.0 ** np.arange(4, 16, 3)
    loss = tuned_losses.TunedLoss(p, b, init_var, None, "heavy_ball")
    lo, hi = (np.full(b.size, v) for v in loss.search_range())
    monkeypatch.setenv("NQM_COMPILED", "0")
    want = np.array(search.searched(loss, 0.02, lo, hi))
    monkeypatch.setenv("NQM_COMPILED", "1")
    real = kernels.search_heavy_ball
    left = np.array([False, True, False, True])

    def leaving_two(*args, **kwargs):
        seen, ok = real(*args, **kwargs)
        seen[:, left] = np.nan
        return seen, ok & ~left

    monkeypatch.setattr(kernels, "search_heavy_ball", leaving_two)
    got = np.array(search.searched(loss, 0.02, lo, hi))
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_compiled_search_is_the_same_on_any_number_of_threads(threads, monkeypatch):
    """Rows are shared out over threads (every k-th row to a thread): one, two or three threads give the same
    results bit for bit, and every row is searched. Planted: the rows of the first thread skipped fails it."""
    p, init_var = _zhang_binned(bins=30)
    b = 2.0 ** np.arange(2, 20, 2)
    loss = tuned_losses.TunedLoss(p, b, init_var, None, "heavy_ball")
    lo, hi = (np.full(b.size, v) for v in loss.search_range())
    args = (loss.kappa, loss.noise, loss.v0, loss.half_h, 0.02, lo, hi)
    s = search
    options = dict(
        steps=(s.INNER_STEPS, s.GOLDEN_STEPS, s.LR_NEAR, s.LR_DECADES),
        outer=s.OUTER_STEPS,
        options=(s.BRACKET_STRIDE, s.SEARCH_RTOL, s.SEARCH_NARROWING, s.LOOSE_RTOL),
    )
    one, ok_one = kernels.search_heavy_ball(*args, **options)
    used = []
    real = kernels.run_tasks

    def counted(tasks, n):
        used.append(n)
        return real(tasks, n)

    monkeypatch.setattr(kernels, "thread_count", lambda _threads, n: min(threads, n))
    monkeypatch.setattr(kernels, "run_tasks", counted)
    many, ok_many = kernels.search_heavy_ball(*args, **options)
    assert used == [threads]
    assert ok_one.all() and ok_many.all() and np.all(np.isfinite(many))
    np.testing.assert_array_equal(many, one)


def _binned_loss(b, bins=60):
    p, init_var = _zhang_binned(bins=bins)
    return tuned_losses.TunedLoss(p, np.asarray(b, dtype=float), init_var, None, "heavy_ball")


def _random_points(loss, rng, m):
    """m points (ε below the feasible step, β) with their batch sizes (rows of the loss)."""
    which = rng.integers(0, loss.noise.shape[0], m)
    beta = 1 - 10 ** rng.uniform(-3, -0.3, m)
    feasible = loss.take(which).feasible_lr(beta, 0.02)
    return rng.uniform(0.3, 1.0, m) * feasible, beta, which


@pytest.mark.parametrize("options", [dict(), dict(stride=1e-9), dict(rel_tol=1e-4, max_narrowing=4)])
def test_compiled_crossings_equal_numpy(options, monkeypatch):
    """Integer first crossings (exact, or the bracket's end when narrowed to 1e-4) and continuous crossings of
    random points, compiled (``_cross_points``) against NumPy's ``_first_crossing`` row by row. Planted: the
    compiled narrowing rounding the interpolated root the other way fails it."""
    rng = np.random.default_rng(1)
    loss = _binned_loss(2.0 ** np.arange(0, 20, 3))
    monkeypatch.setenv("NQM_COMPILED", "0")
    eps, beta, which = _random_points(loss, rng, 40)
    guess = np.full(eps.size, np.inf)
    want = crossing.first_crossing(loss.take(which), eps, beta, 0.02, **options)
    monkeypatch.setenv("NQM_COMPILED", "1")
    kernels_loss = loss.take(which)  # one point per row: the compiled call crosses each at its own batch size
    got = search.cross_points(kernels_loss, eps[None, :], beta[None, :], 0.02, guess[None, :], **options)
    assert np.all(np.isfinite(want[0]))
    np.testing.assert_array_equal(got[0][0], want[0])
    np.testing.assert_allclose(got[1][0], want[1], rtol=1e-10)


def test_compiled_scan_equals_numpy_scan(monkeypatch):
    """The branch-and-bound scan for the first step with E[L_t] ≤ target, compiled against NumPy's, on runs whose
    loss rings (an earlier dip hits before the crossing) and smooth ones, and None alike when over the budget.
    Planted: the compiled underdamped envelope ignoring a zero of the cosine inside the interval fails it."""
    rng = np.random.default_rng(2)
    loss = _binned_loss(2.0 ** np.arange(4, 20, 3))
    eps, beta, which = _random_points(loss, rng, 30)
    beta[:10] = rng.uniform(0.3, 0.7, 10)  # fast ringing
    hits = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("NQM_COMPILED", flag)
        hits[flag] = [
            loss.first_hit_by_scan(int(i), e, h, 0.02, 4000, budget=budget)
            for e, h, i in zip(eps, beta, which)
            for budget in (np.inf, 1e3)
        ]
    assert hits["1"] == hits["0"]
    assert sum(h is None for h in hits["0"]) > 5 and len({h for h in hits["0"] if h is not None}) > 10


def test_fixed_step_curve_equals_numpy(monkeypatch):
    """E[L_t] at a grid of points of one batch size, compiled (``fixed_step_curve``) against the NumPy curve, and
    ``reaches`` saying whether one of them is at most the target."""
    rng = np.random.default_rng(3)
    loss = _binned_loss([4096.0])
    eps, beta, _ = _random_points(loss, rng, 50)
    curve = kernels.fixed_step_curve(eps, beta, loss.kappa, loss.noise[0], loss.v0, loss.half_h)
    numpy_curve = loss.take(np.zeros(eps.size, dtype=int)).curve(eps, beta)
    for t in (0, 1, 7, 30, 150, 2000):
        values = curve(t)
        np.testing.assert_allclose(values, numpy_curve(np.full(eps.size, float(t))), rtol=1e-12)
        for target in (values.min() * 0.999, values.min(), np.median(values)):
            assert curve.reaches(t, target) == bool(values.min() <= target)


def test_without_numba_the_tuners_run_in_numpy(monkeypatch):
    """Where numba cannot be imported the tuner runs its NumPy search, with the same steps as ``NQM_COMPILED=0``,
    and the failed import is not retried on every call. Planted: the import error let through fails it."""
    import sys

    import nqm.dynamics

    p, init_var = _zhang_binned(bins=30)
    b = np.array([16.0, 4096.0])
    monkeypatch.setenv("NQM_COMPILED", "0")
    want = dynamics.optimal_steps_to_target(p, 0.02, b, family="heavy_ball", init_var=init_var)
    monkeypatch.setenv("NQM_COMPILED", "1")
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    monkeypatch.delitem(sys.modules, "nqm.dynamics.runs.heavy_ball_kernels")
    monkeypatch.delattr(nqm.dynamics.runs, "heavy_ball_kernels")
    compiled.imported_kernels.cache_clear()
    try:
        assert compiled.compiled_kernels() is None
        got = dynamics.optimal_steps_to_target(p, 0.02, b, family="heavy_ball", init_var=init_var)
        assert compiled.imported_kernels.cache_info().misses == 1
    finally:
        compiled.imported_kernels.cache_clear()
    np.testing.assert_array_equal(got.steps, want.steps)
    np.testing.assert_array_equal(got.lr, want.lr)
