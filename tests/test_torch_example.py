"""``examples/torch_model.py``: the four callables of nqm.measure.Model written with ``torch.func`` measure the digits
logistic regression exactly as the JAX model of nqm.measure.digits does.

Two frameworks, two layouts of θ (PyTorch's ``nn.Linear`` keeps W as (10, 64) and the bias last, JAX's pytree the
bias first and W as (64, 10)), one model: at a point after 20 real SGD steps the losses, per-example gradients,
HVPs and every exact quantity of ``measure`` agree to rounding once θ is permuted. Needs torch (not an extra of
nqm: a user's own install), JAX and scikit-learn; skipped without them.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("jax")
pytest.importorskip("sklearn")

from nqm.measure import digits, measure, sgd_point  # noqa: E402

# torch's own modules still call torch.jit.script as they load (not this example's doing)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "torch_model.py"


@pytest.fixture(scope="module")
def both():
    spec = importlib.util.spec_from_file_location("torch_model_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    torch_net, params = example.digits_logistic_regression()
    jax_net = digits.logistic_regression()
    layout = jax_net.unravel(np.arange(jax_net.dim, dtype=np.float64))  # where each JAX coordinate sits
    perm = np.concatenate([np.asarray(layout["w"]).T.ravel(), np.asarray(layout["b"])]).astype(int)
    assert np.array_equal(example.flat(params), jax_net.initial[perm])  # both start at 0
    theta = sgd_point(jax_net, jax_net.initial, 1.0, 32, 20, seed=0)
    return torch_net, jax_net, theta, perm


def test_losses_gradients_and_hvps_agree_across_frameworks(both):
    torch_net, jax_net, theta, perm = both
    idx = np.random.default_rng(0).choice(jax_net.n, 40, replace=False)
    assert torch_net.loss(theta[perm], idx) == pytest.approx(jax_net.loss(theta, idx), rel=1e-13)
    np.testing.assert_allclose(
        torch_net.per_example_gradients(theta[perm], idx), jax_net.per_example_gradients(theta, idx)[:, perm],
        rtol=0, atol=1e-13,
    )  # fmt: skip
    vectors = np.random.default_rng(1).standard_normal((3, jax_net.dim))
    np.testing.assert_allclose(
        torch_net.hvp(theta[perm], vectors[:, perm]), jax_net.hvp(theta, vectors)[:, perm], rtol=0, atol=1e-12
    )


def test_measure_gives_the_same_true_noise_scales_from_either_framework(both):
    torch_net, jax_net, theta, perm = both
    settings = {"top_k": 3, "probes": 2, "lanczos_steps": 10, "estimator_draws": 0, "seed": 0}
    m_torch = measure(torch_net, theta[perm], **settings)
    m_jax = measure(jax_net, theta, **settings)
    for field in ("loss", "grad_norm_sq", "gHg", "tr_sigma", "tr_h_sigma", "b_noise", "b_simple"):
        assert getattr(m_torch, field) == pytest.approx(getattr(m_jax, field), rel=1e-10), field
    np.testing.assert_allclose(m_torch.eigenvalues, m_jax.eigenvalues, rtol=1e-8)
