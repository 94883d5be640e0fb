"""B_crit against the target (nqm.dynamics.studies.critical_scaling): its two limits held against the exact solver at
extreme batch sizes, and the derived exponents against the measured ones."""

import numpy as np
import pytest

import nqm
from nqm import dynamics
from nqm.dynamics.studies import critical_scaling as cs

ZHANG = nqm.NoisyQuadratic.zhang2019(1000)
TARGET = 0.01 * 0.5 * ZHANG.h.sum()


def _optimal_run_at(p, target, batch, precond=None):
    """The exact optimal SGD run at any B > 0: it depends on c/B only, so run B = 1 with noise c/B."""
    scaled = nqm.NoisyQuadratic(p.h, p.c / batch)
    return scaled, dynamics.optimal_steps_to_target(scaled, target, [1.0], precond=precond)


@pytest.mark.parametrize("precond", [None, ZHANG.h**-0.5], ids=["sgd", "P=H^-1/2"])
def test_fewest_examples_are_the_small_batch_limit_of_the_exact_solver(precond):
    """E(B) = B·t*(B) from the solver tends to E_min at first order: (E(B)/E_min − 1)/(B/B_crit) settles to a
    constant as B halves. Had the continuous-time formula another limit than the solver (a wrong ¼ in N(τ), a
    wrong V∞), the relative difference would tend to a constant and this quotient would double each halving."""
    limit = cs.small_batch_examples(ZHANG, TARGET, precond=precond)
    b_crit = limit.examples / cs.large_batch_steps(ZHANG, TARGET, precond=precond)
    quotients, noise_scales = [], []
    for k in (10, 12, 14):
        r = 2.0**-k
        scaled, run = _optimal_run_at(ZHANG, TARGET, r * b_crit, precond)
        assert run.interior[0]
        quotients.append((r * b_crit * run.steps_continuous[0] / limit.examples - 1) / r)
        steps = int(run.steps[0])
        opt = run.optimizer(0)
        noise_scales.append(r * b_crit * dynamics.noise_scales_along(scaled, opt, 1.0, steps, at=[steps])[0, 0])
    assert quotients[0] > 0
    # the O(r) quotient converges: successive changes shrink 4× per 4× in r (the next order is O(r²))
    assert abs(quotients[2] - quotients[1]) < 0.3 * abs(quotients[1] - quotients[0])
    assert abs(quotients[2] / quotients[1] - 1) < 1e-3
    # the run's B_noise at the target tends to the limit's (the integer last step moves it by O(1/steps))
    assert noise_scales[-1] == pytest.approx(limit.b_noise, rel=1e-3)
    assert abs(noise_scales[-1] / limit.b_noise - 1) < abs(noise_scales[0] / limit.b_noise - 1)


def test_fewest_steps_are_the_large_batch_limit_and_a_lower_bound():
    s_min = cs.large_batch_steps(ZHANG, TARGET)
    gaps = []
    for b in 2.0 ** np.arange(4, 40, 6):
        t = dynamics.optimal_steps_to_target(ZHANG, TARGET, [b]).steps_continuous[0]
        assert t >= s_min * (1 - 1e-12)  # noise never helps
        gaps.append(t / s_min - 1)
    assert np.all(np.diff(gaps) < 0)
    assert gaps[-1] / gaps[-2] == pytest.approx(1 / 64, rel=0.02)  # S(B) − S_min ∝ 1/B far out: the limit is S_min


def test_small_batch_limit_by_brute_force_minimisation():
    """The minimum over τ of τN(τ)/(L − G(τ)) against a dense grid in log τ, on a two-coordinate problem."""
    p = nqm.NoisyQuadratic([1.0, 0.05], c=[0.3, 2.0])
    target = 0.02
    limit = cs.small_batch_examples(p, target, init_var=[1.0, 4.0])
    tau = np.geomspace(1e-2, 1e4, 2_000_001)
    g = 0.5 * (1.0 * np.exp(-2 * tau) + 0.05 * 4.0 * np.exp(-0.1 * tau))
    n = 0.25 * (0.3 * -np.expm1(-2 * tau) + 2.0 * -np.expm1(-0.1 * tau))
    with np.errstate(divide="ignore", invalid="ignore"):
        examples = np.where(g < target, tau * n / (target - g), np.inf)
    i = int(np.argmin(examples))
    assert limit.examples == pytest.approx(examples[i], rel=1e-9)
    assert limit.tau == pytest.approx(tau[i], rel=1e-4)
    assert limit.eta == pytest.approx((target - g[i]) / n[i], rel=1e-4)
    assert cs.small_batch_examples(p, 10.0).examples == 0.0


def test_derived_exponents():
    assert cs.scaling_exponents(2.0, 1.0) == cs.ScalingExponents(-2.0, -3.0, -1.0, 1.0)
    assert cs.scaling_exponents(2.0, 0.0) == cs.ScalingExponents(-2.0, -4.0, -2.0, 0.5)
    assert cs.scaling_exponents(1.5, 0.0).alpha_b == pytest.approx(1 / 3)
    assert cs.scaling_exponents(1 / 0.79, 0.0).alpha_b == pytest.approx(0.21)  # Kaplan et al.'s α_B
    # α_B is continuous at aq = 1 and equal to 1 beyond
    assert cs.scaling_exponents(2.0, 0.5 - 1e-12).alpha_b == pytest.approx(1.0)
    assert cs.scaling_exponents(3.0, 0.9).alpha_b == 1.0
    with pytest.raises(ValueError, match="noise_exponent"):
        cs.scaling_exponents(2.0, -0.6)  # tr(HΣ) = Σ i^(-0.8) diverges
    with pytest.raises(ValueError, match="exponent"):
        cs.scaling_exponents(1.0, 1.0)  # the initial loss Σ 1/i diverges


@pytest.mark.parametrize("a, q", [(2.0, 1.0), (1.5, 0.0), (2.0, 0.25)])
def test_measured_exponents_approach_the_derived_ones(a, q):
    """Over three decades of target the local slopes of S_min, E_min, B_crit and B_noise(target) approach the
    derived exponents: every deviation shrinks from decade to decade, and in the last decade it is below 1%
    (the slowest case, a = 2 and q = ¼, closes its gap as L^½: 0.4% there)."""
    r = cs.critical_batch_scaling(a, q)
    targets = r.targets[::2]  # whole decades
    derived = r.derived
    for values, exponent in (
        (r.s_min, derived.steps),
        (r.e_min, derived.examples),
        (r.b_crit, derived.critical),
        (r.b_noise_end, derived.critical),
    ):
        slopes = np.diff(np.log(values[::2])) / np.diff(np.log(targets))
        deviation = np.abs(slopes / exponent - 1)
        assert np.all(np.diff(deviation) < 0), deviation
        assert deviation[-1] < 0.01, deviation
    assert r.b_crit == pytest.approx(r.e_min / r.s_min)
