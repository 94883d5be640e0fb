"""One result type for a loss curve, whatever engine computed it.

``nqm.dynamics.expected_loss`` (exact: ``sem = 0``, ``n = None``) and ``nqm.simulate`` (R replicas: the mean
and its standard error) both return a :class:`LossCurve`, as ``scipy.stats`` returns one result class whatever
its ``method=``. A curve is array-like over its ``mean``: NumPy functions, arithmetic and indexing see the
mean, so ``expected_loss(...)[-1]`` or ``np.log(curve)`` read as they would on an array, while ``steps``,
``sem`` and ``n`` stay at hand.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["LossCurve", "exact_curve"]


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
