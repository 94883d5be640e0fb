r"""Expected loss of a linear optimiser, exactly (Zhang et al. 2019, arXiv:1907.04164, §3).

Coordinates of H's eigenbasis evolve independently in mean square, and only Σ's diagonal ``c`` enters. Per
coordinate the optimiser's state follows its transition (:mod:`nqm.optim`), ``s_{t+1} = F s_t + g σ z_t`` with
``λ = εph`` and ``σ = εp√(c/B)`` (:func:`nqm.noise.step_coefficients`), so the second moments ``S = E[s sᵀ]``
obey ``S ← F S Fᵀ + σ² g gᵀ``, a linear map on the m(m + 1)/2 distinct moments:

* SGD (m = 1): ``V ← (1 − λ)² V + σ²``, solved in closed form,

  .. math:: V_t = a^{2t} V_0 + \frac{1 - a^{2t}}{1 - a^2}\,\sigma^2,
            \quad a = 1 - \lambda,\quad 1 - a^2 = \lambda(2 - \lambda)

  with ``a^{2t} = exp(2t·log1p(−λ))``, so nothing cancels when λ ≪ 1 and nothing overflows;
* heavy ball, Nesterov and an EMA of SGD (m = 2): closed forms (:mod:`nqm.dynamics.moments`);
* anything else (an EMA of a momentum method, m = 3; unstable runs): the affine moment map raised to powers by
  repeated squaring, so E[L_t] at any checkpoints costs O(log t) per checkpoint, with no step-by-step loop.

The expected loss is ``E[L_t] = ½ Σ_i h_i E[x_i(t)²]`` with x the optimiser's reported iterate (θ̃ with EMA).
"""

from __future__ import annotations

import numpy as np

from ...checks import as_real, check_count, check_init_var, check_memory, check_steps_at
from ...curves import LossCurve, exact_curve
from ...noise import decay_pull, noise_scale_of_moments, simple_noise_scale_of_moments, step_coefficients
from ...optim import as_optimizer, is_plain_sgd, require_linear, require_no_decay
from ...problem import NoisyQuadratic, check_precond
from . import forms
from .sgd import log_abs_one_minus, one_minus_power, sgd_variance
from .two_state import TwoStateMoments

__all__ = [
    "expected_loss",
    "steady_state_loss",
    "coordinate_variance",
    "noise_scales_along",
    "noise_scales_at",
    "second_moments",
    "powered_second_moments",
    "mean_path",
    "decay_fixed_point",
]

# Coordinates per block: bounds memory at about 2**16 × (matrix size)² × (number of powers) floats.
_BLOCK_ELEMENTS = 1 << 20


def _checkpoints(steps, at) -> np.ndarray:
    steps = check_count("steps", steps)
    if at is None:
        # every step: the steps, their order, the losses and a block of second moments are each this long
        check_memory(
            40.0 * (steps + 1), f"a loss at every one of {steps} steps", "pass at=[...] with the steps you need"
        )
        return np.arange(int(steps) + 1)
    return check_steps_at(steps, at)


def _moment_map(f, g):
    """Augmented (n, k²+1, k²+1) matrix of vec(S) ← (F⊗F) vec(S) + vec(g gᵀ)."""
    n, k, _ = f.shape
    m = np.zeros((n, k * k + 1, k * k + 1))
    m[:, : k * k, : k * k] = np.einsum("nil,njm->nijlm", f, f).reshape(n, k * k, k * k)
    m[:, : k * k, -1] = np.einsum("ni,nj->nij", g, g).reshape(n, k * k)
    m[:, -1, -1] = 1.0
    return m


