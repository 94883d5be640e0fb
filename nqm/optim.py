r"""Optimisers as values: each is defined once here, and every engine consumes it.

An optimiser is a small immutable value with two faces, as an optax transform carries ``init`` beside
``update``:

* its **update**, for a user's loop and the simulators: ``init(x)`` gives the state a run starts from (θ₀ and
  whatever the optimiser carries), ``update(state, g)`` the next state from the stochastic gradient g as PyTorch
  and optax apply the rule (preconditioner and weight decay included), ``advance(state, step)`` the same rule on
  ``step = P g`` already preconditioned and without a linear optimiser's decay (what the simulators run in
  whatever basis they work, adding the decay relative to θ*), and ``readout(state)`` the iterate whose loss is
  reported;
* its **transition**, for the exact engines: per coordinate of H's basis the state ``s`` (θ first) of a
  *linear* optimiser obeys

  .. math:: s_{t+1} = F\,s_t + g\,\sigma z_t,\qquad s_0 = e\,\theta_0,\qquad z_t \sim \mathcal N(0, 1),

  with ``λ = εph`` (the step times the preconditioned curvature) and ``σ = εp√(c/B)`` (the standard deviation
  of the step's noise, :func:`nqm.noise.step_coefficients`). ``transition(lam)`` gives ``(F, g)`` as arrays
  (n, m, m) and (n, m); ``initial`` is e and ``loss_index`` the component whose ½hE[·²] is the loss. Exact
  dynamics (:mod:`nqm.dynamics`), skip-ahead and the fused CUDA kernel (:mod:`nqm.montecarlo.counter`) all use it.

The linear optimisers (Zhang et al. 2019, arXiv:1907.04164, §3):

* ``sgd(lr, precond)``: ``θ ← θ − εPg``;
* ``heavy_ball(lr, momentum, precond)``: ``v ← βv + Pg``, ``θ ← θ − εv``, v₀ = 0; its transition is written
  on positions (θ_t, θ_{t−1}): ``θ_{t+1} = (1 + β − λ)θ_t − βθ_{t−1} − σz``;
* ``nesterov(lr, momentum, precond)`` in PyTorch's form: ``v ← βv + Pg``, ``θ ← θ − ε(Pg + βv)``, v₀ = 0; its
  transition is written on (θ, εv): ``εv' = βεv + λθ + σz``, ``θ' = θ − (1 + β)(λθ + σz) − β²εv``;
* ``ema(inner, gamma)``: iterate averaging ``θ̃ ← γθ̃ + (1 − γ)θ``, θ̃₀ = θ₀, of any linear optimiser; the loss
  of θ̃ is reported.

**Weight decay** λ (``sgd`` and ``heavy_ball``, ``weight_decay=λ``) pulls θ towards 0, coupled (L2: ``g + λθ``
enters the update, as PyTorch's SGD) or ``decoupled`` (``θ ← (1 − ελ)θ − ε·update``: PyTorch's convention, which
ties the decay to ε; Loshchilov & Hutter 2019, arXiv:1711.05101, decouple it further, decaying by the schedule's
multiplier times λ, independent of ε). It stays linear, so its dynamics are exact. In the error x = θ − θ* on
which every engine works, coupled decay is the curvature h + λ (:func:`nqm.noise.step_coefficients` adds it)
plus a constant pull −εpλθ*; decoupled decay enters the transition (δ = ελ: SGD's ``1 − λ − δ``; heavy ball's
``θ_{t+1} = (1 + β − λ − δ)θ_t − β(1 − δ)θ_{t−1}``, started at ``θ_{−1} = θ₀/(1 − δ)``) with the pull −δθ*
(−δ(1 − β)θ* on heavy ball's positions). The pull (:func:`nqm.noise.decay_pull`) is zero when the problem's
optimum θ* is 0; otherwise the mean settles at the biased fixed point :func:`nqm.dynamics.decay_fixed_point`.
Coupled and decoupled differ for SGD only when P ≠ I. The loss reported is the model's L(θ), not the
regularised objective.

Optimisers that are not linear have no transition; the exact engines refuse them with :func:`require_linear`,
and the simulators run their ``advance``. Their nonlinearity acts elementwise in the simulator's coordinates (the
parameter coordinates x = Qθ of a rotated problem, not H's eigenbasis), as in a real model:

* ``sign_sgd(lr)``: ``θ ← θ − ε sign(g)`` (Bernstein et al. 2018, arXiv:1802.04434);
* ``signum(lr, momentum)``: ``m ← βm + (1 − β)g``, ``θ ← θ − ε sign(m)``, m₀ = 0 (ibid.);
* ``rmsprop(lr, beta2, eps)`` in PyTorch's form: ``v ← β₂v + (1 − β₂)g²``, ``θ ← θ − εg/(√v + eps)``, v₀ = 0;
* ``adam(lr, beta1, beta2, eps)`` in PyTorch's form (Kingma & Ba 2015, arXiv:1412.6980), bias-corrected:
  ``m ← β₁m + (1 − β₁)g``, ``v ← β₂v + (1 − β₂)g²``, ``θ ← θ − ε m̂/(√v̂ + eps)`` with ``m̂ = m/(1 − β₁ᵗ)``,
  ``v̂ = v/(1 − β₂ᵗ)`` at update t = 1, 2, …;
* ``adamw(lr, beta1, beta2, eps, weight_decay)``: Adam with decoupled decay, ``θ ← (1 − ελ)θ`` before the Adam
  step (PyTorch's AdamW, whose decay is ε·λ; Loshchilov & Hutter 2019, arXiv:1711.05101, scale λ by the
  schedule's multiplier instead);
* ``normalized_sgd(lr)``: ``θ ← θ − ε g/‖g‖`` (no step where g = 0).

Example:
    >>> import numpy as np
    >>> from nqm import optim
    >>> opt = optim.nesterov(0.1, 0.9)
    >>> F, g = opt.transition(np.array([0.5]))      # λ = 0.5: F = [[1 − 1.9λ, −β²], [λ, β]], g = [−(1 + β), 1]
    >>> F[0].round(12).tolist(), g[0].tolist()
    ([[0.05, -0.81], [0.5, 0.9]], [-1.9, 1.0])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .checks import as_real, check_lr, check_positive_vector, check_real, check_unit_interval

__all__ = [
    "Optimizer",
    "Sgd",
    "HeavyBall",
    "Nesterov",
    "Ema",
    "sgd",
    "heavy_ball",
    "nesterov",
    "ema",
    "SignSgd",
    "Signum",
    "RmsProp",
    "Adam",
    "NormalizedSgd",
    "sign_sgd",
    "signum",
    "rmsprop",
    "adam",
    "adamw",
    "normalized_sgd",
    "qhm",
    "lion",
    "Qhm",
    "Lion",
    "as_optimizer",
    "is_plain_sgd",
    "split_average",
    "require_linear",
    "require_no_decay",
    "stable_lr_bound",
    "FAMILIES",
    "TunedFamily",
    "SGD",
    "HEAVY_BALL",
    "NESTEROV",
    "EMA",
    "QHM",
    "qhm_family",
    "tuned_family",
]


def _check_precond(precond):
    """A preconditioner's diagonal, frozen (the value is immutable); its length is checked by the engines."""
    if precond is None:
        return None
    pre = check_positive_vector("precond (diagonal of P in H's basis)", precond).copy()
    pre.setflags(write=False)
    return pre


