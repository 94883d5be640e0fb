"""Work that cannot fit in memory fails at once, before anything is allocated, with a MemoryError that says how
much it needs, how much there is, and how to split the work."""

import time

import numpy as np
import pytest

import nqm
from nqm import checks, dynamics


def test_available_memory_is_read_from_the_system():
    available = checks.available_memory()
    assert available is not None and 2**20 < available < 2**50


@pytest.mark.parametrize(
    "call, named",
    [
        (
            lambda p: nqm.simulate(p, 0.5, 4, 1, replicas=10**12, at=[1]),
            "replicas × recorded steps = 1000000000000 × 1",
        ),
        (lambda p: nqm.simulate(p, 0.5, 4, 10, 10**11, keep_state=True, at=[10]), "final θ"),
        (lambda p: dynamics.expected_loss(p, 0.5, 4, 10**12), "every one of 1000000000000 steps"),
        (lambda p: nqm.gradient_norm_trace(p, 0.5, 2, 8, 10**6, 10**7), "replicas × steps = 10000000 × 1000000"),
        (lambda p: nqm.LeastSquares(p.h, 0.1).expected_loss(0.1, 2, 10**11), "(steps + 1) × d"),
        (lambda p: nqm.LeastSquares(p.h, 0.1).simulate(0.1, 2, 10, 10**12, at=[10]), "replicas × recorded steps"),
    ],
)
def test_work_that_cannot_fit_fails_at_once(call, named):
    start = time.perf_counter()
    with pytest.raises(MemoryError, match="needs about .* more than the .* available") as err:
        call(nqm.NoisyQuadratic.zhang2019(10))
    assert named in str(err.value)
    assert time.perf_counter() - start < 2.0  # refused before any work, not after minutes of it


def test_the_estimate_is_what_the_run_needs(monkeypatch):
    """With 1 MiB available, 10⁵ replicas × 1 recorded step (1.6 MB of losses and their copies) are refused and 100
    replicas run; the expected loss at every one of 10⁴ steps (0.4 MB) runs and at 10⁵ (4 MB) is refused."""
    monkeypatch.setattr(checks, "available_memory", lambda: 2**20)
    p = nqm.NoisyQuadratic.zhang2019(10)
    with pytest.raises(MemoryError, match="run fewer replicas per call"):
        nqm.simulate(p, 0.5, 4, 1, replicas=10**5, at=[1])
    assert nqm.simulate(p, 0.5, 4, 1, replicas=100, at=[1]).n == 100
    assert len(dynamics.expected_loss(p, 0.5, 4, 10**4)) == 10**4 + 1
    with pytest.raises(MemoryError, match=r"pass at=\[\.\.\.\]"):
        dynamics.expected_loss(p, 0.5, 4, 10**5)
    assert np.isfinite(dynamics.expected_loss(p, 0.5, 4, 10**5, at=[10**5])[0])
