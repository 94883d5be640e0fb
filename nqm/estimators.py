"""Noise-scale estimators as practitioners compute them (McCandlish et al. 2018, arXiv:1812.06162, App. A.1).

Nobody knows G or Σ in real training; one sees squared norms of minibatch gradients. Since
``E|G_B|² = |G|² + tr(Σ)/B`` (eq. 2.10), two batch sizes B_small < B_big give unbiased estimates

.. math::
    |\\mathcal G|^2 = \\frac{B_\\text{big}|G_\\text{big}|^2 - B_\\text{small}|G_\\text{small}|^2}
                          {B_\\text{big} - B_\\text{small}},\\qquad
    \\mathcal S = \\frac{|G_\\text{small}|^2 - |G_\\text{big}|^2}{1/B_\\text{small} - 1/B_\\text{big}},

of ``|G|²`` and ``tr Σ``. Their ratio ``𝒮/|𝒢|²`` estimates ``B_simple = tr Σ/|G|²`` but is biased and, because
``|𝒢|²`` can be negative, has no finite mean; the paper therefore averages 𝒮 and ``|𝒢|²`` separately and reports
the ratio of the averages (:class:`NoiseScaleTracker`).

Everything here is a pure function of arrays (any leading shape broadcasts), plus a small tracker for a
training loop and a data-parallel emulation (:class:`DataParallel`) that says which B_small and B_big a
distributed setup implies and how its raw norms must be rescaled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .checks import as_real, check_batch_size, check_count, check_real

__all__ = [
    "two_batch_estimates",
    "per_example_estimates",
    "consecutive_step_estimates",
    "consecutive_step_estimates_from_norms",
    "simple_noise_scale_estimate",
    "ema",
    "ratio_of_averages",
    "NoiseScaleTracker",
    "DataParallel",
]


def _check_batches(b_small, b_big):
    b_small, b_big = as_real("b_small", b_small), as_real("b_big", b_big)
    if not (np.all(b_small >= 1) and np.all(b_big > b_small) and np.all(np.isfinite(b_big))):
        raise ValueError(f"need 1 <= B_small < B_big, got B_small={b_small}, B_big={b_big}")
    return b_small, b_big


def two_batch_estimates(sq_small, sq_big, b_small, b_big):
    """Unbiased ``(|𝒢|², 𝒮)`` from squared norms of a small- and a big-batch gradient (App. A.1).

    Args:
        sq_small: ``|G_small|²`` of a batch of ``b_small`` examples. sq_big: ``|G_big|²`` of ``b_big``.

    Returns:
        ``(|𝒢|², 𝒮)``: estimates of ``|G|²`` and ``tr Σ``; each is unbiased for any two batches (nested or
        independent) because each squared norm is, in expectation, ``|G|² + tr Σ/B``.

    Example:
        >>> g2, s = two_batch_estimates(3.0, 1.2, 1, 10)   # |G|² + trΣ = 3, |G|² + trΣ/10 = 1.2
        >>> round(float(g2), 12), round(float(s), 12)
        (1.0, 2.0)
    """
    b_small, b_big = _check_batches(b_small, b_big)
    sq_small, sq_big = as_real("sq_small", sq_small), as_real("sq_big", sq_big)
    if not (np.all(np.isfinite(sq_small) & (sq_small >= 0)) and np.all(np.isfinite(sq_big) & (sq_big >= 0))):
        raise ValueError("sq_small and sq_big must be finite squared norms (>= 0)")
    try:
        np.broadcast_shapes(sq_small.shape, sq_big.shape, np.shape(b_small), np.shape(b_big))
    except ValueError:
        shapes = ", ".join(f"{n} {np.shape(v)}" for n, v in zip(("sq_small", "sq_big", "b_small", "b_big"),
                                                                 (sq_small, sq_big, b_small, b_big)))  # fmt: skip
        raise ValueError(f"the two norms and batch sizes must broadcast together; got {shapes}") from None
    g2 = (b_big * sq_big - b_small * sq_small) / (b_big - b_small)
    s = (sq_small - sq_big) / (1 / b_small - 1 / b_big)
    return g2, s


def per_example_estimates(per_example_gradients):
    """``(|𝒢|², 𝒮)`` from B per-example gradients (shape (..., B, d)): B_small = 1, B_big = B.

    ``|G_small|²`` is the mean per-example squared norm (the average of B batches of one), ``|G_big|²``
    the squared norm of their mean.
    """
    g = np.asarray(per_example_gradients, dtype=np.float64)
    b = g.shape[-2]
    sq_small = np.mean(np.sum(g * g, axis=-1), axis=-1)
    mean = g.mean(axis=-2)
    return two_batch_estimates(sq_small, np.sum(mean * mean, axis=-1), 1, b)


def consecutive_step_estimates(grad_previous, grad_current, batch_size):
    """``(|𝒢|², 𝒮)`` from the minibatch gradients of two consecutive steps, treated as B and 2B.

    ``|G_small|²`` is the mean of the two squared norms, ``|G_big|²`` the squared norm of their mean. Costs
    nothing extra in a training loop, but the parameters move between the two gradients, so the true
    gradient differs and the estimates are biased (by about ``−|G_t − G_{t−1}|²`` terms); the validation
    measures how much.
    """
    a, b = np.asarray(grad_previous, dtype=np.float64), np.asarray(grad_current, dtype=np.float64)
    mean = 0.5 * (a + b)
    return consecutive_step_estimates_from_norms(
        0.5 * (np.sum(a * a, axis=-1) + np.sum(b * b, axis=-1)), np.sum(mean * mean, axis=-1), batch_size
    )


def consecutive_step_estimates_from_norms(mean_sq, sq_of_mean, batch_size):
    """As :func:`consecutive_step_estimates`, from the mean of the two squared norms and the squared norm
    of the mean of the two gradients (what a loop that keeps only norms and one previous gradient has)."""
    mean_sq, sq_of_mean = as_real("mean_sq", mean_sq), as_real("sq_of_mean", sq_of_mean)
    if not (np.all(np.isfinite(mean_sq) & (mean_sq >= 0)) and np.all(np.isfinite(sq_of_mean) & (sq_of_mean >= 0))):
        raise ValueError("mean_sq and sq_of_mean must be finite squared norms (>= 0)")
    b = check_batch_size(batch_size)  # named here: the two batches are B and 2B
    if not np.all(np.isfinite(b)):
        raise ValueError(f"batch_size must be finite, got {batch_size!r}")
    return two_batch_estimates(mean_sq, sq_of_mean, b, 2 * b)


def simple_noise_scale_estimate(sq_small, sq_big, b_small, b_big):
    """The per-step ratio ``𝒮/|𝒢|²``: biased, heavy-tailed, negative whenever ``|𝒢|² < 0``."""
    g2, s = two_batch_estimates(sq_small, sq_big, b_small, b_big)
    with np.errstate(divide="ignore", invalid="ignore"):
        return s / g2


def ema(values, beta: float, axis: int = -1, bias_correction: bool = True):
    """Exponential moving average along ``axis``: ``m_t = β m_{t−1} + (1 − β) x_t``, m₀ = 0.

    With ``bias_correction`` the average is divided by ``1 − β^t`` (as in Adam), which removes the pull
    towards the zero start; it cancels in a ratio of two averages with the same β.
    """
    beta = check_real("beta", beta, low=0.0, high=1.0, high_open=True)
    x = as_real("values", values)
    if x.ndim == 0:
        raise ValueError(f"values must be an array with the axis to average along, got {values!r}")
    x = np.moveaxis(x, axis, -1)
    out = np.empty_like(x)
    m = np.zeros(x.shape[:-1])
    for t in range(x.shape[-1]):
        m = beta * m + (1 - beta) * x[..., t]
        out[..., t] = m / (1 - beta ** (t + 1)) if bias_correction else m
    return np.moveaxis(out, -1, axis)


def ratio_of_averages(sq_small, sq_big, b_small, b_big, beta: float, axis: int = -1):
    """B_simple as ``EMA(𝒮)/EMA(|𝒢|²)``, the paper's estimator along a run (App. A.1)."""
    g2, s = two_batch_estimates(sq_small, sq_big, b_small, b_big)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ema(s, beta, axis) / ema(g2, beta, axis)