# each hyper-parameter field of an optimiser value and the range it must lie in: (low, high, low_open, high_open)
_RANGES = {
    "lr": (0.0, np.inf, True, True),
    "momentum": (0.0, 1.0, False, True),
    "gamma": (0.0, 1.0, False, True),
    "nu": (0.0, 1.0, False, False),
    "beta1": (0.0, 1.0, False, True),
    "beta2": (0.0, 1.0, False, True),
    "eps": (0.0, np.inf, True, True),
    "weight_decay": (0.0, np.inf, False, True),
}


class Optimizer(ABC):
    """What every optimiser value offers. ``linear`` says whether it has a transition (exact engines).

    A value built directly (``HeavyBall(0.1, 1.5)``) is checked as the factories check it: each hyper-parameter in
    its range (the tuners' arrays of β or γ elementwise), ``decoupled`` a bool."""

    linear = False
    elementwise = True  # each coordinate's update reads only that coordinate (the simulators may tile them)
    lr: float
    precond: Any

    def __post_init__(self):
        for name, (low, high, low_open, high_open) in _RANGES.items():
            if name not in type(self).__dataclass_fields__ or not type(self).__dataclass_fields__[name].init:
                continue
            value = as_real(name, getattr(self, name))
            inside = (value > low if low_open else value >= low) & (value < high if high_open else value <= high)
            if not np.all(np.isfinite(value) & inside):
                left, right = "(" if low_open else "[", ")" if high_open else "]"
                raise ValueError(
                    f"{name} must be finite and in {left}{low:g}, {high:g}{right}, got {getattr(self, name)!r}"
                )
        if not isinstance(getattr(self, "decoupled", False), (bool, np.bool_)):
            raise TypeError(f"decoupled must be True or False, got {self.decoupled!r}")

    @abstractmethod
    def init(self, x):
        """The state a run starts from, θ₀ = ``x`` (rows of replicas); a tuple of arrays."""

    def update(self, state, grad):
        r"""One step of the whole rule from the minibatch gradient ``grad`` = g at θ = ``state[0]`` (new arrays; the
        state is not modified), as PyTorch and optax apply it: the preconditioner (diagonal in θ's coordinates) and
        the weight decay included. Coupled decay adds λθ to g before P (``θ ← θ − εP(g + λθ)``); decoupled decay
        takes ``δθ`` (δ = ελ) off the new θ, from the old one (``θ ← (1 − δ)θ − εPg``); AdamW decays inside its
        own rule. ``optim.sgd(0.1, weight_decay=0.5).update((θ,), 0·θ)`` is ``(0.95θ,)``."""
        theta = state[0]
        coupled, decoupled = getattr(self, "coupled_decay", 0.0), getattr(self, "decoupled_rate", 0.0)
        if coupled:
            grad = grad + coupled * theta
        new = self.advance(state, grad if self.precond is None else self.precond * grad)
        if decoupled:
            new = (new[0] - decoupled * theta, *new[1:])
        return new

    @abstractmethod
    def advance(self, state, step):
        """The next state from ``step`` = P·g already preconditioned, without a linear optimiser's weight decay
        (new arrays): what the simulators run in their own basis, where θ* and the decay's pull are theirs
        (``nqm.montecarlo.basis.WorkingBasis.step``). AdamW's decay, part of its rule, is applied here too."""

    def readout(self, state):
        """The iterate whose loss is reported."""
        return state[0]


class _Linear(Optimizer):
    linear = True
    initial: tuple[float, ...]
    loss_index = 0
    # no weight decay unless an optimiser has it (_Decaying)
    weight_decay = 0.0
    decoupled = False
    coupled_decay = 0.0
    decoupled_rate = 0.0

    def forcing(self, pre) -> np.ndarray:
        """The constant pull on the state per unit of the optimum θ*, (d, m): zero without weight decay."""
        return np.zeros((np.size(pre), self.order))

    def start_offset(self) -> np.ndarray:
        """The state's start s₀ = e·x₀ + offset·θ* in the error x = θ − θ*, per unit θ* (m,): zero unless the
        start itself is written through θ (decoupled heavy ball's θ_{−1} = θ₀/(1 − δ))."""
        return np.zeros(self.order)

    @property
    def order(self) -> int:
        """m, the number of state components per coordinate."""
        return len(self.initial)

    def closed_form(self, forms, lam, sigma, v0):
        """t ↦ E[(loss component)_t²] (T, n) at integer steps t (T, 1) in closed form, picked from ``forms``
        (:mod:`nqm.dynamics.moments.forms`, handed in by the exact engines) for the per-coordinate ``lam`` = εph,
        noise ``sigma`` = εp√(c/B) and start ``v0``; None where this optimiser has none there (the engines then
        power its moment map)."""
        return None

    def rest_rate(self, lam):
        """``1 − F``'s action on the position when the state is at rest (θ_t = θ_{t−1}), per coordinate for
        ``lam`` = εph: what weight decay's fixed point divides its pull by (:func:`nqm.dynamics.decay_fixed_point`).
        None for an optimiser that carries no weight decay."""
        return None

    @abstractmethod
    def transition(self, lam):
        """(F (..., m, m), g (..., m)) per coordinate for ``lam`` = εph (...): s' = F s + g σ z.

        The hyper-parameters (β, γ) may be arrays broadcasting against ``lam``: the tuners of
        :mod:`nqm.dynamics` evaluate many of them at once."""


