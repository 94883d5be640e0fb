"""The coordinates a simulation works in: H's eigenbasis, or x = Qθ for a problem given in a rotated basis.

In the eigenbasis curvature and preconditioning are elementwise; in a rotated basis they are the dense
H_x = Q diag(h) Qᵀ and P_x = Q diag(p) Qᵀ, so the simulation exercises matrix products as a real model would.
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

    def to_working(self, theta):
        return theta if self.q is None else theta @ self.q.T

    def to_eigenbasis(self, x):
        return x if self.q is None else x @ self.q

    def curvature(self, x):
        return x * self.h if self.q is None else x @ self.h_mat

    def precondition(self, g):
        return g * self.pre if self.q is None else g @ self.pre_mat

    def loss(self, x):
        xp = self.xp
        return 0.5 * xp.einsum("ij,ij->i", x.astype(xp.float64), self.curvature(x).astype(xp.float64))