@dataclass
class NoiseScaleTracker:
    """Running estimates of ``|G|²``, tr Σ and B_simple inside a training loop.

    Example:
        >>> tracker = NoiseScaleTracker(beta=0.9)
        >>> for sq_small, sq_big in [(3.0, 1.2), (3.2, 1.1)]:
        ...     estimate = tracker.update(sq_small, sq_big, b_small=1, b_big=10)
        >>> round(tracker.gradient_sq, 3), round(tracker.trace_sigma, 3), round(tracker.b_simple, 3)
        (0.93, 2.175, 2.34)
    """

    beta: float = 0.99
    steps: int = 0
    _g2: float = field(default=0.0, repr=False)
    _s: float = field(default=0.0, repr=False)

    def __post_init__(self):
        if not 0 <= self.beta < 1:
            raise ValueError(f"beta must lie in [0, 1), got {self.beta!r}")

    def update(self, sq_small: float, sq_big: float, b_small: float, b_big: float) -> float:
        """Feed one step's squared norms; returns the current B_simple estimate."""
        g2, s = two_batch_estimates(sq_small, sq_big, b_small, b_big)
        self.steps += 1
        self._g2 = self.beta * self._g2 + (1 - self.beta) * float(g2)
        self._s = self.beta * self._s + (1 - self.beta) * float(s)
        return self.b_simple

    @property
    def gradient_sq(self) -> float:
        """Bias-corrected moving average of ``|𝒢|²``."""
        return self._g2 / (1 - self.beta**self.steps) if self.steps else float("nan")

    @property
    def trace_sigma(self) -> float:
        """Bias-corrected moving average of 𝒮."""
        return self._s / (1 - self.beta**self.steps) if self.steps else float("nan")

    @property
    def b_simple(self) -> float:
        """Ratio of the averages (the bias corrections cancel)."""
        return self._s / self._g2 if self.steps and self._g2 != 0 else float("nan")