class _Decaying(_Linear):
    r"""Weight decay λ on a linear optimiser: coupled (L2, ``g + λθ`` enters the update, as PyTorch's
    ``weight_decay``) or decoupled (``θ ← (1 − ελ)θ − ε·update``, PyTorch's convention; Loshchilov & Hutter 2019,
    arXiv:1711.05101, scale λ by the schedule's multiplier instead of by ε).

    The decay acts on θ itself, so it pulls towards 0, not towards the problem's optimum θ* (H's basis,
    ``NoisyQuadratic.optimum``). In the error x = θ − θ*, on which every engine works:

    * coupled: the gradient gains λ(x + θ*), so x sees the curvature h + λ (``coupled_decay`` is added to h where λ
      is formed, :func:`nqm.noise.step_coefficients`) and a constant pull −εpλθ*;
    * decoupled: δ = ελ (``decoupled_rate``) enters the transition itself, with the pull −δθ* on θ (for heavy ball
      the pull on x is −δ(1 − β)θ*: the momentum term carries the rest).

    ``forcing(pre)`` is that constant pull per unit θ*, per coordinate (d, m): ``s' = F s + forcing·θ* + gσz``;
    ``start_offset()`` what the start adds per unit θ* (decoupled heavy ball's θ_{−1} = θ₀/(1 − δ) is not x₀).
    The reported loss is the model's L(θ) = ½(θ − θ*)ᵀH(θ − θ*), not the regularised objective. The decay lives in
    the transition and in :meth:`Optimizer.update`; ``advance`` does not carry it: the simulators' general path
    writes it on θ = x + θ* around ``advance`` (``nqm.montecarlo.basis.WorkingBasis.step``), and the engines that
    do neither refuse a decaying optimiser (:func:`require_no_decay`).
    """

    @property
    def coupled_decay(self) -> float:
        """λ where it acts as curvature (coupled decay), else 0."""
        return 0.0 if self.decoupled else self.weight_decay

    @property
    def decoupled_rate(self) -> float:
        """δ = ελ where the decay is decoupled, else 0."""
        return self.lr * self.weight_decay if self.decoupled else 0.0

    def forcing(self, pre) -> np.ndarray:
        """The constant pull on the state per unit θ*, (d, m) for the (d,) diagonal ``pre`` of P."""
        out = np.zeros((np.size(pre), self.order))
        out[:, 0] = -self.lr * self.weight_decay * (self._pull_share() if self.decoupled else pre)
        return out

    def _pull_share(self) -> float:
        return 1.0

    def rest_rate(self, lam):
        """``λ + δ·s``: λ = εph (coupled decay already in it), δ the decoupled rate and s the share of its pull on
        the position (1, or 1 − β for heavy ball: the momentum carries the rest). Formed from λ and δ rather than
        from F's entries, which would cancel when λ, δ ≪ 1."""
        return lam + self.decoupled_rate * self._pull_share()


@dataclass(frozen=True, eq=False)
class Sgd(_Decaying):
    """Plain (optionally preconditioned) SGD, ``θ ← θ − εPg``, with optional weight decay (coupled or decoupled,
    :mod:`nqm.optim`)."""

    lr: float
    precond: Any = None
    weight_decay: float = 0.0
    decoupled: bool = False
    initial = (1.0,)

    def transition(self, lam):
        lam = np.asarray(lam, dtype=np.float64)
        return (1.0 - lam - self.decoupled_rate)[..., None, None], np.full(lam.shape + (1,), -1.0)

    def closed_form(self, forms, lam, sigma, v0):
        return lambda t: forms.sgd_variance(lam + self.decoupled_rate, sigma**2, v0, t)

    def init(self, x):
        return (x,)

    def advance(self, state, step):
        return (state[0] - self.lr * step,)


@dataclass(frozen=True, eq=False)
class HeavyBall(_Decaying):
    """Heavy-ball momentum, ``v ← βv + Pg``, ``θ ← θ − εv``, v₀ = 0 (effective step ε/(1 − β)), with optional
    weight decay (coupled or decoupled, :mod:`nqm.optim`). Decoupled, ``θ ← (1 − δ)θ − εv`` (δ = ελ; SGDW), its
    positions obey ``θ_{t+1} = (1 + β − λ − δ)θ_t − β(1 − δ)θ_{t−1} − σz`` with ``θ_{−1} = θ₀/(1 − δ)`` (v₀ = 0)."""

    lr: float
    momentum: float
    precond: Any = None
    weight_decay: float = 0.0
    decoupled: bool = False

    @property
    def initial(self):
        return (1.0, 1.0 / (1.0 - self.decoupled_rate))  # (θ₀, θ_{−1}): v₀ = 0

    def _pull_share(self) -> float:
        return 1.0 - self.momentum

    def start_offset(self) -> np.ndarray:
        # x_{−1} = θ₀/(1 − δ) − θ* = x₀/(1 − δ) + θ*·δ/(1 − δ)
        delta = self.decoupled_rate
        return np.array([0.0, delta / (1.0 - delta)])

    def transition(self, lam):
        lam = np.asarray(lam, dtype=np.float64)
        beta, delta = self.momentum, self.decoupled_rate
        f = np.empty(lam.shape + (2, 2))
        f[..., 0, 0], f[..., 0, 1] = 1.0 + beta - lam - delta, -beta * (1.0 - delta)
        f[..., 1, 0], f[..., 1, 1] = 1.0, 0.0
        g = np.zeros(lam.shape + (2,))
        g[..., 0] = -1.0
        return f, g

    def closed_form(self, forms, lam, sigma, v0):
        if not self.decoupled_rate and np.all((lam > 0) & (lam < 2 * (1 + self.momentum))):
            return forms.HeavyBallMoments(lam, sigma**2, v0, self.momentum).at
        f, g = self.transition(lam)  # decoupled decay: θ_{−1} = θ₀/(1 − δ), not heavy ball's AR(2) start
        if forms.stable_two_state(f):
            return forms.TwoStateMoments(f, g * sigma[:, None], v0, self.initial).at
        return None

    def init(self, x):
        return (x, x * 0)

    def advance(self, state, step):
        x, v = state
        v = self.momentum * v + step
        return (x - self.lr * v, v)


