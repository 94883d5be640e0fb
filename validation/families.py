"""The problem families shared by the validation checks.

Three families, as issue V1 asks: Zhang et al.'s spectrum (h_i = 1/i, Σ = H, batch-scaled Gaussian
noise), a dense Σ whose eigenbasis is a Haar-random rotation away from H's, and per-example Student-t
noise (heavy-tailed examples, really drawn and averaged). Points θ are taken early, mid and late
along one simulated SGD run of each family, so B_noise differs from point to point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import nqm
from nqm import info, problem_file, spectra

from .sizes import Sizes

SHARED = Sizes(d_zhang=(256, 2000), d_dense=(32, 64), d_examples=(12, 16))
"""The sizes of the shared experiments: the three families' dimensions. Each claim declares its own sizes in its
file (:mod:`validation.sizes`); the one-step grids V1 and V2 share are sized in :mod:`validation.claims`."""


@dataclass
class Family:
    """A problem, how its training run is made, and the points θ taken from that run."""

    key: str
    problem: nqm.NoisyQuadratic
    per_example: str | None
    train_lr: float
    train_batch: int
    point_steps: dict
    points: dict | None = None
    # state-dependent noise (least squares): the NQM whose theory holds at θ, and the real one-step simulation
    problem_at: Callable | None = None
    one_step: Callable | None = None
    init_var: float | np.ndarray = 1.0  # E[θ₀²] in H's basis, scalar or (d,)

    def theory_problem(self, theta) -> nqm.NoisyQuadratic:
        """The problem whose closed forms (``nqm.theory``) hold at θ: the family's, or Σ(θ)'s for least squares."""
        return self.problem if self.problem_at is None else self.problem_at(theta)

    def one_step_improvement(self, theta, eps, batch, replicas: int, seed) -> nqm.OneStepResult:
        if self.one_step is not None:
            return self.one_step(theta, eps, batch, replicas, seed)
        return nqm.one_step_improvement(
            self.problem, theta, eps, batch, replicas, seed=seed, per_example=self.per_example
        )

    def make_points(self, seed: int) -> Family:
        """θ at each named step of one SGD run (a common prefix: later runs extend earlier ones)."""
        self.points = {}
        for name, steps in self.point_steps.items():
            run = nqm.simulate(
                self.problem,
                self.train_lr,
                self.train_batch,
                steps,
                replicas=2,
                seed=seed,
                per_example=self.per_example,
                keep_state=True,
                at=[0, steps],
                init_var=self.init_var,
            )
            self.points[name] = run.state[0]
        return self


def families(quick: bool, seed: int) -> list[Family]:
    """The three families of checks V1–V3, with their points."""
    size = SHARED.at(quick)
    zhang = nqm.NoisyQuadratic.zhang2019(size.d_zhang)
    h_dense = spectra.log_uniform(size.d_dense, 0.01, 1.0)
    sigma = spectra.misaligned_sigma(spectra.noise_power(h_dense, 1.0, 0.5), strength=1.0, seed=seed + 1)
    dense = nqm.NoisyQuadratic(h_dense, sigma=sigma, name=f"dense misaligned Σ (d={size.d_dense})")
    h_ex = spectra.log_uniform(size.d_examples, 0.1, 1.0)
    examples = nqm.NoisyQuadratic(h_ex, h_ex, name=f"Student-t examples (d={size.d_examples})")
    out = [
        Family("zhang2019", zhang, None, 1.0, 8, {"early": 2, "mid": 30, "late": 300}),
        Family("dense-misaligned", dense, None, 1.0, 8, {"early": 2, "mid": 30, "late": 300}),
        Family("student-t-examples", examples, "student_t", 0.5, 1, {"early": 1, "mid": 5, "late": 30}),
    ]
    return [f.make_points(seed) for f in out]


@dataclass(frozen=True)
class UserProblem:
    """A problem from a problem file (``nqm validate --problem FILE``): the claims that apply run on it alone."""

    problem: nqm.NoisyQuadratic
    init_var: float | np.ndarray
    target: float  # the loss that the whole-run claims (V11) aim at
    source: str  # the file, for the report

    @classmethod
    def read(cls, path, target: float | None = None) -> UserProblem:
        """The problem of the file at ``path``; ``target`` defaults to 1% of the initial loss E[L(θ₀)]."""
        parsed = problem_file.read(path)
        p = nqm.NoisyQuadratic.from_parsed(parsed)
        loss0 = info.summary(p, init_var=parsed.init_var)["L0"]
        target = 0.01 * loss0 if target is None else float(target)
        if not (np.isfinite(target) and 0 < target < loss0):
            raise ValueError(f"--target must lie between 0 and the initial loss L0 = {loss0:.6g}, got {target!r}")
        return cls(p, parsed.init_var, target, str(path))


LARGEST_LOSS = 1e100
"""The largest E[L(θ₀)] the Monte Carlo claims take on a user's problem: their per-replica squares and sums
overflow double precision not far beyond 1e150."""


def too_large(user: UserProblem) -> str | None:
    """Why no Monte Carlo claim can speak on ``user``'s problem (its losses too large to square), or None."""
    loss0 = 0.5 * float(np.sum(user.problem.h * user.init_var))
    if not loss0 <= LARGEST_LOSS:
        return f"E[L(θ₀)] = {loss0:.3g} is beyond {LARGEST_LOSS:g}, where squared losses overflow double precision"
    return None


def noiseless_or_too_large(user: UserProblem) -> str | None:
    """Why a claim about the gradient noise cannot speak on ``user``'s problem: no noise (tr Σ = 0), or
    :func:`too_large`; None when it can."""
    if user.problem.trace_sigma == 0:
        return "the claim is about the gradient noise, and this problem has none (tr Σ = 0)"
    return too_large(user)


def problem_family(user: UserProblem, seed: int) -> Family:
    """The user's problem as the one family of V1–V4, V6 and V7: points early, mid and late along an SGD run at
    ε = 1/h_max, B = 8 (the suite's run on zhang2019, whose h_max is 1, with the step scaled to the problem)."""
    p = user.problem
    points = {"early": 2, "mid": 30, "late": 300}
    return Family("problem", p, None, 1.0 / float(p.h.max()), 8, points, init_var=user.init_var).make_points(seed)


def batch_grid(b_noise: float, factors=4.0 ** np.arange(-3, 4)) -> np.ndarray:
    """Integer batch sizes spanning [B_noise/64, 64·B_noise], clipped below at 1 (duplicates removed)."""
    return np.unique(np.maximum(1, np.round(b_noise * factors)))
