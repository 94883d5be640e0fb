"""Problem files (``nqm.problem_file``), ``NoisyQuadratic.from_file``, ``nqm.info`` and ``nqm info``: every kind
builds what the constructor it names builds, every user error names the file and the key, and the summary's noise
scales agree with ``nqm.theory`` evaluated another way."""

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

import nqm
from nqm import dynamics, info, problem_file, spectra, theory
from nqm.cli import main

_POWER = '[spectrum]\nkind = "power_law"\nd = 3\nexponent = 1.0\n[noise]\nkind = "power"\n'


def _write(tmp_path, text, name="p.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_issue_s_example_loads(tmp_path, example_toml):
    p = nqm.NoisyQuadratic.from_file(_write(tmp_path, example_toml))
    np.testing.assert_array_equal(p.h, spectra.power_law(1000, 1.0))
    np.testing.assert_array_equal(p.c, spectra.noise_power(p.h, 1.0, 1.0))
    assert p.name == "power law 1.0" and p.basis is None
    assert problem_file.read(tmp_path / "p.toml").init_var == 1.0


@pytest.mark.parametrize(
    "table, expected",
    [
        ({"kind": "power_law", "d": 5, "exponent": 1.3, "scale": 2.0}, spectra.power_law(5, 1.3, 2.0)),
        ({"kind": "log_uniform", "d": 6, "low": 0.01, "high": 1.0}, spectra.log_uniform(6, 0.01, 1.0)),
        ({"kind": "uniform", "d": 4, "low": 0.5, "high": 2.0}, spectra.uniform(4, 0.5, 2.0)),
        (
            {"kind": "bulk_outliers", "d": 8, "low": 0.01, "high": 0.1, "outliers": [5.0, 2.0]},
            spectra.bulk_outliers(8, (0.01, 0.1), [5.0, 2.0]),
        ),
    ],
)
def test_each_spectrum_kind_is_its_constructor(table, expected):
    p = nqm.NoisyQuadratic.from_dict({"spectrum": table, "noise": {"kind": "power", "q": 0.5}})
    np.testing.assert_array_equal(p.h, expected)
    np.testing.assert_allclose(p.c, expected**0.5, rtol=1e-15)


def test_files_noise_kinds_and_the_basis(tmp_path):
    h = np.array([2.0, 1.0, 0.5])
    np.save(tmp_path / "h.npy", h)
    (tmp_path / "c.txt").write_text("0.1\n0.2\n0.3\n")
    sigma = np.diag([1.0, 2.0, 3.0]) + 0.1
    np.save(tmp_path / "sigma.npy", sigma)
    spectrum = '[spectrum]\nkind = "file"\npath = "h.npy"\n'
    p = nqm.NoisyQuadratic.from_file(_write(tmp_path, spectrum + '[noise]\nkind = "file"\npath = "c.txt"\n'))
    np.testing.assert_array_equal(p.h, h)
    np.testing.assert_allclose(p.c, [0.1, 0.2, 0.3])
    dense = nqm.NoisyQuadratic.from_file(_write(tmp_path, spectrum + '[noise]\nkind = "dense"\npath = "sigma.npy"\n'))
    np.testing.assert_allclose(dense.sigma, sigma)
    noise = '[noise]\nkind = "misaligned"\nq = 1.0\nstrength = 0.5\nseed = 3\n'
    text = spectrum + noise + "[basis]\nstrength = 1.0\nseed = 4\n"
    rotated = nqm.NoisyQuadratic.from_file(_write(tmp_path, text))
    np.testing.assert_allclose(rotated.sigma, spectra.misaligned_sigma(h, 0.5, seed=3), atol=1e-15)
    np.testing.assert_array_equal(rotated.basis, spectra.random_rotation(3, 1.0, seed=4))


@pytest.mark.parametrize(
    "text, message",
    [
        ('[spectrum]\nkind = "power_law"\nd = 5\nexponant = 1.0\n[noise]\nkind = "power"\n', "unknown key 'exponant'"),
        ('[spectrum]\nkind = "power_law"\nd = 5\nexponent = 1.0\n', "missing table \\[noise\\]"),
        ('[spectrum]\nkind = "zipf"\nd = 5\n[noise]\nkind = "power"\n', "kind must be one of"),
        (
            '[spectrum]\nkind = "power_law"\nd = -5\nexponent = 1.0\n[noise]\nkind = "power"\n',
            "d must be a whole number >= 1",
        ),
        (
            '[spectrum]\nkind = "power_law"\nd = 2.7\nexponent = 1.0\n[noise]\nkind = "power"\n',
            "d must be a whole number",
        ),
        ('[spectrum]\nkind = ["power"]\nd = 5\n[noise]\nkind = "power"\n', "kind must be one of .* got \\['power'\\]"),
        (_POWER + "[basis]\nseed = -1\n", "\\[basis\\] seed must be a whole number >= 0, got -1"),
        (_POWER + "[basis]\nstrength = 1.5\n", "strength must lie in \\[0, 1\\]"),
        (_POWER + '[optimum]\nkind = "normal"\nseed = 1.5\n', "\\[optimum\\] seed must be a whole number"),
        (_POWER.replace('kind = "power"\n', 'kind = "misaligned"\nseed = -2\n'), "\\[noise\\] seed must be"),
        ('[spectrum]\nkind = "power_law"\nd = 5\nexponent = "a"\n[noise]\nkind = "power"\n', "exponent must be"),
        ('[spectrum]\nkind = "file"\npath = "none.npy"\n[noise]\nkind = "power"\n', "cannot read"),
        ("[spectrum\n", "not valid TOML"),
        ('[spectrum]\nkind = "power_law"\nd = 3\nexponent = 1.0\n[noise]\nkind = "power"\n[init]\nvar = -1\n', "var"),
        ('[spectrum]\nkind = "power_law"\nd = 3\nexponent = 1.0\n[noise]\nkind = "power"\nwhat = 1\n', "'what'"),
        ('[spectrum]\nkind = "power_law"\nd = 5\n[noise]\nkind = "power"\n', "needs the key 'exponent'"),
        ('[spectrum]\nkind = "uniform"\nd = 5\nlow = 1.0\n[noise]\nkind = "power"\n', "needs the key 'high'"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as excinfo:
        nqm.NoisyQuadratic.from_file(path)
    assert str(excinfo.value).count(str(path)) == 1  # named once, not once per layer that passed the error on


def test_a_noise_file_of_the_wrong_length_is_refused(tmp_path):
    (tmp_path / "c.txt").write_text("0.1\n0.2\n")
    text = '[spectrum]\nkind = "power_law"\nd = 3\nexponent = 1.0\n[noise]\nkind = "file"\npath = "c.txt"\n'
    with pytest.raises(ValueError, match="2 variances; the spectrum has d = 3"):
        nqm.NoisyQuadratic.from_file(_write(tmp_path, text))
    with pytest.raises(ValueError, match="does not exist"):
        nqm.NoisyQuadratic.from_file(tmp_path / "absent.toml")


def test_summary_noise_scales_agree_with_the_theory_at_the_root_variance():
    """Over θ₀ ~ N(0, diag(v)) the ratio-of-expectations noise scales are the closed forms at θ = √v (every
    quadratic form is linear in θ_i²): an independent route through nqm.theory."""
    p = nqm.NoisyQuadratic(spectra.log_uniform(20, 0.01, 1.0), spectra.log_uniform(20, 0.1, 2.0))
    v = np.linspace(0.5, 2.0, 20)
    facts = info.summary(p, init_var=v)
    root = np.sqrt(v)
    assert facts["B_noise_init"] == pytest.approx(float(theory.noise_scale(p, root)), rel=1e-12)
    assert facts["B_simple_init"] == pytest.approx(float(theory.simple_noise_scale(p, root)), rel=1e-12)
    assert facts["eps_max_init"] == pytest.approx(float(theory.max_step(p, root)), rel=1e-12)
    assert facts["L0"] == pytest.approx(0.5 * float(p.h @ v), rel=1e-15)


def test_summary_with_a_target_reports_the_exact_optimal_runs():
    p = nqm.NoisyQuadratic.zhang2019(200)
    facts = info.summary(p, target=0.05)
    runs = dynamics.optimal_steps_to_target(p, 0.05, info.BATCH_SIZES)
    assert facts["steps"] == [float(s) for s in runs.steps]
    s_min, e_min, _ = dynamics.fit_frontier(runs.batch_sizes, runs.steps)
    assert facts["B_crit"] == pytest.approx(e_min / s_min, rel=1e-12)
    along = facts["along_run"]
    assert along["B_noise"][0] == pytest.approx(facts["B_noise_init"], rel=1e-9)  # the run starts at θ₀
    with pytest.raises(ValueError, match="initial loss"):
        info.summary(p, target=2 * facts["L0"])


def test_the_info_command_prints_text_or_json_and_refuses_user_errors(tmp_path, capsys, example_toml):
    path = _write(tmp_path, example_toml.replace("d = 1000", "d = 100"))
    assert main(["info", "--problem", str(path), "--target", "0.05", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert {"B_noise_init", "B_simple_init", "B_crit", "S_min", "E_min", "along_run"} <= set(facts)
    assert main(["info", "--problem", str(path)]) == 0
    assert "B_noise" in capsys.readouterr().out
    absent = ["info", "--problem", str(tmp_path / "absent.toml")]
    for argv in (absent, ["info", "--problem", str(path), "--target", "1e9"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("nqm info: ") and err.count("\n") == 1 and "Traceback" not in err


def _strict(text):
    """JSON as parsers other than Python's read it: Infinity and NaN are not JSON."""

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_info_json_is_strict_json_with_inf_as_a_string_and_a_noiseless_problem_has_no_warning(tmp_path, capsys):
    still = _write(tmp_path, 'name = "p"\n[spectrum]\nkind = "power_law"\nd = 20\nexponent = 1.0\n'
                             '[noise]\nkind = "power"\nq = 1.0\n[init]\nvar = 0.0\n')  # fmt: skip
    assert main(["info", "--problem", str(still), "--json"]) == 0
    facts = _strict(capsys.readouterr().out)
    assert facts["B_noise_init"] == facts["B_simple_init"] == facts["eps_max_init"] == "inf"
    noiseless = _write(tmp_path, 'name = "q"\n[spectrum]\nkind = "power_law"\nd = 20\nexponent = 1.0\n'
                                 '[noise]\nkind = "power"\nscale = 0.0\n')  # fmt: skip
    assert main(["info", "--problem", str(noiseless), "--target", "0.01", "--json"]) == 0  # warnings are errors here
    facts = _strict(capsys.readouterr().out)
    assert facts["E_min"] == 0.0 and facts["B_crit"] == 0.0  # no noise: no batch size helps beyond B = 1
    assert facts["along_run"]["batch_size"] == 1.0
    assert main(["frontier", "zhang2024", "--group", "151M", "--draws", "20", "--json"]) == 0
    _strict(capsys.readouterr().out)


def test_info_says_where_the_optimal_step_is_on_the_edge_of_the_search(tmp_path, capsys, example_toml):
    """With c = 1 on h_i = i^-2, the flattest coordinates' stationary variance ε/(2Bh) exceeds their initial one for
    all but tiny ε/B, so at small B the solver's optimum sits on the edge of its range: the summary says so."""
    flat = example_toml.replace("exponent = 1.0", "exponent = 2.0").replace("q = 1.0", "q = 0.0")
    path = _write(tmp_path, flat.replace("d = 1000", "d = 2000"))
    assert main(["info", "--problem", str(path), "--target", "0.01"]) == 0
    text = capsys.readouterr().out
    assert "(edge)" in text and "upper bound" in text
    facts = info.summary(nqm.NoisyQuadratic.from_file(path), target=0.01)
    assert not facts["interior"][0]  # the smallest batch: ε/B is held below 2·h_min
    readme = info.summary(nqm.NoisyQuadratic.from_file(_write(tmp_path, example_toml, "r.toml")), target=0.01)
    assert all(readme["interior"])


def test_the_optimum_table_draws_or_reads_theta_star(tmp_path):
    base = '[spectrum]\nkind = "power_law"\nd = 3\nexponent = 1.0\n[noise]\nkind = "power"\n'
    drawn = nqm.NoisyQuadratic.from_file(_write(tmp_path, base + '[optimum]\nkind = "normal"\nscale = 2.0\nseed = 5\n'))
    np.testing.assert_array_equal(drawn.optimum, 2.0 * np.random.default_rng(5).standard_normal(3))
    (tmp_path / "star.txt").write_text("1.0\n-2.0\n0.5\n")
    read = nqm.NoisyQuadratic.from_file(_write(tmp_path, base + '[optimum]\nkind = "file"\npath = "star.txt"\n'))
    np.testing.assert_array_equal(read.optimum, [1.0, -2.0, 0.5])
    assert nqm.NoisyQuadratic.from_file(_write(tmp_path, base)).optimum is None
    for bad, message in (('kind = "file"\npath = "c.txt"\n', "cannot read"), ('kind = "normal"\nmean = 1\n', "'mean'")):
        with pytest.raises(ValueError, match=message):
            nqm.NoisyQuadratic.from_file(_write(tmp_path, base + "[optimum]\n" + bad))
    (tmp_path / "short.txt").write_text("1.0\n2.0\n")
    with pytest.raises(ValueError, match="2 values for d = 3"):
        nqm.NoisyQuadratic.from_file(_write(tmp_path, base + '[optimum]\nkind = "file"\npath = "short.txt"\n'))


@pytest.mark.parametrize(
    "array, name, message",
    [
        (np.zeros(3, dtype=[("a", "f8"), ("b", "f8")]), "s.npy", "holds \\[\\('a'.*must hold real numbers"),
        (np.array([1 + 1j, 2.0, 3.0]), "c.npy", "holds complex128; it must hold real numbers"),
        (np.array([True, True, False]), "b.npy", "holds bool"),
        (np.array([1.0, -1.0, 2.0]), "n.npy", "curvatures must be > 0; the file holds -1"),
        (np.ones(3), "z.npz", "is a .npz archive"),
    ],
)
def test_a_spectrum_file_that_is_not_positive_reals_is_refused_by_name(tmp_path, array, name, message):
    with open(tmp_path / name, "wb") as f:  # the name as given (np.save would append .npy)
        np.savez(f, h=array) if name.endswith(".npz") else np.save(f, array)
    path = _write(tmp_path, f'[spectrum]\nkind = "file"\npath = "{name}"\n[noise]\nkind = "power"\n')
    with pytest.raises(ValueError, match=message) as excinfo:
        nqm.NoisyQuadratic.from_file(path)
    assert str(path) in str(excinfo.value)


def test_files_read_whatever_the_case_of_their_suffix_and_the_problem_names_the_file(tmp_path):
    with open(tmp_path / "h.NPY", "wb") as f:
        np.save(f, np.array([3.0, 2.0, 1.0]))
    p = nqm.NoisyQuadratic.from_file(
        _write(tmp_path, '[spectrum]\nkind = "file"\npath = "h.NPY"\n[noise]\nkind = "power"\n')
    )
    np.testing.assert_array_equal(p.h, [3.0, 2.0, 1.0])
    (tmp_path / "c.txt").write_text("0.1\n-0.2\n0.3\n")
    path = _write(tmp_path, _POWER.replace('kind = "power"\n', 'kind = "file"\npath = "c.txt"\n'), "neg.toml")
    with pytest.raises(ValueError, match="neg.toml: c \\(noise variances\\) must be >= 0"):
        nqm.NoisyQuadratic.from_file(path)


def test_a_directory_or_a_file_that_is_not_utf8_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        nqm.NoisyQuadratic.from_file(tmp_path)
    path = tmp_path / "latin.toml"
    path.write_bytes('name = "caf\xe9"\n'.encode("latin-1") + _POWER.encode())
    with pytest.raises(ValueError, match="not UTF-8 text"):
        nqm.NoisyQuadratic.from_file(path)


def test_the_module_docstrings_example_loads(tmp_path):
    example = problem_file.__doc__.split("::\n", 1)[1].split("\n\n", 1)[0]
    p = nqm.NoisyQuadratic.from_file(_write(tmp_path, textwrap.dedent(example)))
    assert p.d == 1000 and p.basis is not None and p.optimum is not None
    stripped = textwrap.dedent(example).replace("strength = 1.0\nseed = 0", "strength = 0\nseed = 0")
    assert np.array_equal(nqm.NoisyQuadratic.from_file(_write(tmp_path, stripped, "q.toml")).basis, np.eye(1000))


@pytest.mark.parametrize("table", ["[basis]\nseed = 1\n", None])
def test_a_file_asking_for_a_huge_dense_matrix_is_refused_before_building_it(tmp_path, table):
    d = problem_file.DENSE_D_MAX + 1
    spectrum = f'[spectrum]\nkind = "power_law"\nd = {d}\nexponent = 1.0\n'
    text = spectrum + ('[noise]\nkind = "power"\n' + table if table else '[noise]\nkind = "misaligned"\n')
    with pytest.raises(ValueError, match=f"builds a dense {d} × {d} matrix .* up to d = {d - 1}"):
        nqm.NoisyQuadratic.from_file(_write(tmp_path, text))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_device_is_refused_not_read_without_end(tmp_path):
    with pytest.raises(ValueError, match="is not a regular file"):
        nqm.NoisyQuadratic.from_file("/dev/zero")
    text = '[spectrum]\nkind = "file"\npath = "/dev/zero"\n[noise]\nkind = "power"\n'
    with pytest.raises(ValueError, match="'/dev/zero' is not a regular file"):
        nqm.NoisyQuadratic.from_file(_write(tmp_path, text))


def test_info_at_a_target_whose_runs_pass_2_to_the_63_steps(tmp_path, capsys):
    """Issue 42: a target of 1e-20 took steps past int64 (1.9e20 at B = 2²⁰) and crashed ``nqm info``."""
    path = _write(tmp_path, TOML20)
    assert main(["info", "--problem", str(path), "--target", "1e-20", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert max(facts["steps"]) > 2.0**63
    along = facts["along_run"]
    assert all(np.isfinite(along["B_noise"])) and along["steps"][-1] == max(along["steps"]) > 0


TOML20 = '[spectrum]\nkind = "power_law"\nd = 20\nexponent = 1.0\n[noise]\nkind = "power"\n'