@dataclass(frozen=True, eq=False)
class Nesterov(_Linear):
    """Nesterov momentum in PyTorch's form, ``v ← βv + Pg``, ``θ ← θ − ε(Pg + βv)``, v₀ = 0."""

    lr: float
    momentum: float
    precond: Any = None
    initial = (1.0, 0.0)  # (θ₀, εv₀ = 0)

    def transition(self, lam):
        lam = np.asarray(lam, dtype=np.float64)
        beta = self.momentum
        f = np.empty(lam.shape + (2, 2))
        f[..., 0, 0], f[..., 0, 1] = 1.0 - (1.0 + beta) * lam, -beta * beta
        f[..., 1, 0], f[..., 1, 1] = lam, beta
        g = np.empty(lam.shape + (2,))
        g[..., 0], g[..., 1] = -(1.0 + beta), 1.0
        return f, g

    def closed_form(self, forms, lam, sigma, v0):
        if not np.all((lam > 0) & (lam < NESTEROV.stable_lr_bound(self.momentum))):
            return None
        f, g = self.transition(lam)
        return forms.TwoStateMoments(f, g * sigma[:, None], v0, self.initial).at

    def init(self, x):
        return (x, x * 0)

    def advance(self, state, step):
        x, v = state
        v = self.momentum * v + step
        return (x - self.lr * (step + self.momentum * v), v)


@dataclass(frozen=True, eq=False)
class Qhm(_Linear):
    r"""Quasi-hyperbolic momentum (Ma & Yarats 2019, arXiv:1810.06801, as in their PyTorch code):
    ``m ← βm + (1 − β)Pg``, ``θ ← θ − ε[(1 − ν)Pg + νm]``, m₀ = 0. ν = 1 is heavy ball with the step ε(1 − β)
    (the "normalised" momentum), ν = 0 is SGD.

    Its transition on (θ, εm), with εPg = λθ + σz:

    .. math:: \epsilon m' = \beta\,\epsilon m + (1 - \beta)(\lambda\theta + \sigma z),\qquad
              \theta' = \theta - (1 - \nu\beta)(\lambda\theta + \sigma z) - \nu\beta\,\epsilon m,

    stable iff λ < 2(1 + β)/(1 + β(1 − 2ν)) (Jury's conditions: det F = β(1 − (1 − ν)λ) and
    1 ± tr F + det F > 0)."""

    lr: float
    momentum: float
    nu: float
    precond: Any = None
    initial = (1.0, 0.0)  # (θ₀, εm₀ = 0)

    def transition(self, lam):
        lam = np.asarray(lam, dtype=np.float64)
        beta, nu = self.momentum, self.nu
        f = np.empty(np.broadcast_shapes(lam.shape, np.shape(beta)) + (2, 2))
        f[..., 0, 0], f[..., 0, 1] = 1.0 - (1.0 - nu * beta) * lam, -nu * beta
        f[..., 1, 0], f[..., 1, 1] = (1.0 - beta) * lam, beta
        g = np.empty(f.shape[:-1])
        g[..., 0], g[..., 1] = -(1.0 - nu * beta), 1.0 - beta
        return f, g

    def closed_form(self, forms, lam, sigma, v0):
        f, g = self.transition(lam)
        if not forms.stable_two_state(f):
            return None
        return forms.TwoStateMoments(f, g * sigma[:, None], v0, self.initial).at

    def init(self, x):
        return (x, x * 0)

    def advance(self, state, step):
        x, m = state
        m = self.momentum * m + (1.0 - self.momentum) * step
        return (x - self.lr * ((1.0 - self.nu) * step + self.nu * m), m)


@dataclass(frozen=True, eq=False)
class Ema(_Linear):
    """Iterate averaging ``θ̃ ← γθ̃ + (1 − γ)θ`` (θ̃₀ = θ₀) over a linear optimiser; the loss of θ̃ is reported."""

    inner: Any
    gamma: float
    lr: float = field(init=False)
    precond: Any = field(init=False)

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "lr", self.inner.lr)
        object.__setattr__(self, "precond", self.inner.precond)

    @property
    def initial(self):
        return (*self.inner.initial, 1.0)

    @property
    def loss_index(self):
        return self.inner.order

    def transition(self, lam):
        # θ̃' = γθ̃ + (1 − γ)θ' with θ' = F₀·s + g₀σz: the averaged row is (1 − γ) times θ's row
        f_in, g_in = self.inner.transition(lam)
        k = g_in.shape[-1]
        f = np.zeros(g_in.shape[:-1] + (k + 1, k + 1))
        f[..., :k, :k] = f_in
        f[..., k, :k] = (1.0 - self.gamma) * f_in[..., 0, :]
        f[..., k, k] = self.gamma
        return f, np.concatenate([g_in, (1.0 - self.gamma) * g_in[..., :1]], axis=-1)

    def closed_form(self, forms, lam, sigma, v0):
        if isinstance(self.inner, Sgd) and np.all((lam > 0) & (lam < 2)):  # an EMA of plain SGD
            return forms.EmaMoments(lam, sigma**2, v0, self.gamma).at
        return None

    def init(self, x):
        return (*self.inner.init(x), x)

    def advance(self, state, step):
        inner = self.inner.advance(state[:-1], step)
        x = self.inner.readout(inner)
        return (*inner, self.gamma * state[-1] + (1.0 - self.gamma) * x)

    def readout(self, state):
        return state[-1]


