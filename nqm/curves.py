"""One result type for a loss curve, whatever engine computed it.

``nqm.dynamics.expected_loss`` (exact: ``sem = 0``, ``n = None``) and ``nqm.simulate`` (R replicas: the mean
and its standard error) both return a :class:`LossCurve`, as ``scipy.stats`` returns one result class whatever
its ``method=``. A curve is array-like over its ``mean``: NumPy functions, arithmetic and indexing see the
mean, so ``expected_loss(...)[-1]`` or ``np.log(curve)`` read as they would on an array, while ``steps``,
``sem`` and ``n`` stay at hand. The steps a curve is recorded at are checked here too (``check_record``), and
a sampled curve is formed from its replicas' losses (``loss_curve``), for every simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from .checks import check_count, check_steps_at

__all__ = ["LossCurve", "exact_curve", "loss_curve", "default_record", "check_record", "as_asked"]


@dataclass(eq=False, repr=False)
class LossCurve(NDArrayOperatorsMixin):
    """E[L] at the steps ``steps``: ``mean`` (K,), its standard error ``sem`` (K,) and the number of replicas
    ``n`` (None for an exact curve, whose ``sem`` is 0).

    Attributes:
        losses: (n, K) per-replica losses when a simulation was asked to keep them, else None.
        state: (n, d) final θ in H's basis when a simulation was asked to keep it, else None.
    """

    steps: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    n: int | None
    losses: np.ndarray | None = None
    state: np.ndarray | None = None

    @property
    def exact(self) -> bool:
        """True for an exact curve (no sampling, so ``sem`` is 0)."""
        return self.n is None

    # -- array-like over the mean ---------------------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        return np.array(self.mean, dtype=dtype, copy=True) if copy else np.asarray(self.mean, dtype=dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(x.mean if isinstance(x, LossCurve) else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __getitem__(self, index):
        return self.mean[index]

    def __len__(self) -> int:
        return len(self.mean)

    def __iter__(self):
        return iter(self.mean)

    @property
    def shape(self) -> tuple:
        return self.mean.shape

    def tolist(self) -> list:
        return self.mean.tolist()

    def __repr__(self) -> str:
        kind = "exact" if self.exact else f"n={self.n}"
        return f"LossCurve({kind}, steps={self.steps.tolist()!r}, mean={np.array2string(self.mean, precision=8)})"


def exact_curve(steps, mean) -> LossCurve:
    """The curve of exact values ``mean`` at ``steps``: ``sem`` = 0, ``n`` = None."""
    mean = np.asarray(mean, dtype=np.float64)
    return LossCurve(np.asarray(steps), mean, np.zeros_like(mean), None)


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
    (default: ``default_record``). The engines run the sorted unique steps; :func:`as_asked` puts the curve
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
