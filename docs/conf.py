"""Sphinx configuration of nqm's site: ``pip install -e '.[docs]'`` then ``sphinx-build -W docs docs/_build/html``.

Two build steps write into ``docs/_generated`` (not committed): the API pages, one per public module, documenting
every name in its ``__all__`` once (at the first module of :data:`API` that exports it; the others link to it), and
the teaching notebooks executed at small size in a kernel, which the site renders with their outputs.
"""

from __future__ import annotations

import importlib.util
import inspect
import pkgutil
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "notebooks"))

import nqm  # noqa: E402

project = "nqm"
author = "The nqm developers"
copyright = "The nqm developers (MIT licence)"
release = version = nqm.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static: the formulas render without a network
    "sphinx.ext.viewcode",
    "myst_nb",
]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the build step below executes them at small size
html_theme = "pydata_sphinx_theme"
html_title = f"nqm {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
exclude_patterns = ["_build", "_generated/notebooks/_work"]
autodoc_member_order = "bysource"
# the compiled tuner's kernels (nqm.dynamics.runs.heavy_ball_kernels) need numba, an optional extra: mocked where absent
autodoc_mock_imports = [] if importlib.util.find_spec("numba") else ["numba"]
autodoc_typehints = "none"  # types are in the docstrings; signatures stay readable
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = True  # every cross-reference must resolve
# Names outside nqm, which intersphinx would link to if the build could reach those projects' inventories.
nitpick_ignore = [
    ("py:class", "numpy.ndarray"),
    ("py:class", "pathlib.Path"),
    ("py:class", "concurrent.futures.Executor"),
    ("py:class", "collections.abc.Callable"),
]

GENERATED = HERE / "_generated"

# The explorer (nqm explore) is a page of the site as it is: one self-contained HTML file copied beside the pages.
from nqm import explore  # noqa: E402

(GENERATED / "extra").mkdir(parents=True, exist_ok=True)
explore.write(GENERATED / "extra" / "explorer.html")
html_extra_path = [str(GENERATED / "extra")]

# The public modules, in the order that decides where a name exported by several of them is documented.
API = [
    "nqm",
    "nqm.optim",
    "nqm.theory",
    "nqm.explore",
    "nqm.dynamics",
    "nqm.montecarlo",
    "nqm.estimators",
    "nqm.noise",
    "nqm.spectra",
    "nqm.problem",
    "nqm.problem_file",
    "nqm.least_squares",
    "nqm.finite_data",
    "nqm.measure",
    "nqm.real_sweeps",
    "nqm.info",
    "nqm.curves",
    "nqm.sweep",
    "nqm.plots",
    "nqm.gallery",
    "nqm.exercises",
    "nqm.checks",
]


def _kind(obj) -> str:
    if inspect.ismodule(obj):
        return "mod"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "func"
    return "data"


def _data_doc(modname: str, name: str) -> list[str]:
    """The doc-string written below a module constant, looked up in the module that assigns it (a package
    re-exports it; the string stays with the assignment)."""
    from sphinx.pycode import ModuleAnalyzer

    obj = getattr(sys.modules[modname], name)
    for where in [modname] + sorted(m for m in sys.modules if m.startswith(modname + ".")):
        if getattr(sys.modules[where], name, None) is obj:
            docs = ModuleAnalyzer.for_module(where).find_attr_docs()
            if ("", name) in docs:
                return [line for line in docs[("", name)] if line]
    raise ValueError(f"{modname}.{name} has no doc-string below its assignment")


def api_pages(out: Path) -> dict[str, list[str]]:
    """Write ``out/<module>.rst`` for every module of :data:`API` and ``out/index.rst``; returns, per module, the
    names documented there."""
    import importlib

    out.mkdir(parents=True, exist_ok=True)
    home: dict[int, str] = {}
    documented: dict[str, list[str]] = {}
    for modname in API:
        module = importlib.import_module(modname)
        lines = [modname, "=" * len(modname), "", f".. automodule:: {modname}", ""]
        elsewhere = []
        documented[modname] = []
        for name in module.__all__:
            obj = getattr(module, name)
            kind = _kind(obj)
            if kind == "mod":
                elsewhere.append(f":mod:`{obj.__name__}`")
                continue
            if id(obj) in home and kind != "data":
                elsewhere.append(f":{'py:' + kind}:`{home[id(obj)]}.{name}`")
                continue
            home.setdefault(id(obj), modname)
            documented[modname].append(name)
            if kind == "data":
                lines += [
                    f".. py:data:: {name}",
                    "",
                    *(f"   {line}" for line in _data_doc(modname, name)),
                    "",
                ]
                continue
            directive = {"class": "autoclass", "func": "autofunction"}[kind]
            lines += [f".. {directive}:: {modname}.{name}"] + (["   :members:", ""] if kind == "class" else [""])
        if elsewhere:
            lines += ["Also exported here: " + ", ".join(elsewhere) + ".", ""]
        (out / f"{modname}.rst").write_text("\n".join(lines))
    internals = ["Internals", "=========", "", "The modules behind the public ones, for readers of the code.", ""]
    for info in pkgutil.walk_packages(nqm.__path__, "nqm."):
        if info.name not in API:
            internals += [info.name, "-" * len(info.name), "", f".. automodule:: {info.name}", ""]
    (out / "internals.rst").write_text("\n".join(internals))
    index = ["API reference", "=============", "", ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   {m}" for m in API] + ["   internals"]
    (out / "index.rst").write_text("\n".join(index) + "\n")
    return documented


def executed_notebooks(out: Path) -> None:
    """Every notebook of ``notebooks/`` executed at small size (without the worked answers) into ``out``."""
    import nbformat
    from run_small import execute_small

    out.mkdir(parents=True, exist_ok=True)
    work = out / "_work"
    work.mkdir(exist_ok=True)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nbformat.write(execute_small(path, work, show_solution=False), out / path.name)
    shutil.rmtree(work)


def gallery_page(out: Path) -> None:
    """``out/gallery.md``: every figure of :mod:`nqm.gallery` (as committed in ``docs/gallery``) with its docstring."""
    from nqm import gallery

    lines = [
        "# Gallery",
        "",
        "Every figure is drawn by `nqm plot NAME` (any of them on your problem with "
        "`--problem FILE`) or `nqm.gallery.render(NAME, path)`.",
        "",
    ]
    for name, draw in gallery.FIGURES.items():
        about = inspect.cleandoc(draw.__doc__ or "").replace("[", "\\[")  # E[ΔL](ε) is no Markdown link
        lines += [f"## {name}", "", f"![{name}](../gallery/{name}.png)", "", about, ""]
        lines += [f"`nqm plot {name} --out {name}.png`", ""]
    out.mkdir(parents=True, exist_ok=True)
    (out / "gallery.md").write_text("\n".join(lines))


def _build_steps(app) -> None:
    gallery_page(GENERATED)
    api_pages(GENERATED / "api")
    executed_notebooks(GENERATED / "notebooks")


def setup(app):
    app.connect("builder-inited", _build_steps)
