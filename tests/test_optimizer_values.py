"""Optimiser values are checked however they are built (issue: ``HeavyBall(0.1, 1.5)`` and ``Sgd(-1.0)`` skipped
every check, ``adamw(weight_decay="0.1")`` and ``True`` were accepted, ``stable_lr_bound("heavy_ball", 2.0)``
returned 6 and ``adam_preconditioner(eps=-1)`` was negative)."""

import numpy as np
import pytest

import nqm
from nqm import optim, theory


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: optim.Sgd(-1.0), "lr must be finite and in \\(0, inf\\)"),
        (lambda: optim.Sgd(0.1, weight_decay=-0.5), "weight_decay must be"),
        (lambda: optim.HeavyBall(0.1, 1.5), "momentum must be finite and in \\[0, 1\\)"),
        (lambda: optim.Nesterov(0.1, np.array([0.5, 1.0])), "momentum must be"),
        (lambda: optim.Ema(optim.sgd(0.1), 1.2), "gamma must be"),
        (lambda: optim.Adam(0.1, 0.9, 0.999, -1e-8), "eps must be"),
        (lambda: optim.RmsProp(0.1, 1.0, 1e-8), "beta2 must be"),
        (lambda: optim.Signum(float("nan"), 0.9), "lr must be"),
        (lambda: optim.stable_lr_bound("heavy_ball", 2.0), "momentum must be in \\[0, 1\\)"),
        (lambda: optim.adamw(0.1, weight_decay=-1.0), "weight_decay must be"),
    ],
)
def test_a_value_out_of_range_is_refused_by_name(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(
    "build",
    [
        lambda: optim.adamw(0.1, weight_decay="0.1"),
        lambda: optim.adamw(0.1, weight_decay=True),
        lambda: optim.HeavyBall(0.1, "0.9"),
        lambda: optim.stable_lr_bound("heavy_ball", True),
    ],
)
def test_a_value_that_is_not_a_number_is_refused(build):
    with pytest.raises(TypeError, match="must be a real number"):
        build()
    with pytest.raises(TypeError, match="decoupled must be True or False"):
        optim.Sgd(0.1, decoupled="yes")


def test_values_in_range_still_build_and_the_tuners_arrays_of_beta_are_accepted():
    assert optim.HeavyBall(0.1, 0.0).momentum == 0.0
    assert optim.adamw(0.1, weight_decay=0.1).weight_decay == 0.1
    np.testing.assert_array_equal(optim.Nesterov(1.0, np.array([0.0, 0.5])).momentum, [0.0, 0.5])
    np.testing.assert_allclose(optim.stable_lr_bound("heavy_ball", np.array([0.0, 0.5])), [2.0, 3.0])


def test_adam_preconditioner_refuses_a_negative_offset():
    p = nqm.NoisyQuadratic.zhang2019(10)
    with pytest.raises(ValueError, match="eps must be"):
        theory.adam_preconditioner(p, np.ones(10), 8, eps=-1.0)
    assert np.all(theory.adam_preconditioner(p, np.ones(10), 8, eps=0.0) > 0)
