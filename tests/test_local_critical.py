"""Merrill et al.'s local critical batch and batch ramps in loss milestones (nqm.dynamics.studies.local_critical,
nqm.dynamics.studies.ramps), against a plain scalar loop of the greedy step written here."""

import numpy as np
import pytest

import nqm
from nqm import dynamics

P = nqm.NoisyQuadratic.zhang2019(30)
L0 = 0.5 * float(P.h.sum())


def _greedy_loop(p, v, batch_of_loss, target, cap=10**6):
    """Greedy steps ε = Σh²V/(Σh³V + Σhc/B) one at a time with B = batch_of_loss(E[L]); the steps to the target,
    the moments there, and Σ B_noise·ds, Σ ds with ds = 1/(1 + B_noise/B)."""
    v, steps, noise_s, s = np.array(v, dtype=float), 0, 0.0, 0.0
    while 0.5 * np.dot(p.h, v) > target and steps < cap:
        b = batch_of_loss(0.5 * np.dot(p.h, v))
        b_noise = np.dot(p.h, p.c) / np.dot(p.h**3, v)
        eps = np.dot(p.h**2, v) / (np.dot(p.h**3, v) + np.dot(p.h, p.c) / b)
        v = (1 - eps * p.h) ** 2 * v + eps**2 * p.c / b
        ds = 1 / (1 + b_noise / b)
        noise_s, s, steps = noise_s + b_noise * ds, s + ds, steps + 1
    return steps, v, noise_s, s


MILESTONES = L0 * np.array([0.4, 0.15, 0.05, 0.02])


def test_branches_are_greedy_runs_from_the_checkpoints():
    grid = 2.0 ** np.arange(2, 12)
    local = dynamics.local_critical_batch(P, 2, MILESTONES, batch_sizes=grid)
    np.testing.assert_array_equal(local.batch_sizes, np.concatenate([[2.0], grid[grid > 2]]))
    v, done = np.ones(P.d), 0
    for m in range(3):
        steps, v, _, _ = _greedy_loop(P, v, lambda loss: 2.0, MILESTONES[m])
        done += steps
        assert local.checkpoint_steps[m] == done
        assert local.b_noise[m] == pytest.approx(np.dot(P.h, P.c) / np.dot(P.h**3, v), rel=1e-12)
        for j, b in enumerate(local.batch_sizes):
            branch, _, noise_s, s = _greedy_loop(P, v, lambda loss, b=b: b, MILESTONES[m + 1])
            assert local.branch_steps[m, j] == branch
            if j == 0:
                assert local.b_noise_mean[m] == pytest.approx(noise_s / s, rel=1e-10)
    np.testing.assert_allclose(local.one_step, 0.2 * local.b_noise + 1.2 * 2, rtol=1e-15)
    assert np.all(np.diff(local.b_noise) > 0) and local.critical[-1] > local.critical[0]


def test_the_local_critical_batch_is_where_examples_first_exceed_the_tolerance():
    """The largest B up to which *every* branch stays within (1 + τ) of the small batch's examples. On a fine grid
    whole-step jumps bring some branch back within the tolerance past the first one outside it (asserted, so the
    test can tell "up to which every" from "the largest within")."""
    local = dynamics.local_critical_batch(P, 2, MILESTONES, batch_sizes=2.0 ** np.arange(1, 16, 1 / 16))
    ok = local.branch_examples <= 1.2 * local.branch_examples[:, :1]
    first_out = np.argmin(ok, axis=1)
    assert np.all(~ok.all(axis=1))
    assert any(ok[m, first_out[m] :].any() for m in range(3))
    np.testing.assert_array_equal(local.critical, local.batch_sizes[first_out - 1])


def test_milestone_ramp_switches_batch_at_the_milestones():
    batches = [4.0, 8.0, 32.0, 64.0]
    run = dynamics.milestone_ramp(P, MILESTONES[:3], batches, MILESTONES[3])

    def batch_of_loss(loss):
        return batches[int(np.sum(loss <= MILESTONES[:3]))]

    steps, *_ = _greedy_loop(P, np.ones(P.d), batch_of_loss, MILESTONES[3])
    assert run.steps == steps
    np.testing.assert_array_equal(np.unique(run.batch_sizes), batches)
    assert run.examples == pytest.approx(np.sum(run.batch_sizes), rel=1e-15)
    # the batch of a step is the one for the loss before it
    before = run.loss[:-1]
    np.testing.assert_array_equal(run.batch_sizes, [batch_of_loss(x) for x in before])


def test_doubling_batches_follow_the_local_critical_batch():
    local = dynamics.local_critical_batch(P, 2, MILESTONES)
    batches = dynamics.doubling_batches(local)
    assert batches[0] == 2 and np.all(np.diff(batches) >= 0)
    assert np.all(batches[1:] <= np.maximum.accumulate(np.minimum(local.critical, local.batch_sizes.max())))
    assert np.all(2 * batches[1:] > np.minimum(local.critical, local.batch_sizes.max()))  # the largest doubling
    np.testing.assert_array_equal(np.log2(batches / 2), np.round(np.log2(batches / 2)))


def test_constant_batch_at_steps_is_the_threshold_batch():
    target = MILESTONES[-1]
    match = dynamics.constant_batch_at_steps(P, 300, target)
    at = _greedy_loop(P, np.ones(P.d), lambda loss: match.batch_size, target)[0]
    below = _greedy_loop(P, np.ones(P.d), lambda loss: match.batch_size * (1 - 1e-7), target)[0]
    assert at <= 300 < below
    assert match.steps == at and match.examples == pytest.approx(at * match.batch_size, rel=1e-15)


def test_growing_ramps_beat_the_constant_batch_at_equal_steps():
    """The ramps this module builds spend fewer examples than the constant batch that is as fast; the same ramp
    reversed (shrinking the batch) spends more."""
    local = dynamics.local_critical_batch(P, 2, MILESTONES)
    batches = dynamics.doubling_batches(local)
    target = MILESTONES[-1]
    for ramp, better in ((batches, True), (batches[::-1], False)):
        run = dynamics.milestone_ramp(P, MILESTONES[:-1], ramp, target)
        match = dynamics.constant_batch_at_steps(P, run.steps, target)
        assert (run.examples < match.examples) == better
