r"""The theory's quantities of a real model at a point θ: :func:`nqm.measure.measure` and its ``Measurement``.

With the training set as the population (:mod:`nqm.measure.model`), McCandlish et al. 2018 (arXiv:1812.06162,
eqs. 2.5–2.9) make the one-step law of SGD a function of four numbers at θ:

.. math:: |G|^2,\quad G^\top HG,\quad \operatorname{tr}\Sigma,\quad \operatorname{tr}(H\Sigma);\qquad
          B_\text{noise} = \frac{\operatorname{tr}(H\Sigma)}{G^\top HG},\quad
          B_\text{simple} = \frac{\operatorname{tr}\Sigma}{|G|^2}.

These are the definitions, not estimators. Here they are computed **exactly** from all N per-example gradients
ξ_n = ∇ℓ_n − G and exact Hessian-vector products: ``tr Σ = (1/N)Σ|ξ_n|²``,
``tr(HΣ) = (1/N)Σ ξ_nᵀHξ_n`` (N HVPs, in chunks). With ``exact_noise=False`` tr(HΣ) is instead a Hutchinson
average over random combinations v = Ξᵀs/√N (s Rademacher; E[vvᵀ] = Σ) with its standard error.

The spectra are taken by Lanczos (:mod:`nqm.measure.lanczos`), deflated: the top-k eigenpairs (λ_i, u_i) of H
exactly (``scipy.sparse.linalg.eigsh``), and the rest — the bulk, on the complement of U — as Gauss quadratures:

* **H's density** by stochastic Lanczos quadrature (Ghorbani et al. 2019, arXiv:1901.10159): Rademacher probes z
  projected off U, ``tr f(H) ≈ Σ_i f(λ_i) + (1/P)Σ_p |z_p^⊥|² Σ_j w_pj f(τ_pj)``;
* **G's spectral measure** from one deterministic Lanczos run started at G^⊥ (exact for polynomials of degree
  ≤ 2m − 1): ``GᵀHᵏG = Σ_i λ_iᵏ(u_iᵀG)² + |G^⊥|²Σ_j w_j τ_jᵏ``;
* **Σ's spectral measure** in H's eigenbasis, ``tr(f(H)Σ) = Σ_ij f(λ)…`` on the top block (UᵀΣU exactly) plus
  Lanczos runs from the noise probes v^⊥ (unbiased, sampled).

Two-batch estimators (:func:`nqm.estimators.two_batch_estimates`) are run on the same model with batches drawn
without replacement, as in training; their expectations then carry the finite-set factor:
``E[|𝒢|²] = |G|² − trΣ/(N − 1)``, ``E[𝒮] = trΣ·N/(N − 1)``. The measurement reports them beside the truth.

Example:
    >>> import numpy as np, nqm
    >>> from nqm.measure import measure, quadratic_model
    >>> p = nqm.NoisyQuadratic([1.0, 0.5, 0.1], [1.0, 1.0, 1.0])
    >>> m = measure(quadratic_model(nqm.FiniteDataset.draw(p, 200, seed=1)), np.ones(3), top_k=1, seed=0)
    >>> round(m.b_noise, 6), m.b_noise_se
    (1.087556, 0.0)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh

from ..checks import check_count
from ..estimators import two_batch_estimates
from .krylov import gauss_quadrature, lanczos
from .local import local_quadratic
from .model import Model

__all__ = ["Measurement", "TwoBatchEstimates", "measure"]

_CONSISTENCY = 1e-8  # |mean of per-example gradients − G| over the scale of the per-example gradients


@dataclass(frozen=True, eq=False)
class TwoBatchEstimates:
    r"""The practitioners' two-batch estimators on a real model, batches drawn without replacement.

    ``grad_norm_sq``, ``tr_sigma``: means of ``|𝒢|²`` and 𝒮 over ``draws`` independent pairs of batches, with
    standard errors; ``b_simple``: the ratio of those means (the paper's practice), its SE by the delta method;
    ``expected_*``: the exact expectations of ``|𝒢|²`` and 𝒮 under sampling without replacement (module
    docstring).
    """

    b_small: int
    b_big: int
    draws: int
    grad_norm_sq: float
    grad_norm_sq_se: float
    tr_sigma: float
    tr_sigma_se: float
    b_simple: float
    b_simple_se: float
    expected_grad_norm_sq: float
    expected_tr_sigma: float


@dataclass(frozen=True, eq=False)
class Measurement:
    r"""A real model's one-step quantities at θ (:func:`measure`). ``*_se`` are standard errors (0 when exact).

    The fields: ``n`` and ``dim`` (N examples, D parameters); ``loss`` L(θ), the full training loss; ``gradient``
    G, shape (D,); ``grad_norm_sq``, ``gHg``, ``tr_sigma``, ``tr_h_sigma``: ``|G|²``, GᵀHG, tr Σ, tr(HΣ);
    ``b_noise`` and ``b_simple``, their ratios; ``eigenvalues`` (k,) and ``eigenvectors`` (k, D), H's top-k
    eigenpairs, largest first; ``gradient_top`` (k,), u_iᵀG; ``sigma_top`` (k, k), UᵀΣU; ``gradient_nodes``,
    ``gradient_masses`` (m,), G^⊥'s measure, masses summing to ``|G^⊥|²``; ``noise_nodes``, ``noise_masses``
    (P, m), Σ^⊥'s measure per noise probe, each probe's masses summing to ``|v_p^⊥|²/P`` (their total estimates
    tr Σ^⊥); ``density_nodes``, ``density_weights`` (P, m), H's bulk per probe in eigenvalue counts (all weights
    sum to about D − k, and ``tr f(H) ≈ Σ f(λ_i) + Σ density_weights·f(density_nodes)``; padded entries have
    weight 0); ``estimators``, the two-batch estimators on the same model (:class:`TwoBatchEstimates`) or None;
    ``hvps``, the Hessian-vector products used; ``seconds``, the wall time.
    """

    model_name: str
    n: int
    dim: int
    loss: float
    gradient: np.ndarray
    grad_norm_sq: float
    gHg: float
    tr_sigma: float
    tr_h_sigma: float
    tr_h_sigma_se: float
    b_noise: float
    b_noise_se: float
    b_simple: float
    b_simple_se: float
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    gradient_top: np.ndarray
    sigma_top: np.ndarray
    gradient_nodes: np.ndarray
    gradient_masses: np.ndarray
    noise_nodes: np.ndarray
    noise_masses: np.ndarray
    density_nodes: np.ndarray
    density_weights: np.ndarray
    estimators: TwoBatchEstimates | None
    hvps: int
    seconds: float

    @property
    def max_step(self) -> float:
        """ε_max = ``|G|²``/GᵀHG (McCandlish et al. eq. 2.7); inf where GᵀHG ≤ 0 (no finite optimal step)."""
        return self.grad_norm_sq / self.gHg if self.gHg > 0 else float("inf")

    def trace_hessian_power(self, k: int) -> tuple[float, float]:
        """(tr Hᵏ, SE) from the top eigenvalues and the SLQ bulk (exact in the top part, sampled in the bulk)."""
        per_probe = np.sum(self.density_weights * self.density_nodes ** int(k), axis=1) * self.density_nodes.shape[0]
        top = float(np.sum(self.eigenvalues ** int(k)))
        se = float(per_probe.std(ddof=1) / np.sqrt(per_probe.size)) if per_probe.size > 1 else float("nan")
        return top + float(per_probe.mean()), se

    def local_quadratic(self, **options):
        """The local NQM at θ (:func:`nqm.measure.local_quadratic`); ``options`` go there."""
        return local_quadratic(self, **options)

    def summary(self) -> dict:
        """The scalar quantities as a plain dict (JSON-ready: finite floats and ints)."""
        out = {
            k: getattr(self, k)
            for k in (
                "n",
                "dim",
                "loss",
                "grad_norm_sq",
                "gHg",
                "tr_sigma",
                "tr_h_sigma",
                "tr_h_sigma_se",
                "b_noise",
                "b_noise_se",
                "b_simple",
                "b_simple_se",
                "hvps",
                "seconds",
            )
        }
        out["top_eigenvalues"] = self.eigenvalues.tolist()
        return out


def _rademacher(rng, shape) -> np.ndarray:
    return rng.integers(0, 2, size=shape).astype(np.float64) * 2.0 - 1.0


def _padded(rows: list[tuple[np.ndarray, np.ndarray]], width: int) -> tuple[np.ndarray, np.ndarray]:
    nodes, masses = np.zeros((len(rows), width)), np.zeros((len(rows), width))
    for i, (x, w) in enumerate(rows):
        nodes[i, : x.size], masses[i, : w.size] = x, w
    return nodes, masses


def _measure_of(matvec, start, steps, deflate) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, masses) of ``start``'s spectral measure off ``deflate``: masses sum to ``|start^⊥|²``."""
    start = start - deflate.T @ (deflate @ start) if deflate.size else start
    size = float(start @ start)
    if not size > 0:
        return np.zeros(1), np.zeros(1)
    alpha, beta, _ = lanczos(matvec, start, steps, orthogonal_to=deflate if deflate.size else None)
    nodes, weights = gauss_quadrature(alpha, beta)
    return nodes, size * weights


