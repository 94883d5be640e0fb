"""The README tour and the docstring examples run, and print what they say they print; the Sphinx site builds with
warnings as errors and documents every public name."""

import doctest
import importlib.util
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_sphinx_site_builds_without_warnings_and_documents_every_public_name(tmp_path):
    """Runs where the docs extra is installed (``pip install -e '.[docs]'``; the README's test command does)."""
    for module in ("sphinx", "pydata_sphinx_theme", "myst_nb"):
        pytest.importorskip(module)
    out = tmp_path / "html"
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
    done = subprocess.run(build, capture_output=True, text=True, timeout=1200)
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
    rendered = sorted(p.name for p in (out / "_generated" / "notebooks").glob("*.html"))
    assert len(rendered) == 8 and all(p[:2].isdigit() for p in rendered)
    assert "<img" in (out / "_generated" / "notebooks" / rendered[2]).read_text()  # outputs rendered, figures too
