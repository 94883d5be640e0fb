r"""Lanczos on a symmetric operator given by its products, and the Gauss quadrature it implies.

For a symmetric H and a start q₀ (``|q₀| = 1``), m steps of Lanczos build an orthonormal basis Q_m of the Krylov space
span{q₀, Hq₀, …, H^{m−1}q₀} and the tridiagonal T_m = Q_mᵀHQ_m (diagonal α, off-diagonal β). With
T_m = V diag(τ) Vᵀ, the nodes τ_j and weights w_j = V_{0j}² are the Gauss quadrature of q₀'s spectral measure:

.. math:: q_0^\top f(H)\, q_0 = \sum_j w_j f(\tau_j)
          \quad\text{exactly for every polynomial } f \text{ of degree} \le 2m - 1

(Golub & Meurant, *Matrices, Moments and Quadrature with Applications*, 2010, ch. 6; used for Hessian spectra by
Ghorbani, Krishnan & Xiao 2019, arXiv:1901.10159). Full re-orthogonalisation (twice, against every earlier
vector and an optional block it must stay orthogonal to) keeps Q_m orthonormal to rounding, so no ghost copies of
converged eigenvalues appear. When the Krylov space closes (β ≈ 0) the quadrature is exact for every f.

Example:
    >>> import numpy as np
    >>> h = np.array([1.0, 2.0, 5.0])
    >>> nodes, weights = gauss_quadrature(*lanczos(lambda v: h * v, np.ones(3), 3)[:2])
    >>> np.round(nodes, 12), np.round(weights * 3, 12)
    (array([1., 2., 5.]), array([1., 1., 1.]))
"""

from __future__ import annotations

import numpy as np

__all__ = ["lanczos", "gauss_quadrature"]

_CLOSED = 1e-12  # β below this fraction of |α| + |β|'s scale: the Krylov space is invariant (exact quadrature)


def _orthogonalise(w: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """w minus its projection on the rows of ``basis``, twice ("twice is enough": Parlett 1980, §6.9)."""
    for _ in range(2):
        w = w - basis.T @ (basis @ w)
    return w


def lanczos(matvec, start, steps: int, *, orthogonal_to=None):
    r"""``steps`` Lanczos steps of a symmetric operator from ``start``: ``(alpha, beta, basis)``.

    Args:
        matvec: ``v ↦ Hv`` for a vector of shape (D,).
        start: (D,) the start; normalised here (it must not be 0).
        steps: the most steps m; fewer when the Krylov space closes.
        orthogonal_to: (k, D) orthonormal rows the basis is kept orthogonal to (deflated Lanczos: rows spanning an
            invariant subspace of H, such as its top eigenvectors, leave the rest of the spectrum).

    Returns:
        ``alpha`` (m,), ``beta`` (m − 1,) of T_m, and ``basis`` (m, D), the orthonormal Lanczos vectors.
    """
    q = np.asarray(start, dtype=np.float64)
    extra = np.zeros((0, q.size)) if orthogonal_to is None else np.asarray(orthogonal_to, dtype=np.float64)
    q = _orthogonalise(q, extra) if extra.size else q
    norm = np.linalg.norm(q)
    if not norm > 0:
        raise ValueError("the Lanczos start must be nonzero (after removing its part in orthogonal_to)")
    steps = int(steps)
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    basis = np.empty((min(steps, q.size), q.size))
    basis[0] = q / norm
    alpha, beta = [], []
    for j in range(basis.shape[0]):
        w = np.asarray(matvec(basis[j]), dtype=np.float64)
        alpha.append(float(basis[j] @ w))
        if j + 1 == basis.shape[0]:
            break
        w = _orthogonalise(w, np.vstack([extra, basis[: j + 1]]))
        b = float(np.linalg.norm(w))
        if b <= _CLOSED * (abs(alpha[-1]) + (beta[-1] if beta else 0.0) + np.finfo(float).tiny):
            break
        beta.append(b)
        basis[j + 1] = w / b
    m = len(alpha)
    return np.array(alpha), np.array(beta[: m - 1]), basis[:m]


def gauss_quadrature(alpha, beta):
    r"""Nodes τ and weights w of the Gauss rule of T = tridiag(β, α, β): ``q₀ᵀf(H)q₀ ≈ Σ w_j f(τ_j)``, Σ w = 1."""
    alpha = np.asarray(alpha, dtype=np.float64)
    t = np.diag(alpha) + np.diag(np.asarray(beta, dtype=np.float64), 1) + np.diag(np.asarray(beta), -1)
    nodes, vectors = np.linalg.eigh(t)
    return nodes, vectors[0] ** 2
