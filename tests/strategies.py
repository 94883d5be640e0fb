"""Reusable hypothesis strategies: problems, points, batch sizes and steps (never seeds for statistics)."""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nqm

positive = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)
batch_sizes = st.floats(min_value=1.0, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def problems(draw, min_d=1, max_d=12, noise=True):
    d = draw(st.integers(min_d, max_d))
    h = draw(hnp.arrays(np.float64, d, elements=positive))
    if noise:
        c = draw(hnp.arrays(np.float64, d, elements=st.floats(0.0, 1e2)))
        c[0] += 1e-2  # some noise, so that B_noise > 0
    else:
        c = np.zeros(d)
    return nqm.NoisyQuadratic(h, c)


@st.composite
def points(draw, p):
    theta = draw(hnp.arrays(np.float64, p.d, elements=st.floats(-10, 10)))
    theta[0] = draw(st.floats(0.1, 10))  # G ≠ 0
    return theta


@st.composite
def problem_and_point(draw, **kw):
    p = draw(problems(**kw))
    return p, draw(points(p))


@st.composite
def rotations(draw, d):
    """A random orthogonal matrix from a drawn Gaussian matrix (QR with sign fix)."""
    a = draw(hnp.arrays(np.float64, (d, d), elements=st.floats(-1, 1)))
    a = a + 3 * np.eye(d)  # well conditioned
    q, r = np.linalg.qr(a)
    return q * np.sign(np.diag(r))


@st.composite
def linear_optimisers(draw, lr):
    """A linear optimiser of :mod:`nqm.optim` with step ``lr``: SGD, heavy ball, Nesterov or quasi-hyperbolic
    momentum (ν drawn from 0.3, 0.7, 1), with or without an EMA of its iterates (β, γ drawn over [0, 0.95))."""
    nu = draw(st.sampled_from([0.3, 0.7, 1.0]))
    family = draw(
        st.sampled_from([nqm.optim.heavy_ball, nqm.optim.nesterov, lambda lr, beta: nqm.optim.qhm(lr, beta, nu)])
    )
    base = family(lr, draw(st.sampled_from([0.0, 0.3, 0.7, 0.9])))
    return nqm.optim.ema(base, draw(st.sampled_from([0.0, 0.5, 0.9])))


@st.composite
def sign_problems(draw, max_d=6):
    """A rotated problem with noise in every parameter coordinate, possibly correlated, and a point θ."""
    p = draw(problems(min_d=2, max_d=max_d))
    q = draw(rotations(p.d))
    a = draw(hnp.arrays(np.float64, (p.d, p.d), elements=st.floats(-1, 1)))
    sigma_x = a @ a.T * draw(st.sampled_from([0.0, 1.0])) + np.diag(
        draw(hnp.arrays(np.float64, p.d, elements=positive))
    )
    rotated = nqm.NoisyQuadratic.with_parameter_noise(p.h, q, sigma_x)
    return rotated, draw(points(p))
