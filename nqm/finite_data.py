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
  left out of that epoch, PyTorch's ``drop_last``); the batches of one epoch are dependent (two of them have
  covariance −Σ_N/(N − 1)), epochs independent, and the expected losses exact too
  (:func:`~nqm.finite_data.epoch_correction`);
* ``"batches"``: every step B distinct examples drawn afresh: independent steps with the covariance above, so
  the training-loss dynamics are exact (:meth:`~nqm.FiniteDataset.training_problem`);
* ``"replacement"``: B examples with replacement: independent steps with Σ_N/B, exact too.

:meth:`~nqm.FiniteDataset.expected_losses` gives the exact losses of each; :meth:`~nqm.FiniteDataset.simulate`
draws them. The tuned runs (:meth:`~nqm.FiniteDataset.optimal_epochs`) use independent batches.
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

from .checks import (
    check_batch_size,
    check_batch_sizes,
    check_count,
    check_init_var,
    check_lr,
    check_memory,
    check_replicas,
)
from .curves import LossCurve, as_asked, check_record, exact_curve, loss_curve
from .dynamics import OptimalRuns, expected_loss, mean_path, optimal_steps_to_target
from .noise import correlate, step_coefficients
from .optim import as_optimizer, require_linear, require_no_decay
from .problem import NoisyQuadratic, check_precond

__all__ = ["FiniteDataset", "FiniteLeastSquares", "batch_factor", "distinct_batches", "epoch_correction", "SAMPLINGS"]

SAMPLINGS = ("epochs", "batches", "replacement")
"""How :meth:`~nqm.FiniteDataset.simulate` draws its minibatches."""

_GATHER_ELEMENTS = 1 << 22  # replicas × B × d gathered at once


