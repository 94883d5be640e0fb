"""Bad input gives a clear error that names the argument, never a silent wrong answer: the cases a careless or
hostile user tried (each was once a NaN, a truncation, uninitialised memory or a result for other arguments)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import batch_sizes, problems

import nqm
from nqm import dynamics, estimators, noise, optim, spectra


def _p():
    return nqm.NoisyQuadratic.zhang2019(10)


def _rng():
    return np.random.default_rng(0)


def _ls():
    return nqm.LeastSquares(np.array([1.0, 0.5, 0.25]), 0.1)


CASES = [
    # record / at: integers in range; one behaviour for order and repeats (see test_record_order_and_repeats)
    ("LeastSquares.simulate record=[-1, 5]", lambda: _ls().simulate(0.1, 2, 10, 4, at=[-1, 5], seed=3), "at"),
    ("LeastSquares.simulate record=[0, 999]", lambda: _ls().simulate(0.1, 2, 10, 4, at=[0, 999], seed=3), "at"),
    ("simulate at=[2.7]", lambda: nqm.simulate(_p(), 0.5, 4, 5, 4, at=[2.7]), "at"),
    ("expected_loss at=[2.5]", lambda: dynamics.expected_loss(_p(), 0.5, 4, 5, at=[2.5]), "at"),
    ("LeastSquares.expected_loss init_var=-1", lambda: _ls().expected_loss(0.1, 2, 3, init_var=-1.0), "init_var"),
    ("simulate theta0 with NaN", lambda: nqm.simulate(_p(), 0.5, 4, 5, 4, theta0=[np.nan] + [0.0] * 9), "theta0"),
    # steps_to_target and noise_scales_along: scalars, finite and positive
    ("steps_to_target lr=-0.1", lambda: dynamics.steps_to_target(_p(), -0.1, 4, 0.5), "lr"),
    ("steps_to_target lr=0", lambda: dynamics.steps_to_target(_p(), 0.0, 4, 0.5), "lr"),
    ("steps_to_target lr=inf", lambda: dynamics.steps_to_target(_p(), np.inf, 4, 0.5), "lr"),
    ("steps_to_target lr=[0.5, 0.01]", lambda: dynamics.steps_to_target(_p(), [0.5, 0.01], 4, 0.5), "opt"),
    ("steps_to_target B=[64, 4]", lambda: dynamics.steps_to_target(_p(), 0.5, [64, 4], 0.05), "batch"),
    ("noise_scales_along lr=-1", lambda: dynamics.noise_scales_along(_p(), -1.0, 4, 10), "lr"),
    ("noise_scales_along B=-4", lambda: dynamics.noise_scales_along(_p(), 0.5, -4, 10), "batch"),
    ("noise_scales_along steps=-10", lambda: dynamics.noise_scales_along(_p(), 0.5, 4, -10), "steps"),
    # examples are drawn: integer batch sizes
    ("minibatch_noise examples B=2.5", lambda: noise.minibatch_noise(_rng(), _p(), 2.5, 4, "gaussian"), "batch"),
    ("minibatch_noise B=0", lambda: noise.minibatch_noise(_rng(), _p(), 0, 4), "batch"),
    ("minibatch_noise B=-4", lambda: noise.minibatch_noise(_rng(), _p(), -4, 4), "batch"),
    ("bulk_outliers below the bulk", lambda: spectra.bulk_outliers(10, (0.1, 1.0), [5.0, 0.5]), "outliers"),
    ("gradient_norm_trace b_small=2.7", lambda: nqm.gradient_norm_trace(_p(), 0.5, 2.7, 5.5, 3, 4), "b_small"),
    ("DataParallel workers=2.5", lambda: estimators.DataParallel(workers=2.5, local_batch=4), "workers"),
    # problems
    ("NoisyQuadratic complex h", lambda: nqm.NoisyQuadratic(np.array([1.0 + 1j, 2.0])), "h"),
    ("zhang2019 d=2.7", lambda: nqm.NoisyQuadratic.zhang2019(2.7), "d"),
    ("zhang2019 d=NaN", lambda: nqm.NoisyQuadratic.zhang2019(float("nan")), "d"),
    ("zhang2019 d=None", lambda: nqm.NoisyQuadratic.zhang2019(None), "d"),
    ("zhang2019 d='10'", lambda: nqm.NoisyQuadratic.zhang2019("10"), "d"),
    ("power_law scale=nan", lambda: spectra.power_law(10, 1.0, scale=float("nan")), "scale"),
    ("noise_power h with NaN", lambda: spectra.noise_power(np.array([1.0, np.nan]), 1.0, 1.0), "h"),
    ("misaligned_sigma c with NaN", lambda: spectra.misaligned_sigma(np.array([1.0, np.nan])), "c"),
    # an environment override never hides an invalid argument
    (
        "simulate backend='torch' under NQM_BACKEND",
        lambda: nqm.simulate(_p(), 0.5, 4, 5, 4, backend="torch"),
        "backend",
    ),
    ("simulate backend=42 under NQM_BACKEND", lambda: nqm.simulate(_p(), 0.5, 4, 5, 4, backend=42), "backend"),
]


@pytest.mark.parametrize("call, named", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_a_clear_error_naming_the_argument(call, named, monkeypatch):
    monkeypatch.setenv("NQM_BACKEND", "numpy")
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    assert named in str(err.value), str(err.value)


def test_record_order_and_repeats_are_kept_by_every_engine():
    """``at`` in any order, with repeats: the simulators return the curve as asked, as the exact engine does."""
    p, at = _p(), [5, 0, 3, 5]
    exact = dynamics.expected_loss(p, 0.5, 4, 5, at=at)
    sim = nqm.simulate(p, 0.5, 4, 5, 8, at=at, seed=1, keep_losses=True)
    assert exact.steps.tolist() == sim.steps.tolist() == at
    assert sim.mean[0] == sim.mean[3] and sim.losses.shape == (8, 4)
    ordered = nqm.simulate(p, 0.5, 4, 5, 8, at=[0, 3, 5], seed=1)
    assert sim.mean[[1, 2, 0]].tolist() == ordered.mean.tolist()  # the same run, reordered
    ls = nqm.LeastSquares(p.h, 0.1).simulate(0.1, 2, 5, 4, at=at, seed=1)
    assert ls.steps.tolist() == at and ls.mean[0] == ls.mean[3]


def test_real_batch_sizes_stay_exact_for_gaussian_noise():
    """Batch-scaled Gaussian noise takes a real B: variance c/B (B = 2.5 gives 0.4·c, not c/2)."""
    p = nqm.NoisyQuadratic([1.0, 2.0], c=[1.0, 1.0])
    draws = noise.minibatch_noise(_rng(), p, 2.5, 200_000)
    np.testing.assert_allclose(draws.var(axis=0), 0.4, rtol=0.02)  # SE of a variance: √(2/n) ≈ 0.3%, 6σ


# -- every public entry point against bad scalars ------------------------------------------------------------------
# For each entry point: a call with good arguments, and the scalar arguments that must refuse a bad value with an
# error naming them. Bad values: NaN, ±inf, 0 and negatives where they are out of range, non-integers for counts,
# complex numbers, strings and None. The good call itself must give a finite result.

_ZH = nqm.NoisyQuadratic.zhang2019(8)
_L0 = 0.5 * float(_ZH.h.sum())
_THETA = np.linspace(1.0, 0.1, 8)
_BAD_REAL = [float("nan"), float("inf"), -float("inf"), 1 + 1j, "0.5", None]
_BAD_POSITIVE = _BAD_REAL + [0.0, -1.0]
_BAD_COUNT = _BAD_REAL + [2.7, -3]
_BAD_BATCH = [float("nan"), -float("inf"), 1 + 1j, "0.5", None, 0.0, -4.0, 0.5]  # B = inf is the noiseless limit

ENTRY_POINTS = {
    "theory.optimal_step": (lambda batch_size: nqm.theory.optimal_step(_ZH, _THETA, batch_size), {"batch_size": 4}),
    "theory.optimal_improvement": (
        lambda batch_size: nqm.theory.optimal_improvement(_ZH, _THETA, batch_size),
        {"batch_size": 4},
    ),
    "dynamics.expected_loss": (
        lambda lr, batch_size, steps, init_var: dynamics.expected_loss(_ZH, lr, batch_size, steps, init_var=init_var),
        {"lr": 0.5, "batch_size": 4, "steps": 5, "init_var": 1.0},
    ),
    "dynamics.steps_to_target": (
        lambda lr, batch_size, target: dynamics.steps_to_target(_ZH, lr, batch_size, target),
        {"lr": 0.5, "batch_size": 4, "target": 0.5},
    ),
    "dynamics.optimal_steps_to_target": (
        lambda target, batch_size: dynamics.optimal_steps_to_target(_ZH, target, [batch_size]).steps,
        {"target": 0.5, "batch_size": 4},
    ),
    "dynamics.noise_scales_along": (
        lambda lr, batch_size, steps: dynamics.noise_scales_along(_ZH, lr, batch_size, steps),
        {"lr": 0.5, "batch_size": 4, "steps": 5},
    ),
    "simulate": (
        lambda lr, batch_size, steps, replicas, init_var: nqm.simulate(
            _ZH, lr, batch_size, steps, replicas, init_var=init_var
        ),
        {"lr": 0.5, "batch_size": 4, "steps": 5, "replicas": 4, "init_var": 1.0},
    ),
    "gradient_norm_trace": (
        lambda lr, steps, replicas: nqm.gradient_norm_trace(_ZH, lr, 2, 8, steps, replicas).sq_big,
        {"lr": 0.5, "steps": 5, "replicas": 4},
    ),
    "optim.heavy_ball": (lambda lr, momentum: optim.heavy_ball(lr, momentum).lr, {"lr": 0.5, "momentum": 0.9}),
    "optim.ema": (lambda gamma: optim.ema(optim.sgd(0.5), gamma).gamma, {"gamma": 0.9}),
    "optim.adam": (lambda lr, beta1, eps: optim.adam(lr, beta1, eps=eps).lr, {"lr": 0.1, "beta1": 0.9, "eps": 1e-8}),
    "spectra.power_law": (lambda d, exponent: spectra.power_law(d, exponent), {"d": 8, "exponent": 1.0}),
    "dynamics.small_batch_examples": (
        lambda target: dynamics.small_batch_examples(_ZH, target).examples,
        {"target": 0.01},
    ),
    "dynamics.large_batch_steps": (lambda target: dynamics.large_batch_steps(_ZH, target), {"target": 0.01}),
    "dynamics.scaling_exponents": (
        lambda exponent: dynamics.scaling_exponents(exponent, 1.0).alpha_b,
        {"exponent": 2.0},
    ),
    "dynamics.staged_run": (
        lambda lr, batch_size, steps: dynamics.staged_run(_ZH, [lr], [batch_size], [steps], target=0.5).loss,
        {"lr": 0.5, "batch_size": 4, "steps": 5},
    ),
    "dynamics.smith_equivalence": (
        lambda lr, batch_size, factor: dynamics.smith_equivalence(_ZH, lr, batch_size, factor, [4, 4]).gap,
        {"lr": 0.5, "batch_size": 4, "factor": 2.0},
    ),
    "dynamics.local_critical_batch": (
        lambda batch_size, tolerance: (
            dynamics.local_critical_batch(_ZH, batch_size, [0.5 * _L0, 0.2 * _L0], tolerance=tolerance).critical
        ),
        {"batch_size": 2, "tolerance": 0.2},
    ),
    "dynamics.constant_batch_at_steps": (
        lambda target: dynamics.constant_batch_at_steps(_ZH, 50, target).examples,
        {"target": 0.5},
    ),
    "dynamics.milestone_ramp": (
        lambda batch_size, target: dynamics.milestone_ramp(_ZH, [0.5 * _L0], [batch_size] * 2, target).examples,
        {"batch_size": 4, "target": 0.2 * _L0},
    ),
    "spectra.power_law_bins": (lambda exponent: spectra.power_law_bins(exponent, 1e6)[0], {"exponent": 2.0}),
    "spectra.log_uniform": (lambda d, low: spectra.log_uniform(d, low, 1.0), {"d": 8, "low": 0.01}),
    "spectra.noise_power": (lambda scale: spectra.noise_power(_ZH.h, scale), {"scale": 1.0}),
    "NoisyQuadratic.zhang2019": (lambda d: nqm.NoisyQuadratic.zhang2019(d).h, {"d": 8}),
}

_BAD_FOR = {
    "lr": _BAD_POSITIVE,
    "batch_size": _BAD_BATCH,
    "steps": _BAD_COUNT,
    "replicas": _BAD_COUNT + [1],
    "d": _BAD_COUNT + [0],
    "init_var": _BAD_REAL + [-1.0],
    "target": _BAD_POSITIVE,
    "momentum": _BAD_REAL + [-0.1, 1.0],
    "gamma": _BAD_REAL + [-0.1, 1.0],
    "beta1": _BAD_REAL + [-0.1, 1.0],
    "eps": _BAD_REAL + [-1.0],
    "exponent": _BAD_REAL,
    "factor": _BAD_REAL + [0.5],
    "tolerance": _BAD_POSITIVE,
    "low": _BAD_POSITIVE,
    "scale": _BAD_REAL + [-1.0],
}

_BAD_CASES = [(entry, arg, bad) for entry, (_, good) in ENTRY_POINTS.items() for arg in good for bad in _BAD_FOR[arg]]


def _finite(result) -> bool:
    values = np.asarray(result.mean if isinstance(result, nqm.LossCurve) else result, dtype=np.float64)
    return not np.any(np.isnan(values))


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_good_arguments_give_a_result_without_nan(entry):
    call, good = ENTRY_POINTS[entry]
    assert _finite(call(**good))


@pytest.mark.parametrize("entry, arg, bad", _BAD_CASES, ids=[f"{e}-{a}={b!r}" for e, a, b in _BAD_CASES])
def test_a_bad_scalar_is_refused_naming_its_argument(entry, arg, bad):
    call, good = ENTRY_POINTS[entry]
    names = {"lr": ("lr", "opt"), "batch_size": ("batch",), "target": ("target",)}.get(arg, (arg,))
    with pytest.raises((ValueError, TypeError)) as err:
        call(**{**good, arg: bad})
    assert any(n in str(err.value) for n in names), f"{entry}({arg}={bad!r}): {err.value}"


# -- the same, as properties: hypothesis draws the bad values --------------------------------------------------
# A bad scalar is any non-finite float, complex number, string, None or boolean, or a finite value outside the
# argument's range; a bad array has a non-finite entry, the wrong length or rank, or a non-real dtype. Each must be
# refused with a ValueError or TypeError naming the argument (never a NaN, a truncation or a silent cast).

_NOT_A_NUMBER = st.one_of(
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    st.complex_numbers(allow_nan=False, allow_infinity=False).filter(lambda z: z.imag != 0),
    st.text(max_size=4),
    st.none(),
    st.booleans(),
)
_NEGATIVE = st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=False)
_OUT_OF_RANGE = {
    "lr": st.one_of(_NEGATIVE, st.just(0.0)),
    "batch_size": st.floats(max_value=1.0, exclude_max=True, allow_nan=False, allow_infinity=False),
    "steps": st.one_of(_NEGATIVE, st.floats(0.01, 1e6).filter(lambda x: x != round(x))),
    "replicas": st.one_of(st.integers(max_value=1), st.floats(2.01, 1e6).filter(lambda x: x != round(x))),
    "d": st.one_of(st.integers(max_value=0), st.floats(1.01, 1e6).filter(lambda x: x != round(x))),
    "init_var": _NEGATIVE,
    "target": st.one_of(_NEGATIVE, st.just(0.0)),
    "momentum": st.one_of(_NEGATIVE, st.floats(min_value=1.0, allow_nan=False, allow_infinity=False)),
    "gamma": st.one_of(_NEGATIVE, st.floats(min_value=1.0, allow_nan=False, allow_infinity=False)),
    "beta1": st.one_of(_NEGATIVE, st.floats(min_value=1.0, allow_nan=False, allow_infinity=False)),
    "eps": _NEGATIVE,
    "exponent": st.nothing(),
    "tolerance": st.one_of(_NEGATIVE, st.just(0.0)),
    "factor": st.floats(max_value=1.0, exclude_max=True, allow_nan=False, allow_infinity=False),
    "low": st.one_of(_NEGATIVE, st.just(0.0)),
    "scale": _NEGATIVE,
}
_ARG_NAMES = {"lr": ("lr", "opt"), "batch_size": ("batch",), "target": ("target",)}
_PAIRS = [(entry, arg) for entry, (_, good) in ENTRY_POINTS.items() for arg in good]


@pytest.mark.parametrize("entry, arg", _PAIRS, ids=[f"{e}-{a}" for e, a in _PAIRS])
@settings(max_examples=15)
@given(data=st.data())
def test_any_bad_scalar_is_refused_naming_its_argument(entry, arg, data):
    call, good = ENTRY_POINTS[entry]
    not_a_number = _NOT_A_NUMBER.filter(lambda x: x != float("inf")) if arg == "batch_size" else _NOT_A_NUMBER
    bad = data.draw(st.one_of(not_a_number, _OUT_OF_RANGE[arg]), label=arg)  # B = inf: the noiseless limit
    with pytest.raises((ValueError, TypeError)) as err:
        call(**{**good, arg: bad})
    assert any(n in str(err.value) for n in _ARG_NAMES.get(arg, (arg,))), f"{entry}({arg}={bad!r}): {err.value}"


@st.composite
def _bad_vectors(draw, d, low=None, batched=False):
    """A length-d-ish array that is wrong: a NaN/±inf entry, an entry below ``low``, the wrong length or rank (not
    when ``batched``: a stack of points is one), or a complex, string, object or boolean dtype."""
    good = draw(hnp.arrays(np.float64, d, elements=st.floats(1.0, 10.0)))
    kind = draw(st.sampled_from(["non-finite", "below", "length", "rank", "complex", "str", "object", "bool"]))
    if (kind == "below" and low is None) or (kind == "rank" and batched):
        kind = "non-finite"
    if kind in ("non-finite", "below"):
        values = [float("nan"), float("inf"), -float("inf")] if kind == "non-finite" else [low - 1.0, -1e-9 + low]
        good[draw(st.integers(0, d - 1))] = draw(st.sampled_from(values))
        return good
    if kind == "length":
        return np.ones(draw(st.sampled_from([0, d + 1, d + 5] + ([d - 1] if d > 1 else []))))
    if kind == "rank":
        return np.ones((2, d))
    return {"complex": good + 1j, "str": good.astype(str), "object": good.astype(object), "bool": good > 5}[kind]


_D = 5
_P5 = nqm.NoisyQuadratic(np.linspace(1.0, 0.2, _D), np.linspace(0.5, 0.1, _D))
_ARRAY_ENTRY_POINTS = {
    "NoisyQuadratic h": (lambda v: nqm.NoisyQuadratic(v, np.ones(_D)), "h", 1e-300),
    "NoisyQuadratic c": (lambda v: nqm.NoisyQuadratic(np.ones(_D), v), "c", 0.0),
    "theory.optimal_step theta": (lambda v: nqm.theory.optimal_step(_P5, v, 4), "theta", None),
    "theory.noise_scale theta": (lambda v: nqm.theory.noise_scale(_P5, v), "theta", None),
    "LeastSquares theta": (lambda v: nqm.LeastSquares(np.ones(_D), 0.1).noise_scale(v), "theta", None),
    "simulate theta0": (lambda v: nqm.simulate(_P5, 0.5, 4, 3, 4, theta0=v), "theta0", None),
    "expected_loss init_var": (lambda v: dynamics.expected_loss(_P5, 0.5, 4, 3, init_var=v), "init_var", 0.0),
    "sgd precond": (lambda v: dynamics.expected_loss(_P5, optim.sgd(0.5, precond=v), 4, 3), "precond", 1e-300),
    "misaligned_sigma c": (lambda v: spectra.misaligned_sigma(v), "c", 0.0),
}


@pytest.mark.parametrize("entry", list(_ARRAY_ENTRY_POINTS))
@settings(max_examples=25)
@given(data=st.data())
def test_any_bad_array_is_refused_naming_its_argument(entry, data):
    call, name, low = _ARRAY_ENTRY_POINTS[entry]
    bad = data.draw(_bad_vectors(_D, low, batched=entry.startswith("theory")), label=name)
    if entry == "misaligned_sigma c" and bad.ndim == 1 and bad.dtype.kind == "f" and bad.size >= 1:
        assume(not np.all(np.isfinite(bad)) or bad.min() < 0)  # any length is a valid spectrum there
    with pytest.raises((ValueError, TypeError)) as err:
        call(bad)
    assert name in str(err.value) or (name == "c" and "d must be" in str(err.value)), f"{entry}: {err.value}"


@settings(max_examples=25)
@given(
    at=st.one_of(
        st.lists(st.integers(-5, 20), min_size=1).filter(lambda a: min(a) < 0 or max(a) > 10),
        st.lists(st.floats(0.1, 9.9).filter(lambda x: x != round(x)), min_size=1),
        st.lists(st.booleans(), min_size=1),
        st.lists(st.text(max_size=2), min_size=1),
        st.just([]),
    ),
    engine=st.sampled_from(["expected_loss", "simulate", "LeastSquares.simulate"]),
)
def test_bad_steps_asked_for_are_refused_by_every_engine(at, engine):
    """One rule for ``at`` everywhere: a non-empty list of integer steps in [0, steps]."""
    calls = {
        "expected_loss": lambda: dynamics.expected_loss(_P5, 0.5, 4, 10, at=at),
        "simulate": lambda: nqm.simulate(_P5, 0.5, 4, 10, 4, at=at),
        "LeastSquares.simulate": lambda: _ls().simulate(0.1, 2, 10, 4, at=at, threads=1),
    }
    with pytest.raises(ValueError, match="at must"):
        calls[engine]()


@settings(max_examples=40)
@given(
    p=problems(max_d=8),
    lr_fraction=st.floats(1e-6, 10.0),
    batch=batch_sizes,
    steps=st.integers(0, 200),
    init_var=st.floats(0.0, 1e3),
)
def test_finite_arguments_never_give_nan(p, lr_fraction, batch, steps, init_var):
    """Any finite, in-range arguments give a number or inf (a diverging run), never NaN: exact dynamics, the
    steps to a target, and McCandlish's one-step quantities."""
    lr = lr_fraction / p.h.max()
    curve = dynamics.expected_loss(p, lr, batch, steps, init_var=init_var)
    assert not np.any(np.isnan(curve.mean))
    target = 0.5 * float(p.h @ np.full(p.d, init_var)) * 0.1 + 1e-12
    assert not np.isnan(dynamics.steps_to_target(p, lr, batch, target, init_var=init_var))
    theta = np.sqrt(init_var) * np.ones(p.d) + 1e-3
    for f in (nqm.theory.optimal_step, nqm.theory.optimal_improvement):
        assert not np.any(np.isnan(f(p, theta, batch)))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda p: nqm.dynamics.expected_loss(p, 0.5, [], 10), ValueError, "batch size must be a single number"),
        (lambda p: nqm.dynamics.steady_state_loss(p, 0.5, [8, 16]), ValueError, "batch size must be a single number"),
        (lambda p: nqm.dynamics.coordinate_variance(p, 0.5, 8, float("nan")), ValueError, "step must be"),
        (lambda p: nqm.dynamics.coordinate_variance(p, 0.5, 8, "3"), TypeError, "step must be a real number"),
        (lambda p: nqm.theory.preconditioned_simple_noise_scale(p, np.ones(p.d), 1j), TypeError, "precond_x"),
        (lambda p: nqm.montecarlo.simulate_checkpoints(p, 0.5, 8, [0, np.inf], 4), ValueError, "at must be"),
        (lambda p: nqm.montecarlo.simulate_checkpoints(p, 0.5, 8, ["3"], 4), TypeError, "at must be a real number"),
        (lambda p: nqm.montecarlo.steps_to_target(p, 0.5, 8, 1j, 4, 10), TypeError, "target"),
        (lambda p: nqm.gradient_norm_trace(p, [], 2, 8, 5, 4), ValueError, "step size"),
        (lambda p: nqm.montecarlo.default_record("10"), ValueError, "steps must be an integer"),
        (lambda p: estimators.two_batch_estimates([1.0, 2.0], [], 1, 8), ValueError, "sq_big \\(0,\\)"),
        (lambda p: estimators.consecutive_step_estimates_from_norms(np.nan, 1.0, 4), ValueError, "mean_sq"),
        (lambda p: estimators.consecutive_step_estimates_from_norms(2.0, 1.0, np.inf), ValueError, "batch_size"),
        (lambda p: estimators.ema(3.0, 0.9), ValueError, "values must be an array"),
        (lambda p: estimators.ema([1.0, 2.0], "0.9"), TypeError, "beta"),
        (lambda p: spectra.custom([1 + 1j, 2.0]), TypeError, "values"),
        (lambda p: spectra.geometric_bins([1.0, 0.0], 4), ValueError, "h \\(curvatures\\) must be > 0"),
        (lambda p: nqm.finite_data.batch_factor(np.inf, 4), ValueError, "n \\(examples\\)"),
        (lambda p: estimators.two_batch_estimates(-1.0, 1.0, 1, 8), ValueError, "squared norms \\(>= 0\\)"),
        (lambda p: estimators.consecutive_step_estimates_from_norms(2.0, -1.0, 4), ValueError, "sq_of_mean"),
        (lambda p: spectra.power_law(10, -1.0), ValueError, "exponent"),
    ],
)
def test_fuzzed_arguments_are_named(call, error, message):
    """Found by ``bench/probe.py --fuzz``: numpy's own messages ("only 0-dimensional arrays …", "cannot convert
    float NaN to integer") where the argument was not named."""
    with pytest.raises(error, match=message):
        call(nqm.NoisyQuadratic.zhang2019(10))
