r"""A :class:`~nqm.measure.Model` from a JAX per-example loss and a parameter pytree (optional extra ``nqm[real]``).

The four callables are JAX's transformations of ``ℓ(params, x, y)``, the loss of one example:

* per-example gradients ``vmap(grad(ℓ))`` over a chunk of examples;
* the mean loss and its gradient on any index set;
* Hessian-vector products of the full-batch mean loss by forward-over-reverse differentiation,
  ``Hv = ∂/∂t ∇L(θ + tv)|₀ = jvp(grad(L), (θ,), (v,))`` (Pearlmutter 1994), vmapped over the vectors;
* batched losses and gradients (for one real step, many times), and real heavy-ball runs of many steps in one
  compiled ``lax.scan`` (for whole runs).

``params`` is any pytree, flattened with ``jax.flatten_util.ravel_pytree``; every computation runs in float64
(inside ``jax.enable_x64``, without changing the caller's global setting), since exact comparisons with the
quadratic's closed forms need it.
A PyTorch user writes the same four with ``torch.func`` (``vmap(grad(loss_one), in_dims=(None, 0, 0))``,
``jvp(grad(mean_loss), (θ,), (v,))``) and passes them to :class:`~nqm.measure.Model` (the repository's
``examples/torch_model.py``).
"""

from __future__ import annotations

import numpy as np

from .model import Model

__all__ = ["JaxModel", "import_jax"]


def import_jax():
    """(jax, jax.numpy, ravel_pytree), or an ImportError that says how to install them."""
    try:
        import jax
        import jax.numpy as jnp
        from jax.flatten_util import ravel_pytree
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ImportError("nqm.measure.JaxModel needs JAX: pip install 'nqm[real]'") from None
    return jax, jnp, ravel_pytree


class JaxModel(Model):
    """A model from a JAX per-example loss ``per_example_loss(params, x, y) -> scalar``.

    Args:
        per_example_loss: the loss of one example (x, y) at ``params``.
        params: the parameter pytree at which ``initial`` is taken (its structure is kept for ``unravel``).
        inputs: (N, ...) the examples' inputs. targets: (N, ...) their targets (labels keep their dtype).
        name: a label for reports.

    Attributes (besides :class:`~nqm.measure.Model`'s): ``initial``, the flat float64 θ of ``params``;
    ``unravel(theta)``, the pytree of a flat θ.
    """

    def __init__(self, per_example_loss, params, inputs, targets, *, name: str = "JAX model"):
        jax, jnp, ravel_pytree = import_jax()
        if not callable(per_example_loss):
            raise TypeError("per_example_loss must be callable: per_example_loss(params, x, y) -> scalar")
        with jax.enable_x64(True):
            params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype=jnp.float64), params)
            flat, unravel = ravel_pytree(params)
            x = jnp.asarray(inputs, dtype=jnp.float64)
            y = jnp.asarray(targets)
        if x.ndim < 1 or y.ndim < 1 or x.shape[0] != y.shape[0]:
            raise ValueError(f"inputs and targets need the same first dimension N, got {x.shape} and {y.shape}")

        def one(theta, xi, yi):
            return per_example_loss(unravel(theta), xi, yi)

        def mean_loss(theta, idx):
            return jnp.mean(jax.vmap(one, in_axes=(None, 0, 0))(theta, x[idx], y[idx]))

        def full_loss(theta):
            return jnp.mean(jax.vmap(one, in_axes=(None, 0, 0))(theta, x, y))

        def hvp_one(theta, v):
            return jax.jvp(jax.grad(full_loss), (theta,), (v,))[1]

        def heavy_ball_run(theta, velocity, lr, momentum, rows):
            def step(carry, idx):
                th, v = carry
                v = momentum * v + jax.grad(mean_loss)(th, idx)
                th = th - lr * v
                return (th, v), full_loss(th)

            (theta, velocity), losses = jax.lax.scan(step, (theta, velocity), rows)
            return theta, velocity, losses

        compiled = {
            "loss": jax.jit(mean_loss),
            "gradient": jax.jit(jax.grad(mean_loss)),
            "per_example_gradients": jax.jit(
                lambda theta, idx: jax.vmap(jax.grad(one), in_axes=(None, 0, 0))(theta, x[idx], y[idx])
            ),
            "hvp": jax.jit(jax.vmap(hvp_one, in_axes=(None, 0))),
            "losses_at": jax.jit(jax.vmap(mean_loss, in_axes=(0, None))),
            "gradients_on": jax.jit(jax.vmap(jax.grad(mean_loss), in_axes=(None, 0))),
        }

        def on_host(fn, scalar=False):
            def call(theta, arg):
                with jax.enable_x64(True):
                    out = fn(jnp.asarray(theta, dtype=jnp.float64), jnp.asarray(arg))
                return float(out) if scalar else np.asarray(out, dtype=np.float64)

            return call

        def run_on_host(run):
            def call(theta, velocity, lr, momentum, rows):
                with jax.enable_x64(True):
                    f64 = jnp.float64
                    out = run(jnp.asarray(theta, f64), jnp.asarray(velocity, f64), f64(lr), f64(momentum), rows)
                return tuple(np.asarray(a, dtype=np.float64) for a in out)

            return call

        super().__init__(
            n=int(x.shape[0]),
            dim=int(flat.size),
            loss=on_host(compiled["loss"], scalar=True),
            gradient=on_host(compiled["gradient"]),
            per_example_gradients=on_host(compiled["per_example_gradients"]),
            hvp=on_host(compiled["hvp"]),
            name=name,
            losses_at=on_host(compiled["losses_at"]),
            gradients_on=on_host(compiled["gradients_on"]),
            heavy_ball_run=run_on_host(jax.jit(heavy_ball_run)),
        )
        object.__setattr__(self, "initial", np.asarray(flat, dtype=np.float64))
        object.__setattr__(self, "unravel", unravel)
