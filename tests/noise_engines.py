"""Every engine's answer on three small problems, as arrays by name: what ``test_noise_home`` holds an edited copy
of the package to. Imported by the test, and run as a script inside the edited copy (``python noise_engines.py
OUT.npz``), so both sides compute with the same code.

``problems(label_noise)`` builds the problems with ``label_noise · H`` added to Σ by hand (0: as given), in H's
basis: a diagonal Σ, a dense Σ and a diagonal Σ in a rotated basis.
"""

from __future__ import annotations

import sys
from dataclasses import astuple

import numpy as np

import nqm
from nqm import dynamics, info, montecarlo, optim, theory

D = 6


def problems(label_noise: float = 0.0) -> dict[str, nqm.NoisyQuadratic]:
    rng = np.random.default_rng(11)
    h = np.logspace(0, -2, D)
    c = rng.uniform(0.2, 2.0, D) * h
    a = rng.standard_normal((D, D))
    sigma = a @ a.T / D + np.diag(c)
    basis, _ = np.linalg.qr(rng.standard_normal((D, D)))
    return {
        "diagonal": nqm.NoisyQuadratic(h, c + label_noise * h),
        "dense": nqm.NoisyQuadratic(h, sigma=sigma + label_noise * np.diag(h)),
        "rotated": nqm.NoisyQuadratic(h, c + label_noise * h, basis=basis),
    }


def _curve(curve) -> np.ndarray:
    return np.concatenate([curve.mean, curve.sem])


def engine_results(label_noise: float = 0.0) -> dict[str, np.ndarray]:
    """Each engine's answer, keyed ``engine/problem``."""
    return {
        f"{engine}/{name}": np.asarray(value, dtype=np.float64).ravel()
        for name, p in problems(label_noise).items()
        for engine, value in _answers(p).items()
    }


def _answers(p: nqm.NoisyQuadratic) -> dict:
    theta = np.linspace(1.0, -0.5, D)
    sgd, hb = optim.sgd(0.5), optim.heavy_ball(0.3, 0.8)
    facts = info.summary(p)
    one = montecarlo.one_step_improvement(p, theta, 0.3, 4, 256, seed=3, threads=1)
    trace = montecarlo.gradient_norm_trace(p, 0.3, 2, 8, 5, 64, seed=3, threads=1)
    return {
        "theory.noise_scale": theory.noise_scale(p, theta),
        "theory.simple_noise_scale": theory.simple_noise_scale(p, theta),
        "theory.optimal_step": theory.optimal_step(p, theta, 4.0),
        "theory.sign_step_moments": theory.sign_step_moments(p, theta, 4.0),
        "theory.adam_preconditioner": theory.adam_preconditioner(p, theta, 4.0),
        "theory.preconditioned_simple_noise_scale": theory.preconditioned_simple_noise_scale(p, theta, 1 + theta**2),
        "info.summary": [facts[k] for k in ("trace_sigma", "trace_h_sigma", "B_noise_init", "B_simple_init")],
        "dynamics.expected_loss.sgd": dynamics.expected_loss(p, sgd, 4, 50).mean,
        "dynamics.expected_loss.heavy_ball": dynamics.expected_loss(p, hb, 4, 50).mean,
        "dynamics.steady_state_loss": dynamics.steady_state_loss(p, hb, 4),
        "dynamics.steps_to_target": dynamics.steps_to_target(p, sgd, 64, 0.1),
        "dynamics.noise_scales_along": dynamics.noise_scales_along(p, sgd, 4, 40, at=[0, 10, 40]),
        "dynamics.optimal_steps_to_target": dynamics.optimal_steps_to_target(p, 0.05, [1, 16]).steps_continuous,
        "dynamics.greedy_schedule": dynamics.greedy_schedule(p, 4, 30).loss,
        "dynamics.small_batch_examples": astuple(dynamics.small_batch_examples(p, 0.05)),
        "dynamics.smith_equivalence": dynamics.smith_equivalence(p, 0.5, 4, 2.0, [20, 20]).limit_loss,
        "simulate": _curve(montecarlo.simulate(p, sgd, 4, 20, 64, seed=3, threads=1)),
        "simulate.per_example": _curve(montecarlo.simulate(p, sgd, 4, 20, 64, seed=3, per_example="gaussian")),
        "simulate.philox": _curve(montecarlo.simulate(p, sgd, 4, 20, 64, seed=3, generator="philox")),
        "simulate.adam": _curve(montecarlo.simulate(p, optim.adam(0.05), 4, 20, 64, seed=3, threads=1)),
        "simulate.adam.philox": _curve(montecarlo.simulate(p, optim.adam(0.05), 4, 20, 64, seed=3, generator="philox")),
        "one_step_improvement": [one.mean, one.sem],
        "gradient_norm_trace": np.concatenate([trace.sq_small.ravel(), trace.sq_big.ravel(), [trace.trace_sigma]]),
        "FiniteDataset.draw": nqm.FiniteDataset.draw(p, 20, seed=3).examples,
    }


if __name__ == "__main__":
    np.savez(sys.argv[1], **engine_results(), package=np.array(nqm.__file__))
