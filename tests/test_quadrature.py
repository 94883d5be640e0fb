"""The compressed spectrum the tuners search on: Gauss rules of discrete measures (exact to degree 2n − 1, not 2n),
the compression's moments per bin, and the tuner's answer on a long spectrum, searched compressed and settled
exactly, against the search on every coordinate."""

import numpy as np
import pytest

import nqm
from nqm import dynamics
from nqm.dynamics.runs import search, tuned_losses
from nqm.dynamics.runs.quadrature import compress_spectrum, gauss_rule


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_a_gauss_rule_integrates_polynomials_up_to_degree_2n_minus_1(n):
    rng = np.random.default_rng(n)
    x, w = rng.uniform(-3.0, 5.0, 40), rng.uniform(0.0, 2.0, 40)
    nodes, weights = gauss_rule(x, w, n)
    assert nodes.size == n and np.all(weights > 0) and x.min() <= nodes.min() and nodes.max() <= x.max()
    moment = lambda y, v, k: v @ ((y - 1.0) / 4.0) ** k  # noqa: E731 - moments about the interval's middle
    for k in range(2 * n):
        assert moment(nodes, weights, k) == pytest.approx(moment(x, w, k), rel=1e-11, abs=1e-12)
    assert abs(moment(nodes, weights, 2 * n) - moment(x, w, 2 * n)) > 1e-6 * moment(x, w, 2 * n)


def test_the_compression_keeps_the_top_and_each_bin_s_moments():
    rng = np.random.default_rng(3)
    kappa = np.sort(np.exp(rng.uniform(np.log(1e-4), 0.0, 3000)))[::-1]  # every bin of log κ well filled
    a, b = rng.uniform(0.0, 1.0, 3000), rng.uniform(0.0, 1.0, 3000)
    c = compress_spectrum(kappa, a, b, exact=20, bins=10, nodes=3)
    np.testing.assert_array_equal(c.kappa[:20], kappa[:20])
    np.testing.assert_array_equal(c.a[:20], a[:20])
    assert c.kappa.size == 20 + 10 * 2 * 3
    # per bin of log κ the rule holds the moments of degree < 6 of each weight, so the whole sums do too
    log_k, log_c = np.log(kappa[20:]), np.log(c.kappa[20:])
    middle = 0.5 * (log_k.min() + log_k.max())
    for weights, compressed in ((a[20:], c.a[20:]), (b[20:], c.b[20:])):
        for k in range(6):
            assert compressed @ (log_c - middle) ** k == pytest.approx(weights @ (log_k - middle) ** k, rel=1e-9)


# the threshold lowered from its default (2048) so that the exact search over every coordinate takes seconds, not
# minutes (d = 4096: 2.5 minutes for heavy ball; here 40 s and 10 s); the compression is the same at every d
@pytest.mark.parametrize(("family", "d", "compress_above"), [("heavy_ball", 2048, 1024), ("ema", 1024, 512)])
def test_a_long_spectrum_searched_compressed_gives_the_exact_search_s_runs(family, d, compress_above, monkeypatch):
    """d = 2 × the compression threshold, at batch sizes whose runs are long and smooth at the target: the same steps
    as the search over every coordinate (ε within 1e-4), and exact first hits (checked step by step at the shorter
    run; the longer costs minutes to scan). Planted: a coarse compression (no exact top, one node per bin) moves the
    answer."""
    monkeypatch.setattr(search, "COMPRESS_ABOVE", compress_above)
    p = nqm.NoisyQuadratic.zhang2019(d)
    batches, target = np.array([4.0, 256.0]), 0.02
    assert p.d > search.COMPRESS_ABOVE
    compressed = dynamics.optimal_steps_to_target(p, target, batches, family=family)
    assert dynamics.steps_to_target(p, compressed.optimizer(1), batches[1], target) == compressed.steps[1]
    monkeypatch.setattr(search, "COMPRESS_ABOVE", 10**9)
    full = dynamics.optimal_steps_to_target(p, target, batches, family=family)
    np.testing.assert_array_equal(compressed.steps, full.steps)
    np.testing.assert_allclose(compressed.lr, full.lr, rtol=1e-4)
    monkeypatch.setattr(search, "COMPRESS_ABOVE", compress_above)
    coarse = lambda k, a, b, **_: compress_spectrum(k, a, b, exact=1, bins=4, nodes=1)  # noqa: E731
    monkeypatch.setattr(tuned_losses, "compress_spectrum", coarse)
    planted = dynamics.optimal_steps_to_target(p, target, batches, family=family)
    assert not np.allclose(planted.lr, full.lr, rtol=1e-4)
