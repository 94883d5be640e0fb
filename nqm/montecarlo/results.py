"""What a simulation returns: loss curves with standard errors (:mod:`nqm.curves`), one-step improvements,
gradient-norm traces."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..curves import LossCurve, as_asked, check_record, default_record, loss_curve

__all__ = [
    "LossCurve",
    "OneStepResult",
    "sample_skewness",
    "GradientNormTrace",
    "loss_curve",
    "default_record",
    "check_record",
    "as_asked",
]


@dataclass
class OneStepResult:
    """Improvement ``ΔL = L(θ) − L(θ − εP G_B)`` over replicas, on a grid of (lr, batch_size): per cell the
    ``mean``, its standard error ``sem`` and the replicas' sample ``skew`` (m₃/m₂^{3/2}; ΔL is quadratic in the
    noise, so skewed), over ``n`` replicas."""

    lr: np.ndarray
    batch_size: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    n: int
    skew: np.ndarray | None = None

    @classmethod
    def of_samples(cls, lr, batch_size, samples) -> OneStepResult:
        """The result of per-replica improvements ``samples`` (grid shape + (replicas,))."""
        n = samples.shape[-1]
        mean, sem = samples.mean(axis=-1), samples.std(axis=-1, ddof=1) / np.sqrt(n)
        return cls(np.array(lr), np.array(batch_size), mean, sem, n, sample_skewness(samples))


def sample_skewness(samples, axis: int = -1) -> np.ndarray:
    """The samples' skewness ``m₃/m₂^{3/2}`` from their central moments along ``axis`` (0 where they do not vary)."""
    x = np.asarray(samples, dtype=np.float64)
    centred = x - x.mean(axis=axis, keepdims=True)
    m2, m3 = np.mean(centred**2, axis=axis), np.mean(centred**3, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(m2 > 0, m3 / m2**1.5, 0.0)


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