def _top_eigenpairs(matvec, dim, k, rng) -> tuple[np.ndarray, np.ndarray]:
    if k == 0:
        return np.zeros(0), np.zeros((0, dim))
    if k >= dim:
        raise ValueError(f"top_k must be < the number of parameters ({dim}), got {k}")
    operator = LinearOperator((dim, dim), matvec=matvec, dtype=np.float64)
    values, vectors = eigsh(operator, k=k, which="LA", v0=rng.standard_normal(dim))
    order = np.argsort(values)[::-1]
    return values[order], np.ascontiguousarray(vectors[:, order].T)


def _estimators(model, theta, g2, tr_sigma, b_small, b_big, draws, rng) -> TwoBatchEstimates:
    n = model.n
    if not 1 <= b_small < b_big < n:
        raise ValueError(f"estimator_batches must satisfy 1 <= B_small < B_big < N = {n}, got ({b_small}, {b_big})")
    sq = np.empty((draws, 2))
    for i in range(draws):
        for j, b in enumerate((b_small, b_big)):
            grad = np.asarray(model.gradient(theta, rng.choice(n, size=b, replace=False)), dtype=np.float64)
            sq[i, j] = grad @ grad
    g2_hat, s_hat = two_batch_estimates(sq[:, 0], sq[:, 1], b_small, b_big)
    mg, ms = float(g2_hat.mean()), float(s_hat.mean())
    sg, ss = float(g2_hat.std(ddof=1) / np.sqrt(draws)), float(s_hat.std(ddof=1) / np.sqrt(draws))
    cov = float(np.cov(g2_hat, s_hat)[0, 1] / draws)
    ratio = ms / mg
    ratio_se = abs(ratio) * np.sqrt(max((ss / ms) ** 2 + (sg / mg) ** 2 - 2 * cov / (ms * mg), 0.0))
    return TwoBatchEstimates(
        b_small=b_small,
        b_big=b_big,
        draws=draws,
        grad_norm_sq=mg,
        grad_norm_sq_se=sg,
        tr_sigma=ms,
        tr_sigma_se=ss,
        b_simple=ratio,
        b_simple_se=float(ratio_se),
        expected_grad_norm_sq=g2 - tr_sigma / (n - 1),
        expected_tr_sigma=tr_sigma * n / (n - 1),
    )


