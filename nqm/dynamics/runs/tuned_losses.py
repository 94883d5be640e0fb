"""The expected loss of the tuned families for rows of (ε, hp), in closed form: heavy ball, Nesterov and an EMA of
SGD (hp = β or γ), SGD with weight decay (hp = λ) and heavy ball with a held decay; what the search
(:mod:`.search`) asks of each: its curve, stationary loss, stability edge, feasible step, searched range and
compiled kernels."""

from __future__ import annotations

import copy

import numpy as np

from ...checks import check_init_var
from ...noise import injected_variance
from ...optim import HEAVY_BALL, SGD, TunedFamily, tuned_family
from ...problem import NoisyQuadratic, check_precond
from .. import moments as forms
from ..moments import (
    DecayedSgdMoments,
    HeavyBallMoments,
    TwoStateMoments,
    heavy_ball_stationary,
    two_state_stationary,
)
from .compiled import compiled_kernels
from .crossing import first_hit_pruned, scan_leaf
from .quadrature import compress_spectrum

__all__ = ["TunedLoss", "DecayTunedLoss", "DecayHeavyBallLoss", "PulledMoments", "decay_range", "H_LOG_RANGE"]

# searched hyper-parameter range: h = β or γ in [1e-6, 1 − 1e-4], golden sections on log(1 − h)
H_LOG_RANGE = (np.log(1e-4), np.log1p(-1e-6))


