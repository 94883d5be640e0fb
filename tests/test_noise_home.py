"""The noise has one home (docs/architecture.md, "Change the noise model"): label noise, Σ → Σ + s²H, written in
``nqm/noise.py``'s three accessors of Σ and nowhere else, reaches every engine.

The test makes exactly that edit to a copy of the package, runs every engine there (``noise_engines.py``, on a
diagonal, a dense and a rotated problem) and holds each answer to the unedited package on the same problems with
s²H added to Σ by hand. The draws of the simulators are the same on both sides, so even the Monte Carlo answers
agree to rounding: an engine that read Σ past ``nqm.noise`` would see no label noise and differ by O(s²/c) ≈ 20%.
A second copy also plants such a bypass (the CPU simulator's noise scale read off the problem) and must fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from noise_engines import engine_results

ROOT = Path(__file__).resolve().parents[1]
LABEL_NOISE = 0.3

# The worked example of docs/architecture.md: the three accessors, each with s²H added.
LABEL_NOISE_EDIT = {
    "    return p.c\n": f"    return p.c + {LABEL_NOISE} * p.h\n",
    "    return p.sigma_factor\n": (
        "    if p.sigma is None:\n        return None\n"
        f"    return NoisyQuadratic(p.h, sigma=p.sigma + {LABEL_NOISE} * np.diag(p.h)).sigma_factor\n"
    ),
    "    return p.parameter_sigma\n": f"    return p.parameter_sigma + {LABEL_NOISE} * p.parameter_hessian\n",
}
# Two engines made to read Σ off the problem again, and the answers that must then move.
BYPASSES = {
    "simulator": (
        "nqm/montecarlo/sfc64.py",
        ("    sd = noise_sd(p, batch_size)\n", "    sd = np.sqrt(p.c / batch_size)\n"),
        ["simulate.adam/diagonal"],  # the fused elementwise path; the linear one scales by step_coefficients
    ),
    "counter engine": (
        "nqm/montecarlo/counter.py",
        ("    batch_sd = noise_sd(p, batch_size)\n", "    batch_sd = np.sqrt(p.c / batch_size)\n"),
        ["simulate.adam.philox/diagonal"],  # its fused elementwise path
    ),
    "noise scale": (
        "nqm/dynamics/moments/expected.py",
        ("noise_scale_of_moments(p, v, pre),", "((pre**2 * p.h) @ p.c) / (v @ (pre**2 * p.h**3)),"),
        [f"dynamics.noise_scales_along/{name}" for name in ("diagonal", "dense", "rotated")],
    ),
}


def _edited_results(tmp_path: Path, edits: dict[str, dict[str, str]]) -> dict[str, np.ndarray]:
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "nqm", copy / "nqm", ignore=shutil.ignore_patterns("__pycache__"))
    for name, replacements in edits.items():
        path = copy / name
        text = path.read_text()
        for old, new in replacements.items():
            assert text.count(old) == 1, (name, old)
            text = text.replace(old, new)
        path.write_text(text)
    out = tmp_path / "results.npz"
    env = {**os.environ, "PYTHONPATH": str(copy)}
    subprocess.run([sys.executable, str(ROOT / "tests" / "noise_engines.py"), str(out)], check=True, env=env)
    with np.load(out) as data:
        results = dict(data)
    assert Path(str(results.pop("package"))).is_relative_to(copy), "the edited copy was not the package imported"
    return results


def _differing(edited: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> list[str]:
    assert edited.keys() == reference.keys()
    # rounding only: Q(Σ + s²H)Qᵀ is formed in another order than QΣQᵀ + s²QHQᵀ
    return [k for k in reference if not np.allclose(edited[k], reference[k], rtol=1e-10, atol=0.0, equal_nan=True)]


@pytest.fixture(scope="module")
def reference():
    return engine_results(LABEL_NOISE)


@pytest.mark.slow
def test_label_noise_written_in_the_noise_module_alone_reaches_every_engine(tmp_path, reference):
    edited = _edited_results(tmp_path, {"nqm/noise.py": LABEL_NOISE_EDIT})
    assert _differing(edited, reference) == []
    # and the label noise is really there: without it most answers move
    assert len(_differing(engine_results(0.0), reference)) > 0.8 * len(reference)


@pytest.mark.slow
@pytest.mark.parametrize("bypass", sorted(BYPASSES))
def test_an_engine_that_reads_sigma_past_the_noise_module_is_caught(tmp_path, reference, bypass):
    path, (old, new), moved = BYPASSES[bypass]
    edited = _edited_results(tmp_path, {"nqm/noise.py": LABEL_NOISE_EDIT, path: {old: new}})
    assert _differing(edited, reference) == moved
