"""A diverging run is inf, never NaN (issue: simulate reported NaN for heavy ball, Adam and float32 runs).

An unstable step overflows the state to inf, and inf − inf turns the loss into NaN; from the first non-finite loss
a replica has diverged and its loss is inf, as the exact engines call an unstable run's steps to a target inf.
"""

import numpy as np
import pytest

import nqm
from nqm import optim
from nqm.montecarlo.results import loss_curve

pytestmark = pytest.mark.filterwarnings(
    "ignore:overflow encountered:RuntimeWarning", "ignore:invalid value encountered:RuntimeWarning"
)


@pytest.mark.parametrize(
    "opt, options",
    [
        (100.0, {}),
        (optim.heavy_ball(100.0, 0.9), {}),
        (optim.heavy_ball(100.0, 0.9), {"dtype": np.float32}),
        (optim.heavy_ball(100.0, 0.9), {"generator": "philox"}),
        (100.0, {"per_example": "gaussian"}),
    ],
)
def test_a_diverging_run_is_inf_from_where_it_leaves_and_finite_before(opt, options):
    p = nqm.NoisyQuadratic.zhang2019(20)
    run = nqm.simulate(p, opt, 8, 300, 4, seed=0, progress=False, **options)
    small = 1e-4 if isinstance(opt, float) else optim.heavy_ball(1e-4, 0.9)
    stable = nqm.simulate(p, small, 8, 300, 4, seed=0, progress=False, **options)
    assert not np.any(np.isnan(run.mean)) and not np.any(np.isnan(run.sem))
    assert run.mean[-1] == np.inf and run.sem[-1] == np.inf
    # step 0 does not depend on the step size (a float32 state is rounded along paths that may differ by an ulp)
    eps = float(np.finfo(options.get("dtype", np.float64)).eps)
    assert run.mean[0] == pytest.approx(stable.mean[0], rel=4 * eps) and np.isfinite(run.mean[0])
    gone = np.isinf(run.mean)
    assert np.all(gone[np.argmax(gone) :])  # once diverged, always


def test_loss_curve_marks_a_replica_diverged_from_its_first_non_finite_loss():
    losses = np.array([[1.0, 2.0, np.nan, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, np.inf, 3.0, 3.0]])
    curve = loss_curve(np.arange(4), losses, keep_losses=True)
    np.testing.assert_array_equal(curve.losses[0], [1.0, 2.0, np.inf, np.inf])
    np.testing.assert_array_equal(curve.losses[2], [1.0, np.inf, np.inf, np.inf])
    np.testing.assert_array_equal(curve.mean, [1.0, np.inf, np.inf, np.inf])
    np.testing.assert_array_equal(curve.sem, [0.0, np.inf, np.inf, np.inf])
