"""The notebooks' exercises: the package computes the right answer and checks yours against it.

``check(name, answer, **context)`` prints whether ``answer`` is right (and returns True/False); ``answer = None``
only reminds you that the exercise is open. ``solution(name, **context)`` is one worked answer — try your own
first. The notebooks set ``SHOW_SOLUTION = True`` when the test suite runs them.

Each exercise states its tolerance: exact quantities must match to 1e-8 relative; answers estimated from
simulation must land within the stated relative error of the truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import dynamics, theory
from .montecarlo import one_step_improvement
from .noise import decay_pull, step_coefficients

__all__ = ["check", "solution", "EXERCISES"]


@dataclass(frozen=True)
class Exercise:
    question: str
    truth: Callable[..., float]
    worked: Callable[..., float]
    rtol: float


def _bnoise_by_hand(p, theta):
    g = p.h * theta  # G = Hθ in H's eigenbasis
    return float(np.sum(p.h * p.c) / (g @ (p.h * g)))  # tr(HΣ)/(GᵀHG)


def _bnoise_from_vertices(p, theta, seed=0, replicas=4000):
    """Simulated parabola vertices at several B, then a least-squares fit of 1/ε_opt = (1 + B_noise/B)/ε_max."""
    b_true = float(theory.noise_scale(p, theta))
    batch = np.maximum(1, np.round(b_true * 2.0 ** np.arange(-2, 4)))
    eps = theory.optimal_step(p, theta, batch)[:, None] * np.linspace(0.3, 1.7, 8)
    sim = one_step_improvement(p, theta, eps, batch[:, None], replicas, seed=seed)
    vertices = []
    for e, m in zip(eps, sim.mean):
        a, b, _ = np.polyfit(e, m, 2)  # m ≈ a ε² + b ε + c, vertex at −b/(2a)
        vertices.append(-b / (2 * a))
    # 1/ε_opt is linear in 1/B: intercept 1/ε_max, slope B_noise/ε_max
    slope, intercept = np.polyfit(1 / batch, 1 / np.array(vertices), 1)
    return float(slope / intercept)


def _bcrit_from_asymptotes(p, target):
    """S_min = min_B S(B) and E_min = min_B B·S(B) over B = 2², …, 2²¹ (the frontier's asymptotes)."""
    r = dynamics.optimal_steps_to_target(p, target, 2.0 ** np.arange(2, 22))
    return float(np.min(r.examples) / np.min(r.steps))


def _momentum_break_even(p, target):
    """The smallest batch size (of 2², 2³, …) at which tuned momentum needs fewer than half SGD's steps."""
    batch = 2.0 ** np.arange(2, 22)
    sgd = dynamics.optimal_steps_to_target(p, target, batch)
    mom = dynamics.optimal_steps_to_target(p, target, batch, family="heavy_ball")
    return float(batch[np.argmax(mom.steps < 0.5 * sgd.steps)])


def _bsimple_from_two_batches(p, theta, seed=0, draws=400, b_small=4, b_big=64):
    from . import estimators, noise

    rng = np.random.default_rng(seed)
    g = theory.gradient(p, theta)
    small = g + noise.minibatch_noise(rng, p, b_small, draws)
    big = g + noise.minibatch_noise(rng, p, b_big, draws)
    sq_small, sq_big = np.sum(small**2, axis=1), np.sum(big**2, axis=1)
    g2, trace = estimators.two_batch_estimates(sq_small.mean(), sq_big.mean(), b_small, b_big)
    return float(trace / g2)


def _sign_limit_by_hand(p, theta):
    """Σ|G_i| / (sign(G)ᵀ H_x sign(G)) in the parameter coordinates x = Qθ (every G_i ≠ 0)."""
    q = np.eye(p.d) if p.basis is None else p.basis
    g = q @ (p.h * theta)  # G_x = Q G, G = Hθ in H's eigenbasis
    s = np.sign(g)
    h_x = (q * p.h) @ q.T
    return float(np.abs(g).sum() / (s @ h_x @ s))


def _decay_bias(p, opt, batch):
    """½Σh x∞² of SGD's coupled decay, from nqm's fixed point (the truth)."""
    lam, _ = step_coefficients(p, opt, batch)
    x_inf = dynamics.decay_fixed_point(opt, lam, decay_pull(p, opt).step)[:, 0]
    return float(0.5 * p.h @ x_inf**2)


def _real_noise_scale(model, theta):
    from .measure import measure

    return measure(model, theta, top_k=0, probes=2, lanczos_steps=1, estimator_draws=0).b_noise


def _real_noise_scale_by_hand(model, theta):
    """tr(HΣ)/GᵀHG from all per-example gradients and HVPs, Σ normalised by N (the set is the population)."""
    idx = np.arange(model.n)
    g = model.gradient(theta, idx)
    xi = model.per_example_gradients(theta, idx) - g
    tr_h_sigma = float(np.sum(xi * model.hvp(theta, xi))) / model.n
    return tr_h_sigma / float(g @ model.hvp(theta, g[None])[0])


def _decay_bias_by_hand(p, opt, batch):
    """Coupled decay settles at argmin L + ½λ|θ|² = Hθ*/(H + λ): the error there is −λθ*/(h + λ)."""
    lam = opt.weight_decay
    return float(0.5 * p.h @ (lam * p.optimum / (p.h + lam)) ** 2)


EXERCISES = {
    "noise-scale-by-hand": Exercise(
        "B_noise = tr(HΣ)/(GᵀHG) at θ, computed with NumPy from p.h, p.c and θ (not theory.noise_scale)",
        lambda p, theta: float(theory.noise_scale(p, theta)),
        _bnoise_by_hand,
        1e-8,
    ),
    "noise-scale-from-vertices": Exercise(
        "B_noise at θ fitted from simulated parabola vertices ε_opt(B) = ε_max/(1 + B_noise/B) (within 10 %)",
        lambda p, theta: float(theory.noise_scale(p, theta)),
        _bnoise_from_vertices,
        0.10,
    ),
    "critical-batch-size": Exercise(
        "B_crit = E_min/S_min with S_min = min S(B) and E_min = min B·S(B) over B = 2², …, 2²¹ (exact optima)",
        _bcrit_from_asymptotes,
        _bcrit_from_asymptotes,
        1e-8,
    ),
    "momentum-break-even": Exercise(
        "the smallest batch size 2^k at which tuned momentum needs fewer than half of tuned SGD's steps",
        _momentum_break_even,
        _momentum_break_even,
        0.0,
    ),
    "sign-large-batch-limit": Exercise(
        "sign descent's optimal step as B → ∞, Σ|G_i|/(sign(G)ᵀH_x sign(G)) in the parameter coordinates, with "
        "NumPy from p.h, p.basis and θ (not theory.sign_optimal_step)",
        lambda p, theta: float(theory.sign_optimal_step(p, theta, np.inf)),
        _sign_limit_by_hand,
        1e-8,
    ),
    "simple-noise-scale-estimate": Exercise(
        "B_simple = tr(Σ)/|G|² at θ estimated from 400 pairs of batch-gradient norms at B = 4 and 64 (within 15 %)",
        lambda p, theta: float(theory.simple_noise_scale(p, theta)),
        _bsimple_from_two_batches,
        0.15,
    ),
    "weight-decay-bias": Exercise(
        "the stationary bias ½Σh x∞² that SGD's coupled weight decay λ leaves on a problem with optimum θ*, with NumPy "
        "from p.h, p.optimum and λ (not nqm.dynamics)",
        _decay_bias,
        _decay_bias_by_hand,
        1e-8,
    ),
    "real-noise-scale": Exercise(
        "a real model's true B_noise = tr(HΣ)/GᵀHG at θ, with NumPy from model.gradient, "
        "model.per_example_gradients and model.hvp over all N examples (not nqm.measure)",
        _real_noise_scale,
        _real_noise_scale_by_hand,
        1e-8,
    ),
}
"""The notebooks' exercises by name: the question, the true answer and the worked one, and the tolerance."""


def _get(name: str) -> Exercise:
    if name not in EXERCISES:
        raise ValueError(f"unknown exercise {name!r}; choose from {', '.join(EXERCISES)}")
    return EXERCISES[name]


def solution(name: str, **context) -> float:
    """One worked answer to exercise ``name`` (context: the notebook's problem ``p`` and ``theta`` or ``target``)."""
    return _get(name).worked(**context)


def check(name: str, answer, **context) -> bool:
    """Compare ``answer`` with the package's value; prints the verdict and returns it (None: not answered yet)."""
    ex = _get(name)
    if answer is None:
        print(f"Exercise '{name}': {ex.question}. Put your answer in `answer` and run this cell again.")
        return False
    truth = ex.truth(**context)
    error = abs(float(answer) - truth) / abs(truth)
    right = error <= max(ex.rtol, 1e-12)
    verdict = "right" if right else "not yet"
    print(
        f"Exercise '{name}': {verdict} — your answer {float(answer):.6g}, the package's {truth:.6g} "
        f"(relative difference {error:.2g}, tolerance {ex.rtol:g})."
    )
    return right
