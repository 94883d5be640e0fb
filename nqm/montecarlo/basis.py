"""The coordinates a simulation works in: H's eigenbasis, or x = Qθ for a problem given in a rotated basis.

In the eigenbasis curvature and preconditioning are elementwise; in a rotated basis they are the dense
H_x = Q diag(h) Qᵀ and P_x = Q diag(p) Qᵀ, so the simulation exercises matrix products as a real model would.
The state is the error x = θ − θ*; weight decay, which acts on θ itself, sees the optimum θ* in these coordinates.
Works with any NumPy-like array module (NumPy, CuPy).
"""

from __future__ import annotations

import numpy as np

from ..problem import NoisyQuadratic

__all__ = ["WorkingBasis"]


class WorkingBasis:
    """Operators of the coordinates the simulator works in: H's eigenbasis, or x = Qθ (arrays of module xp)."""

    def __init__(self, p: NoisyQuadratic, pre: np.ndarray, dtype, xp=np):
        self.xp = xp
        self.q = None if p.basis is None else xp.asarray(p.basis, dtype=dtype)
        if p.basis is None:
            self.h, self.pre = xp.asarray(p.h, dtype=dtype), xp.asarray(pre, dtype=dtype)
        else:
            self.h_mat = xp.asarray((p.basis * p.h) @ p.basis.T, dtype=dtype)
            self.pre_mat = xp.asarray((p.basis * pre) @ p.basis.T, dtype=dtype)
        pulled = p.optimum is not None and np.any(p.optimum)
        self.optimum = self.to_working(xp.asarray(p.optimum, dtype=dtype)) if pulled else None

    def to_working(self, theta):
        return theta if self.q is None else theta @ self.q.T

    def to_eigenbasis(self, x):
        return x if self.q is None else x @ self.q

    def curvature(self, x):
        return x * self.h if self.q is None else x @ self.h_mat

    def precondition(self, g):
        return g * self.pre if self.q is None else g @ self.pre_mat

    def step(self, opt, state, noise):
        r"""The state after one update of ``opt`` (:mod:`nqm.optim`) from the minibatch gradient ``H x + noise``.

        Weight decay acts on θ = x + θ*, not on the error x: coupled, the gradient gains λθ (and is preconditioned
        with it); decoupled, ``θ ← θ' − δθ`` after the update (δ = ελ, SGDW: heavy ball's ``θ − εv − δθ``). An
        optimiser that is not linear decays x inside its own update, and its ``pull`` (−ελθ*, AdamW) adds the rest.
        """
        x = state[0]
        theta = x if self.optimum is None else x + self.optimum
        grad = self.curvature(x) + noise
        coupled, decoupled = getattr(opt, "coupled_decay", 0.0), getattr(opt, "decoupled_rate", 0.0)
        if coupled:
            grad = grad + coupled * theta
        state = opt.advance(state, self.precondition(grad))
        if decoupled:
            state = (state[0] - decoupled * theta, *state[1:])
        pull = None if self.optimum is None or not hasattr(opt, "pull") else opt.pull(self.optimum)
        if pull is not None:  # linear in θ*, so the pull in these coordinates is the pull of θ* in them
            state = (state[0] + pull, *state[1:])
        return state

    def loss(self, x):
        xp = self.xp
        return 0.5 * xp.einsum("ij,ij->i", x.astype(xp.float64), self.curvature(x).astype(xp.float64))