# -- optimisers that are not linear: simulated only ------------------------------------------------
class _Nonlinear(Optimizer):
    """An optimiser whose update is not linear in (state, g): no transition, no preconditioner of its own.

    Each is written once, as ``apply``: an in-place step of θ and its auxiliary arrays (``slots`` of them: momentum,
    second moment) from the gradient g at update t = 1, 2, …. ``advance`` runs it on copies; the fused diagonal
    loop of :mod:`nqm.montecarlo.sfc64` runs it in place. The state is (θ, *auxiliary, t)."""

    precond = None
    slots = 0

    def init(self, x):
        return (x, *(x * 0 for _ in range(self.slots)), 0)

    def advance(self, state, step):
        x, *aux, t = state
        x, aux, g = x.copy(), [a.copy() for a in aux], step.copy()
        self.apply(x, aux, g, np.empty_like(g), t + 1)
        return (x, *aux, t + 1)

    @abstractmethod
    def apply(self, x, aux, g, buf, t: int) -> None:
        """In place: θ (``x``) and ``aux`` from the gradient ``g`` at update ``t``; ``g`` and ``buf`` are scratch."""

    def kernel_arguments(self) -> tuple[int, float, float, float, float, float] | None:
        """The arguments ``(kind, lr, β₁, β₂, eps, decay)`` of the fused CUDA kernel's ``nqm_adaptive_run``
        (``nqm/montecarlo/cuda/fused.cu``, which writes this optimiser's arithmetic once more; decay = 1 − ε·λ, 1
        without weight decay), or None where the kernel does not run it (the update couples the coordinates)."""
        return None


class _Elementwise(_Nonlinear):
    """A nonlinear optimiser whose update of each coordinate reads only that coordinate, written once as ``step``:
    a pure function ``step(x, *aux, g, *constants) -> x'`` (or ``(x', *aux')`` with auxiliary slots) of one
    coordinate's numbers, whose ``constants(t)`` hold what depends on the hyper-parameters and the update t.

    NumPy evaluates ``step`` on whole arrays (``apply``); the fused loop of :mod:`nqm.montecarlo.fused` compiles the
    same function with numba into one pass per step. Both run the same operations in the same order, so they give
    the same numbers bit for bit. A moving average ``β·m + (1 − β)·g`` is written ``(m − g)·β + g`` (one multiply);
    ``step`` calls nothing but NumPy's ``sign`` and ``sqrt``, which numba compiles too."""

    @staticmethod
    @abstractmethod
    def step(*args):
        """One coordinate's update: ``(x, *aux, g, *constants)`` to ``x'`` or ``(x', *aux')``."""

    @abstractmethod
    def constants(self, t: int) -> tuple[float, ...]:
        """The scalars ``step`` takes after g at update t (the hyper-parameters, and bias corrections by t)."""

    def apply(self, x, aux, g, buf, t):
        new = self.step(x, *aux, g, *self.constants(t))
        if self.slots == 0:
            x[...] = new
            return
        x[...] = new[0]
        for slot, value in zip(aux, new[1:]):
            slot[...] = value


@dataclass(frozen=True, eq=False)
class SignSgd(_Elementwise):
    """Sign descent, ``θ ← θ − ε sign(g)`` elementwise in the simulator's coordinates (sign(0) = 0)."""

    lr: float

    def kernel_arguments(self):
        return 0, self.lr, 0.0, 0.0, 0.0, 1.0

    @staticmethod
    def step(x, g, lr):
        return x - np.sign(g) * lr

    def constants(self, t):
        return (self.lr,)


@dataclass(frozen=True, eq=False)
class Signum(_Elementwise):
    """Sign descent with momentum, ``m ← βm + (1 − β)g``, ``θ ← θ − ε sign(m)`` (m₀ = 0)."""

    lr: float
    momentum: float
    slots = 1

    def kernel_arguments(self):
        return 1, self.lr, self.momentum, 0.0, 0.0, 1.0

    @staticmethod
    def step(x, m, g, lr, beta):
        m = (m - g) * beta + g
        return x - np.sign(m) * lr, m

    def constants(self, t):
        return self.lr, self.momentum


@dataclass(frozen=True, eq=False)
class RmsProp(_Elementwise):
    """RMSprop as PyTorch writes it, ``v ← β₂v + (1 − β₂)g²``, ``θ ← θ − εg/(√v + eps)`` (v₀ = 0)."""

    lr: float
    beta2: float
    eps: float
    slots = 1

    def kernel_arguments(self):
        return 2, self.lr, 0.0, self.beta2, self.eps, 1.0

    @staticmethod
    def step(x, v, g, lr, beta2, eps):
        g2 = g * g
        v = (v - g2) * beta2 + g2
        return x - (g / (np.sqrt(v) + eps)) * lr, v

    def constants(self, t):
        return self.lr, self.beta2, self.eps


@dataclass(frozen=True, eq=False)
class Adam(_Elementwise):
    """Adam as PyTorch writes it (bias-corrected); with ``weight_decay`` λ > 0 it is AdamW (decoupled:
    ``θ ← (1 − ελ)θ`` before the Adam step)."""

    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float = 0.0
    slots = 2

    def pull(self, optimum):
        """The constant step AdamW's decay adds to the error x = θ − θ* (``(1 − ελ)(x + θ*) − θ*``): −ελθ* in the
        simulator's coordinates, after the Adam step; None without decay or with θ* = 0."""
        if not self.weight_decay or optimum is None or not np.any(optimum):
            return None
        return -self.lr * self.weight_decay * optimum

    def kernel_arguments(self):
        return 3, self.lr, self.beta1, self.beta2, self.eps, 1.0 - self.lr * self.weight_decay

    @staticmethod
    def step(x, m, v, g, decay, beta1, beta2, eps_scaled, rate):
        # ε m̂/(√v̂ + eps) with m̂ = m/(1 − β₁ᵗ), v̂ = v/(1 − β₂ᵗ), written as rate·m/(√v + eps·√b₂) with
        # rate = ε√b₂/b₁ (constants): no √v̂ is formed. decay = 1 − ελ is exactly 1 without weight decay.
        m = (m - g) * beta1 + g
        g2 = g * g
        v = (v - g2) * beta2 + g2
        return x * decay - (m / (np.sqrt(v) + eps_scaled)) * rate, m, v

    def constants(self, t):
        root_b2 = float(np.sqrt(1.0 - self.beta2**t))
        return (
            1.0 - self.lr * self.weight_decay,
            self.beta1,
            self.beta2,
            self.eps * root_b2,
            self.lr * root_b2 / (1.0 - self.beta1**t),
        )