@dataclass(frozen=True)
class DataParallel:
    """K workers × local batch b × A accumulation steps, as a framework computes gradients.

    Each micro-batch gradient is the mean over its b examples of the per-example gradient of the loss
    multiplied by ``loss_scale`` (mixed precision). A worker *sums* its A micro-batch gradients (as
    ``.grad`` accumulates) unless ``accumulation_mean`` divides by A; the all-reduce across workers is a
    ``"sum"`` or a ``"mean"``. The natural measurement is the worker's local gradient before the all-reduce
    (the small batch) and the reduced gradient after it (the big batch).

    :meth:`implied_batches` says which (B_small, B_big) that pair is, and :meth:`true_scale` turns the raw
    squared norms into the squared norms of mean gradients that :func:`two_batch_estimates` expects.
    """

    workers: int
    local_batch: int
    accumulation: int = 1
    reduction: str = "mean"
    accumulation_mean: bool = False
    loss_scale: float = 1.0

    def __post_init__(self):
        check_count("workers", self.workers, 2)  # the two-batch estimate needs B_big > B_small
        check_count("local_batch", self.local_batch, 1)
        check_count("accumulation", self.accumulation, 1)
        if not (np.isfinite(self.loss_scale) and self.loss_scale > 0):
            raise ValueError(f"loss_scale must be finite and > 0, got {self.loss_scale!r}")
        if self.reduction not in ("mean", "sum"):
            raise ValueError("reduction must be 'mean' or 'sum'")

    def implied_batches(self) -> tuple[int, int]:
        """(B_small, B_big) = (b·A, K·b·A): a worker's accumulated batch and the global batch."""
        small = self.local_batch * self.accumulation
        return small, self.workers * small

    def _local_factor(self) -> float:
        """raw local gradient = factor × (mean gradient over the worker's b·A examples)."""
        return self.loss_scale * (1 if self.accumulation_mean else self.accumulation)

    def _global_factor(self) -> float:
        return self._local_factor() * (self.workers if self.reduction == "sum" else 1)

    def true_scale(self, raw_sq_local, raw_sq_global):
        """Squared norms of the mean gradients over B_small and B_big examples, from the raw ones."""
        return (
            np.asarray(raw_sq_local) / self._local_factor() ** 2,
            np.asarray(raw_sq_global) / self._global_factor() ** 2,
        )

    def raw_gradients(self, per_example_gradients):
        """What the framework holds, from per-example gradients of shape (..., K·A·b, d).

        Returns ``(local, reduced)``: every worker's accumulated gradient (..., K, d) and the all-reduced
        one (..., d), both scaled as the framework scales them. Examples are assigned worker-major, then
        accumulation step, then slot.
        """
        g = np.asarray(per_example_gradients, dtype=np.float64)
        k, a, b = self.workers, self.accumulation, self.local_batch
        g = g.reshape(g.shape[:-2] + (k, a, b, g.shape[-1])) * self.loss_scale
        micro = g.mean(axis=-2)  # (..., K, A, d)
        local = micro.sum(axis=-2) / (a if self.accumulation_mean else 1)  # (..., K, d)
        reduced = local.sum(axis=-2) / (k if self.reduction == "mean" else 1)
        return local, reduced

    def estimates(self, local, reduced):
        """``(|𝒢|², 𝒮)`` from the framework's raw gradients.

        The small-batch squared norm is averaged over the K workers (each is an unbiased
        ``|G|² + trΣ/B_small``), which costs nothing and lowers the variance.
        """
        raw_small = np.mean(np.sum(np.square(local), axis=-1), axis=-1)
        raw_big = np.sum(np.square(reduced), axis=-1)
        sq_small, sq_big = self.true_scale(raw_small, raw_big)
        return two_batch_estimates(sq_small, sq_big, *self.implied_batches())
