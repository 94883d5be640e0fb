r"""The local noisy quadratic of a real model at θ, built from a :class:`~nqm.measure.Measurement`.

Near θ the model's loss is ``L(θ + δ) ≈ L(θ) + Gᵀδ + ½δᵀHδ`` and its per-example gradients have covariance Σ
(frozen at θ). In H's eigenbasis this is an additive NQM whose optimum sits at ``−H⁻¹G``: in the NQM's coordinates
the start is θ₀ with ``h_iθ₀ᵢ = G_i``, so ``θ₀ᵢ = G_i/h_i``. Only H's spectrum, G's spectral measure and the
diagonal of Σ in H's eigenbasis enter the expected loss of a linear optimiser with an H-diagonal preconditioner
(the moment recursions of :mod:`nqm.dynamics` are per coordinate, and linear in (θ₀ᵢ², Σ_ii)). So the built
problem has three groups of coordinates, each a curvature with a start and a noise:

* **top-k**: h = λ_i, θ₀ = u_iᵀG/λ_i, c = (UᵀΣU)_ii (the top block's off-diagonal does not enter);
* **G's bulk**: the Gauss nodes τ_j of G^⊥'s measure, θ₀ = √(mass_j)/τ_j, c = 0;
* **Σ's bulk**: the Gauss nodes of each noise probe's measure, θ₀ = 0, c = mass.

A coordinate carrying only a start and one carrying only noise at the same curvature give the same E[L_t] as one
carrying both, because each coordinate's moments are linear in (θ₀², c). G's quadrature is exact for polynomials
of degree ≤ 2m − 1 in h (m Lanczos steps). Noiseless SGD's improvement after t steps is

.. math:: L_0 - L_t = \tfrac12\sum_i \frac{G_i^2}{h_i}\bigl(1 - (1 - \varepsilon h_i)^{2t}\bigr),

a polynomial of degree 2t − 1 in h per unit G², so the built NQM's improvement is exact for t ≤ m; the start's
own loss ½GᵀH⁻¹G (a moment of 1/h) is Gauss-approximated, and below the real model's is meaningless anyway (the
model is no quadratic). Σ's part is an unbiased sampled quadrature (Hutchinson over the noise probes).

What is approximated, and reported (``LocalQuadratic.kept``): curvatures at or below
``curvature_floor·λ_max`` (negative curvature of a non-convex model, and near-flat directions, whose
``½G²/h`` would dominate the start's loss) are dropped, and with them their share of ``|G|²``, GᵀHG, tr Σ, tr(HΣ);
the sampled Σ bulk gives tr Σ and tr(HΣ) with sampling error. The loss is quadratic: the model's higher
derivatives and Σ's change with θ are not in it.

Example:
    >>> import numpy as np, nqm
    >>> from nqm.measure import measure, quadratic_model
    >>> p = nqm.NoisyQuadratic([1.0, 0.5, 0.1], [1.0, 1.0, 1.0])
    >>> m = measure(quadratic_model(nqm.FiniteDataset.draw(p, 200, seed=1)), np.ones(3), top_k=1, seed=0)
    >>> local = local_quadratic(m)
    >>> round(m.b_noise, 6), round(float(nqm.theory.noise_scale(local.problem, local.theta0)), 6)
    (1.087556, 1.01402)

The top direction is exact; the other two carry their noise through ten sampled probes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import check_real
from ..problem import NoisyQuadratic

__all__ = ["LocalQuadratic", "local_quadratic"]


@dataclass(frozen=True, eq=False)
class LocalQuadratic:
    """The local NQM: ``problem`` (its h, c), the start ``theta0`` in its coordinates and ``init_var = theta0²``
    (what :mod:`nqm.dynamics` takes), and ``kept``: for each of ``grad_norm_sq``, ``gHg``, ``tr_sigma``,
    ``tr_h_sigma`` the pair (measured, the NQM's)."""

    problem: NoisyQuadratic
    theta0: np.ndarray
    kept: dict

    @property
    def init_var(self) -> np.ndarray:
        return self.theta0**2


def local_quadratic(m, *, curvature_floor: float = 1e-6, name: str | None = None) -> LocalQuadratic:
    r"""The local NQM of measurement ``m`` (module docstring: its coordinates, and what is dropped).

    Args:
        m: a :class:`nqm.measure.Measurement`.
        curvature_floor: curvatures at or below ``curvature_floor × λ_max`` are dropped (they must be > 0 in an
            NQM); λ_max is the top eigenvalue (or the largest node without top eigenpairs).
        name: the problem's label.
    """
    floor_rel = check_real("curvature_floor", curvature_floor, low=0.0, high=1.0, high_open=True)
    nodes = [m.eigenvalues, m.gradient_nodes, m.noise_nodes.ravel()]
    lam_max = max(float(np.max(x)) for x in nodes if x.size)
    if not lam_max > 0:
        raise ValueError("the measured Hessian has no positive curvature: there is no local NQM")
    floor = floor_rel * lam_max
    top_c = np.diag(m.sigma_top) if m.sigma_top.size else np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        groups = [
            (m.eigenvalues, m.gradient_top / m.eigenvalues, top_c),
            (m.gradient_nodes, np.sqrt(m.gradient_masses) / m.gradient_nodes, np.zeros(m.gradient_nodes.size)),
            (m.noise_nodes.ravel(), np.zeros(m.noise_nodes.size), m.noise_masses.ravel()),
        ]
    h, theta0, c = (np.concatenate(parts) for parts in zip(*groups))
    carries = (theta0 != 0) | (c > 0)
    keep = carries & (h > floor)
    h, theta0, c = h[keep], np.where(np.isfinite(theta0[keep]), theta0[keep], 0.0), c[keep]
    if h.size == 0:
        raise ValueError(f"no curvature above the floor {floor:.3g} carries gradient or noise")
    problem = NoisyQuadratic(h, c, name=name or f"local NQM of {m.model_name}")
    g = h * theta0
    kept = {
        "grad_norm_sq": (m.grad_norm_sq, float(g @ g)),
        "gHg": (m.gHg, float(g @ (h * g))),
        "tr_sigma": (m.tr_sigma, float(c.sum())),
        "tr_h_sigma": (m.tr_h_sigma, float(h @ c)),
    }
    return LocalQuadratic(problem=problem, theta0=theta0, kept=kept)