@dataclass(frozen=True, eq=False)
class Lion(_Elementwise):
    """Lion (Chen et al. 2023, arXiv:2302.06675, Algorithm 2 without decay): ``c = β₁m + (1 − β₁)g``,
    ``θ ← θ − ε sign(c)``, then ``m ← β₂m + (1 − β₂)g`` (m₀ = 0): sign descent on an interpolation of the
    momentum and the fresh gradient, the momentum kept with its own β₂. β₁ = β₂ is signum."""

    lr: float
    beta1: float
    beta2: float
    slots = 1

    @staticmethod
    def step(x, m, g, lr, beta1, rest1, beta2):
        return x - np.sign(m * beta1 + rest1 * g) * lr, (m - g) * beta2 + g

    def constants(self, t):
        return self.lr, self.beta1, 1.0 - self.beta1, self.beta2


@dataclass(frozen=True, eq=False)
class NormalizedSgd(_Nonlinear):
    """Normalised gradient descent, ``θ ← θ − ε g/‖g‖`` (the norm of each replica's whole gradient; no step
    where g = 0)."""

    lr: float
    elementwise = False

    def apply(self, x, aux, g, buf, t):
        np.multiply(g, g, out=buf)
        norm = np.sqrt(buf.sum(axis=-1, keepdims=True))
        g *= self.lr / (norm + (norm == 0))  # g = 0 has norm 0: divide by 1, step 0
        x -= g


# -- constructors ---------------------------------------------------------------------------------
def sgd(lr, precond=None, weight_decay=0.0, decoupled=False) -> Sgd:
    """SGD ``θ ← θ − εPg``; ``precond`` is the (d,) diagonal of P in H's basis (None: P = I).

    ``weight_decay`` λ ≥ 0 pulls θ towards 0: coupled (``θ ← θ − εP(g + λθ)``, the default) or ``decoupled``
    (``θ ← (1 − ελ)θ − εPg``); the two differ only when P ≠ I."""
    lr = float(check_lr(lr))
    return Sgd(lr, _check_precond(precond), *_check_decay(lr, weight_decay, decoupled))


def heavy_ball(lr, momentum, precond=None, weight_decay=0.0, decoupled=False) -> Sgd | HeavyBall:
    """Heavy ball ``v ← βv + Pg``, ``θ ← θ − εv`` (v₀ = 0); β = 0 is SGD.

    ``weight_decay`` λ ≥ 0: coupled (``v ← βv + P(g + λθ)``, PyTorch's SGD) or ``decoupled``
    (``θ ← (1 − ελ)θ − εv``, SGDW)."""
    beta = check_unit_interval("momentum", momentum)
    if beta == 0:
        return sgd(lr, precond, weight_decay, decoupled)
    lr = float(check_lr(lr))
    return HeavyBall(lr, beta, _check_precond(precond), *_check_decay(lr, weight_decay, decoupled))


def _check_decay(lr: float, weight_decay, decoupled) -> tuple[float, bool]:
    """(λ, decoupled): λ finite and ≥ 0, and ελ < 1 when decoupled (θ ← (1 − ελ)θ must not flip θ's sign)."""
    wd = check_real("weight_decay", weight_decay, low=0.0)
    if not isinstance(decoupled, (bool, np.bool_)):
        raise TypeError(f"decoupled must be True or False, got {decoupled!r}")
    if decoupled and lr * wd >= 1.0:
        raise ValueError(f"decoupled weight_decay needs lr·weight_decay < 1, got {lr:g}·{wd:g}")
    return wd, bool(decoupled)


def nesterov(lr, momentum, precond=None) -> Sgd | Nesterov:
    """Nesterov (PyTorch): ``v ← βv + Pg``, ``θ ← θ − ε(Pg + βv)`` (v₀ = 0); β = 0 is SGD."""
    beta = check_unit_interval("momentum", momentum)
    return Nesterov(float(check_lr(lr)), beta, _check_precond(precond)) if beta > 0 else sgd(lr, precond)


def qhm(lr, momentum, nu=0.7, precond=None) -> Sgd | Qhm:
    """Quasi-hyperbolic momentum ``m ← βm + (1 − β)Pg``, ``θ ← θ − ε[(1 − ν)Pg + νm]`` (m₀ = 0; Ma & Yarats 2019,
    whose recommended ν is 0.7); β = 0 or ν = 0 is SGD."""
    beta, nu = check_unit_interval("momentum", momentum), check_real("nu", nu, low=0.0, high=1.0)
    if beta == 0 or nu == 0:
        return sgd(lr, precond)
    return Qhm(float(check_lr(lr)), beta, nu, _check_precond(precond))


def ema(inner, gamma):
    """Iterate averaging with coefficient γ ∈ [0, 1) of the linear optimiser ``inner`` (γ = 0: ``inner``)."""
    inner = as_optimizer(inner)
    require_linear(inner, "ema")
    if getattr(inner, "weight_decay", 0.0):
        raise ValueError("ema of an optimiser with weight decay is not supported yet: average one without decay")
    g = check_unit_interval("ema gamma", gamma)
    if isinstance(inner, Ema):
        raise ValueError("ema of an ema is not supported: average the inner optimiser once")
    return Ema(inner, g) if g > 0 else inner


def sign_sgd(lr) -> SignSgd:
    """Sign descent ``θ ← θ − ε sign(g)``, elementwise in the simulator's coordinates; Monte Carlo only."""
    return SignSgd(float(check_lr(lr)))


def signum(lr, momentum) -> SignSgd | Signum:
    """Signum ``m ← βm + (1 − β)g``, ``θ ← θ − ε sign(m)`` (m₀ = 0); β = 0 is sign descent. Monte Carlo only."""
    beta = check_unit_interval("momentum", momentum)
    return Signum(float(check_lr(lr)), beta) if beta > 0 else sign_sgd(lr)


def rmsprop(lr, beta2=0.99, eps=1e-8) -> RmsProp:
    """RMSprop (PyTorch: ``alpha`` = β₂, eps outside the root); Monte Carlo only."""
    return RmsProp(float(check_lr(lr)), check_unit_interval("beta2", beta2), _check_eps(eps))


