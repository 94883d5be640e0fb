r"""One real SGD step on a real model, many times: the measured change of the full training loss, and its fit.

From θ, a minibatch of B distinct examples gives ĝ_B, and one step changes the training loss by
``ΔL(ε) = L(θ − εĝ_B) − L(θ)``. Taylor's theorem with ``E[ĝ_B] = G`` and
``E[ĝ_Bᵀ H ĝ_B] = GᵀHG + tr(HΣ)κ_B`` gives, exactly in the first two orders,

.. math:: \mathbb E[\Delta L](\varepsilon) = -\varepsilon|G|^2
          + \tfrac12\varepsilon^2\bigl(G^\top HG + \operatorname{tr}(H\Sigma)\,\kappa_B\bigr) + O(\varepsilon^3),
          \qquad \kappa_B = \frac{N - B}{B(N - 1)}\ \text{(without replacement)},\ \frac1B\ \text{(with)},

McCandlish et al. 2018 (arXiv:1812.06162, eq. 2.6 and the remark after eq. 2.3); on a quadratic the O(ε³) is 0.
:func:`nqm.measure.one_step_changes` measures ΔL for every draw on a grid of ε (the same minibatch for every ε of a
draw, so the grid's cells are correlated and a fit per draw carries that), and :func:`nqm.measure.fit_one_step` fits
each draw's curve by least squares on ``ε, ε², …`` (no intercept: ΔL(0) = 0) and averages, so the coefficients'
standard errors are the spread of the per-draw fits over √draws. :func:`nqm.measure.predicted_coefficients` gives
the first two from a :class:`~nqm.measure.Measurement`.
"""

from __future__ import annotations

import numpy as np

from ..checks import check_count
from ..finite_data import batch_factor
from .model import Model

__all__ = [
    "one_step_changes",
    "draw_fits",
    "fit_one_step",
    "mean_of_fits",
    "predicted_coefficients",
    "sgd_point",
    "step_grid",
    "normalised_improvements",
]

_THETAS_PER_CALL = 64  # stepped points per loss call: bounds a vectorised model's memory (θs × N × width)


def _batches(model: Model, batch_sizes) -> np.ndarray:
    b = np.asarray(batch_sizes)
    if b.ndim != 1 or b.size == 0 or not np.all((b == np.round(b)) & (b >= 1) & (b <= model.n)):
        raise ValueError(f"batch_sizes must be integers in [1, N = {model.n}], got {batch_sizes}")
    return b.astype(int)


