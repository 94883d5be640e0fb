r"""A finite training set: N examples drawn once, revisited in epochs, minibatches without replacement.

Example n of the additive NQM has the loss ``ℓ_n(θ) = ½θᵀHθ + ξ_nᵀθ`` (gradient ``Hθ + ξ_n``), its ξ_n drawn once
from (0, Σ). The population loss is ``L(θ) = ½θᵀHθ`` (θ* = 0); the **training loss** is the examples' mean,

.. math:: L_N(\theta) = \tfrac12\theta^\top H\theta + \bar\xi^\top\theta
          = \tfrac12(\theta - \theta_N)^\top H(\theta - \theta_N) - \tfrac12\theta_N^\top H\theta_N,
          \qquad \theta_N = -H^{-1}\bar\xi,

so the empirical minimiser θ_N is not θ*. About the training gradient ``Hθ + ξ̄``, a minibatch of B examples has
noise covariance

.. math:: \operatorname{Cov} = \Sigma_N\,\frac{N - B}{B(N - 1)}\ \text{(B distinct examples)},\qquad
          \frac{\Sigma_N}{B}\ \text{(with replacement)},\qquad
          \Sigma_N = \frac1N\sum_n(\xi_n - \bar\xi)(\xi_n - \bar\xi)^\top,

the finite-population correction (McCandlish et al. 2018, arXiv:1812.06162, the remark after eq. 2.3): at B = N
a batch is the whole set and the noise vanishes. Smith & Le 2018 (arXiv:1710.06451) read the noise temperature as
ε(N/B − 1).

Three ways to draw the batches (``sampling``):

* ``"epochs"`` (as training does): each epoch a fresh permutation, cut into ⌊N/B⌋ batches of B (a remainder is
  left out of that epoch, PyTorch's ``drop_last``); the batches of one epoch are dependent;
* ``"batches"``: every step B distinct examples drawn afresh: independent steps with the covariance above, so
  the training-loss dynamics are exact (:meth:`~nqm.FiniteDataset.training_problem`);
* ``"replacement"``: B examples with replacement: independent steps with Σ_N/B, exact too.

Shuffled epochs are simulated (:meth:`~nqm.FiniteDataset.simulate`) and held against the independent-batch law.
Reported losses are excesses over their minima: the training loss ``L_N(θ) − L_N(θ_N) = ½(θ − θ_N)ᵀH(θ − θ_N)``
and the population loss ``L(θ) = ½θᵀHθ``.

Example:
    >>> import nqm
    >>> data = nqm.FiniteDataset.draw(nqm.NoisyQuadratic.zhang2019(20), 64, seed=0)
    >>> data.n, data.d, round(data.batch_factor(64), 12), round(data.batch_factor(1), 12)
    (64, 20, 0.0, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import check_batch_size, check_count, check_init_var, check_replicas
from .curves import LossCurve, exact_curve
from .dynamics import expected_loss, mean_path
from .montecarlo.results import as_asked, check_record, loss_curve
from .noise import step_coefficients
from .optim import as_optimizer, require_linear, require_no_decay
from .problem import NoisyQuadratic, check_precond

__all__ = ["FiniteDataset", "SAMPLINGS"]

SAMPLINGS = ("epochs", "batches", "replacement")
"""How :meth:`~nqm.FiniteDataset.simulate` draws its minibatches."""

_GATHER_ELEMENTS = 1 << 22  # replicas × B × d gathered at once


@dataclass(frozen=True, eq=False)
class FiniteDataset:
    """N examples of an additive NQM in H's basis: ``h`` (d,) and the per-example noise ``examples`` (N, d)."""

    h: np.ndarray
    examples: np.ndarray
    name: str = "finite dataset"

    def __post_init__(self):
        h = NoisyQuadratic(self.h, c=np.zeros(np.size(self.h))).h  # same validation as every problem
        xi = np.array(self.examples, dtype=np.float64)
        if xi.ndim != 2 or xi.shape[1] != h.size:
            raise ValueError(f"examples must have shape (N, {h.size}), got {np.shape(self.examples)}")
        if xi.shape[0] < 2:
            raise ValueError(f"examples needs N >= 2 examples, got {xi.shape[0]}")
        if not np.all(np.isfinite(xi)):
            raise ValueError("examples contains non-finite values")
        xi.setflags(write=False)
        object.__setattr__(self, "h", h)
        object.__setattr__(self, "examples", xi)

    @classmethod
    def draw(cls, p: NoisyQuadratic, n: int, *, seed=0) -> FiniteDataset:
        """N examples of ``p``: ξ_n = F z_n with F Fᵀ = Σ and z_n standard normal, drawn once from ``seed``."""
        n = int(check_count("n (examples)", n))
        rng = np.random.default_rng(np.random.SeedSequence(seed))
        z = rng.standard_normal((n, p.d))
        xi = z * np.sqrt(p.c) if p.is_diagonal or p.sigma is None else z @ p.sigma_factor.T
        return cls(p.h, xi, name=f"{n} examples of {p.name}")

    @property
    def n(self) -> int:
        return self.examples.shape[0]

    @property
    def d(self) -> int:
        return self.h.size

    @property
    def mean_noise(self) -> np.ndarray:
        """ξ̄, the training gradient's offset at θ = 0."""
        return self.examples.mean(axis=0)

    @property
    def optimum(self) -> np.ndarray:
        """θ_N = −H⁻¹ξ̄, the minimiser of the training loss (the population's is 0)."""
        return -self.mean_noise / self.h

    @property
    def sigma(self) -> np.ndarray:
        """Σ_N = (1/N)Σ(ξ_n − ξ̄)(ξ_n − ξ̄)ᵀ, the examples' covariance about their mean, (d, d)."""
        centred = self.examples - self.mean_noise
        return centred.T @ centred / self.n

    def batch_factor(self, batch_size, sampling: str = "batches") -> float:
        """The batch's noise covariance over Σ_N: (N − B)/(B(N − 1)) for B distinct examples, 1/B with
        replacement."""
        b = float(check_batch_size(batch_size, integer=True))
        if _check_sampling(sampling) == "replacement":
            return 1.0 / b
        if b > self.n:
            raise ValueError(f"batch_size B = {b:g} exceeds the N = {self.n} examples (without replacement)")
        return (self.n - b) / (b * (self.n - 1))

    def training_problem(self, batch_size, sampling: str = "batches") -> NoisyQuadratic:
        """The training loss as an additive NQM at batch size B, exact for independent batches: curvature H,
        optimum θ_N, per-example covariance ``B·batch_factor·Σ_N`` (so that a batch of B has the covariance
        above). Shuffled epochs have no such problem: their batches are dependent."""
        if _check_sampling(sampling) == "epochs":
            raise ValueError("shuffled epochs have dependent batches and no exact dynamics: use sampling='batches'")
        b = float(check_batch_size(batch_size, integer=True))
        scale = b * self.batch_factor(b, sampling)
        name = f"training loss, {self.name}"
        return NoisyQuadratic(self.h, sigma=scale * self.sigma, optimum=self.optimum, name=name)

    def expected_losses(
        self, opt, batch_size, steps: int, *, sampling: str = "batches", init_var=1.0, at=None
    ) -> tuple[LossCurve, LossCurve]:
        r"""Exact (training, population) excess losses of SGD or heavy ball with independent batches, from
        θ₀ ~ N(0, diag(init_var)).

        In the error x = θ − θ_N the run is the training problem's (:meth:`training_problem`) with E[x₀] = −θ_N,
        so ``E[x_t²]`` is its second moment from ``init_var + θ_N²`` and ``E[x_t]`` its mean path
        (:func:`nqm.dynamics.mean_path`); the population loss is ``½Σh E[(θ_N + x_t)²]``.
        """
        opt = require_no_decay(require_linear(as_optimizer(opt), "FiniteDataset.expected_losses"), "FiniteDataset")
        problem = self.training_problem(batch_size, sampling)
        theta_n = self.optimum
        v0 = check_init_var(init_var, self.d)
        train = expected_loss(problem, opt, batch_size, steps, init_var=v0 + theta_n**2, at=at)
        t = np.asarray(train.steps)
        order = np.argsort(t, kind="stable")
        lam, _ = step_coefficients(problem, opt, batch_size)
        start = -theta_n[:, None] * np.asarray(opt.initial)[None, :]
        mean = np.empty((t.size, self.d))
        mean[order] = mean_path(opt, lam, np.zeros_like(start), start, t[order])
        population = 0.5 * self.h @ theta_n**2 + mean @ (self.h * theta_n) + train.mean
        return train, exact_curve(t, population)

    def simulate(
        self, opt, batch_size, steps: int, replicas: int, *, sampling: str = "epochs", seed=0, init_var=1.0, at=None
    ) -> tuple[LossCurve, LossCurve]:
        """Monte Carlo (training, population) excess losses of ``opt`` with real minibatches of the N examples.

        Each replica starts from θ₀ ~ N(0, diag(init_var)) and draws its own batches (``sampling``, see the module);
        with "epochs" a replica's step t uses batch t mod ⌊N/B⌋ of its current epoch's permutation. Any optimiser
        value runs (its ``update`` on P·(Hθ + mean of the batch's ξ)). One stream from ``seed``; single-threaded.
        """
        opt = require_no_decay(as_optimizer(opt), "FiniteDataset.simulate")
        sampling = _check_sampling(sampling)
        b = int(check_batch_size(batch_size, integer=True))
        if sampling != "replacement" and b > self.n:
            raise ValueError(f"batch_size B = {b} exceeds the N = {self.n} examples (without replacement)")
        steps, replicas = check_count("steps", steps), check_replicas(replicas)
        asked = check_record(steps, at)
        rec = np.unique(asked)
        v0 = check_init_var(init_var, self.d)
        pre = check_precond(NoisyQuadratic(self.h, c=np.zeros(self.d)), opt.precond)
        rng = np.random.default_rng(np.random.SeedSequence(seed))
        theta = rng.standard_normal((replicas, self.d)) * np.sqrt(v0)
        state = opt.init(theta)
        per_epoch = self.n // b
        order = None
        train, test = np.empty((replicas, rec.size)), np.empty((replicas, rec.size))
        theta_n, k = self.optimum, 0
        for t in range(steps + 1):
            x = opt.readout(state)
            if k < rec.size and rec[k] == t:
                train[:, k] = 0.5 * np.square(x - theta_n) @ self.h
                test[:, k] = 0.5 * np.square(x) @ self.h
                k += 1
            if t == steps:
                break
            if sampling == "epochs" and t % per_epoch == 0:
                order = np.argsort(rng.random((replicas, self.n)), axis=1)  # a permutation per replica
            idx = self._batch_indices(rng, sampling, order, t % per_epoch, b, replicas)
            noise = self._batch_mean(idx)
            state = opt.update(state, pre * (self.h * state[0] + noise))
        return as_asked(loss_curve(rec, train), asked), as_asked(loss_curve(rec, test), asked)

    def _batch_indices(self, rng, sampling, order, slot, b, replicas):
        if sampling == "replacement":
            return rng.integers(0, self.n, (replicas, b))
        if sampling == "batches":
            return np.argpartition(rng.random((replicas, self.n)), b - 1, axis=1)[:, :b] if b < self.n else None
        return order[:, slot * b : (slot + 1) * b]

    def _batch_mean(self, idx):
        """Mean of each row's examples (rows of ``idx``; None: all N), in blocks that bound the gather's memory."""
        if idx is None:  # every example: the training gradient itself
            return self.mean_noise
        out = np.empty((idx.shape[0], self.d))
        rows = max(1, _GATHER_ELEMENTS // (idx.shape[1] * self.d))
        for r0 in range(0, idx.shape[0], rows):
            out[r0 : r0 + rows] = self.examples[idx[r0 : r0 + rows]].mean(axis=1)
        return out


def _check_sampling(sampling: str) -> str:
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    return sampling