# -- momentum and EMA: integer first crossings on the closed forms, tuned by nested golden sections --------
class TunedLoss:
    """E[L_t] for rows of (ε, β) — heavy ball or Nesterov — or (ε, γ) — an EMA of SGD — in closed form
    (:mod:`nqm.dynamics.moments`); ``hp`` is the hyper-parameter β or γ of each row."""

    decoupled = False
    compressible = True  # E[L_t] is linear in (V₀, q) per coordinate: see compressed()

    def __init__(self, p: NoisyQuadratic, batch_sizes, init_var, precond, family: TunedFamily):
        pre = check_precond(p, precond)
        self.precond = None if precond is None else pre
        self.family = tuned_family(family)
        self.half_h = 0.5 * p.h
        self.kappa = pre * p.h
        self.batch_sizes = batch_sizes
        self.noise = injected_variance(p, batch_sizes[:, None], pre)
        self.v0 = check_init_var(init_var, p.d)

    def compressed(self, **sizes) -> TunedLoss:
        """The same loss on a compressed spectrum (:func:`nqm.dynamics.runs.quadrature.compress_spectrum`), to
        search on: pseudo-coordinates of curvature κ with ½h = 1, V₀ = a (the start's weight) and noise b/B per batch
        size."""
        positive = self.kappa > 0  # κ = 0 coordinates (flat directions) are kept as they are
        unit_noise = self.noise[0] * self.batch_sizes[0]  # p²c
        spectrum = compress_spectrum(
            self.kappa[positive], (self.half_h * self.v0)[positive], (self.half_h * unit_noise)[positive], **sizes
        )
        out = copy.copy(self)
        out.kappa = np.concatenate([spectrum.kappa, self.kappa[~positive]])
        out.half_h = np.concatenate([np.ones(spectrum.kappa.size), self.half_h[~positive]])
        out.v0 = np.concatenate([spectrum.a, self.v0[~positive]])
        weights = np.concatenate([spectrum.b, unit_noise[~positive]])
        out.noise = weights / self.batch_sizes[:, None]
        return out

    def take(self, rows) -> TunedLoss:
        """The same loss for the batch sizes at the indices ``rows`` (repeats allowed: ``tiled`` repeats them all),
        so that several points per batch size, or a few batch sizes, are searched in one vectorised call."""
        out = copy.copy(self)
        out.batch_sizes = self.batch_sizes[rows]
        out.noise = self.noise[rows]
        return out

    def tiled(self, k: int) -> TunedLoss:
        """The loss for its batch sizes repeated ``k`` times: rows i, i + n, … are batch size i."""
        return self.take(np.tile(np.arange(self.noise.shape[0]), k))

    def _moments(self, eps, hp, v0, rows=slice(None)):
        lam, q, hh = eps[..., None] * self.kappa, eps[..., None] ** 2 * self.noise[rows], hp[..., None]
        return self.family.moments(forms, lam, q, v0, hh)

    def curve(self, eps, hp):
        """t ↦ E[L_t] at fixed rows (ε, hp); the t-independent work is done here, once."""
        moments = self._moments(eps, hp, self.v0)
        return lambda t: moments.at(np.asarray(t, dtype=np.float64)[:, None]) @ self.half_h

    def value(self, eps, hp, t):
        return self.curve(eps, hp)(t)

    def initial_loss(self) -> float:
        """E[L_0] = ½Σh·V₀, whatever the hyper-parameters: the runs start at E[θ₀] = θ*."""
        return float(self.v0 @ self.half_h)

    def first_hit_by_scan(
        self, row: int, eps: float, hp: float, target: float, until: int, budget: float = np.inf
    ) -> int | None:
        """The first integer t < ``until`` with E[L_t] ≤ target for batch size ``row`` at (ε, hp) by evaluating
        every step; ``until`` if there is none; None where that would take more than ``budget`` coordinate-steps.

        The stretches where a lower bound of E[L_t] (:meth:`HeavyBallMoments.lower_bound`,
        :meth:`TwoStateMoments.lower_bound`, :meth:`EmaMoments.lower_bound`) stays above the target are skipped:
        intervals (``first_hit_pruned``) are searched left first and halved down to leaves of a few steps
        (``scan_leaf``) that are evaluated step by step, so the first hit found is the first one."""
        kernels = self.kernels()
        if kernels is not None:  # compiled, the same branch and bound; NaN: a value it cannot give, decided below
            leaf = scan_leaf(self.half_h.size)
            hit = kernels.first_hit_pruned(
                eps, hp, self.kappa, self.noise[row], self.v0, self.half_h, target, until, budget, leaf
            )
            if not (isinstance(hit, float) and np.isnan(hit)):
                return hit
        moments = self._moments(np.array(eps), np.array(hp), self.v0, row)
        if hasattr(moments, "lower_bound"):  # the closed forms that bound themselves are scanned by branch and bound
            return first_hit_pruned(moments, self.half_h, target, until, budget)
        if until * self.v0.size > budget:
            return None
        chunk = max(1, (1 << 22) // self.v0.size)
        for start in range(0, until, chunk):
            ts = np.arange(start, min(start + chunk, until), dtype=np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                hit = np.nonzero(moments.at(ts[:, None]) @ self.half_h <= target)[0]
            if hit.size:
                return int(ts[hit[0]])
        return until

    def kernels(self):
        """The compiled kernels (:mod:`.heavy_ball_kernels`) where they compute this loss — heavy ball, with no
        flat direction (κ = 0 has no closed form there) — and :func:`.compiled.compiled_kernels` gives them; else
        None."""
        if not self.family.compiled or not np.all(self.kappa > 0):
            return None
        return compiled_kernels()

    def stationary(self, eps, hp):
        lam, q, hh = eps[:, None] * self.kappa, eps[:, None] ** 2 * self.noise, hp[:, None]
        return self.family.stationary(forms, lam, q, hh) @ self.half_h

    def stability_edge(self, hp):
        """Largest stable ε: λ_max below the family's bound (:meth:`nqm.optim.TunedFamily.stable_lr_bound`)."""
        return self.family.stable_lr_bound(hp) / self.kappa.max()

    def search_range(self) -> tuple[float, float]:
        """The range of s searched, with ``hp = hp_of(s)``: log(1 − h) for h = β or γ in [10⁻⁶, 1 − 10⁻⁴]."""
        return H_LOG_RANGE

    @staticmethod
    def hp_of(s):
        return -np.expm1(s)

    def result_fields(self, hp) -> dict:
        """The tuned hyper-parameter as :class:`OptimalRuns` names it."""
        return {self.family.hyper: hp}

    def feasible_lr(self, hp, target):
        """Per row, the ε (just below the stability edge) at which the stationary loss reaches ``target``.

        The stationary loss increases with ε, from 0 to ∞ at the edge: bisection in log ε, 42 halvings (compiled
        where :meth:`kernels` gives them).
        """
        kernels = self.kernels()
        if kernels is not None:
            return kernels.feasible_lr(hp, self.kappa, self.noise, self.half_h, target)
        edge = self.stability_edge(hp) * (1 - 1e-9)
        lo, hi = np.log(edge) - np.log(1e15), np.log(edge)
        for _ in range(42):  # 34.5·2⁻⁴² = 8e-12 in log ε
            mid = 0.5 * (lo + hi)
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                above = ~(self.stationary(np.exp(mid), hp) < target)
            hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
        return np.exp(lo)


class DecayTunedLoss(TunedLoss):
    """E[L_t] of SGD with weight decay λ for rows of (ε, λ), with the problem's optimum θ* (towards which the decay
    does not pull): closed form per coordinate (:class:`~nqm.dynamics.DecayedSgdMoments`). λ is searched on log λ
    over [10⁻³·h_min, h_max], or held at ``decay``."""

    compressible = False  # the mean's path to the biased fixed point is not a sum of a- and b-weighted parts

    def kernels(self):
        """None: the compiled kernels know no weight decay."""
        return None

    def __init__(self, p: NoisyQuadratic, batch_sizes, init_var, precond, decay, decoupled: bool):
        self.pre = check_precond(p, precond)
        self.precond = None if precond is None else self.pre
        self.family = SGD
        self.decoupled = decoupled
        self.h, self.half_h = p.h, 0.5 * p.h
        self.optimum = np.zeros(p.d) if p.optimum is None else p.optimum
        self.batch_sizes = batch_sizes
        self.noise = injected_variance(p, batch_sizes[:, None], self.pre)
        self.v0 = check_init_var(init_var, p.d)
        self.range = decay_range(p) if decay == "tune" else (np.log(decay),) * 2

    def _decayed_kappa(self, decay):
        """The curvature a step ε multiplies, per row: p(h + λ) coupled, ph + λ decoupled."""
        return self.pre * (self.h + decay) if not self.decoupled else self.pre * self.h + decay

    def _moments(self, eps, hp, v0, rows=slice(None)):
        lam = hp[..., None]
        kappa = self._decayed_kappa(lam)
        pulled = lam * (1.0 if self.decoupled else self.pre) * self.optimum  # the pull per unit ε
        return DecayedSgdMoments(eps[..., None] * kappa, eps[..., None] ** 2 * self.noise[rows], v0, -pulled / kappa)

    def stationary(self, eps, hp):
        return self._moments(eps, hp, self.v0).stationary() @ self.half_h

    def stability_edge(self, hp):
        return 2.0 / self._decayed_kappa(np.asarray(hp)[..., None]).max(axis=-1)

    def search_range(self) -> tuple[float, float]:
        return self.range

    @staticmethod
    def hp_of(s):
        return np.exp(s)

    def result_fields(self, hp) -> dict:
        return {"weight_decay": hp}


class DecayHeavyBallLoss(TunedLoss):
    """Heavy ball with a held weight decay λ per batch size (a number, or one per row), for rows of (ε, β): E[x_t²]
    is the zero-mean second moment plus the square of the mean's path to the biased fixed point
    (:class:`PulledMoments`). Coupled: heavy ball's closed form at the curvature h + λ, x∞ = −λθ*/(h + λ).
    Decoupled (δ = ελ): the two-state form of ``θ_{t+1} = (1 + β − λ − δ)θ_t − β(1 − δ)θ_{t−1}`` started at
    θ_{−1} = θ₀/(1 − δ), with x∞ = −λ(1 − β)θ*/(ph + λ(1 − β))."""

    compressible = False

    def kernels(self):
        """None: the compiled kernels know no weight decay."""
        return None

    def __init__(self, p: NoisyQuadratic, batch_sizes, init_var, precond, decay, decoupled: bool):
        super().__init__(p, batch_sizes, init_var, precond, HEAVY_BALL)
        self.decay = np.broadcast_to(np.asarray(decay, dtype=np.float64), batch_sizes.shape)
        self.decoupled = decoupled
        self.pre, self.h = check_precond(p, precond), p.h
        # the curvature a step ε multiplies, per row: coupled decay is curvature p(h + λ)
        self.kappa = self.pre * (p.h + (0.0 if decoupled else self.decay[:, None]))
        if decoupled:
            self.kappa = np.broadcast_to(self.kappa, (batch_sizes.size, p.d))
        self.optimum = None if p.optimum is None or not np.any(p.optimum) else p.optimum

    def take(self, rows) -> DecayHeavyBallLoss:
        out = super().take(rows)
        out.decay = self.decay[rows]
        out.kappa = self.kappa if self.kappa.ndim == 1 else self.kappa[rows]
        return out

    def _parts(self, eps, hp, rows=slice(None)):
        """(λ, q, β, δ) per row and coordinate, the transition F and the noise's gains u = (−√q, 0)."""
        lam, q = eps[..., None] * self.kappa[rows], eps[..., None] ** 2 * self.noise[rows]
        beta = np.broadcast_to(hp[..., None], lam.shape)
        decay = self.decay[rows][..., None]
        delta = np.broadcast_to(eps[..., None] * decay if self.decoupled else 0.0, lam.shape)
        f = np.empty(lam.shape + (2, 2))
        f[..., 0, 0], f[..., 0, 1] = 1 + beta - lam - delta, -beta * (1 - delta)
        f[..., 1, 0], f[..., 1, 1] = 1.0, 0.0
        u = np.zeros(lam.shape + (2,))
        u[..., 0] = -np.sqrt(q)
        return lam, q, beta, delta, f, u

    def _fixed_point(self, lam, beta, delta, rows=slice(None)):
        """x∞ per row and coordinate (pull over λ + δ(1 − β)), None without an optimum."""
        if self.optimum is None:
            return None
        if self.decoupled:
            return -delta * (1 - beta) * self.optimum / (lam + delta * (1 - beta))
        decay = self.decay[rows][..., None]
        return -decay * self.optimum / (self.h + decay)

    def _moments(self, eps, hp, v0, rows=slice(None)):
        lam, q, beta, delta, f, u = self._parts(eps, hp, rows)
        if self.decoupled:
            start = (1.0, 1.0 / (1.0 - delta[..., :1]))  # θ_{−1} = θ₀/(1 − δ): one δ per row
            variance = TwoStateMoments(f, u, v0, start)
        else:
            variance = HeavyBallMoments(lam, q, v0, beta)
        x_inf = self._fixed_point(lam, beta, delta, rows)
        if x_inf is None:
            return variance
        offset = np.zeros(lam.shape) if not self.decoupled else delta / (1 - delta) * self.optimum
        response = TwoStateMoments(f, np.zeros(lam.shape + (2,)), 0.0, (1.0, 0.0))
        return PulledMoments(variance, response, x_inf, offset)

    def stationary(self, eps, hp):
        lam, q, beta, delta, f, u = self._parts(eps, hp)
        if self.decoupled:
            noise = two_state_stationary(f, u)[..., 0]
        else:
            noise = heavy_ball_stationary(lam, q, beta)
        x_inf = self._fixed_point(lam, beta, delta)
        return (noise if x_inf is None else noise + x_inf**2) @ self.half_h

    def stability_edge(self, hp):
        beta = np.asarray(hp)
        if not self.decoupled:
            return HEAVY_BALL.stable_lr_bound(beta) / self.kappa.max(axis=-1)
        # Jury on x' = a₁x + a₂x₋ with a₁ = 1 + β − εph − ελ, a₂ = −β(1 − ελ): ε(max ph + λ(1 + β)) < 2(1 + β),
        # and ελ < 1 for the decay itself
        return np.minimum(2 * (1 + beta) / (self.kappa.max(axis=-1) + self.decay * (1 + beta)), 1.0 / self.decay)

    def result_fields(self, hp) -> dict:
        return {"momentum": hp, "weight_decay": np.broadcast_to(self.decay, np.shape(hp)).copy()}


class PulledMoments:
    """E[x_t²] of a two-state run pulled towards x∞ (both states at rest there): the zero-mean second moment
    ``variance.at(t)`` plus the mean's square, ``E[s_t] = s∞ + F^t(s₀ − s∞)`` with s∞ = (x∞, x∞), E[s₀] =
    (0, ``offset``), and ``response``'s row e₀ᵀF^t."""

    def __init__(self, variance, response: TwoStateMoments, x_inf, offset):
        self.variance, self.response, self.x_inf, self.offset = variance, response, x_inf, offset

    def at(self, t):
        r0, r1 = self.response.row(np.asarray(t, dtype=np.float64))
        with np.errstate(over="ignore", invalid="ignore"):
            mean = self.x_inf - r0 * self.x_inf + r1 * (self.offset - self.x_inf)
            return self.variance.at(t) + mean**2


def decay_range(p: NoisyQuadratic) -> tuple[float, float]:
    """Where a tuned weight decay is searched, on log λ: [10⁻³·h_min, h_max]."""
    return np.log(1e-3 * p.h.min()), np.log(p.h.max())
