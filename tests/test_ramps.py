"""Staged SGD runs and Smith et al.'s equivalence (nqm.dynamics.studies.ramps), against a step-by-step recursion and
against the first-order derivation's convergence."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nqm
from nqm import dynamics

P = nqm.NoisyQuadratic.zhang2019(50)


def _step_by_step(p, lr, batch_sizes, steps, precond, target):
    """E[θ²] one step at a time, V ← (1 − εph)²V + ε²p²c/B, with the first step whose ½Σh V ≤ target."""
    pre = np.ones(p.d) if precond is None else precond
    v, t, examples, hit, ends = np.ones(p.d), 0, 0.0, None, [0.5 * p.h @ np.ones(p.d)]
    for eps, b, n in zip(lr, batch_sizes, steps):
        for _ in range(n):
            v = (1 - eps * pre * p.h) ** 2 * v + eps**2 * pre**2 * p.c / b
            t, examples = t + 1, examples + b
            if hit is None and 0.5 * p.h @ v <= target:
                hit = (t, examples)
        ends.append(0.5 * p.h @ v)
    return np.array(ends), hit


@pytest.mark.parametrize("precond", [None, P.h**-0.5], ids=["sgd", "P=H^-1/2"])
def test_staged_run_is_the_step_by_step_recursion(precond):
    lr, batches, steps = [0.9, 0.5, 0.2], [4, 32, 256], [30, 40, 50]
    target = 0.02 * 0.5 * P.h.sum()  # reached in the third stage
    run = dynamics.staged_run(P, lr, batches, steps, target=target, precond=precond)
    ends, hit = _step_by_step(P, lr, batches, steps, precond, target)
    np.testing.assert_allclose(run.loss, ends, rtol=1e-12)
    assert hit is not None and hit[0] > steps[0] + steps[1]
    assert (run.steps_to_target, run.examples_to_target) == hit
    np.testing.assert_array_equal(run.examples, [0, 120, 1400, 14200])
    # a target met exactly at a stage end counts the steps and examples of the stages before it
    at_end = ends[2] * (1 + 1e-9)
    run = dynamics.staged_run(P, lr, batches, steps, target=at_end, precond=precond)
    assert (run.steps_to_target, run.examples_to_target) == _step_by_step(P, lr, batches, steps, precond, at_end)[1]
    assert run.steps_to_target == 70


def test_staged_run_without_reaching_the_target():
    run = dynamics.staged_run(P, [0.5], [8], [3], target=1e-9)
    assert run.steps_to_target == run.examples_to_target == np.inf
    assert dynamics.staged_run(P, [0.5], [8], [3]).steps_to_target is None


def test_one_stage_is_a_constant_run():
    run = dynamics.staged_run(P, [0.7], [16], [200], target=0.05)
    assert run.loss[-1] == pytest.approx(dynamics.expected_loss(P, 0.7, 16, 200)[-1], rel=1e-12)
    assert run.steps_to_target == dynamics.steps_to_target(P, 0.7, 16, 0.05)


def _ratios(s):
    """Exact deviations over their first-order predictions: the decay run's and the growth run's from the limit,
    and the gap between them (stages after the first, where they differ)."""
    return np.concatenate(
        [
            (s.decay.loss - s.limit_loss)[1:] / s.first_order_decay[1:],
            (s.growth.loss - s.limit_loss)[1:] / s.first_order_growth[1:],
            s.gap[2:] / s.first_order_gap[2:],
        ]
    )


def test_smith_gap_is_first_order_in_the_step_with_the_derived_coefficient():
    """Shrinking ε₀ and B₀ by m at fixed examples, each run's distance from the common limit, and the gap between
    them, over the derived first-order term tend to 1 with an error O(ε₀κ): it halves when m doubles. A wrong
    coefficient (the decay run's contraction taken as the growth run's, a floor expanded as 1 + εκ) leaves a
    ratio that does not tend to 1."""
    kappa_max = P.h.max()
    errors = []
    for m in (16, 32, 64):
        s = dynamics.smith_equivalence(P, 0.5 / kappa_max / m, 2**10 / m, 4, np.array([50, 50, 50]) * m)
        assert s.step_curvature == pytest.approx(0.5 / m)
        errors.append(np.abs(_ratios(s) - 1).max())
    assert errors[-1] < 0.05 * s.step_curvature
    assert 1.8 < errors[0] / errors[1] < 2.2 and 1.8 < errors[1] / errors[2] < 2.2
    # the two runs agree at the limit: same examples at every stage end, same ε/B
    np.testing.assert_array_equal(s.decay.examples, s.growth.examples)
    np.testing.assert_allclose(s.decay.lr / s.decay.batch_sizes, s.growth.lr / s.growth.batch_sizes, rtol=1e-15)
    assert np.all(s.growth.steps[1:] < s.decay.steps[1:])


def test_smith_equivalence_breaks_past_the_stability_edge():
    """ε₀κ_max > 2: the growth run diverges; the decay run's later, smaller steps are stable."""
    kappa_max = P.h.max()
    s = dynamics.smith_equivalence(P, 2.5 / kappa_max, 16, 4, [100, 100, 100], target=0.05 * 0.5 * P.h.sum())
    assert s.growth.loss[-1] > 1e10 * s.growth.loss[0]
    assert s.decay.loss[-1] < s.decay.loss[0]
    assert s.growth.steps_to_target == np.inf and np.isfinite(s.decay.steps_to_target)


def test_smith_rejects_a_factor_that_makes_fractional_steps():
    with pytest.raises(ValueError, match="factor"):
        dynamics.smith_equivalence(P, 0.1, 4, 2.5, [3, 3])
    with pytest.raises(ValueError, match="stage_steps"):
        dynamics.smith_equivalence(P, 0.1, 4, 2, [3.5])
    with pytest.raises(ValueError, match="one length"):
        dynamics.staged_run(P, [0.1, 0.2], [4], [3, 3])


@settings(max_examples=40, deadline=None)
@given(
    lr=st.floats(0.01, 1.9),
    batch=st.floats(1.0, 1e4),
    first=st.integers(0, 400),
    second=st.integers(0, 400),
)
def test_a_stage_cut_in_two_is_the_same_stage(lr, batch, first, second):
    """Cutting one stage of (ε, B) into two changes nothing: the stage maps compose (the closed form's
    semigroup property), and the first step to a target is the same wherever the cut falls."""
    target = 0.3 * 0.5 * P.h.sum()
    whole = dynamics.staged_run(P, [lr], [batch], [first + second], target=target)
    cut = dynamics.staged_run(P, [lr, lr], [batch, batch], [first, second], target=target)
    np.testing.assert_allclose(cut.loss[[0, 2]], whole.loss, rtol=1e-10)
    assert cut.steps_to_target == whole.steps_to_target
    assert cut.examples_to_target == pytest.approx(whole.examples_to_target, rel=1e-12)
