r"""Real data and models shipped with packages: scikit-learn's bundled digits, in JAX (extra ``nqm[real]``).

The data set is the 1797 8×8 handwritten digits (UCI's optical recognition of handwritten digits, Alpaydin &
Kaynak 1998) that scikit-learn ships, so nothing is downloaded. Pixels are scaled to [0, 1]. Two models, each a
``nqm.measure.JaxModel`` with its initial parameters:

* ``logistic_regression``: multinomial logistic regression, 64 → 10, with an L2 term ``λ/2·|W|²`` in every
  example's loss (convex, and strictly so with λ > 0: its local NQM should be close to exact);
* ``mlp``: a 64–32–10 tanh network with a softmax cross-entropy (non-convex), initialised with
  N(0, 1/fan_in) weights from ``seed``.

Example (needs scikit-learn and JAX):
    >>> from nqm.measure import digits
    >>> model = digits.logistic_regression()               # doctest: +SKIP
    >>> model.n, model.dim                                  # doctest: +SKIP
    (1797, 650)
"""

from __future__ import annotations

import numpy as np

from .jax_model import JaxModel, import_jax

__all__ = ["load", "logistic_regression", "mlp"]


def load() -> tuple[np.ndarray, np.ndarray]:
    """(inputs (1797, 64) in [0, 1], labels (1797,) int) from scikit-learn's bundled copy."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("nqm.measure.digits needs scikit-learn: pip install 'nqm[real]'") from None
    data = load_digits()
    return np.asarray(data.data, dtype=np.float64) / 16.0, np.asarray(data.target, dtype=np.int64)


def _cross_entropy(jax, jnp, logits, label):
    return jax.nn.logsumexp(logits) - logits[label]


def logistic_regression(*, l2: float = 1e-3) -> JaxModel:
    """Multinomial logistic regression on the digits: ℓ = CE(Wᵀx + b, y) + ``(λ/2)|W|²``; starts at W = 0, b = 0."""
    jax, jnp, _ = import_jax()
    x, y = load()
    lam = float(l2)
    if not lam >= 0:
        raise ValueError(f"l2 must be >= 0, got {l2}")

    def loss(params, xi, yi):
        return _cross_entropy(jax, jnp, xi @ params["w"] + params["b"], yi) + 0.5 * lam * jnp.sum(params["w"] ** 2)

    params = {"w": np.zeros((64, 10)), "b": np.zeros(10)}
    return JaxModel(loss, params, x, y, name=f"digits logistic regression (λ = {lam:g})")


def mlp(hidden: int = 32, *, seed=0) -> JaxModel:
    """A 64–``hidden``–10 tanh MLP on the digits with softmax cross-entropy; N(0, 1/fan_in) weights, zero biases."""
    jax, jnp, _ = import_jax()
    x, y = load()
    hidden = int(hidden)
    if hidden < 1:
        raise ValueError(f"hidden must be >= 1, got {hidden}")
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    params = {
        "w1": rng.standard_normal((64, hidden)) / 8.0,
        "b1": np.zeros(hidden),
        "w2": rng.standard_normal((hidden, 10)) / np.sqrt(hidden),
        "b2": np.zeros(10),
    }

    def loss(params, xi, yi):
        a = jnp.tanh(xi @ params["w1"] + params["b1"])
        return _cross_entropy(jax, jnp, a @ params["w2"] + params["b2"], yi)

    return JaxModel(loss, params, x, y, name=f"digits MLP 64-{hidden}-10")