def powered_second_moments(opt, lam, sigma, v0, t):
    """E[(loss component)²] at steps ``t`` (sorted) by powering the affine moment map of ``opt``'s
    transition (:mod:`nqm.optim`); shape (T, n)."""
    f, g = opt.transition(lam)
    g = g * sigma[:, None]
    idx = opt.loss_index
    n, k, _ = f.shape
    m = _moment_map(f, g)
    e = np.asarray(opt.initial, dtype=np.float64)
    state = np.concatenate([v0[:, None] * np.outer(e, e).reshape(1, k * k), np.ones((n, 1))], axis=1)
    gaps = np.diff(np.concatenate([[0], t]))
    powers = [m]
    for _ in range(max(int(gaps.max()).bit_length() - 1, 0) if gaps.size else 0):
        with np.errstate(over="ignore", invalid="ignore"):
            powers.append(powers[-1] @ powers[-1])
    out = np.empty((t.size, n))
    with np.errstate(over="ignore", invalid="ignore"):
        for j, gap in enumerate(gaps):
            bit = 0
            while gap:
                if gap & 1:
                    state = np.einsum("nij,nj->ni", powers[bit], state)
                gap >>= 1
                bit += 1
            out[j] = state[:, idx * k + idx]
    return out


def second_moments(opt, lam, sigma, v0, t):
    """E[(loss component)²] (T, n) at sorted integer steps ``t``: the optimiser's closed form where it has one
    (its ``closed_form`` picks it from :mod:`.forms`: SGD; stable heavy ball and Nesterov; a
    stable EMA of SGD), else the powered moment map of its transition (momentum with EMA, unstable runs). The
    closed forms are also the more accurate: repeated squaring of the moment map loses digits when β or γ is close
    to 1 (the tests hold both against the step-by-step recursion)."""
    form = opt.closed_form(forms, lam, sigma, v0)
    if form is not None:
        return form(t[:, None].astype(np.float64))
    return powered_second_moments(opt, lam, sigma, v0, t)


def decay_fixed_point(opt, lam, pull) -> np.ndarray:
    r"""The state's mean at rest under weight decay's pull ``pull`` (n, m), ``s∞ = (I − F)⁻¹·pull``, for SGD and
    heavy ball.

    Both settle with θ at rest (heavy ball: θ_t = θ_{t−1}), where ``1 − F``'s action on the position is
    ``λ + δ(1 − β)`` with δ the decoupled rate (β = 0 for SGD), formed from λ and δ rather than from F's entries,
    which would cancel when λ, δ ≪ 1: ``x∞ = pull/(λ + δ(1 − β))``, the biased fixed point of the regularised
    objective (coupled: ``−λθ*/(h + λ)``; decoupled SGD: ``−λθ*/(ph + λ)``).
    """
    rate = opt.rest_rate(lam)
    if rate is None:
        raise ValueError(f"weight decay is written for SGD and heavy ball; got {type(opt).__name__}")
    with np.errstate(divide="ignore", invalid="ignore"):
        x_inf = pull[:, 0] / rate
    return np.repeat(x_inf[:, None], opt.order, axis=1)


def mean_path(opt, lam, pull, start, t):
    r"""``E[x_t]`` (T, n) of θ's error x = θ − θ* when its state starts at the mean ``start`` and is pulled by a
    constant ``pull`` each step (both (n, m)): weight decay's pull (:class:`nqm.noise.DecayPull`; x₀'s own mean is
    0), or no pull and a start away from the optimum (a finite training set's θ_N,
    :class:`nqm.FiniteDataset`), at sorted integer steps ``t``. With the fixed point s∞
    (:func:`~nqm.dynamics.decay_fixed_point`, 0 without a pull),

    .. math:: \mathbb E[s_t] = s_\infty + F^t (s_0 - s_\infty),\qquad s_0 = \text{start}.

    SGD: ``x∞ + a^t(s₀ − x∞)`` with a = 1 − λ − δ and 1 − a^t by ``expm1`` (no cancellation while a^t ≈ 1); heavy
    ball: the row ``e₀ᵀF^t`` of ``TwoStateMoments`` (:mod:`nqm.dynamics.moments`, Cayley–Hamilton). The second
    moment adds its square to the zero-mean one (the pull is deterministic)."""
    s_inf = decay_fixed_point(opt, lam, pull)
    dev = start - s_inf
    tt = t[:, None].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if is_plain_sgd(opt):
            rate = opt.rest_rate(lam)  # 1 − a
            return s_inf[:, 0] + (1.0 - one_minus_power(rate, log_abs_one_minus(rate), tt)) * dev[:, 0]
        f, _ = opt.transition(lam)
        r0, r1 = TwoStateMoments(f, np.zeros_like(pull), 0.0, (1.0, 0.0)).row(tt)
        return s_inf[:, 0] + r0 * dev[:, 0] + r1 * dev[:, 1]


