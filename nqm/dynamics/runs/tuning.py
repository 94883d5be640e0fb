"""The front door of the tuners: the fewest steps to a target at each batch size over an optimiser family's
hyper-parameters (:func:`~nqm.dynamics.optimal_steps_to_target`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ...checks import check_batch_sizes, check_real, check_target
from ...optim import tuned_family
from ...problem import NoisyQuadratic, check_precond
from . import tuned_losses
from .optimal_runs import OptimalRuns
from .search import optimal_heavy_ball_decay, optimal_tuned
from .sgd import SGDLoss
from .sgd_tuning import optimal_sgd
from .steps import steps_to_target
from .tuned_losses import DecayHeavyBallLoss, DecayTunedLoss, TunedLoss

__all__ = ["optimal_steps_to_target"]


def optimal_steps_to_target(
    p: NoisyQuadratic,
    target,
    batch_sizes,
    *,
    family: str = "sgd",
    init_var=1.0,
    precond=None,
    weight_decay=0.0,
    decoupled: bool = False,
) -> OptimalRuns:
    """Fewest steps to reach ``target`` at each batch size, over the hyper-parameters of an optimiser family.

    ``family`` is one of :data:`nqm.optim.FAMILIES`: "sgd" tunes ε; "heavy_ball" and "nesterov" tune ε and β;
    "ema" (iterate averaging of SGD) tunes ε and γ. ``precond`` is the fixed (d,) diagonal of P.

    At the optimum ε* the continuous step count t(ε) is stationary, so (t*, ε*) solve

    .. math:: L(t, \\epsilon) = \\text{target},\\qquad \\partial L/\\partial\\epsilon\\,(t, \\epsilon) = 0,

    solved for all batch sizes at once by Newton's method in (log t, ε) with analytic derivatives, started
    from 10 golden-section steps on log ε over the searched range. Steps are ``ceil(t*)``: no other ε can do
    better, since t(ε) ≥ t* for all ε in the searched range: stable steps with a stationary loss below the
    target whose coordinates all relax downwards (V₀ ≥ V∞). ``interior`` says where the optimum is a
    stationary point inside that range; where it is not, the optimum sits on the range's edge and a larger ε,
    at which some coordinate grows from the start, may be faster (check with :func:`~nqm.dynamics.steps_to_target`).
    Even an interior optimum is only the range's: where slow coordinates start below their noise floor, E[L_t] at a
    larger ε can dip below the target on its way to a stationary loss above it, in fewer steps (h = i^−1.92 on
    d = 300, c ∝ h^0.19, init var 5: 188 steps against 216 at B = 64; the explorer's test, which minimises over
    every stable ε, finds such runs).

    ``family="heavy_ball"``, ``"nesterov"`` and ``"ema"`` also tune h = β or γ in [10⁻⁶, 1 − 10⁻⁴]: golden
    sections on log(1 − h) (after h's high end itself) around golden sections on log ε (over the decade below the
    largest stable step whose stationary loss is below the target, and further down where the optimum is not in
    it), each point's steps the first crossing of the closed form (:mod:`nqm.dynamics.moments`; Nesterov's through
    its two-state transition), then the best of a 5 × 5 patch of nearby points. t(ε, β) is jagged where E[L] still
    oscillates at the target (at large B, and for heavy ball at mid B too: by up to 0.4% of t over 1.4% of ε on
    Zhang's problem at B = 64), so the tuned steps are the best of the points searched, not a certified minimum.
    Beyond 2048 coordinates these searches run on compressed spectra (``nqm.dynamics.runs.quadrature``: 256 weighted
    coordinates for the search, 448 for the patch, whose crossings agree with the exact ones to a few hundredths of
    a step on smooth runs) and the best three points of the patch are crossed again on the exact loss. Every earlier
    step of the chosen runs is then checked (heavy ball, Nesterov and EMA skip the stretches their closed form's lower
    bound excludes), so the steps are exact first hits at the returned hyper-parameters; only a check that would
    cost more than 2²⁵ coordinate-steps (long runs with weight decay, whose closed forms have no such bound) keeps
    the crossing, the first hit where E[L] decreases up to it. A larger batch injects less noise, so it reaches the
    target no later at a smaller batch's hyper-parameters; where the search missed that (short, jagged runs at large
    B), a batch size takes the next smaller one's run where its first hit, checked step by step within the same
    budget, is sooner, so the steps do not grow with B. ``interior`` is False where ε or h sits at an end of its
    range (at small B the optimum pushes β, γ → 1 with ε/(1 − β) fixed). For heavy ball without weight decay all of
    this runs compiled where numba is installed (``pip install 'nqm[fast]'``;
    :mod:`nqm.dynamics.runs.heavy_ball_kernels`): the same forms, steps and tolerances, batch sizes on threads, about 7×
    faster on 100 coordinates, with the same steps and (ε, β) to 1e-10; ``NQM_COMPILED=0`` turns it off.

    ``weight_decay``: for SGD, λ held at a number or ``"tune"``d on log λ over [10⁻³·h_min, h_max], coupled or
    ``decoupled`` (:mod:`nqm.optim`); for heavy ball, λ held or tuned the same way (coupled or decoupled) with ε
    and β (tuned: golden sections on log λ around the (ε, β) search, one batch size at a time, 18 times the cost
    of a held λ). The runs start from E[θ₀] = θ* (the problem's ``optimum``); the decay pulls towards 0, so where
    θ* ≠ 0 the mean leaves θ* for the decay's fixed point. They are searched as the momentum families are, on
    closed forms (:class:`~nqm.dynamics.DecayedSgdMoments`; heavy ball's at the curvature h + λ plus its mean's
    path). With θ* = 0 the decay pulls towards the optimum itself: it only adds curvature, so a tuned λ goes to
    the top of its range, h_max, or near it, and the runs take a few steps (on Zhang's problem with d = 1000 and
    target 0.01, 2 or 3 steps for SGD and heavy ball at B = 64 … 16384, against 57 to 6143 for heavy ball without
    decay). Give the problem an ``optimum`` away from 0 to see what decay trades (there, with θ* = 1, a tuned λ of
    about 2·10⁻⁵ takes heavy ball to 6083 steps at B = 64).

    References: Zhang et al. 2019 (arXiv:1907.04164), Fig. 2–3 (SGD), 5 (momentum), 7 (EMA);
    McCandlish et al. 2018, §2.3.
    """
    family = tuned_family(family)
    target = check_target(target)
    b = check_batch_sizes(batch_sizes)
    decay = check_decay_choice(weight_decay, decoupled, family)
    n = b.size
    if SGDLoss(p, b, init_var, precond).value(np.zeros(n), np.ones(n) * 1e-12)[0] <= target:
        # the start already meets the target (E[L(θ₀)] ≤ target): no step at all, whatever the optimiser
        zeros, none = np.zeros(n), np.full(n, np.nan)
        pre = None if precond is None else check_precond(p, precond)
        return OptimalRuns(
            b,
            zeros,
            zeros,
            none,
            zeros,
            np.zeros(n, dtype=bool),
            **({family.hyper: none} if family.hyper else {}),
            family=family,
            precond=pre,
            weight_decay=None if decay is None else none,
            decoupled=bool(decoupled),
        )
    if decay is not None and family.hyper is None:  # SGD: λ is searched (or held) where β would be
        return optimal_tuned(p, target, b, DecayTunedLoss(p, b, init_var, precond, decay, bool(decoupled)))
    if decay == "tune":  # heavy ball: a third search, on log λ, around the held-λ search of (ε, β)
        return optimal_heavy_ball_decay(p, target, b, init_var, precond, bool(decoupled))
    if decay is not None:
        return optimal_tuned(p, target, b, DecayHeavyBallLoss(p, b, init_var, precond, decay, bool(decoupled)))
    if family.hyper is not None:
        runs = optimal_tuned(p, target, b, TunedLoss(p, b, init_var, precond, family))
        return no_slower_than_sgd(p, target, runs, init_var, precond)
    return optimal_sgd(p, target, b, init_var, precond)


def check_decay_choice(weight_decay, decoupled, family):
    """None (no decay), a held λ > 0, or "tune"; weight decay is held or tuned for SGD and heavy ball."""
    if isinstance(weight_decay, str):
        if weight_decay != "tune":
            raise ValueError(f"weight_decay must be a number >= 0 or 'tune', got {weight_decay!r}")
        decay = "tune"
    else:
        decay = check_real("weight_decay", weight_decay, low=0.0) or None
    if not isinstance(decoupled, (bool, np.bool_)):
        raise TypeError(f"decoupled must be True or False, got {decoupled!r}")
    if decay is not None and not family.decays:
        raise ValueError(f"weight decay is held or tuned for family='sgd' and 'heavy_ball' (not {family.name!r})")
    return decay


def no_slower_than_sgd(p, target, runs: OptimalRuns, init_var, precond) -> OptimalRuns:
    """Heavy ball, Nesterov and EMA at the low end of h's range (h = 10⁻⁶) are SGD to within 10⁻⁶ of a step, so
    their optimum takes no more steps than SGD's: where tuned SGD (whose search crosses the cusps ε = 1/κ exactly,
    :func:`solved_coordinates`) is faster, its ε is taken with that h, and the steps are the exact first hit of the
    family there. The smooth (ε, h) search cannot find those cusps: on an isotropic H, ε = 1 solves every coordinate
    in one step, which only h → 0 keeps."""
    sgd_runs = optimal_sgd(p, target, runs.batch_sizes, init_var, precond)
    faster = np.nonzero(sgd_runs.steps < runs.steps)[0]
    if faster.size == 0:
        return runs
    hp_field = runs.family.hyper
    lr, hp = runs.lr.copy(), getattr(runs, hp_field).copy()
    lr[faster], hp[faster] = sgd_runs.lr[faster], -np.expm1(tuned_losses.H_LOG_RANGE[1])  # h = 10⁻⁶
    candidate = dataclasses.replace(runs, lr=lr, **{hp_field: hp})
    steps, continuous, interior = runs.steps.copy(), runs.steps_continuous.copy(), runs.interior.copy()
    keep = np.ones(runs.steps.size, dtype=bool)
    for i in faster:
        budget = int(runs.steps[i]) if np.isfinite(runs.steps[i]) else 10**7
        hit = steps_to_target(p, candidate.optimizer(i), runs.batch_sizes[i], target, init_var=init_var,
                              max_steps=budget)  # fmt: skip
        if hit < steps[i]:
            steps[i], continuous[i], interior[i], keep[i] = hit, hit, False, False
    lr, hp = np.where(keep, runs.lr, lr), np.where(keep, getattr(runs, hp_field), hp)
    return dataclasses.replace(
        runs, steps=steps, examples=runs.batch_sizes * steps, lr=lr, steps_continuous=continuous, interior=interior,
        **{hp_field: hp},
    )  # fmt: skip