def adam(lr, beta1=0.9, beta2=0.999, eps=1e-8) -> Adam:
    """Adam, bias-corrected as in PyTorch; Monte Carlo only."""
    b1, b2 = check_unit_interval("beta1", beta1), check_unit_interval("beta2", beta2)
    return Adam(float(check_lr(lr)), b1, b2, _check_eps(eps))


def adamw(lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01) -> Adam:
    """AdamW: Adam with decoupled weight decay ``θ ← (1 − ελ)θ`` (PyTorch's AdamW); Monte Carlo only."""
    lr = float(check_lr(lr))
    b1, b2 = check_unit_interval("beta1", beta1), check_unit_interval("beta2", beta2)
    wd = check_real("weight_decay", weight_decay, low=0.0)
    if not lr * wd < 1.0:
        raise ValueError(f"weight_decay must be finite, >= 0 and below 1/lr, got {weight_decay!r}")
    return Adam(lr, b1, b2, _check_eps(eps), wd)


def lion(lr, beta1=0.9, beta2=0.99) -> Lion:
    """Lion (Chen et al. 2023): ``c = β₁m + (1 − β₁)g``, ``θ ← θ − ε sign(c)``, ``m ← β₂m + (1 − β₂)g``
    (m₀ = 0), elementwise in the simulator's coordinates; Monte Carlo only."""
    return Lion(float(check_lr(lr)), check_unit_interval("beta1", beta1), check_unit_interval("beta2", beta2))


def normalized_sgd(lr) -> NormalizedSgd:
    """Normalised gradient descent ``θ ← θ − ε g/‖g‖``; Monte Carlo only."""
    return NormalizedSgd(float(check_lr(lr)))


def _check_eps(eps) -> float:
    """The ε of an adaptive denominator: finite and > 0 (a 0 would divide 0 by 0 where a coordinate has no noise
    and no gradient)."""
    return check_real("eps (the adaptive denominator's offset)", eps, low=0.0, low_open=True)


def split_average(opt):
    """(the optimiser that is averaged, γ) for an EMA; (``opt``, 0) otherwise. ``ema(core, γ)`` rebuilds it."""
    return (opt.inner, opt.gamma) if isinstance(opt, Ema) else (opt, 0.0)


def is_plain_sgd(opt) -> bool:
    """Whether ``opt`` is (preconditioned, possibly decaying) SGD: one state, ``θ ← θ − εPg``, whose closed forms
    the engines' SGD fast paths use. The one place outside the classes that asks what an optimiser is."""
    return isinstance(opt, Sgd)


def as_optimizer(opt) -> Optimizer:
    """``opt`` itself if it is an optimiser value; a plain number ε means ``sgd(ε)``."""
    if isinstance(opt, Optimizer):
        return opt
    if isinstance(opt, (int, float, np.integer, np.floating)) and not isinstance(opt, bool):
        return sgd(opt)
    raise TypeError(f"opt must be an optimiser from nqm.optim or a step size (one number), got {opt!r}")


def require_no_decay(opt, engine: str):
    """Raise a clear error when an engine that does not model weight decay gets an optimiser with it."""
    if getattr(opt, "weight_decay", 0.0):
        raise ValueError(
            f"{engine} does not model weight decay yet; expected_loss, steps_to_target and nqm.simulate on a "
            "diagonal problem do"
        )
    return opt


def require_linear(opt, engine: str):
    """Raise a clear error when an engine that needs a transition gets an optimiser without one."""
    if not getattr(opt, "linear", False):
        raise ValueError(
            f"{engine} needs a linear optimiser (sgd, heavy_ball, nesterov or an ema of one); "
            f"{type(opt).__name__} has no exact dynamics: simulate it with nqm.simulate"
            + (" (its one-step law is nqm.theory.sign_improvement)" if isinstance(opt, SignSgd) else "")
        )
    return opt


def stable_lr_bound(family, momentum=0.0):
    r"""Largest λ = εph for which the family's mean dynamics are stable (per coordinate).

    SGD and its EMA: λ < 2; heavy ball: λ < 2(1 + β); Nesterov: λ < 2(1 + β)/(1 + 2β) (Jury's conditions on
    z² − (1 + β)(1 − λ)z + β(1 − λ)). ``family`` is a :class:`TunedFamily` or its name.
    """
    return tuned_family(family).stable_lr_bound(momentum)


def _momentum(momentum) -> np.ndarray:
    beta = as_real("momentum", momentum)
    if not np.all((beta >= 0) & (beta < 1)):
        raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
    return beta


# -- tuned families ---------------------------------------------------------------------------------
class TunedFamily(ABC):
    r"""An optimiser family whose hyper-parameters :func:`nqm.dynamics.optimal_steps_to_target` tunes, as a value:
    the step ε and, where ``hyper`` names one, a second hyper-parameter h ∈ [0, 1) (β of momentum, γ of an EMA;
    the field of :class:`~nqm.dynamics.OptimalRuns` that holds it). It knows how to build its optimiser, its
    stability edge, its closed-form second moments for the exact engines (from the forms they hand it,
    :mod:`nqm.dynamics.moments`: this module stays below the engines), whether its search runs compiled
    (``compiled``) and whether weight decay can be held or tuned with it (``decays``).

    A family equals its name, so ``runs.family == "heavy_ball"`` reads as it did when families were strings; the
    strings of :data:`FAMILIES` are accepted wherever a family is (:func:`tuned_family`).
    """

    name: str = ""
    hyper: str | None = None
    compiled: bool = False
    decays: bool = False

    @abstractmethod
    def optimizer(self, lr, hp=None, precond=None, weight_decay=0.0, decoupled=False) -> Optimizer:
        """The optimiser value at step ``lr`` and hyper-parameter ``hp``."""

    @abstractmethod
    def stable_lr_bound(self, hp=0.0):
        """Largest stable λ = εph at hyper-parameter ``hp`` (elementwise)."""

    @abstractmethod
    def moments(self, forms, lam, noise_var, v0, hp):
        """The closed form of E[x_t²] (an object with ``at(t)``; ``lower_bound`` where it has one) for rows of λ,
        q = ε²p²c/B, V₀ and ``hp`` broadcasting together; ``forms`` is :mod:`nqm.dynamics.moments.forms`."""

    @abstractmethod
    def stationary(self, forms, lam, noise_var, hp):
        """lim E[x_t²] per row and coordinate of the reported iterate (same arguments as :meth:`moments`)."""

    def __eq__(self, other):
        return other is self or (isinstance(other, str) and other == self.name)

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"optim.{self.name.upper()}"

    def __str__(self):
        return self.name


