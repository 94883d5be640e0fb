"""The plot functions draw what they are given, the gallery renders every figure, and ``nqm plot`` works."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

import nqm
from nqm import gallery, plots
from nqm.cli import main


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_each_plot_function_returns_its_axes_and_draws_the_given_data():
    x = np.geomspace(0.1, 10, 5)
    ax = plots.batch_size_laws(x, 1 / (1 + 1 / x), 1 / (1 + 1 / x), [("sim", x, 1 / (1 + 1 / x), 0.01 * x)])
    np.testing.assert_allclose(ax.lines[0].get_xdata(), x)
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "B / B_noise"

    ax = plots.one_step_parabolas(x, {"B = 1": x - x**2}, vertices={"B = 1": (0.5, 0.25)})
    np.testing.assert_allclose(ax.lines[0].get_ydata(), x - x**2)

    steps = np.array([1000.0, 300.0, 150.0, 120.0])
    batch = np.array([1.0, 4.0, 16.0, 64.0])
    ax = plots.pareto_frontier(steps, batch * steps, 100.0, 1000.0)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "B_crit = 10" in labels
    star = [line for line in ax.lines if line.get_marker() == "*"][0]
    assert star.get_xdata()[0] == 200.0 and star.get_ydata()[0] == 2000.0  # (2 S_min, 2 E_min)

    ax = plots.steps_vs_batch(batch, {"a": steps}, b_crit=8.0)
    assert any(line.get_xdata()[0] == 8.0 for line in ax.lines[1:])  # B_crit marked
    ax = plots.noise_scale_over_training(np.arange(5), np.ones(5), 2 * np.ones(5))
    assert len(ax.lines) == 2
    ax = plots.labelled_curves(x, {"a": x, "b": 2 * x}, xscale="log")
    np.testing.assert_allclose(ax.lines[1].get_ydata(), 2 * x)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"] and ax.get_xscale() == "log"


def test_an_axes_can_be_passed_in():
    fig, (a, b) = plots.new_axes(2)
    assert plots.noise_scale_over_training([1, 2], [1, 1], [2, 2], ax=b) is b
    assert not a.lines


def test_styles_stay_apart_in_greyscale():
    """Adjacent line styles differ in darkness or dash pattern, so the figures survive a greyscale print."""
    for (c1, d1), (c2, d2) in zip(plots.LINES, plots.LINES[1:]):
        assert c1 != c2 or d1 != d2
    assert all(float(c) <= 0.6 for c, _ in plots.LINES)  # no line lighter than 60 % grey


@pytest.mark.parametrize("name", list(gallery.FIGURES))
def test_every_gallery_figure_renders_as_vector_output(name, tmp_path):
    small = {"d": 200} if name in ("pareto", "steps", "noise-scale", "simulation") else {"d": 300}
    path = gallery.render(name, tmp_path / f"{name}.svg", **small)
    text = Path(path).read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "<path" in text


@pytest.mark.parametrize("name", [name for name in gallery.FIGURES if name not in gallery.NOT_ON_A_PROBLEM])
def test_every_gallery_figure_draws_a_problem_file_s_problem(name, tmp_path, capsys):
    """``nqm plot NAME --problem FILE``: a power law with exponent 1.3, noise c = h^0.5, h_max = 2 (the default
    step 1 would diverge there) and E[θ₀²] = 0.5."""
    path = tmp_path / "p.toml"
    path.write_text(
        'name = "my problem"\n[spectrum]\nkind = "power_law"\nd = 60\nexponent = 1.3\nscale = 2.0\n'
        '[noise]\nkind = "power"\nq = 0.5\n[init]\nvar = 0.5\n'
    )
    out = tmp_path / f"{name}.svg"
    target = [] if name in gallery.NO_TARGET else ["--target", "0.02"]
    assert main(["plot", name, "--problem", str(path), *target, "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    text = out.read_text()
    assert "<svg" in text and "<path" in text


def test_a_figure_of_a_real_network_refuses_a_problem_and_all_leaves_it_out_by_name(tmp_path, capsys, monkeypatch):
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\n[spectrum]\nkind = "power_law"\nd = 20\n')
    assert main(["plot", "real-network", "--problem", str(path), "--out", str(tmp_path / "r.svg")]) == 2
    assert "real-network measures a real network" in capsys.readouterr().err
    assert not (tmp_path / "r.svg").exists()
    problem = nqm.NoisyQuadratic([1.0, 0.5], [1.0, 1.0])
    with pytest.raises(ValueError, match="leave out --problem"):
        gallery.real_network(problem=problem)
    # nqm plot all --problem draws the others and names the one left out (the others are stubbed: only the choice
    # of figures is tested here, each figure's drawing above)
    monkeypatch.setattr(gallery, "render", lambda name, out, **options: str(out))
    with pytest.warns(UserWarning, match="figure real-network not drawn: real-network measures a real network"):
        drawn = gallery.render_all(tmp_path, problem=problem)
    assert [Path(p).stem for p in drawn] == [n for n in gallery.FIGURES if n != "real-network"]


def test_a_figure_whose_extra_is_missing_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(gallery.NEEDS, "real-network", ("jax", "a_module_that_is_not_installed"))
    assert main(["plot", "real-network", "--out", str(tmp_path / "r.png")]) == 2
    assert "needs a_module_that_is_not_installed: pip install 'nqm[real]'" in capsys.readouterr().err
    monkeypatch.setattr(gallery, "render", lambda name, out, **options: str(out))
    with pytest.warns(
        UserWarning, match="figure real-network not drawn: real-network needs a_module_that_is_not_installed"
    ):
        drawn = gallery.render_all(tmp_path)
    assert len(drawn) == len(gallery.FIGURES) - 1


def test_the_plot_command_lists_renders_and_refuses_unknown_names(tmp_path, capsys):
    assert main(["plot", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in gallery.FIGURES)
    out = tmp_path / "laws.pdf"
    assert main(["plot", "laws", "--out", str(out), "--d", "200"]) == 0
    assert out.read_bytes().startswith(b"%PDF")
    assert main(["plot", "nonsense"]) == 2
    assert "unknown figure" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown figure"):
        gallery.render("nonsense")


def _noiseless_file(tmp_path):
    path = tmp_path / "quiet.toml"
    path.write_text('[spectrum]\nkind = "power_law"\nd = 20\nexponent = 1.0\n[noise]\nkind = "power"\nscale = 0\n')
    return path


def test_figures_of_the_noise_refuse_a_noiseless_problem_and_all_names_them(tmp_path, capsys, monkeypatch):
    quiet = _noiseless_file(tmp_path)
    assert main(["plot", "laws", "--problem", str(quiet), "--out", str(tmp_path / "laws.svg")]) == 2
    assert "figure laws draws the laws in units of B_noise; quiet is noiseless" in capsys.readouterr().err
    problem = nqm.NoisyQuadratic.from_file(quiet)
    for name in gallery.NEEDS_NOISE:
        with pytest.raises(ValueError, match=f"figure {name} .*noiseless"):
            gallery.FIGURES[name](problem=problem)
    monkeypatch.setattr(gallery, "render", lambda name, out, **options: str(out))
    assert main(["plot", "all", "--problem", str(quiet), "--out", str(tmp_path / "all")]) == 0
    out, err = capsys.readouterr()
    left_out = {line.split()[3] for line in err.splitlines()}
    assert left_out == set(gallery.NEEDS_NOISE) | set(gallery.NOT_ON_A_PROBLEM)
    assert all(line.startswith("nqm plot: figure ") for line in err.splitlines())
    assert len(out.splitlines()) == len(gallery.FIGURES) - len(left_out)


def test_plot_options_a_figure_does_not_use_are_refused(capsys):
    for name in gallery.NO_TARGET:
        assert main(["plot", name, "--target", "0.5"]) == 2
        assert "draws no run to a target loss: leave out --target" in capsys.readouterr().err
    assert main(["plot", "laws", "--format", "tiff2"]) == 2
    assert "--format 'tiff2' is not an image format" in capsys.readouterr().err
    assert main(["plot", "laws", "--format", "png", "--out", "x.pdf"]) == 2
    assert "--format png disagrees with --out 'x.pdf'" in capsys.readouterr().err


def test_one_figure_takes_its_format_any_case_and_replaces_only_its_own_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    small = ["--d", "30"]
    assert main(["plot", "parabolas", "--format", "svg", *small]) == 0
    assert (tmp_path / "parabolas.svg").read_text().lstrip().startswith("<?xml")
    assert main(["plot", "parabolas", "--format", "svg", *small]) == 0  # its own file: replaced
    assert main(["plot", "parabolas", "--out", "LAWS.PNG", *small]) == 0
    assert (tmp_path / "LAWS.PNG").read_bytes().startswith(b"\x89PNG")
    (tmp_path / "paper.pdf").write_text("my paper")
    capsys.readouterr()
    assert main(["plot", "parabolas", "--out", "paper.pdf", *small]) == 2
    assert "exists and is not named after the figure; add --force" in capsys.readouterr().err
    assert (tmp_path / "paper.pdf").read_text() == "my paper"
    assert main(["plot", "parabolas", "--out", "paper.pdf", "--force", *small]) == 0
    assert (tmp_path / "paper.pdf").read_bytes().startswith(b"%PDF")
