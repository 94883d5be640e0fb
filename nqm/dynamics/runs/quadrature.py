r"""A long spectrum compressed into a few weighted coordinates, for searching hyper-parameters on it.

A linear optimiser's expected loss is a sum over coordinates of two functions of the coordinate's curvature
κ = p·h (:mod:`nqm.dynamics.moments`, :mod:`nqm.dynamics.moments.heavy_ball`):

.. math:: \mathbb E[L_t] = \sum_i a_i\,W_t(\epsilon\kappa_i)^2 + b_i\,\epsilon^2 S_t(\epsilon\kappa_i),
          \qquad a_i = \tfrac12 h_i V_{0,i},\quad b_i = \tfrac12 h_i p_i^2 c_i / B,

the decay of the start (weights a) and the noise accumulated since (weights b). Both are smooth in log κ wherever
the coordinates are dense, so each of the two sums over a narrow bin of log κ is integrated well by a Gauss rule
of the discrete measure ``Σ_i a_i δ(log κ − log κ_i)`` (resp. b) with a few nodes: exact for polynomials in log κ
of degree 2n − 1 within the bin. The largest curvatures, which are few, set the stability edge and oscillate
fastest, are kept as they are. The solvers search on the compressed sum and settle on the exact one
(:func:`nqm.dynamics.optimal_steps_to_target`); nothing they report comes from the compression alone.

Reference: Golub & Welsch 1969, *Calculation of Gauss quadrature rules* (the Jacobi matrix of a measure).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CompressedSpectrum", "compress_spectrum", "gauss_rule"]


def gauss_rule(x, w, n: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Nodes and weights of the n-point Gauss rule of the discrete measure ``Σ_j w_j δ(x − x_j)`` (w ≥ 0, at least
    n distinct points of positive weight): ``Σ_k W_k f(X_k) = Σ_j w_j f(x_j)`` for every polynomial f of degree
    < 2n. The Stieltjes procedure gives the measure's Jacobi matrix (on x mapped to [−1, 1], where the recurrence
    is well conditioned); its eigenvalues are the nodes, and the squared first components of its eigenvectors
    times the total weight are the weights (Golub & Welsch 1969)."""
    x, w = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    centre, half = 0.5 * (x.max() + x.min()), 0.5 * (x.max() - x.min())
    y = (x - centre) / half if half > 0 else x - centre
    alpha, beta = np.zeros(n), np.zeros(n)
    p_prev, p = np.zeros_like(y), np.ones_like(y)
    norm_prev = 1.0
    for k in range(n):
        norm = w @ (p * p)
        alpha[k] = (w @ (y * p * p)) / norm
        beta[k] = norm / norm_prev if k else 0.0
        p_prev, p = p, (y - alpha[k]) * p - beta[k] * p_prev
        norm_prev = norm
    jacobi = np.diag(alpha) + np.diag(np.sqrt(beta[1:]), 1) + np.diag(np.sqrt(beta[1:]), -1)
    nodes, vectors = np.linalg.eigh(jacobi)
    return centre + half * nodes, w.sum() * vectors[0] ** 2


@dataclass(frozen=True)
class CompressedSpectrum:
    """Pseudo-coordinates that stand for a spectrum in sums ``Σ a·f(κ) + b·g(κ)``: curvatures ``kappa`` (K,) and
    the weights ``a`` (K,) and ``b`` (K,) each carries (a node of one rule carries 0 of the other part)."""

    kappa: np.ndarray
    a: np.ndarray
    b: np.ndarray


def compress_spectrum(kappa, a, b, *, exact: int = 64, bins: int = 64, nodes: int = 3) -> CompressedSpectrum:
    """The coordinates (κ, a, b) compressed: the ``exact`` largest κ kept as they are, the rest split into ``bins``
    bins of equal width in log κ, each integrated by ``nodes``-point Gauss rules of its a- and its b-weights
    (:func:`gauss_rule`); a bin with too few coordinates of positive weight keeps them as they are."""
    kappa, a, b = (np.asarray(v, dtype=np.float64) for v in (kappa, a, b))
    order = np.argsort(kappa)[::-1]
    kappa, a, b = kappa[order], a[order], b[order]
    parts = [(kappa[:exact], a[:exact], b[:exact])]
    rest = slice(exact, None)
    log_k = np.log(kappa[rest])
    if log_k.size:
        edges = np.linspace(log_k.min(), log_k.max(), bins + 1)
        which = np.clip(np.searchsorted(edges, log_k, side="right") - 1, 0, bins - 1)
        for j in range(bins):
            inside = which == j
            for weight, is_a in ((a[rest][inside], True), (b[rest][inside], False)):
                x = log_k[inside][weight > 0]
                w = weight[weight > 0]
                if np.unique(x).size <= nodes:
                    points, masses = np.exp(x), w
                else:
                    nodes_x, masses = gauss_rule(x, w, nodes)
                    points = np.exp(nodes_x)
                zero = np.zeros_like(masses)
                parts.append((points, masses, zero) if is_a else (points, zero, masses))
    kappa, a, b = (np.concatenate(v) for v in zip(*parts))
    return CompressedSpectrum(kappa, a, b)