@dataclass(frozen=True, eq=False)
class FiniteDataset:
    """N examples of an additive NQM in H's basis: ``h`` (d,) and the per-example noise ``examples`` (N, d).

    θ is measured from the population's optimum (θ* of the problem drawn from): every result here is the same
    wherever θ* lies, since the engines refuse weight decay, the one thing that sees it. An orthogonal ``basis`` Q
    (the problem's) makes :meth:`simulate` run the optimiser on the parameters x = Qθ, where sign descent and Adam
    act, as the problem's own simulator does; the exact results are basis-invariant."""

    h: np.ndarray
    examples: np.ndarray
    name: str = "finite dataset"
    basis: np.ndarray | None = None

    def __post_init__(self):
        checked = NoisyQuadratic(self.h, c=np.zeros(np.size(self.h)), basis=self.basis)  # validated as any problem's
        h = checked.h
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
        object.__setattr__(self, "basis", checked.basis)

    @classmethod
    def draw(cls, p: NoisyQuadratic, n: int, *, seed=0) -> FiniteDataset:
        """N examples of ``p``: ξ_n = F z_n with F Fᵀ = Σ and z_n standard normal, drawn once from ``seed``; the
        dataset keeps ``p``'s basis and measures θ from ``p``'s optimum (see the class)."""
        n = int(check_count("n (examples)", n))
        rng = np.random.default_rng(np.random.SeedSequence(seed))
        z = rng.standard_normal((n, p.d))
        xi = correlate(z, p, 1.0)
        return cls(p.h, xi, name=f"{n} examples of {p.name}", basis=p.basis)

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
        return batch_factor(self.n, batch_size, sampling)

    def training_problem(self, batch_size, sampling: str = "batches") -> NoisyQuadratic:
        """The training loss as an additive NQM at batch size B, exact for independent batches: curvature H,
        optimum θ_N, per-example covariance ``B·batch_factor·Σ_N`` (so that a batch of B has the covariance
        above). Shuffled epochs have no such problem: their batches are dependent
        (:func:`~nqm.finite_data.epoch_correction`)."""
        if _check_sampling(sampling) == "epochs":
            raise ValueError(
                "shuffled epochs have dependent batches: no noisy quadratic with independent noise describes them; "
                "use sampling='batches' (expected_losses computes epochs exactly)"
            )
        b = float(check_batch_size(batch_size, integer=True, single=True))
        scale = b * self.batch_factor(b, sampling)
        name = f"training loss, {self.name}"
        return NoisyQuadratic(self.h, sigma=scale * self.sigma, optimum=self.optimum, name=name)

    def optimal_epochs(self, target, batch_sizes, *, sampling: str = "batches", init_var=1.0) -> OptimalRuns:
        """Per batch size, the fewest steps of SGD (ε tuned, :func:`nqm.dynamics.optimal_steps_to_target`) until the
        expected training excess loss is at most ``target``, with independent batches (epochs: ``examples``/N).

        Each B has its own training problem (the factor (N − B)/(B(N − 1)) is in its Σ) and the start's second
        moment is ``init_var + θ_N²`` (θ₀ ~ N(0, init_var) is centred on the population's optimum, not θ_N)."""
        b = check_batch_sizes(batch_sizes)
        v0 = check_init_var(init_var, self.d) + self.optimum**2
        runs = [optimal_steps_to_target(self.training_problem(x, sampling), target, [x], init_var=v0) for x in b]
        fields = ("steps", "examples", "lr", "steps_continuous", "interior")
        joined = {k: np.concatenate([getattr(r, k) for r in runs]) for k in fields}
        return OptimalRuns(b, **joined)

    def expected_losses(
        self, opt, batch_size, steps: int, *, sampling: str = "batches", init_var=1.0, at=None
    ) -> tuple[LossCurve, LossCurve]:
        r"""Exact (training, population) excess losses of a linear optimiser from θ₀ ~ N(0, diag(init_var)), with
        independent batches or shuffled epochs.

        In the error x = θ − θ_N the run is the training problem's (:meth:`training_problem`) with E[x₀] = −θ_N,
        so ``E[x_t²]`` is its second moment from ``init_var + θ_N²`` and ``E[x_t]`` its mean path
        (:func:`nqm.dynamics.mean_path`); the population loss is ``½Σh E[(θ_N + x_t)²]``. Shuffled epochs add
        the covariance of the batches within an epoch (:func:`~nqm.finite_data.epoch_correction`).
        """
        opt = require_no_decay(require_linear(as_optimizer(opt), "FiniteDataset.expected_losses"), "FiniteDataset")
        epochs = _check_sampling(sampling) == "epochs"
        problem = self.training_problem(batch_size, "batches" if epochs else sampling)
        theta_n = self.optimum
        v0 = check_init_var(init_var, self.d)
        train = expected_loss(problem, opt, batch_size, steps, init_var=v0 + theta_n**2, at=at)
        t = np.asarray(train.steps)
        order = np.argsort(t, kind="stable")
        lam, sigma = step_coefficients(problem, opt, batch_size)
        start = -theta_n[:, None] * np.asarray(opt.initial)[None, :]
        mean = np.empty((t.size, self.d))
        mean[order] = mean_path(opt, lam, np.zeros_like(start), start, t[order])
        train_mean = train.mean
        if epochs:
            b = int(check_batch_size(batch_size, integer=True, single=True))
            train_mean = train_mean + 0.5 * epoch_correction(opt, lam, sigma, b, self.n, t) @ self.h
            train = exact_curve(t, train_mean)
        population = 0.5 * self.h @ theta_n**2 + mean @ (self.h * theta_n) + train_mean
        return train, exact_curve(t, population)

    def simulate(
        self, opt, batch_size, steps: int, replicas: int, *, sampling: str = "epochs", seed=0, init_var=1.0, at=None
    ) -> tuple[LossCurve, LossCurve]:
        """Monte Carlo (training, population) excess losses of ``opt`` with real minibatches of the N examples.

        Each replica starts from θ₀ ~ N(0, diag(init_var)) and draws its own batches (``sampling``, see the module);
        with "epochs" a replica's step t uses batch t mod ⌊N/B⌋ of its current epoch's permutation. Any optimiser
        value runs (its ``advance`` on P·(Hθ + mean of the batch's ξ)). One stream from ``seed``; single-threaded.
        """
        theta_n, q = self.optimum, self.basis
        pre = check_precond(NoisyQuadratic(self.h, c=np.zeros(self.d)), as_optimizer(opt).precond)
        # with a basis the run's coordinates are x = Qθ (rows: x = θQᵀ); P·g is formed in H's basis, then rotated
        to_theta = (lambda x: x) if q is None else (lambda x: x @ q)
        to_run = (lambda theta: theta) if q is None else (lambda theta: theta @ q.T)

        def gradient(x, idx):
            return to_run(pre * (self.h * to_theta(x) + _batch_mean(self.examples, idx, self.mean_noise)))

        return _simulate_batches(
            opt, self.n, self.d, batch_size, steps, replicas, sampling, seed, init_var, at, gradient,
            lambda x: 0.5 * np.square(to_theta(x) - theta_n) @ self.h, lambda x: 0.5 * np.square(to_theta(x)) @ self.h,
            to_run=to_run,
        )  # fmt: skip