def measure(
    model: Model,
    theta,
    *,
    top_k: int = 20,
    probes: int = 10,
    noise_probes: int | None = None,
    lanczos_steps: int = 80,
    exact_noise: bool = True,
    chunk: int = 256,
    estimator_batches: tuple[int, int] | None = None,
    estimator_draws: int = 200,
    seed=0,
) -> Measurement:
    r"""Measure a real model's gradient, Hessian spectrum, gradient noise and true noise scales at θ.

    Args:
        model: a :class:`nqm.measure.Model` (or :class:`nqm.measure.JaxModel`).
        theta: (D,) the point.
        top_k: H's top eigenpairs computed exactly (deflated from every Lanczos run below); 0 for none.
        probes: Rademacher probes of the SLQ density of H's bulk.
        noise_probes: probes of Σ's spectral measure (default ``probes``).
        lanczos_steps: m, the Lanczos steps of every quadrature.
        exact_noise: tr(HΣ) from all N per-example gradients (N HVPs); False: Hutchinson over the noise probes, with
            its SE.
        chunk: per-example gradients (and HVPs) per call.
        estimator_batches: (B_small, B_big) of the two-batch estimators; default (min(32, N/16), min(256, N/4)).
        estimator_draws: independent pairs of batches for the estimators; 0 skips them.
        seed: seeds every probe and draw (``numpy.random.SeedSequence``).

    Returns:
        a :class:`Measurement`.
    """
    start_time = time.perf_counter()
    if not isinstance(model, Model):
        raise TypeError(f"model must be an nqm.measure.Model (or JaxModel), got {type(model).__name__}")
    theta = model.check_point(theta)
    top_k = check_count("top_k", top_k)
    probes = check_count("probes", probes, 2)
    noise_probes = probes if noise_probes is None else check_count("noise_probes", noise_probes, 2)
    steps = check_count("lanczos_steps", lanczos_steps, 1)
    chunk = check_count("chunk", chunk, 1)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    hvps = [0]

    def matvec(v):
        hvps[0] += 1
        return np.asarray(model.hvp(theta, np.asarray(v, dtype=np.float64)[None, :]), dtype=np.float64)[0]

    everything = model.everything
    loss = float(model.loss(theta, everything))
    g = np.asarray(model.gradient(theta, everything), dtype=np.float64)
    if g.shape != (model.dim,):
        raise ValueError(f"model.gradient returned shape {g.shape}, expected ({model.dim},)")
    g2, ghg = float(g @ g), float(g @ matvec(g))
    values, vectors = _top_eigenpairs(matvec, model.dim, top_k, rng)

    # One pass over the examples: Σ's trace, its top block, its probes and (exactly) tr(HΣ).
    signs = _rademacher(rng, (model.n, noise_probes))
    noise_sum, tr_sigma, tr_h_sigma = np.zeros(model.dim), 0.0, 0.0
    sigma_top, combos = np.zeros((top_k, top_k)), np.zeros((noise_probes, model.dim))
    scale = 0.0
    for lo in range(0, model.n, chunk):
        idx = everything[lo : lo + chunk]
        per_example = np.asarray(model.per_example_gradients(theta, idx), dtype=np.float64)
        if per_example.shape != (idx.size, model.dim):
            raise ValueError(
                f"model.per_example_gradients returned shape {per_example.shape}, expected ({idx.size}, {model.dim})"
            )
        xi = per_example - g
        noise_sum += xi.sum(axis=0)
        tr_sigma += float(np.sum(xi * xi))
        scale = max(scale, float(np.abs(per_example).max()))
        projected = xi @ vectors.T
        sigma_top += projected.T @ projected
        combos += signs[idx].T @ xi
        if exact_noise:
            hxi = np.asarray(model.hvp(theta, xi), dtype=np.float64)
            hvps[0] += idx.size
            tr_h_sigma += float(np.sum(xi * hxi))
    if np.abs(noise_sum / model.n).max() > _CONSISTENCY * max(scale, np.finfo(float).tiny):
        raise ValueError(
            "model.gradient(theta, all) is not the mean of model.per_example_gradients: |mean difference| = "
            f"{np.abs(noise_sum / model.n).max():.3g} (per-example scale {scale:.3g})"
        )
    tr_sigma /= model.n
    sigma_top /= model.n
    combos /= np.sqrt(model.n)

    grad_nodes, grad_masses = _measure_of(matvec, g, steps, vectors)
    noise = [_measure_of(matvec, v, steps, vectors) for v in combos]
    noise_nodes, noise_masses = _padded([(x, w / noise_probes) for x, w in noise], steps)
    bulk = [_measure_of(matvec, _rademacher(rng, model.dim), steps, vectors) for _ in range(probes)]
    density_nodes, density_weights = _padded([(x, w / probes) for x, w in bulk], steps)

    if exact_noise:
        tr_h_sigma /= model.n
        tr_h_sigma_se = 0.0
    else:  # Hutchinson: the top block exactly, the bulk's first moment per probe
        per_probe = np.sum(noise_nodes * noise_masses, axis=1) * noise_probes
        tr_h_sigma = float(values @ np.diag(sigma_top) + per_probe.mean())
        tr_h_sigma_se = float(per_probe.std(ddof=1) / np.sqrt(noise_probes))

    estimates = None
    draws = check_count("estimator_draws", estimator_draws)
    if draws:
        if draws < 2:
            raise ValueError(f"estimator_draws must be 0 (none) or >= 2 (for standard errors), got {draws}")
        if estimator_batches is None:
            b_small = max(1, min(32, model.n // 16))
            estimator_batches = (b_small, max(b_small + 1, min(256, model.n // 4)))
        b_small, b_big = (int(b) for b in estimator_batches)
        estimates = _estimators(model, theta, g2, tr_sigma, b_small, b_big, draws, rng)

    return Measurement(
        model_name=model.name,
        n=model.n,
        dim=model.dim,
        loss=loss,
        gradient=g,
        grad_norm_sq=g2,
        gHg=ghg,
        tr_sigma=tr_sigma,
        tr_h_sigma=tr_h_sigma,
        tr_h_sigma_se=tr_h_sigma_se,
        b_noise=tr_h_sigma / ghg if ghg > 0 else float("nan"),
        b_noise_se=tr_h_sigma_se / abs(ghg) if ghg != 0 else float("nan"),
        b_simple=tr_sigma / g2 if g2 > 0 else float("nan"),
        b_simple_se=0.0,
        eigenvalues=values,
        eigenvectors=vectors,
        gradient_top=vectors @ g,
        sigma_top=sigma_top,
        gradient_nodes=grad_nodes,
        gradient_masses=grad_masses,
        noise_nodes=noise_nodes,
        noise_masses=noise_masses,
        density_nodes=density_nodes,
        density_weights=density_weights,
        estimators=estimates,
        hvps=hvps[0],
        seconds=time.perf_counter() - start_time,
    )
