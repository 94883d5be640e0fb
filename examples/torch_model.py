r"""A PyTorch model as nqm sees it: the four callables of :class:`nqm.measure.Model` written with ``torch.func``.

    python examples/torch_model.py          # needs torch, scikit-learn and nqm

:class:`nqm.measure.Model` asks for four functions on flat float64 NumPy vectors θ over a training set of N
examples (the training set is the population, McCandlish et al. 2018, arXiv:1812.06162, §2.1):

* ``loss(θ, idx)`` and ``gradient(θ, idx)``: the mean loss L_idx(θ) = (1/|idx|) Σ_{n ∈ idx} ℓ_n(θ) and ∇L_idx;
* ``per_example_gradients(θ, idx)``: the rows ∇ℓ_n(θ), n ∈ idx (``vmap(grad(ℓ))``);
* ``hvp(θ, V)``: H(θ)vᵢ for each row vᵢ of V, H the full-batch Hessian, by forward-over-reverse differentiation
  Hv = ∂/∂t ∇L(θ + tv)|₀ = ``jvp(grad(L), (θ,), (v,))`` (Pearlmutter 1994), vmapped over the rows.

:func:`torch_model` builds them from ``batch_loss(params, x, y)``, the mean loss of a batch over a dict of parameter
tensors (the form ``torch.func.functional_call`` gives any ``nn.Module``); per-example gradients are its gradient
on batches of one, vmapped (PyTorch's per-sample-gradient recipe). Everything runs in float64.
The script measures the digits logistic regression, written as an ``nn.Linear``, at its initial point and after
100 real SGD steps; ``nqm.measure.digits.logistic_regression`` is the same model in JAX, and the tests hold the two
to rounding.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, grad, jvp, vmap

from nqm.measure import Model, measure, sgd_point

__all__ = ["digits_logistic_regression", "flat", "torch_model"]


def torch_model(batch_loss, params: dict, inputs, targets, *, name: str = "PyTorch model") -> Model:
    """An :class:`nqm.measure.Model` from ``batch_loss(params, x, y) -> scalar tensor``, the mean loss of the batch
    (x, y) over its examples.

    ``params`` maps names to tensors; θ is their concatenation in the dict's order, each flattened row-major
    (:func:`flat` gives the θ of a params dict). ``inputs`` (N, ...) and ``targets`` (N, ...) are the training set.
    """
    names = list(params)
    shapes = [tuple(params[k].shape) for k in names]
    sizes = [int(np.prod(s, dtype=int)) for s in shapes]
    x = torch.as_tensor(np.asarray(inputs), dtype=torch.float64)
    y = torch.as_tensor(np.asarray(targets))
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"inputs and targets need the same first dimension N, got {x.shape[0]} and {y.shape[0]}")

    def unflatten(theta):
        return {k: part.reshape(s) for k, part, s in zip(names, torch.split(theta, sizes), shapes)}

    def mean_loss(theta, idx):
        return batch_loss(unflatten(theta), x[idx], y[idx])

    def one(theta, xi, yi):  # the loss of one example: a batch of one
        return batch_loss(unflatten(theta), xi[None], yi[None])

    def full_loss(theta):
        return batch_loss(unflatten(theta), x, y)

    per_example = vmap(grad(one), in_dims=(None, 0, 0))
    hvps = vmap(lambda theta, v: jvp(grad(full_loss), (theta,), (v,))[1], in_dims=(None, 0))

    def tensor(a):
        return torch.as_tensor(np.asarray(a, dtype=np.float64))

    def index(idx):
        return torch.as_tensor(np.asarray(idx, dtype=np.int64))

    return Model(
        n=int(x.shape[0]),
        dim=sum(sizes),
        loss=lambda theta, idx: float(mean_loss(tensor(theta), index(idx))),
        gradient=lambda theta, idx: grad(mean_loss)(tensor(theta), index(idx)).numpy(),
        per_example_gradients=lambda theta, idx: per_example(tensor(theta), x[index(idx)], y[index(idx)]).numpy(),
        hvp=lambda theta, vectors: hvps(tensor(theta), tensor(vectors)).numpy(),
        name=name,
    )


def flat(params: dict) -> np.ndarray:
    """θ of a params dict: the tensors flattened row-major and concatenated in the dict's order (float64)."""
    return np.concatenate([p.detach().to(torch.float64).reshape(-1).numpy() for p in params.values()])


def digits_logistic_regression(l2: float = 1e-3) -> tuple[Model, dict]:
    """The digits logistic regression as an ``nn.Linear(64, 10)`` from zero, with ``(λ/2)|W|²`` in every example's
    loss (scikit-learn's bundled digits, pixels scaled to [0, 1]); returns the model and its initial params."""
    from sklearn.datasets import load_digits

    data = load_digits()
    net = torch.nn.Linear(64, 10, dtype=torch.float64)
    params = {k: torch.zeros_like(v) for k, v in net.named_parameters()}

    def batch_loss(p, xb, yb):  # every example's loss carries (λ/2)|W|², so their mean does too
        cross_entropy = torch.nn.functional.cross_entropy(functional_call(net, p, (xb,)), yb)
        return cross_entropy + 0.5 * l2 * (p["weight"] ** 2).sum()

    model = torch_model(batch_loss, params, data.data / 16.0, data.target, name="digits logistic (PyTorch)")
    return model, params


def main() -> None:
    model, params = digits_logistic_regression()
    theta0 = flat(params)
    theta = sgd_point(model, theta0, 1.0, 32, 100, seed=0)  # 100 real SGD steps, B = 32, ε = 1
    for label, point in (("θ₀", theta0), ("after 100 SGD steps", theta)):
        m = measure(model, point, top_k=5, probes=4, lanczos_steps=30, seed=0)
        print(
            f"{label}: L = {m.loss:.4f}, |G|² = {m.grad_norm_sq:.4g}, GᵀHG = {m.gHg:.4g}, "
            f"tr(HΣ) = {m.tr_h_sigma:.4g}, B_noise = {m.b_noise:.1f}, B_simple = {m.b_simple:.1f}, "
            f"λ_max = {m.eigenvalues[0]:.4g} ({m.seconds:.1f} s)"
        )


if __name__ == "__main__":
    main()
