"""The README tour and the docstring examples run, and print what they say they print; the Sphinx site builds with
warnings as errors and documents every public name."""

import doctest
import importlib.util
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from nqm import explore

ROOT = Path(__file__).resolve().parent.parent
FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def test_readme_tour(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the sweep example writes its file to the working directory
    result = doctest.testfile(str(ROOT / "README.md"), module_relative=False, optionflags=FLAGS)
    assert result.attempted > 5 and result.failed == 0


def _modules_with_examples() -> list[str]:
    """Every module of nqm whose source holds a docstring example (found by reading, not importing, the files), so
    that a module moved or added is not left out of the test."""
    import pkgutil

    import nqm

    found = []
    for info in pkgutil.walk_packages(nqm.__path__, "nqm."):
        origin = importlib.util.find_spec(info.name).origin
        if ">>> " in Path(origin).read_text():
            found.append(info.name)
    return found


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples(module):
    package, _, name = module.rpartition(".")
    if name in getattr(importlib.import_module(package), "OPTIONAL_MODULES", ()):
        pytest.importorskip(module, reason=f"{module} needs an optional extra")  # nqm.measure.digits: JAX, sklearn
    imported = importlib.import_module(module)
    result = doctest.testmod(imported, optionflags=FLAGS)
    assert result.failed == 0


def _inventory(path: Path) -> dict[str, str]:
    """Sphinx's objects.inv as {name: domain:role} (four header lines, then zlib-compressed lines)."""
    lines = path.read_bytes().split(b"\n", 4)
    assert lines[0].startswith(b"# Sphinx inventory version 2")
    entries = {}
    for line in zlib.decompress(lines[4]).decode().splitlines():
        name, role = line.split(" ", 2)[:2]
        entries[name] = role
    return entries


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The Sphinx site, built once with warnings as errors: (its directory, the build's completed process). Runs
    where the docs extra is installed (``pip install -e '.[docs]'``; the README's test command does)."""
    for module in ("sphinx", "pydata_sphinx_theme", "myst_nb"):
        pytest.importorskip(module)
    out = tmp_path_factory.mktemp("site") / "html"
    build = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-E",
        "-q",
        "-b",
        "html",
        str(ROOT / "docs"),
        str(out),
    ]
    return out, subprocess.run(build, capture_output=True, text=True, timeout=1200)


@pytest.mark.slow
def test_sphinx_site_builds_without_warnings_and_documents_every_public_name(site):
    out, done = site
    assert done.returncode == 0, done.stderr[-5000:]
    names = _inventory(out / "objects.inv")
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        from conf import API
    finally:
        sys.path.remove(str(ROOT / "docs"))
    for modname in API:
        assert names.get(modname) == "py:module", modname
        module = importlib.import_module(modname)
        for name in module.__all__:
            homes = [f"{home}.{name}" for home in API] + [getattr(getattr(module, name), "__name__", "")]
            assert f"{modname}.{name}" in names or any(h in names for h in homes), f"{modname}.{name} undocumented"
    for page in ("index", "tour", "architecture", "notebooks", "_generated/gallery", "_generated/api/internals"):
        assert (out / f"{page}.html").exists(), page
    # the explorer is copied as it is (one self-contained file), and its page links it
    assert (out / "explorer.html").read_text() == explore.page()
    assert 'href="explorer.html"' in (out / "explore.html").read_text()
    rendered = sorted(p.name for p in (out / "_generated" / "notebooks").glob("*.html"))
    assert len(rendered) == 8 and all(p[:2].isdigit() for p in rendered)
    assert "<img" in (out / "_generated" / "notebooks" / rendered[2]).read_text()  # outputs rendered, figures too


# Pages whose formulas a reader meets first, and what a formula left unrendered shows.
MATH_PAGES = ("critical_batch_size", "_generated/api/nqm.theory", "_generated/api/nqm.dynamics")
RAW_TEX = ("\\frac", "\\text", "\\(", "\\[", "$$")


def _rendered(page: Path) -> str:
    """The page's DOM after headless chromium ran its scripts (MathJax typesets on load), without scripts/styles."""
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=30000", "--dump-dom"]
    done = subprocess.run([*flags, page.as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return re.sub(r"<(script|style)\b.*?</\1>", "", done.stdout, flags=re.S)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_the_site_s_math_renders_offline_in_a_browser(site, tmp_path):
    """MathJax ships with the site (sphinx-mathjax-offline), so a browser with no network typesets every formula:
    each page has as many MathJax containers as formulas and no raw TeX. Planted: the same page with its MathJax
    script pointing at a file that is not there shows its TeX raw, and the check says so."""
    out, done = site
    assert done.returncode == 0, done.stderr[-5000:]
    for name in MATH_PAGES:
        page = out / f"{name}.html"
        html = page.read_text()
        formulas = html.count('class="math notranslate')
        assert formulas > 0, name
        assert not re.search(r"<script[^>]*src=\"(https?:)?//", html), f"{name} fetches a script from the network"
        dom = _rendered(page)
        assert dom.count("<mjx-container") >= formulas, name
        assert [t for t in RAW_TEX if t in dom] == [], name
    planted = page.with_name("planted.html")
    planted.write_text(html.replace("mathjax/tex-chtml.js", "mathjax/not-there.js"))
    dom = _rendered(planted)
    assert "<mjx-container" not in dom and [t for t in RAW_TEX if t in dom]
    shot = tmp_path / "theory.png"  # what a reader sees: a page of typeset math, not blank
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1100,1400"]
    url = (out / "_generated/api/nqm.theory.html").as_uri()
    run = subprocess.run([*flags, "--virtual-time-budget=30000", f"--screenshot={shot}", url], capture_output=True)
    assert run.returncode == 0 and shot.stat().st_size > 20_000