def one_step_changes(model: Model, theta, lrs, batch_sizes, draws: int, *, seed=0) -> np.ndarray:
    """ΔL = L(θ − εĝ_B) − L(θ) of the full training loss, shape (draws, len(batch_sizes), ε per batch size).

    Args:
        model: the model. theta: (D,) the point.
        lrs: (nB, nε) step sizes per batch size (or (nε,) for all).
        batch_sizes: (nB,) integers in [1, N]; each draw takes B distinct examples (uniformly, without replacement).
        draws: minibatches per batch size; each is used for every ε of its row.
        seed: seeds the minibatches (``numpy.random.SeedSequence``).
    """
    theta = model.check_point(theta)
    b = _batches(model, batch_sizes)
    lrs = np.broadcast_to(np.asarray(lrs, dtype=np.float64), (b.size, np.shape(lrs)[-1]))
    if not np.all(np.isfinite(lrs) & (lrs > 0)):
        raise ValueError("lrs must be finite and > 0")
    draws = check_count("draws", draws, 2)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    base = float(model.loss(theta, model.everything))
    out = np.empty((draws, b.size, lrs.shape[1]))
    per_call = max(1, _THETAS_PER_CALL // lrs.shape[1])  # draws whose stepped points are evaluated in one call
    for j, size in enumerate(b):
        rows = np.stack([rng.choice(model.n, size=size, replace=False) for _ in range(draws)])
        for lo in range(0, draws, per_call):
            g = model.gradients(theta, rows[lo : lo + per_call])
            points = theta - lrs[j][None, :, None] * g[:, None, :]  # (draws in call, nε, D)
            out[lo : lo + per_call, j] = model.losses(points.reshape(-1, model.dim)).reshape(g.shape[0], -1) - base
    return out


def draw_fits(lrs, changes, degree: int = 4) -> np.ndarray:
    r"""Least-squares coefficients (c₁ … c_degree) of ``ΔL = Σ_k c_k ε^k`` for each draw: (draws, nB, degree).

    Args:
        lrs: (nB, nε) or (nε,) the grid. changes: (draws, nB, nε) from :func:`one_step_changes`.
        degree: the highest power fitted (4: the cubic and quartic terms free, so that the first two orders are
            not biased by the model's higher derivatives over the grid).
    """
    changes = np.asarray(changes, dtype=np.float64)
    draws, nb, ne = changes.shape
    lrs = np.broadcast_to(np.asarray(lrs, dtype=np.float64), (nb, ne))
    degree = check_count("degree", degree, 1)
    if ne < degree:
        raise ValueError(f"a fit of degree {degree} needs at least {degree} step sizes, got {ne}")
    powers = np.arange(1, degree + 1)
    out = np.empty((draws, nb, degree))
    for j in range(nb):
        scale = lrs[j].max()  # fit in ε/scale: a well-conditioned design
        design = (lrs[j][:, None] / scale) ** powers
        out[:, j] = np.linalg.lstsq(design, changes[:, j, :].T, rcond=None)[0].T / scale**powers
    return out


def mean_of_fits(fits) -> tuple[np.ndarray, np.ndarray]:
    """(mean, standard error) over draws of per-draw fits (draws, nB, degree): each draw is independent."""
    fits = np.asarray(fits, dtype=np.float64)
    return fits.mean(axis=0), fits.std(axis=0, ddof=1) / np.sqrt(fits.shape[0])


def fit_one_step(lrs, changes, degree: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The per-draw fits of :func:`draw_fits` averaged: ``mean`` (nB, degree) and its standard error ``se``."""
    return mean_of_fits(draw_fits(lrs, changes, degree))


def predicted_coefficients(m, batch_sizes, sampling: str = "batches") -> tuple[np.ndarray, np.ndarray]:
    """(c₁, c₂) = ``(−|G|², ½(GᵀHG + tr(HΣ)κ_B))`` from a measurement, κ_B as ``sampling`` draws the batches."""
    kappa = np.array([batch_factor(m.n, b, sampling) for b in np.atleast_1d(batch_sizes)])
    return np.full(kappa.shape, -m.grad_norm_sq), 0.5 * (m.gHg + m.tr_h_sigma * kappa)


def step_grid(m, batch_sizes, factors, step_cap: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    r"""(lrs (nB, nε), ε_opt (nB,)): a grid of steps around the law's optimum, ``s_B·factors`` with
    s_B = min(ε_opt(B), ``step_cap``/λ_max) and ``ε_opt(B) = |G|²/(GᵀHG + tr(HΣ)κ_B) = −c₁/(2c₂)``.

    The cap keeps ε·λ_max ≤ ``step_cap``·max(factors), where low-degree fits still describe a network (V23 found
    a quartic biased by many SEs on the digits MLP beyond ε·λ_max ≈ 1)."""
    c1, c2 = predicted_coefficients(m, batch_sizes)
    eps_opt = -c1 / (2 * c2)
    lrs = np.minimum(eps_opt, step_cap / float(m.eigenvalues[0]))[:, None] * np.asarray(factors, dtype=np.float64)
    return lrs, eps_opt


def normalised_improvements(lrs, changes, c1, c2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Measured steps in the law's units, each (nB, nε): u = ε/ε_opt(B), the mean improvement
    E[−ΔL]/ΔL_opt(B) and its standard error, with ε_opt = −c₁/(2c₂) and ΔL_opt = c₁²/(4c₂) the quadratic's vertex.
    The law puts every batch size on u(2 − u) (:func:`nqm.plots.normalised_one_step` draws it)."""
    changes = np.asarray(changes, dtype=np.float64)
    c1, c2 = np.asarray(c1, dtype=np.float64)[:, None], np.asarray(c2, dtype=np.float64)[:, None]
    dl_opt = c1**2 / (4 * c2)
    u = np.broadcast_to(np.asarray(lrs, dtype=np.float64), changes.shape[1:]) / (-c1 / (2 * c2))
    se = changes.std(axis=0, ddof=1) / np.sqrt(changes.shape[0]) / dl_opt
    return u, -changes.mean(axis=0) / dl_opt, se


def sgd_point(model: Model, theta, lr: float, batch_size: int, steps: int, *, seed=0) -> np.ndarray:
    """θ after ``steps`` plain SGD steps of size ``lr`` on minibatches of ``batch_size`` distinct examples: a point
    along a real training run, reproducible from ``seed``."""
    theta = model.check_point(theta).copy()
    b = int(_batches(model, [batch_size])[0])
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    for _ in range(check_count("steps", steps)):
        theta -= lr * np.asarray(model.gradient(theta, rng.choice(model.n, size=b, replace=False)))
    return theta