def expected_loss(p: NoisyQuadratic, opt, batch_size, steps: int, *, init_var=1.0, at=None) -> LossCurve:
    """Exact E[L_t] of a linear optimiser (:mod:`nqm.optim`): SGD, heavy ball, Nesterov, and their EMA.

    .. math:: \\mathbb E[L_t] = \\tfrac12 \\sum_i h_i\\,\\mathbb E[\\theta_i(t)^2]

    Args:
        p: the problem; only ``h`` and Σ's diagonal ``c`` enter.
        opt: an optimiser value from :mod:`nqm.optim`, or a step ε > 0 meaning ``optim.sgd(ε)``.
        batch_size: B ≥ 1 (real allowed). steps: number of steps T.
        init_var: E[θ_0²] per coordinate in H's basis, scalar or (d,).
        at: optional 1-D array of steps in [0, T] at which to evaluate (default: every step).

    Returns:
        a :class:`nqm.LossCurve` at the steps ``at`` (default 0 … T): exact, so ``sem`` = 0 and ``n`` = None;
        array-like over its values. A diverging run (unstable step) gives inf once it overflows.

    References: Zhang et al. 2019 (arXiv:1907.04164), eqs. for SGD, momentum and EMA in §3 and App. A.

    Example:
        >>> from nqm import NoisyQuadratic
        >>> p = NoisyQuadratic([1.0], c=[0.0])
        >>> expected_loss(p, 0.5, 1, 2).tolist()   # ½ · (1 − 0.5)^{2t}
        [0.5, 0.125, 0.03125]
    """
    opt = require_linear(as_optimizer(opt), "expected_loss")
    t = _checkpoints(steps, at)
    lam, sigma = step_coefficients(p, opt, batch_size)
    pull = decay_pull(p, opt)
    v0 = check_init_var(init_var, p.d)
    order = np.argsort(t, kind="stable")
    t_sorted = t[order]
    loss = np.zeros(t.size)
    closed = opt.order <= 2  # closed forms: SGD, heavy ball, Nesterov and an EMA of SGD
    # closed forms need O(T·n) memory, the powered map O(n·log T·m⁴)
    block = max(1, _BLOCK_ELEMENTS // max(t.size, 1)) if closed else 1 << 12
    for lo in range(0, p.d, block):
        sl = slice(lo, lo + block)
        var = second_moments(opt, lam[sl], sigma[sl], v0[sl], t_sorted)
        with np.errstate(over="ignore", invalid="ignore"):
            if pull is not None:
                var = var + mean_path(opt, lam[sl], pull.step[sl], pull.start[sl], t_sorted) ** 2
            loss += 0.5 * (var @ p.h[sl])
    loss = np.where(np.isnan(loss), np.inf, loss)  # nan only arises from inf − inf in a diverging run
    out = np.empty_like(loss)
    out[order] = loss
    return exact_curve(t, out)


def steady_state_loss(p: NoisyQuadratic, opt, batch_size) -> float:
    """lim E[L_t] as t → ∞ for a linear optimiser: the fixed point of its moment map (inf when unstable).

    For SGD per coordinate this is ``εc/(2B(2 − ελ))`` (p = 1); Zhang et al. 2019 give momentum's
    ``(1 + β)εc/(2B(2β + 2 − εh)(1 − β))`` — the tests derive both from this fixed point. With weight decay
    and an optimum θ* ≠ 0 the mean's bias ``½Σh x∞²`` (:func:`~nqm.dynamics.decay_fixed_point`) is added.
    """
    opt = require_linear(as_optimizer(opt), "steady_state_loss")
    lam, sigma = step_coefficients(p, opt, batch_size)
    f, g = opt.transition(lam)
    g = g * sigma[:, None]
    # Stable iff the spectral radius of F is < 1; the moment map's eigenvalues are its products.
    if np.max(np.abs(np.linalg.eigvals(f))) >= 1.0:
        return float("inf")
    m = _moment_map(f, g)
    k = f.shape[1]
    kk = k * k
    fixed = np.linalg.solve(np.eye(kk) - m[:, :kk, :kk], m[:, :kk, -1][..., None])[..., 0]
    idx = opt.loss_index
    second = fixed[:, idx * k + idx]
    pull = decay_pull(p, opt)
    if pull is not None:  # weight decay's bias: the mean settles at (I − F)⁻¹·pull
        second = second + decay_fixed_point(opt, lam, pull.step)[:, idx] ** 2
    return float(0.5 * p.h @ second)


def _sgd_only(opt, name):
    opt = require_no_decay(as_optimizer(opt), name)
    if not is_plain_sgd(opt):
        raise ValueError(f"{name} is written for (preconditioned) SGD; got {type(opt).__name__}")
    return opt


def coordinate_variance(p: NoisyQuadratic, opt, batch_size, step, *, init_var=1.0) -> np.ndarray:
    """Exact ``E[θ_i(t)²]`` per coordinate (d,) of (preconditioned) SGD at ``step`` t (``inf`` for t = ∞).

    Every second-moment quantity of the iterate follows, e.g. ``E|G_t|² = Σ h_i² E[θ_i²]`` and
    ``E[G_tᵀHG_t] = Σ h_i³ E[θ_i²]``; at t = ∞ this is the stationary
    ``ε²p²c/(B·ελ(2 − ελ))`` (McCandlish et al. 2018, App. C; Zhang et al. 2019, §3).
    """
    lam, sigma = step_coefficients(p, _sgd_only(opt, "coordinate_variance"), batch_size)
    v0 = check_init_var(init_var, p.d)
    if step == np.inf:
        with np.errstate(divide="ignore"):
            return np.where(lam < 2, sigma**2 / (lam * (2 - lam)), np.inf)
    t = as_real("step", step)
    if t.ndim != 0 or not (t >= 0 and t == np.round(t)):
        raise ValueError(f"step must be a non-negative integer or inf, got {step!r}")
    return sgd_variance(lam, sigma**2, v0, float(step))


def noise_scales_along(p: NoisyQuadratic, opt, batch_size, steps: int, *, at=None, init_var=1.0):
    r"""Exact (B_noise, B_simple) along an expected SGD run, ratio-of-expectations form; shape (len(at), 2).

    .. math:: B_\text{noise}(t) = \frac{\operatorname{tr}(P H P \Sigma)}{E[G_t^\top P H P G_t]},\qquad
              B_\text{simple}(t) = \frac{\operatorname{tr}\Sigma}{E|G_t|^2},

    with E[θ_i(t)²] from :func:`sgd_variance` (McCandlish et al. 2018, arXiv:1812.06162, §2.2 and App. D).
    ``at`` defaults to 513 evenly spaced steps of the run, enough for its time average.
    """
    steps = check_count("steps", steps)
    at = np.unique(np.round(np.linspace(0, steps, 513))) if at is None else _checkpoints(steps, at)
    return noise_scales_at(p, opt, batch_size, at, init_var=init_var)


def noise_scales_at(p: NoisyQuadratic, opt, batch_size, t, *, init_var=1.0):
    r"""(B_noise, B_simple) of :func:`noise_scales_along` at times ``t`` ≥ 0, which may lie between steps: the
    closed form E[θ_i(t)²] = a_i^{2t}V_0 + (1 − a_i^{2t})q_i/(λ_i(2 − λ_i)) read at real t is smooth in t, which a
    quadrature over a long run's steps needs (:func:`nqm.dynamics.critical_batch_sizes`). Shape (len(t), 2)."""
    opt = _sgd_only(opt, "noise_scales_along")
    pre = check_precond(p, opt.precond)
    t = np.asarray(t, dtype=np.float64)
    if t.ndim != 1 or not np.all(np.isfinite(t) & (t >= 0)):
        raise ValueError(f"t must be a 1-D array of times >= 0, got {t!r}")
    lam, sigma = step_coefficients(p, opt, batch_size)
    q = sigma**2
    v0 = check_init_var(init_var, p.d)
    out = []
    for chunk in np.array_split(t, max(1, len(t) // 64)):
        v = sgd_variance(lam, q, v0, chunk[:, None])
        out.append(np.stack([noise_scale_of_moments(p, v, pre), simple_noise_scale_of_moments(p, v)], 1))
    return np.concatenate(out)
