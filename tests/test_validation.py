"""The validation suite: its statistics helpers, and an end-to-end `nqm validate --quick`."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from nqm.cli import main as cli_main
from validation.stats import Check, critical_z, decide, fit_saturation, parabola_vertex


def test_critical_z_is_bonferroni():
    assert critical_z(1, 0.05) == pytest.approx(1.959964, rel=1e-6)
    assert critical_z(100, 1e-3) == pytest.approx(4.4172, rel=1e-4)  # about 4.4 for K = 100 cells at α = 1e-3


def test_parabola_vertex_is_exact_on_noiseless_data():
    eps = np.linspace(0.1, 2.5, 9)
    y = 3.0 * eps - 1.5 * eps**2  # vertex at ε = 1, value 1.5
    e, se_e, top, se_top = parabola_vertex(eps, y, np.full(9, 1e-3))
    assert e == pytest.approx(1.0, rel=1e-12) and top == pytest.approx(1.5, rel=1e-12)
    assert 0 < se_e < 1e-2 and 0 < se_top < 1e-2


def test_fit_saturation_recovers_parameters():
    b = 2.0 ** np.arange(-6, 7) * 10
    y = 2.0 / (1 + 10 / b)
    y_max, noise, se_y, se_n = fit_saturation(b, y, np.full(b.size, 1e-6), 1.0, 3.0)
    assert y_max == pytest.approx(2.0, rel=1e-6) and noise == pytest.approx(10.0, rel=1e-6)


def test_decide_passes_truth_and_rejects_planted_error():
    rng = np.random.default_rng(0)
    truth = np.linspace(1, 2, 50)
    se = np.full(50, 0.01)
    measured = truth + se * rng.standard_normal(50)
    good = Check("c", "claim", "f", truth, measured, se)
    control = good.control("control", "planted", truth * 1.1)
    exact = Check("e", "claim", "f", [1.0], [1.0 + 1e-12], 0.0, exact=True)
    bad_exact = Check("x", "claim", "f", [1.0], [1.001], 0.0, exact=True)
    z = decide([good, control, exact, bad_exact])
    assert z == pytest.approx(critical_z(50))
    assert good.passed and control.passed and exact.passed and not bad_exact.passed


def test_nqm_validate_quick_end_to_end(quick_report):
    """The quick suite passes, rejects every control, and writes the report, results and figures."""
    tmp_path, status = quick_report
    assert status == 0
    results = json.loads((tmp_path / "results.json").read_text())
    checks = results["checks"]
    assert {"name", "claim", "kind", "predicted", "measured", "se", "z", "passed"} <= set(checks[0])
    kinds = {c["kind"] for c in checks}
    assert kinds == {"check", "negative_control"}
    names = " ".join(c["name"] for c in checks)
    for tag in ("V1", "V2", "V3", "V4", "V5"):
        assert tag in names
    assert all(c["passed"] for c in checks)
    for c in checks:
        if c["figure"]:
            assert (tmp_path / c["figure"]).stat().st_size > 10_000
    assert "negative controls rejected" in (tmp_path / "report.md").read_text()


def test_python_m_validation_is_nqm_validate():
    out = subprocess.run([sys.executable, "-m", "validation", "--help"], capture_output=True, text=True, check=True)
    assert "--quick" in out.stdout and "--seed" in out.stdout
    script = shutil.which("nqm")
    if script is not None:  # the console script of an installed package
        out = subprocess.run([script, "validate", "--help"], capture_output=True, text=True, check=True)
        assert "--quick" in out.stdout


def test_only_runs_the_named_checks(tmp_path, capsys):
    assert cli_main(["validate", "--quick", "--out", str(tmp_path), "--only", "V5"]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["meta"]["only"] == ["V5"]
    assert results["checks"] and all(c["name"].startswith("V5") for c in results["checks"])
    capsys.readouterr()
    assert cli_main(["validate", "--out", str(tmp_path), "--only", "V0"]) == 2  # a user error (tests/test_cli.py)
    assert "--only names no check V0" in capsys.readouterr().err
    from validation.runner import run

    with pytest.raises(ValueError, match="unknown check"):  # called from Python, the runner raises
        run(tmp_path, quick=True, only=["V0"])


def test_claims_are_discovered_in_order():
    from validation.claims import discover

    assert [c.id for c in discover()] == [f"V{i}" for i in range(1, 17)]


def test_a_new_claim_is_one_file(tmp_path, monkeypatch):
    """A package with claim files is discovered by file name; a malformed claim is refused with its name."""
    from validation.claims import Context, discover

    pkg = tmp_path / "more_claims"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "v2_second.py").write_text(
        "from validation.claims import Outcome\nID = 'V2'\nTITLE = 'second'\n"
        "def run(ctx):\n    return Outcome(tables=[ctx.seed])\n"
    )
    (pkg / "v10_tenth.py").write_text("ID = 'V10'\nTITLE = 'tenth'\ndef run(ctx):\n    return None\n")
    (pkg / "helpers.py").write_text("X = 1\n")  # not a claim: no vN_ prefix
    monkeypatch.syspath_prepend(str(tmp_path))
    claims = discover("more_claims")
    assert [(c.id, c.title) for c in claims] == [("V2", "second"), ("V10", "tenth")]
    assert claims[0].run(Context(tmp_path, None, 7)).tables == [7]
    (pkg / "v3_wrong.py").write_text("ID = 'V4'\nTITLE = 't'\ndef run(ctx):\n    pass\n")
    with pytest.raises(ValueError, match="v3_wrong declares ID 'V4'"):
        discover("more_claims")
    (pkg / "v3_wrong.py").write_text("ID = 'V3'\n")
    monkeypatch.delitem(sys.modules, "more_claims.v3_wrong")  # import it afresh
    with pytest.raises(ValueError, match="lacks TITLE, run"):
        discover("more_claims")
