"""State-dependent noise: linear least squares with Gaussian features.

Examples are real pairs (x, y) with ``x ~ N(0, H)`` and ``y = xᵀθ* + ν``, ``ν ~ N(0, σ²)``; coordinates are
H's eigenbasis and θ is measured from θ* (so θ* = 0). The per-example gradient of ``½(xᵀθ − y)²`` is
``g_x = x(xᵀθ − ν)``, with mean ``Hθ`` and (Isserlis' theorem for Gaussian x)

.. math:: \\Sigma(\\theta) = H\\theta\\theta^\\top H + (\\theta^\\top H\\theta + \\sigma^2)\\,H,

so the noise grows with the loss. The excess loss is ``L(θ) = ½θᵀHθ`` and SGD's second moments obey an exact
closed recursion (diagonal of M = E[θθᵀ] in H's basis):

.. math:: m_i \\leftarrow (1 - \\epsilon h_i)^2 m_i + \\frac{\\epsilon^2}{B}\\Big(h_i^2 m_i
          + h_i\\sum_j h_j m_j + \\sigma^2 h_i\\Big).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import (
    check_batch_size,
    check_count,
    check_init_var,
    check_lr,
    check_memory,
    check_point,
    check_replicas,
)
from .curves import LossCurve, as_asked, check_record, exact_curve, loss_curve
from .montecarlo import OneStepResult, tile_rng
from .optim import as_optimizer, is_plain_sgd, require_linear, require_no_decay
from .problem import NoisyQuadratic, check_precond
from .threads import run_tasks, thread_count

__all__ = ["LeastSquares"]


@dataclass(frozen=True)
class LeastSquares:
    """Least squares with Gaussian features x ~ N(0, diag(h)) and label noise variance ``noise_var`` (σ²)."""

    h: np.ndarray
    noise_var: float = 0.0

    def __post_init__(self):
        h = NoisyQuadratic(self.h, c=np.zeros(np.size(self.h))).h  # same validation as every problem
        object.__setattr__(self, "h", h)
        if not np.isfinite(self.noise_var) or self.noise_var < 0:
            raise ValueError(f"noise_var (σ²) must be finite and >= 0, got {self.noise_var!r}")

    @property
    def d(self) -> int:
        return self.h.size

    def sigma(self, theta) -> np.ndarray:
        """Per-example gradient covariance Σ(θ) = HθθᵀH + (θᵀHθ + σ²)H, dense (d, d) in H's basis."""
        th = check_point("theta", theta, self.d)
        g = self.h * th
        return np.outer(g, g) + np.diag((th @ g + self.noise_var) * self.h)

    def at(self, theta) -> NoisyQuadratic:
        """The additive NQM that has this problem's noise at θ: every closed form of :mod:`nqm.theory`
        (B_noise, ε_opt, E[ΔL] …) then holds at θ exactly, since they need only the mean and covariance of
        the gradient there."""
        return NoisyQuadratic(self.h, sigma=self.sigma(theta), name="least squares at θ")

    def noise_scale(self, theta) -> float:
        """B_noise(θ) = tr(HΣ(θ))/(GᵀHG) = [θᵀH³θ + (θᵀHθ + σ²) tr H²]/(θᵀH³θ)."""
        th = check_point("theta", theta, self.d)
        h3 = th @ (self.h**3 * th)
        return float((h3 + (th @ (self.h * th) + self.noise_var) * (self.h @ self.h)) / h3)

    def _moments(self, opt, batch_size, steps: int, init_var):
        """(E θ², E[reported iterate²]) at t = 0 … steps, each (steps + 1, d), by the exact recursion of the
        optimiser's transition with the noise variance of the current second moments."""
        opt = require_no_decay(require_linear(as_optimizer(opt), "LeastSquares.expected_loss"), "least squares")
        b = float(check_batch_size(batch_size, single=True))
        steps = check_count("steps", steps)
        check_memory(
            16.0 * (steps + 1) * self.d,
            f"LeastSquares.expected_loss keeps (steps + 1) × d = {steps + 1} × {self.d} second moments",
            "ask for fewer steps per call",
        )
        m = check_init_var(init_var, self.d).copy()
        if is_plain_sgd(opt) and opt.precond is None:
            e = opt.lr  # SGD: the one-state recursion of the module docstring
            contraction = (1 - e * self.h) ** 2 + e * e * self.h**2 / b
            coupling = e * e * self.h / b
            out = np.empty((steps + 1, self.d))
            out[0] = m
            for t in range(1, steps + 1):
                m = contraction * m + coupling * (self.h @ m + self.noise_var)
                out[t] = m
            return out, out
        pre = check_precond(self.as_quadratic(), opt.precond)
        f, g = opt.transition(opt.lr * pre * self.h)
        scale = (opt.lr * pre) ** 2 / b  # the step's noise variance per unit of Σ(θ)_ii
        e = np.asarray(opt.initial)
        s = m[:, None, None] * np.outer(e, e)  # E[s sᵀ] per coordinate, s₀ = eθ₀
        gg = g[:, :, None] * g[:, None, :]
        k = opt.loss_index
        theta, shown = np.empty((steps + 1, self.d)), np.empty((steps + 1, self.d))
        theta[0], shown[0] = s[:, 0, 0], s[:, k, k]
        for t in range(1, steps + 1):
            v = s[:, 0, 0]  # the gradient is taken at θ: Var ξ_i = h_i²V_i + h_i(Σ h_j V_j + σ²)
            q = scale * (self.h**2 * v + self.h * (self.h @ v + self.noise_var))
            s = f @ s @ np.swapaxes(f, -1, -2) + gg * q[:, None, None]
            theta[t], shown[t] = s[:, 0, 0], s[:, k, k]
        return theta, shown

    def second_moments(self, opt, batch_size, steps: int, *, init_var=1.0) -> np.ndarray:
        r"""Exact E[θ_i(t)²], t = 0 … steps, shape (steps + 1, d), of a linear optimiser (a step ε means SGD).

        For SGD the closed recursion is

        .. math:: V_{t+1} = \big[(1 - \epsilon h)^2 + \epsilon^2h^2/B\big]V_t
                  + \frac{\epsilon^2 h}{B}\big(\textstyle\sum_j h_jV_{t,j} + \sigma^2\big)

        (Gaussian fourth moments E[x xᵀMx xᵀ] = 2HMH + tr(HM)H keep E[θθᵀ] diagonal in H's basis). Any other
        linear optimiser (:mod:`nqm.optim`) steps its transition's second moments, ``S ← FSFᵀ + q_t ggᵀ``,
        with the noise variance q_t = (εp)²/B·(h²V_t + h(Σ h_j V_{t,j} + σ²)) of the current V_t = E θ²."""
        return self._moments(opt, batch_size, steps, init_var)[0]

    def expected_loss(self, opt, batch_size, steps: int, *, init_var=1.0) -> LossCurve:
        """Exact E[L_t], t = 0 … steps (of θ̃ for an EMA), from the closed second-moment recursion: a
        :class:`nqm.LossCurve` with ``sem`` = 0."""
        loss = 0.5 * self._moments(opt, batch_size, steps, init_var)[1] @ self.h
        return exact_curve(np.arange(loss.size), loss)

    def as_quadratic(self) -> NoisyQuadratic:
        """The curvature as a noiseless :class:`NoisyQuadratic` (for the checks of shared arguments)."""
        return NoisyQuadratic(self.h, c=np.zeros(self.d))

    def expected_noise_scales(self, second_moments) -> tuple[np.ndarray, np.ndarray]:
        """Ratio-of-expectations noise scales at second moments V (…, d) (McCandlish et al. 2018, eqs. 2.8–2.9):
        ``E[tr HΣ(θ)]/E[GᵀHG]`` and ``E[tr Σ(θ)]/E|G|²`` with E[Σ(θ)] = HVH + (Σ h V + σ²)H."""
        v = np.asarray(second_moments, dtype=np.float64)
        ghg, gg = v @ self.h**3, v @ self.h**2
        level = v @ self.h + self.noise_var
        return (ghg + level * (self.h @ self.h)) / ghg, (gg + level * self.h.sum()) / gg

    def example_gradients(self, rng: np.random.Generator, theta, batch_size: int) -> np.ndarray:
        """Mean gradient of ``batch_size`` real examples at each row of θ (rows, d): x(xᵀθ − ν) averaged."""
        th = np.atleast_2d(theta)
        x = rng.standard_normal((batch_size,) + th.shape) * np.sqrt(self.h)
        nu = rng.standard_normal((batch_size, th.shape[0])) * np.sqrt(self.noise_var)
        residual = np.einsum("brd,rd->br", x, th) - nu
        return np.einsum("br,brd->rd", residual, x) / batch_size

    def simulate(self, opt, batch_size, steps, replicas, *, seed=0, init_var=1.0, at=None, threads=None) -> LossCurve:
        """Any optimiser (:mod:`nqm.optim`; a step ε means SGD) on real examples: R replicas, each step B
        fresh (x, y) pairs; losses (of θ̃ for an EMA) at the steps ``at``."""
        opt = require_no_decay(as_optimizer(opt), "least squares")
        pre = None if opt.precond is None else check_precond(self.as_quadratic(), opt.precond)
        b = check_count("batch_size", batch_size, 1)
        steps = check_count("steps", steps)
        replicas = check_replicas(replicas)
        asked = check_record(steps, at)
        rec = np.unique(asked)  # recorded in order; the curve comes back as asked
        var0 = check_init_var(init_var, self.d)
        check_memory(
            16.0 * replicas * rec.size,
            f"LeastSquares.simulate with replicas × recorded steps = {replicas} × {rec.size}",
            "run fewer replicas per call with different seeds and pool the results, or record fewer steps (at=[...])",
        )
        rows = max(1, (1 << 16) // (self.d * b))
        blocks = list(range(0, replicas, rows))

        def block(r0):
            def run():
                rng = tile_rng(seed, r0 // rows)
                n = min(rows, replicas - r0)
                state = opt.init(rng.standard_normal((n, self.d)) * np.sqrt(var0))
                losses = np.empty((n, rec.size))
                k = 0
                for t in range(steps + 1):
                    if k < rec.size and rec[k] == t:
                        losses[:, k] = 0.5 * (opt.readout(state) ** 2) @ self.h
                        k += 1
                    if t < steps:
                        grad = self.example_gradients(rng, state[0], b)
                        state = opt.advance(state, grad if pre is None else pre * grad)
                return losses

            return run

        parts = run_tasks([block(r0) for r0 in blocks], thread_count(threads, len(blocks)))
        return as_asked(loss_curve(rec, np.concatenate(parts)), asked)

    def one_step_improvement(self, theta, lr, batch_size, replicas: int, *, seed=0, threads=None):
        """ΔL = L(θ) − L(θ − εG_B) with B real examples, on a broadcast (lr, batch_size) grid; every cell has
        its own stream. Returns :class:`nqm.OneStepResult` (compare with ``theory.expected_improvement(
        self.at(θ), θ, ε, B)``)."""
        lrs, bs = np.broadcast_arrays(check_lr(lr), check_batch_size(batch_size, integer=True))
        replicas = check_replicas(replicas)
        th = check_point("theta", theta, self.d)
        loss0 = 0.5 * self.h @ th**2

        def cell(index):
            def run():
                rng = tile_rng(seed, index)
                b = int(bs.flat[index])
                rows = max(1, (1 << 18) // (self.d * b))
                out = np.empty(replicas)
                for r0 in range(0, replicas, rows):
                    n = min(rows, replicas - r0)
                    new = th - float(lrs.flat[index]) * self.example_gradients(rng, np.tile(th, (n, 1)), b)
                    out[r0 : r0 + n] = loss0 - 0.5 * (new**2) @ self.h
                return out

            return run

        samples = np.array(run_tasks([cell(i) for i in range(lrs.size)], thread_count(threads, lrs.size)))
        samples = samples.reshape(lrs.shape + (replicas,))
        return OneStepResult.of_samples(lrs, bs, samples)
