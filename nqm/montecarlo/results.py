"""What a simulation returns: loss curves with standard errors, one-step improvements, gradient-norm traces."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import check_count, check_steps_at
from ..curves import LossCurve

__all__ = [
    "LossCurve",
    "OneStepResult",
    "GradientNormTrace",
    "loss_curve",
    "default_record",
    "check_record",
    "as_asked",
]


@dataclass
class OneStepResult:
    """Improvement ``ΔL = L(θ) − L(θ − εP G_B)`` over replicas, on a grid of (lr, batch_size)."""

    lr: np.ndarray
    batch_size: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    n: int


@dataclass
class GradientNormTrace:
    """What a practitioner sees along an SGD run, and the truth, per replica and step: arrays (R, T).

    Attributes:
        sq_small, sq_big: ``|G_small|²`` and ``|G_big|²`` of nested batches of B_small ⊂ B_big examples
            (the big batch is the one SGD steps with).
        sq_consecutive: ``|½(G_big(θ_{t−1}) + G_big(θ_t))|²`` (nan at t = 0).
        sq_true: ``|G(θ_t)|²``. ghg_true: ``G(θ_t)ᵀHG(θ_t)``.
        b_small, b_big: the two batch sizes. trace_sigma, trace_h_sigma: tr Σ and tr(HΣ).
    """

    sq_small: np.ndarray
    sq_big: np.ndarray
    sq_consecutive: np.ndarray
    sq_true: np.ndarray
    ghg_true: np.ndarray
    b_small: int
    b_big: int
    trace_sigma: float
    trace_h_sigma: float


def loss_curve(record, losses, keep_losses: bool = False, state=None) -> LossCurve:
    """The loss curve of per-replica losses (R, K) at the sorted steps ``record``: mean and standard error.

    A replica whose loss has once been non-finite has diverged: its loss is inf from there on (an overflowed
    state turns into NaN as inf − inf, or into 0 through a sign), as the exact engines say of an unstable step;
    a step where some replica diverged has mean and standard error inf."""
    diverged = np.logical_or.accumulate(~np.isfinite(losses), axis=1)
    if np.any(diverged):
        losses = np.where(diverged, np.inf, losses)
    with np.errstate(invalid="ignore"):  # the spread of a column holding inf: inf, set below
        sem = losses.std(axis=0, ddof=1) / np.sqrt(losses.shape[0])
    sem[np.any(diverged, axis=0)] = np.inf
    return LossCurve(
        steps=record,
        mean=losses.mean(axis=0),
        sem=sem,
        n=losses.shape[0],
        losses=losses if keep_losses else None,
        state=state,
    )


def default_record(steps: int, points: int = 40) -> np.ndarray:
    """Log-spaced checkpoints in [0, steps], always with 0 and ``steps``."""
    steps = check_count("steps", steps)
    if steps == 0:
        return np.array([0])
    inner = np.round(np.geomspace(1, steps, points)).astype(np.int64)
    return np.unique(np.concatenate([[0], inner, [steps]]))


def check_record(steps: int, record) -> np.ndarray:
    """The steps ``at`` as asked for (order and repeats kept): a non-empty 1-D array of integers in [0, steps]
    (default: :func:`default_record`). The engines run the sorted unique steps; :func:`as_asked` puts the curve
    back in the order asked for, as :func:`nqm.dynamics.expected_loss` returns it."""
    if record is None:
        return default_record(steps)
    return check_steps_at(steps, record)


def as_asked(curve: LossCurve, asked: np.ndarray) -> LossCurve:
    """``curve`` (at the sorted unique steps) at the steps ``asked``, in their order and with their repeats."""
    if np.array_equal(curve.steps, asked):
        return curve
    i = np.searchsorted(curve.steps, asked)
    return LossCurve(
        steps=asked,
        mean=curve.mean[i],
        sem=curve.sem[i],
        n=curve.n,
        losses=None if curve.losses is None else curve.losses[:, i],
        state=curve.state,
    )
