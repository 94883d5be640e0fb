r"""An elementwise optimiser's step fused with the NQM's gradient into one compiled loop, where numba is installed.

On a diagonal problem a step of an elementwise optimiser (:mod:`nqm.optim`: sign descent, Adam and every other
whose class writes ``step``; none is named here) is, per coordinate of a tile,

.. math:: g = \sigma z + h\,x,\qquad (x, m, v) \leftarrow \mathrm{step}(x, m, v, g, c_1, \dots, c_k),

with z the fresh normal, σ the minibatch noise's standard deviation and ``step`` the optimiser's one definition
(``_Elementwise.step``, a pure function of one coordinate's numbers). NumPy runs it as a pass over the tile per
operation (five to ten passes beside the normal generator's one); compiled here, one loop does all of it per
element. The loop runs the same operations in the same order, and numba does not contract a multiply and an add
into an FMA unless asked (no ``fastmath``), so it gives NumPy's numbers bit for bit in float64 and float32
(``tests/test_fused_elementwise.py``). The normals still come from NumPy's SFC64 (the same stream either way).

``NQM_COMPILED=0``, or numba missing or failing to import: ``fused_step`` returns None and the simulator runs
NumPy. Each optimiser class compiles once per process and dtype on first use (about a second).
"""

from __future__ import annotations

import functools
import os

__all__ = ["fused_step"]


def fused_step(opt):
    """A compiled ``kernel(x, aux, z, h, sd, constants)`` that runs one step of ``opt`` on a tile in place (``x`` and
    the ``aux`` tuple (rows, cols), ``z`` the normals (rows, cols), ``h`` and ``sd`` (cols,), ``constants`` the
    tuple ``opt.constants(t)`` in the tile's dtype), or None where it cannot be compiled here."""
    if os.environ.get("NQM_COMPILED", "1") == "0" or not hasattr(opt, "step"):
        return None
    return _kernel(type(opt).step, opt.slots)


@functools.cache
def _kernel(step, slots: int):
    """The fused loop around ``step`` with ``slots`` auxiliary arrays (0, 1 or 2), compiled lazily; None without
    numba."""
    try:
        import numba
    except ImportError:
        return None
    one = numba.njit(step)  # the optimiser's own definition, compiled as it is written
    jit = numba.njit(nogil=True)  # the tiles run on threads

    # one loop per number of slots: numba writes a tuple's items back into arrays only when it knows how many
    if slots == 0:

        @jit
        def kernel(x, aux, z, h, sd, constants):
            for r in range(x.shape[0]):
                for c in range(x.shape[1]):
                    g = z[r, c] * sd[c] + x[r, c] * h[c]
                    x[r, c] = one(x[r, c], g, *constants)

    elif slots == 1:

        @jit
        def kernel(x, aux, z, h, sd, constants):
            (m,) = aux
            for r in range(x.shape[0]):
                for c in range(x.shape[1]):
                    g = z[r, c] * sd[c] + x[r, c] * h[c]
                    x[r, c], m[r, c] = one(x[r, c], m[r, c], g, *constants)

    elif slots == 2:

        @jit
        def kernel(x, aux, z, h, sd, constants):
            m, v = aux
            for r in range(x.shape[0]):
                for c in range(x.shape[1]):
                    g = z[r, c] * sd[c] + x[r, c] * h[c]
                    x[r, c], m[r, c], v[r, c] = one(x[r, c], m[r, c], v[r, c], g, *constants)

    else:
        return None
    return kernel
