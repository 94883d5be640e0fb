r"""A real model, as :func:`nqm.measure.measure` sees it: four callables on flat float64 vectors over N examples.

The training set is the population (McCandlish et al. 2018, arXiv:1812.06162, §2.1, with the finite-set reading
of their remark after eq. 2.3): with ℓ_n(θ) the loss of example n,

.. math:: L(\theta) = \frac1N\sum_n \ell_n(\theta),\quad G = \nabla L,\quad H = \nabla^2 L,\quad
          \Sigma = \frac1N\sum_n (\nabla\ell_n - G)(\nabla\ell_n - G)^\top,

and a minibatch of B distinct examples has noise covariance Σ(N − B)/(B(N − 1)) (Σ/B with replacement).

A :class:`Model` is framework-agnostic: any code that evaluates these on index sets will do. ``JaxModel``
(:mod:`nqm.measure.jax_model`) builds one from a per-example loss; a PyTorch user writes the same four with
``torch.func`` (``vmap(grad(loss_one))`` for per-example gradients, ``jvp(grad(mean_loss), …)`` for the HVP;
the repository's ``examples/torch_model.py``).
:func:`nqm.measure.quadratic_model` wraps a finite training set of an NQM, whose every quantity is known
exactly: the first test of any measurement.

Example:
    >>> import numpy as np, nqm
    >>> data = nqm.FiniteDataset.draw(nqm.NoisyQuadratic([1.0, 0.1], [1.0, 1.0]), 50, seed=0)
    >>> model = quadratic_model(data)
    >>> model.n, model.dim, model.gradient(np.zeros(2), np.arange(50)).round(3)
    (50, 2, array([-0.013,  0.176]))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Model", "quadratic_model"]


@dataclass(frozen=True)
class Model:
    """A model over a finite training set of ``n`` examples and ``dim`` parameters, as four callables.

    Attributes:
        n: N, the number of training examples (indices 0 … N − 1).
        dim: D, the number of parameters of the flat vector θ.
        loss: ``loss(theta, idx) -> float``, the mean loss over the examples ``idx`` (an int array).
        gradient: ``gradient(theta, idx) -> (D,)``, the gradient of that mean.
        per_example_gradients: ``per_example_gradients(theta, idx) -> (len(idx), D)``, one row per example; called
            on chunks of indices, so that N × D need never be held at once.
        hvp: ``hvp(theta, vectors) -> (k, D)``, the products of the full-batch mean loss's Hessian H(θ) with the
            rows of ``vectors`` (k, D).
        name: a label for reports.
        losses_at: optional, ``losses_at(thetas, idx) -> (k,)``, the mean loss on ``idx`` at each row of ``thetas``
            (k, D); without it :meth:`losses` calls ``loss`` row by row.
        gradients_on: optional, ``gradients_on(theta, rows) -> (k, D)``, the mean gradient on each row of the index
            matrix ``rows`` (k, B); without it :meth:`gradients` calls ``gradient`` row by row.
        heavy_ball_run: optional, ``heavy_ball_run(theta, velocity, lr, momentum, rows) -> (theta, velocity,
            losses)``: one heavy-ball step ``v ← βv + ĝ, θ ← θ − εv`` per row of the index matrix ``rows`` (T, B),
            and the full training loss after each (T,); without it real runs take one step per call.
    """

    n: int
    dim: int
    loss: Callable
    gradient: Callable
    per_example_gradients: Callable
    hvp: Callable
    name: str = "model"
    losses_at: Callable | None = None
    gradients_on: Callable | None = None
    heavy_ball_run: Callable | None = None

    def __post_init__(self):
        for field in ("n", "dim"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{field} must be a positive integer, got {value!r}")
        if self.n < 2:
            raise ValueError(f"n must be >= 2 examples (Σ needs two), got {self.n}")
        for field in ("loss", "gradient", "per_example_gradients", "hvp"):
            if not callable(getattr(self, field)):
                raise TypeError(f"{field} must be callable, got {type(getattr(self, field)).__name__}")
        for field in ("losses_at", "gradients_on", "heavy_ball_run"):
            if getattr(self, field) is not None and not callable(getattr(self, field)):
                raise TypeError(f"{field} must be callable or None, got {type(getattr(self, field)).__name__}")

    @property
    def everything(self) -> np.ndarray:
        """All example indices, 0 … N − 1."""
        return np.arange(self.n)

    def check_point(self, theta) -> np.ndarray:
        """θ as a flat float64 (D,) vector, checked."""
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.dim,):
            raise ValueError(f"theta must have shape ({self.dim},), got {theta.shape}")
        if not np.all(np.isfinite(theta)):
            raise ValueError("theta contains non-finite values")
        return theta

    def losses(self, thetas, idx=None) -> np.ndarray:
        """(k,) the mean loss on ``idx`` (default all examples) at each row of ``thetas`` (k, D)."""
        idx = self.everything if idx is None else np.asarray(idx)
        thetas = np.asarray(thetas, dtype=np.float64)
        if self.losses_at is not None:
            return np.asarray(self.losses_at(thetas, idx), dtype=np.float64).reshape(thetas.shape[0])
        return np.array([float(self.loss(t, idx)) for t in thetas])

    def gradients(self, theta, rows) -> np.ndarray:
        """(k, D) the mean gradient at θ on each row of the index matrix ``rows`` (k, B)."""
        rows = np.asarray(rows)
        if self.gradients_on is not None:
            return np.asarray(self.gradients_on(theta, rows), dtype=np.float64).reshape(rows.shape[0], self.dim)
        return np.array([np.asarray(self.gradient(theta, r), dtype=np.float64) for r in rows])

    def matvec(self, theta) -> Callable:
        """``v ↦ H(θ)v`` for one (D,) vector, through :attr:`hvp`."""
        return lambda v: np.asarray(self.hvp(theta, np.asarray(v)[None, :]), dtype=np.float64)[0]


def quadratic_model(data, basis=None) -> Model:
    r"""The finite training set of an additive NQM as a :class:`Model` (exact reference for every measurement).

    Example n of :class:`nqm.FiniteDataset` has ``ℓ_n(θ) = ½θᵀHθ + ξ_nᵀθ`` in H's basis. With an orthogonal
    ``basis`` Q the parameters are x = Qθ, so ``ℓ_n(x) = ½xᵀ(QHQᵀ)x + (Qξ_n)ᵀx`` and H is dense in x, as in a real
    network. Then G = H_x x + Qξ̄, the Hessian is H_x = QHQᵀ and Σ = QΣ_NQᵀ exactly.

    Args:
        data: a :class:`nqm.FiniteDataset` (``h`` (d,), ``examples`` (N, d)).
        basis: optional (d, d) orthogonal Q.
    """
    h, xi = np.asarray(data.h, dtype=np.float64), np.asarray(data.examples, dtype=np.float64)
    if basis is None:
        hx, xi_x = np.diag(h), xi
    else:
        q = np.asarray(basis, dtype=np.float64)
        if q.shape != (h.size, h.size) or not np.allclose(q @ q.T, np.eye(h.size), atol=1e-10):
            raise ValueError(f"basis must be an orthogonal ({h.size}, {h.size}) matrix")
        hx, xi_x = (q * h) @ q.T, xi @ q.T

    def per_example_gradients(theta, idx):
        return (hx @ theta)[None, :] + xi_x[np.asarray(idx)]

    def gradient(theta, idx):
        return hx @ theta + xi_x[np.asarray(idx)].mean(axis=0)

    def loss(theta, idx):
        return float(0.5 * theta @ hx @ theta + xi_x[np.asarray(idx)].mean(axis=0) @ theta)

    def hvp(theta, vectors):
        return np.asarray(vectors, dtype=np.float64) @ hx  # H_x is symmetric

    return Model(
        n=xi.shape[0],
        dim=h.size,
        loss=loss,
        gradient=gradient,
        per_example_gradients=per_example_gradients,
        hvp=hvp,
        name=f"quadratic model of {data.name}",
    )