@dataclass(frozen=True, eq=False)
class FiniteLeastSquares:
    r"""N least-squares examples drawn once: features ``x_n ~ N(0, diag(h))`` (rows of ``features``, H's basis) and
    labels ``y_n = x_nᵀθ* + ν_n`` with θ measured from θ* (so ``labels`` = ν, variance ``noise_var``).

    The training loss ``L_N(θ) = (1/2N)Σ(x_nᵀθ − y_n)²`` has the curvature ``H_N = XᵀX/N`` (dense: the sample
    covariance of the features) and the minimiser ``θ_N = H_N⁻¹Xᵀy/N``; the population excess is ``½θᵀHθ``. The
    per-example gradients ``g_n = x_n(x_nᵀθ − y_n)`` depend on θ, so their covariance about the training gradient,
    ``S_N(θ)``, shrinks as θ fits the examples — the training set's noise is not the population's. With
    independent batches the first two moments of θ (mean m, second moment M = E[θθᵀ], both dense) obey an exact
    recursion, since ``E[S_N(θ)]`` needs only m and M (:meth:`expected_losses`).
    """

    h: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    noise_var: float = 0.0
    name: str = "finite least squares"

    def __post_init__(self):
        h = NoisyQuadratic(self.h, c=np.zeros(np.size(self.h))).h
        x, y = np.array(self.features, dtype=np.float64), np.array(self.labels, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != h.size or y.shape != (x.shape[0],) or x.shape[0] < 2:
            raise ValueError(f"features must be (N, {h.size}) and labels (N,) with N >= 2, got {x.shape}, {y.shape}")
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise ValueError("features and labels must be finite")
        for a in (x, y):
            a.setflags(write=False)
        object.__setattr__(self, "h", h)
        object.__setattr__(self, "features", x)
        object.__setattr__(self, "labels", y)

    @classmethod
    def draw(cls, h, n: int, noise_var: float = 0.0, *, seed=0) -> FiniteLeastSquares:
        """N pairs with x ~ N(0, diag(h)) and label noise ν ~ N(0, noise_var), drawn once from ``seed``."""
        n = int(check_count("n (examples)", n))
        h = NoisyQuadratic(h, c=np.zeros(np.size(h))).h
        rng = np.random.default_rng(np.random.SeedSequence(seed))
        x = rng.standard_normal((n, h.size)) * np.sqrt(h)
        y = rng.standard_normal(n) * np.sqrt(noise_var)
        return cls(h, x, y, float(noise_var), name=f"{n} least-squares examples (d={h.size}, σ²={noise_var:g})")

    @property
    def n(self) -> int:
        return self.features.shape[0]

    @property
    def d(self) -> int:
        return self.h.size

    @property
    def hessian(self) -> np.ndarray:
        """H_N = XᵀX/N, the training loss's curvature (d, d)."""
        return self.features.T @ self.features / self.n

    @property
    def optimum(self) -> np.ndarray:
        """θ_N, the least-norm minimiser of the training loss (unique when N ≥ d)."""
        return np.linalg.lstsq(self.features, self.labels, rcond=None)[0]

    def gradient_covariance(self, mean, second) -> np.ndarray:
        r"""``E[S_N(θ)]`` (d, d) for θ with mean ``mean`` and second moment ``second`` = E[θθᵀ], with
        r_n = x_nᵀθ − y_n:

        .. math:: S_N(θ) = \frac1N\sum_n x_nx_n^\top r_n^2 - \bar g\bar g^\top,\qquad
                  \mathbb E[r_n^2] = x_n^\top M x_n - 2y_n x_n^\top m + y_n^2,

        and ``E[ḡḡᵀ] = H_N M H_N − H_N m bᵀ − b mᵀH_N + bbᵀ`` (ḡ = H_Nθ − b, b = Xᵀy/N)."""
        x, y, hn = self.features, self.labels, self.hessian
        b = x.T @ y / self.n
        r2 = np.einsum("ni,ij,nj->n", x, second, x) - 2 * y * (x @ mean) + y * y
        hm = hn @ mean
        gg = hn @ second @ hn - np.outer(hm, b) - np.outer(b, hm) + np.outer(b, b)
        return (x * r2[:, None]).T @ x / self.n - gg

    def moments(self, lr, batch_size, steps: int, *, sampling: str = "batches", init_var=1.0):
        """(m_t, M_t) for t = 0 … steps, shapes (steps + 1, d) and (steps + 1, d, d), of SGD ``θ ← θ − εg_B`` with
        independent batches, from θ₀ ~ N(0, diag(init_var)):

        ``m' = m − ε(H_N m − b)``, ``M' = AMAᵀ + A m cᵀ + c mᵀAᵀ + ccᵀ + ε²·factor·E[S_N(θ)]`` with A = I − εH_N,
        c = εb and the factor of :func:`~nqm.finite_data.batch_factor`."""
        eps = float(check_lr(lr))
        factor = batch_factor(self.n, batch_size, sampling)
        if sampling == "epochs":
            raise ValueError("shuffled epochs have dependent batches, whose exact dynamics nqm does not compute: "
                             "use sampling='batches'")  # fmt: skip
        steps = check_count("steps", steps)
        check_memory(8.0 * (steps + 1) * self.d * (self.d + 1), "FiniteLeastSquares.moments", "ask for fewer steps")
        hn = self.hessian
        a, c = np.eye(self.d) - eps * hn, eps * self.features.T @ self.labels / self.n
        m, big = np.zeros(self.d), np.diag(check_init_var(init_var, self.d))
        means, seconds = np.empty((steps + 1, self.d)), np.empty((steps + 1, self.d, self.d))
        means[0], seconds[0] = m, big
        for t in range(1, steps + 1):
            noise = eps * eps * factor * self.gradient_covariance(m, big)
            am = a @ m
            big = a @ big @ a.T + np.outer(am, c) + np.outer(c, am) + np.outer(c, c) + noise
            m = am + c
            means[t], seconds[t] = m, big
        return means, seconds

    def expected_losses(
        self, lr, batch_size, steps: int, *, sampling: str = "batches", init_var=1.0
    ) -> tuple[LossCurve, LossCurve]:
        """Exact (training, population) excess losses of SGD with independent batches at t = 0 … steps:
        ``½tr(H_N E[(θ − θ_N)(θ − θ_N)ᵀ])`` and ``½tr(H E[θθᵀ])``."""
        means, seconds = self.moments(lr, batch_size, steps, sampling=sampling, init_var=init_var)
        hn, opt = self.hessian, self.optimum
        cross = means @ hn @ opt
        train = 0.5 * (np.einsum("ij,tji->t", hn, seconds) - 2 * cross + opt @ hn @ opt)
        population = 0.5 * np.einsum("i,tii->t", self.h, seconds)
        t = np.arange(steps + 1)
        return exact_curve(t, train), exact_curve(t, population)

    def noise_scales(self, means, seconds) -> tuple[np.ndarray, np.ndarray]:
        r"""(training, population) B_noise along moments (m_t, M_t), ratios of expectations: the training set's
        ``E[tr(H_N S_N(θ))]/E[ḡᵀH_Nḡ]`` against the population's ``E[tr(HΣ(θ))]/E[GᵀHG]`` with
        Σ(θ) = HθθᵀH + (θᵀHθ + σ²)H (:class:`nqm.LeastSquares`)."""
        hn, h = self.hessian, self.h
        b = self.features.T @ self.labels / self.n
        train, population = [], []
        for m, big in zip(means, seconds):
            s = self.gradient_covariance(m, big)
            hm = hn @ m
            ghg = np.trace(hn @ hn @ big @ hn) - 2 * (hm @ hn @ b) + b @ hn @ b
            train.append(np.trace(hn @ s) / ghg)
            h3 = np.einsum("i,ii->", h**3, big)
            level = np.einsum("i,ii->", h, big) + self.noise_var
            population.append((h3 + level * (h @ h)) / h3)
        return np.array(train), np.array(population)

    def simulate(
        self, opt, batch_size, steps: int, replicas: int, *, sampling: str = "epochs", seed=0, init_var=1.0, at=None
    ) -> tuple[LossCurve, LossCurve]:
        """Monte Carlo (training, population) excess losses of ``opt`` on real minibatches of the N pairs (the
        batches as :meth:`~nqm.FiniteDataset.simulate` draws them); P applies in H's basis."""
        x, y, hn, opt_n = self.features, self.labels, self.hessian, self.optimum
        pre = check_precond(NoisyQuadratic(self.h, c=np.zeros(self.d)), as_optimizer(opt).precond)
        full = -(x.T @ y) / self.n

        def gradient(theta, idx):
            if idx is None:
                return pre * (theta @ hn + full)
            out = np.empty_like(theta)
            block = max(1, _GATHER_ELEMENTS // (idx.shape[1] * self.d))
            for r0 in range(0, idx.shape[0], block):
                xb, yb = x[idx[r0 : r0 + block]], y[idx[r0 : r0 + block]]
                residual = np.einsum("rbd,rd->rb", xb, theta[r0 : r0 + block]) - yb
                out[r0 : r0 + block] = np.einsum("rb,rbd->rd", residual, xb) / idx.shape[1]
            return pre * out

        def train_loss(theta):
            dev = theta - opt_n
            return 0.5 * np.einsum("ri,ij,rj->r", dev, hn, dev)

        return _simulate_batches(
            opt, self.n, self.d, batch_size, steps, replicas, sampling, seed, init_var, at, gradient, train_loss,
            lambda theta: 0.5 * np.square(theta) @ self.h,
        )  # fmt: skip


def batch_factor(n: int, batch_size, sampling: str = "batches") -> float:
    """A batch's gradient covariance over the examples' own, Σ_N: (N − B)/(B(N − 1)) for B distinct examples of N,
    1/B with replacement (the finite-population correction)."""
    n = check_count("n (examples)", n, 1)
    b = float(check_batch_size(batch_size, integer=True, single=True))
    if _check_sampling(sampling) == "replacement":
        return 1.0 / b
    if b > n:
        raise ValueError(f"batch_size B = {b:g} exceeds the N = {n} examples (without replacement)")
    return (n - b) / (b * (n - 1))


def epoch_correction(opt, lam, sigma, batch_size: int, n: int, t) -> np.ndarray:
    r"""E[x_T²] with shuffled epochs minus E[x_T²] with independent batches of B distinct examples, (len(t), d).

    An epoch takes K = ⌊N/B⌋ disjoint batches from one permutation of the N examples; a batch's mean noise has
    covariance V = (N − B)/(B(N − 1))·Σ_N, two batches of one epoch −Σ_N/(N − 1) = −V·B/(N − B) (two distinct
    examples drawn without replacement have covariance −Σ_N/(N − 1)), and epochs are independent. The noise of
    step s reaches the reported component at step T as σ·r_{T−1−s} with the impulse response r_k = e_Lᵀ F^k g of
    ``opt``'s transition (:mod:`nqm.optim`; SGD: r_k = −(1 − λ)^k), so the pairs within each epoch e add

    .. math:: \mathbb E[x_T^2] - \mathbb E[x_T^2]_\text{indep} = -\frac{\sigma^2 B}{N - B}\sum_e
              \Big[\Big(\sum_{s\in e} r_{T-1-s}\Big)^2 - \sum_{s\in e} r_{T-1-s}^2\Big]

    (per coordinate of H's basis; ``lam``, ``sigma`` from :func:`nqm.noise.step_coefficients` at B). The mean is
    that of independent batches: every batch's noise has mean 0."""
    t = np.asarray(t, dtype=np.int64)
    if n <= batch_size or t.size == 0:  # one batch per epoch: nothing within an epoch to correlate
        return np.zeros((t.size, np.size(lam)))
    per_epoch, horizon = n // batch_size, int(t.max())
    f, g = opt.transition(lam)
    state = np.broadcast_to(g, np.shape(lam) + g.shape[-1:]).astype(np.float64)
    prefix, prefix_sq = np.zeros((horizon + 1, np.size(lam))), np.zeros((horizon + 1, np.size(lam)))
    for k in range(horizon):  # prefix sums of r_k and r_k²
        r = state[:, opt.loss_index]
        prefix[k + 1], prefix_sq[k + 1] = prefix[k] + r, prefix_sq[k] + r * r
        state = np.einsum("dij,dj->di", f, state)
    out = np.zeros((t.size, np.size(lam)))
    for row, steps in enumerate(t):
        first = np.arange(0, steps, per_epoch)  # each epoch's first step s; it spans s … min(s + K, T) − 1
        hi, lo = steps - first, steps - np.minimum(first + per_epoch, steps)  # r indices k ∈ [lo, hi)
        within = (prefix[hi] - prefix[lo]) ** 2 - (prefix_sq[hi] - prefix_sq[lo])
        out[row] = within.sum(axis=0)
    return -(sigma**2) * batch_size / (n - batch_size) * out


def _simulate_batches(
    opt,
    n,
    d,
    batch_size,
    steps,
    replicas,
    sampling,
    seed,
    init_var,
    at,
    gradient,
    train_loss,
    test_loss,
    to_run=None,
) -> tuple[LossCurve, LossCurve]:
    """The loop both training sets simulate: replicas from θ₀ ~ N(0, diag(init_var)) (in the run's coordinates
    ``to_run(θ₀)`` where given), each step the optimiser's ``advance`` on ``gradient(x, batch indices)`` (indices
    (R, B), or None for every example), the two losses at the recorded steps."""  # fmt: skip
    opt = require_no_decay(as_optimizer(opt), "a finite training set")
    sampling = _check_sampling(sampling)
    b = int(check_batch_size(batch_size, integer=True, single=True))
    if sampling != "replacement" and b > n:
        raise ValueError(f"batch_size B = {b} exceeds the N = {n} examples (without replacement)")
    steps, replicas = check_count("steps", steps), check_replicas(replicas)
    asked = check_record(steps, at)
    rec = np.unique(asked)
    v0 = check_init_var(init_var, d)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    theta0 = rng.standard_normal((replicas, d)) * np.sqrt(v0)
    state = opt.init(theta0 if to_run is None else to_run(theta0))
    per_epoch, order = n // b, None
    train, test = np.empty((replicas, rec.size)), np.empty((replicas, rec.size))
    k = 0
    for t in range(steps + 1):
        x = opt.readout(state)
        if k < rec.size and rec[k] == t:
            train[:, k], test[:, k] = train_loss(x), test_loss(x)
            k += 1
        if t == steps:
            break
        if sampling == "epochs" and t % per_epoch == 0:
            order = np.argsort(rng.random((replicas, n)), axis=1)  # a permutation per replica
        idx = _batch_indices(rng, sampling, order, t % per_epoch, b, replicas, n)
        state = opt.advance(state, gradient(state[0], idx))
    return as_asked(loss_curve(rec, train), asked), as_asked(loss_curve(rec, test), asked)


def _batch_indices(rng, sampling, order, slot, b, replicas, n):
    """Each replica's batch (R, B): fresh with replacement, B distinct afresh, or slot ``slot`` of its epoch's
    permutation; None where a batch is every example."""
    if sampling == "replacement":
        return rng.integers(0, n, (replicas, b))
    if sampling == "batches":
        return distinct_batches(rng, replicas, n, b) if b < n else None
    return order[:, slot * b : (slot + 1) * b]


def distinct_batches(rng: np.random.Generator, replicas: int, n: int, b: int) -> np.ndarray:
    """(replicas, b) indices, each row b distinct examples of n, uniform over subsets.

    Small batches (b² ≤ n) draw b indices with replacement and redraw the rows that repeat one (a row repeats with
    probability below b²/(2n) ≤ ½, so a few rounds suffice): O(replicas·b) work instead of the O(replicas·n) of
    ranking n random keys per row, which larger batches use. Rejecting whole rows keeps every ordered b-tuple of
    distinct indices equally likely."""
    if b * b > n:
        return np.argpartition(rng.random((replicas, n)), b - 1, axis=1)[:, :b]
    out = rng.integers(0, n, (replicas, b))
    redo = np.arange(replicas)
    while True:
        ranked = np.sort(out[redo], axis=1)
        redo = redo[np.any(ranked[:, 1:] == ranked[:, :-1], axis=1)]
        if redo.size == 0:
            return out
        out[redo] = rng.integers(0, n, (redo.size, b))


def _batch_mean(rows_of, idx, everything):
    """Mean of ``rows_of`` over each row of ``idx`` (None: ``everything``, the mean over all), in blocks that bound
    the gather's memory."""
    if idx is None:
        return everything
    out = np.empty((idx.shape[0],) + rows_of.shape[1:])
    block = max(1, _GATHER_ELEMENTS // (idx.shape[1] * max(1, int(np.prod(rows_of.shape[1:])))))
    for r0 in range(0, idx.shape[0], block):
        out[r0 : r0 + block] = rows_of[idx[r0 : r0 + block]].mean(axis=1)
    return out


def _check_sampling(sampling: str) -> str:
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    return sampling
