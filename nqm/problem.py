"""The noisy quadratic problem description shared by theory, dynamics and simulation.

Loss ``L(θ) = ½ θᵀHθ`` with ``H = diag(h)`` in its eigenbasis; a per-example gradient is
``g_x(θ) = Hθ + ξ_x`` with ``E ξ = 0`` and ``Cov ξ = Σ`` (McCandlish et al. 2018, arXiv:1812.06162,
§2; Zhang et al. 2019, arXiv:1907.04164, §3). Σ is given either by its diagonal ``c`` in H's
basis or as a dense PSD matrix ``sigma`` in H's basis. An optional orthogonal ``basis`` Q makes
the simulator work on ``Qθ``; every closed-form quantity is basis-invariant, so theory and
dynamics ignore it.
"""

from __future__ import annotations

import numpy as np

from . import problem_file
from .checks import as_real, as_vector, check_count, check_positive_vector, check_real

__all__ = ["NoisyQuadratic", "check_precond"]

_SYMMETRY_RTOL = 1e-10
_ORTHOGONALITY_ATOL = 1e-8


class NoisyQuadratic:
    """A noisy quadratic model.

    .. math::
        L(\\theta) = \\tfrac12 \\theta^\\top H \\theta, \\quad
        g_x(\\theta) = H\\theta + \\xi_x,\\quad \\operatorname{Cov}\\xi_x = \\Sigma

    Args:
        h: (d,) Hessian eigenvalues, finite and > 0.
        c: (d,) per-example noise variances ≥ 0 (diagonal of Σ in H's basis), or a scalar
            broadcast to all coordinates. Mutually exclusive with ``sigma``.
        sigma: (d, d) dense symmetric PSD per-example covariance in H's basis.
        basis: (d, d) orthogonal matrix Q; the simulator then works on ``Qθ``.
        optimum: (d,) the minimiser θ* in H's basis (default 0). Points, θ₀ and ``init_var`` are measured from it
            everywhere (the engines work on the error θ − θ*); it matters only where something acts on θ itself:
            weight decay pulls θ towards 0, not towards θ* (:mod:`nqm.optim`).
        name: a label used in reports.

    Example:
        >>> p = NoisyQuadratic([1.0, 0.5], c=[0.1, 0.2])
        >>> p.d, float(p.trace_sigma)
        (2, 0.30000000000000004)
    """

    def __init__(self, h, c=None, *, sigma=None, basis=None, optimum=None, name: str | None = None):
        self.h = as_vector("h (Hessian eigenvalues)", h)
        if self.h.size == 0:
            raise ValueError("h (Hessian eigenvalues) must not be empty")
        if np.any(self.h <= 0):
            raise ValueError(f"h (Hessian eigenvalues) must be > 0; got min(h) = {self.h.min():g}")
        d = self.h.size
        if (c is None) == (sigma is None):
            raise ValueError("give exactly one of c (diagonal noise variances) or sigma (dense Σ)")
        if sigma is not None:
            sigma = as_real("sigma", sigma)
            if sigma.shape != (d, d):
                raise ValueError(f"sigma must have shape ({d}, {d}), got {sigma.shape}")
            if not np.all(np.isfinite(sigma)):
                raise ValueError("sigma contains non-finite values")
            scale = max(np.abs(sigma).max(), np.finfo(float).tiny)
            if not np.allclose(sigma, sigma.T, rtol=0, atol=_SYMMETRY_RTOL * scale):
                raise ValueError("sigma must be symmetric")
            sigma = 0.5 * (sigma + sigma.T)
            _check_psd(sigma, 1e-10 * scale * d)
            self._sigma_factor = None  # formed when a simulator first asks (an eigendecomposition, O(d³))
            self.sigma = sigma
            self.c = np.diag(sigma).copy()
        else:
            self.c = as_vector("c (noise variances)", c, d)
            if np.any(self.c < 0):
                raise ValueError(f"c (noise variances) must be >= 0; got min(c) = {self.c.min():g}")
            self.sigma = None
            self._sigma_factor = None
        if basis is not None:
            basis = as_real("basis", basis)
            if basis.shape != (d, d):
                raise ValueError(f"basis must have shape ({d}, {d}), got {basis.shape}")
            if not np.allclose(basis @ basis.T, np.eye(d), rtol=0, atol=_ORTHOGONALITY_ATOL):
                raise ValueError("basis must be orthogonal (Q Qᵀ = I)")
        self.basis = basis
        self.optimum = None
        if optimum is not None:
            self.optimum = as_vector("optimum (θ* in H's basis)", optimum, d).copy()
            self.optimum.setflags(write=False)
        self.name = name or ("dense-Σ quadratic" if sigma is not None else "diagonal quadratic")

    # -- derived quantities -------------------------------------------------------------------
    @property
    def d(self) -> int:
        """Dimension."""
        return self.h.size

    @property
    def is_diagonal(self) -> bool:
        """True when Σ is diagonal in H's basis and no rotated basis is requested."""
        return self.sigma is None and self.basis is None

    @property
    def trace_sigma(self) -> float:
        """tr Σ."""
        return float(self.c.sum())

    @property
    def trace_h_sigma(self) -> float:
        """tr(HΣ) = Σ_i h_i Σ_ii (H is diagonal in its own basis)."""
        return float(self.h @ self.c)

    @property
    def parameter_hessian(self) -> np.ndarray:
        """(d, d) H in the simulator's coordinates x = Qθ, that is ``Q diag(h) Qᵀ`` (``diag(h)`` without a basis)."""
        return np.diag(self.h) if self.basis is None else (self.basis * self.h) @ self.basis.T

    @property
    def parameter_sigma(self) -> np.ndarray:
        """(d, d) Σ in the simulator's coordinates x = Qθ, that is ``Q Σ Qᵀ``. Sign-based and adaptive optimisers act
        elementwise there, so their laws need it."""
        sigma = np.diag(self.c) if self.sigma is None else self.sigma
        return sigma if self.basis is None else self.basis @ sigma @ self.basis.T

    @property
    def sigma_factor(self) -> np.ndarray | None:
        """(d, d) F with F Fᵀ = Σ for a dense Σ, else None (the factor is ``sqrt(c)``): F = U·sqrt(λ) from Σ's
        eigendecomposition, formed on first use and kept (the closed forms never need it)."""
        if self.sigma is not None and self._sigma_factor is None:
            eigvals, eigvecs = np.linalg.eigh(self.sigma)
            self._sigma_factor = eigvecs * np.sqrt(np.clip(eigvals, 0.0, None))
        return self._sigma_factor

    def __repr__(self) -> str:
        return (
            f"NoisyQuadratic(name={self.name!r}, d={self.d}, h∈[{self.h.min():.3g}, {self.h.max():.3g}], "
            f"tr Σ={self.trace_sigma:.3g}, dense={self.sigma is not None}, rotated={self.basis is not None})"
        )

    def with_noise_scaled(self, factor: float) -> NoisyQuadratic:
        """The same problem with Σ multiplied by ``factor``: every expected dynamics at batch size B·factor is this
        problem's at B (they depend on Σ/B alone), which reaches batch sizes below 1."""
        factor = check_real("factor", factor, low=0.0, low_open=True)
        noise = {"c": self.c * factor} if self.sigma is None else {"sigma": self.sigma * factor}
        return type(self)(self.h, **noise, basis=self.basis, optimum=self.optimum, name=self.name)

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def with_parameter_noise(cls, h, basis, sigma_x, *, name: str | None = None) -> NoisyQuadratic:
        r"""A rotated problem whose noise is given in the parameter coordinates x = Qθ.

        .. math:: H_x = Q\,\mathrm{diag}(h)\,Q^\top, \qquad \Sigma = Q^\top \Sigma_x Q

        Args:
            h: (d,) Hessian eigenvalues. basis: (d, d) orthogonal Q.
            sigma_x: the per-example covariance in the parameter coordinates: its (d,) diagonal (noise
                independent across parameters), a dense (d, d) matrix, or ``"hessian_diagonal"`` for
                Σ_x = diag(H_x), so that the noise is proportional to the curvature parameter by parameter (the
                assumption of Li et al. 2024, arXiv:2405.14578, for sign-like optimisers).

        Example:
            >>> import numpy as np
            >>> from nqm import spectra
            >>> q = spectra.random_rotation(3, seed=0)
            >>> p = NoisyQuadratic.with_parameter_noise([1.0, 0.5, 0.25], q, "hessian_diagonal")
            >>> bool(np.allclose(p.parameter_sigma, np.diag(np.diag(p.parameter_hessian))))
            True
        """
        h = as_vector("h (Hessian eigenvalues)", h)
        q = as_real("basis", basis)
        if q.shape != (h.size, h.size):
            raise ValueError(f"basis must have shape ({h.size}, {h.size}), got {q.shape}")
        if isinstance(sigma_x, str):
            if sigma_x != "hessian_diagonal":
                raise ValueError(f"sigma_x must be an array or 'hessian_diagonal', got {sigma_x!r}")
            sx = np.diag(np.einsum("ij,j,ij->i", q, h, q))
            label = "Σ_x = diag(H_x)"
        else:
            sx = as_real("sigma_x", sigma_x)
            if sx.ndim == 1:
                sx = np.diag(as_vector("sigma_x (parameter-coordinate noise variances)", sx, h.size))
            label = "Σ given in x"
        if sx.shape != (h.size, h.size):
            raise ValueError(f"sigma_x must have shape ({h.size},) or ({h.size}, {h.size}), got {sx.shape}")
        scale = max(np.abs(sx).max(), np.finfo(float).tiny)
        if not np.allclose(sx, sx.T, rtol=0, atol=_SYMMETRY_RTOL * scale):  # as the constructor refuses Σ
            raise ValueError("sigma_x must be symmetric")
        sigma = q.T @ sx @ q
        return cls(h, sigma=0.5 * (sigma + sigma.T), basis=q, name=name or f"rotated, {label} (d={h.size})")

    @classmethod
    def from_dict(cls, spec: dict, *, base_dir=None) -> NoisyQuadratic:
        """The problem a description holds (the tables of a problem file, :mod:`nqm.problem_file`).

        Example:
            >>> spec = {"spectrum": {"kind": "power_law", "d": 3, "exponent": 1.0}, "noise": {"kind": "power"}}
            >>> NoisyQuadratic.from_dict(spec).h.tolist()
            [1.0, 0.5, 0.3333333333333333]
        """
        return cls.from_parsed(problem_file.parse(spec, base_dir=base_dir))

    @classmethod
    def from_file(cls, path) -> NoisyQuadratic:
        """The problem of a TOML problem file (:mod:`nqm.problem_file`; its ``[init] var`` is read by
        ``problem_file.read``)."""
        return cls.from_parsed(problem_file.read(path))

    @classmethod
    def from_parsed(cls, parsed: problem_file.ParsedProblem) -> NoisyQuadratic:
        """The problem of a parsed description (:func:`nqm.problem_file.read` or ``parse``); what the problem
        refuses (a negative variance in a noise file, a Σ that is not PSD) is named with the description's source."""
        try:
            return cls(
                parsed.h, parsed.c, sigma=parsed.sigma, basis=parsed.basis, optimum=parsed.optimum, name=parsed.name
            )
        except ValueError as e:
            raise ValueError(f"{parsed.source}: {e}") from None

    # -- presets --------------------------------------------------------------------------------
    @classmethod
    def from_measurement(cls, measurement, **options) -> NoisyQuadratic:
        """The local NQM of a real model measured at θ (:func:`nqm.measure.local_quadratic`, which says what it
        keeps and drops; ``options`` go there). Its start, ``init_var``, comes with
        ``measurement.local_quadratic(**options)``."""
        return measurement.local_quadratic(**options).problem

    @classmethod
    def zhang2019(cls, d: int = 10_000) -> NoisyQuadratic:
        """The setup of Zhang et al. 2019 (arXiv:1907.04164, §4): ``h_i = 1/i``, ``c = h``."""
        d = check_count("d", d, 1)
        h = 1.0 / np.arange(1, d + 1, dtype=np.float64)
        return cls(h, h.copy(), name=f"zhang2019(d={int(d)})")


# -- the check that needs the problem ------------------------------------------------------------------------
def _check_psd(sigma: np.ndarray, tolerance: float) -> None:
    """Refuse a Σ with an eigenvalue below −``tolerance``. Σ + tolerance·I having a Cholesky factor (a tenth of an
    eigendecomposition's time) proves it; only where it has none are the eigenvalues computed."""
    try:
        np.linalg.cholesky(sigma + tolerance * np.eye(sigma.shape[0]))
    except np.linalg.LinAlgError:  # rare on a valid Σ (a zero Σ, rounding at the edge): the eigenvalues decide
        smallest = np.linalg.eigvalsh(sigma).min()
        if smallest < -tolerance:
            raise ValueError(f"sigma must be positive semi-definite; smallest eigenvalue {smallest:.3g}") from None


def check_precond(p: NoisyQuadratic, precond) -> np.ndarray:
    """Diagonal of the preconditioner P in H's basis as (d,) float64; ones when None."""
    return np.ones(p.d) if precond is None else check_positive_vector("precond (diagonal of P)", precond, p.d)