class _SgdFamily(TunedFamily):
    name, decays = "sgd", True

    def optimizer(self, lr, hp=None, precond=None, weight_decay=0.0, decoupled=False):
        return sgd(lr, precond, weight_decay, decoupled)

    def stable_lr_bound(self, hp=0.0):
        return 2.0 + 0 * _momentum(hp)

    # SGD's own tuner solves its closed form by Newton's method; these serve a search over SGD all the same
    def moments(self, forms, lam, noise_var, v0, hp):
        return forms.DecayedSgdMoments(lam, noise_var, v0, 0.0)

    def stationary(self, forms, lam, noise_var, hp):
        return forms.DecayedSgdMoments(lam, noise_var, 0.0, 0.0).stationary()


class _HeavyBallFamily(TunedFamily):
    name, hyper, compiled, decays = "heavy_ball", "momentum", True, True

    def optimizer(self, lr, hp=None, precond=None, weight_decay=0.0, decoupled=False):
        return heavy_ball(lr, hp, precond, weight_decay, decoupled)

    def stable_lr_bound(self, hp=0.0):
        return 2.0 * (1 + _momentum(hp))

    def moments(self, forms, lam, noise_var, v0, hp):
        return forms.HeavyBallMoments(lam, noise_var, v0, hp)

    def stationary(self, forms, lam, noise_var, hp):
        return forms.heavy_ball_stationary(lam, noise_var, hp)


class _TwoStateFamily(TunedFamily):
    """A family whose closed form is the general two-state one (:class:`~nqm.dynamics.moments.TwoStateMoments`)
    of its value's transition, with β an array broadcasting against λ (the step ε does not enter it: λ and σ carry
    it)."""

    initial: tuple[float, float]  # the value's start e, the same for every β

    @abstractmethod
    def _unit_step(self, beta) -> _Linear:
        """The optimiser value at ε = 1 and momentum ``beta`` (an array: one β per row)."""

    def _transition(self, lam, noise_var, beta):
        """(F, u = gσ) per row and coordinate."""
        f, g = self._unit_step(beta).transition(lam)
        return f, g * np.sqrt(noise_var)[..., None]

    def moments(self, forms, lam, noise_var, v0, hp):
        f, u = self._transition(lam, noise_var, hp)
        return forms.TwoStateMoments(f, u, v0, self.initial)

    def stationary(self, forms, lam, noise_var, hp):
        return forms.two_state_stationary(*self._transition(lam, noise_var, hp))[..., 0]


class _NesterovFamily(_TwoStateFamily):
    name, hyper, initial = "nesterov", "momentum", Nesterov.initial

    def optimizer(self, lr, hp=None, precond=None, weight_decay=0.0, decoupled=False):
        if weight_decay:
            raise ValueError("nesterov has no weight decay here")
        return nesterov(lr, hp, precond)

    def stable_lr_bound(self, hp=0.0):
        beta = _momentum(hp)
        return 2.0 * (1 + beta) / (1 + 2 * beta)

    def _unit_step(self, beta):
        return Nesterov(1.0, beta)


class _EmaFamily(TunedFamily):
    name, hyper = "ema", "ema"

    def optimizer(self, lr, hp=None, precond=None, weight_decay=0.0, decoupled=False):
        return ema(sgd(lr, precond, weight_decay, decoupled), hp)

    def stable_lr_bound(self, hp=0.0):
        return 2.0 + 0 * _momentum(hp)

    def moments(self, forms, lam, noise_var, v0, hp):
        return forms.EmaMoments(lam, noise_var, v0, hp)

    def stationary(self, forms, lam, noise_var, hp):
        return forms.ema_stationary(lam, noise_var, hp)[2]


class _QhmFamily(_TwoStateFamily):
    name, hyper, initial = "qhm", "momentum", Qhm.initial

    def __init__(self, nu: float):
        self.nu = check_real("nu", nu, low=0.0, high=1.0)

    def optimizer(self, lr, hp=None, precond=None, weight_decay=0.0, decoupled=False):
        if weight_decay:
            raise ValueError("qhm has no weight decay here")
        return qhm(lr, hp, self.nu, precond)

    def stable_lr_bound(self, hp=0.0):
        beta = _momentum(hp)
        return 2.0 * (1 + beta) / (1 + beta * (1 - 2 * self.nu))

    def _unit_step(self, beta):
        return Qhm(1.0, beta, self.nu)

    def __repr__(self):
        return f"optim.qhm_family({self.nu!r})"


def qhm_family(nu: float = 0.7) -> TunedFamily:
    """Quasi-hyperbolic momentum with ν held (Ma & Yarats recommend 0.7), tuned over ε and β."""
    return QHM if nu == 0.7 else _QhmFamily(nu)


SGD = _SgdFamily()
"""SGD, tuned over ε (and weight decay λ where asked)."""
HEAVY_BALL = _HeavyBallFamily()
"""Heavy ball, tuned over ε and β (and weight decay λ where asked); compiled where numba is installed."""
NESTEROV = _NesterovFamily()
"""Nesterov's momentum, tuned over ε and β."""
EMA = _EmaFamily()
"""Iterate averaging of SGD, tuned over ε and γ."""
QHM = _QhmFamily(0.7)
"""Quasi-hyperbolic momentum at ν = 0.7, tuned over ε and β (:func:`qhm_family` for another ν)."""

_TUNED = {family.name: family for family in (SGD, HEAVY_BALL, NESTEROV, EMA, QHM)}

FAMILIES = tuple(_TUNED)
"""The names of the families whose hyper-parameters :func:`nqm.dynamics.optimal_steps_to_target` tunes."""


def tuned_family(family) -> TunedFamily:
    """A :class:`TunedFamily` from itself or its name (one of :data:`FAMILIES`)."""
    if isinstance(family, TunedFamily):
        return family
    if isinstance(family, str) and family in _TUNED:
        return _TUNED[family]
    raise ValueError(f"family must be one of {FAMILIES} or a TunedFamily (optim.SGD, …), got {family!r}")
