"""The rules of docs/architecture.md, checked on the source: no import circles, no module reaching into another's
``_private`` names, no arrow pointing up the layers, no import past a package's public face, no engine that tests
an optimiser's type.

Imports are read with ``ast`` from every file, those inside functions included. The layers are read from the
architecture page itself (its code blocks headed ``# layers``), so the page and the code cannot drift apart
unseen. Each rule is also run on a planted violation, which it must report.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("nqm", "validation")  # the code the layers govern
EVERYWHERE = PACKAGES + ("tests", "bench", "examples", "docs", "notebooks")  # the code the private rule governs


@dataclass(frozen=True)
class Import:
    """One imported name: ``module`` (the module it resolves to) and ``name`` (None for ``import module``)."""

    source: str
    module: str
    name: str | None
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path, tops=PACKAGES) -> dict[str, Path]:
    """Every module under the top packages ``tops``, by dotted name."""
    return {module_name(f, root): f for top in tops for f in sorted((root / top).rglob("*.py"))}


def _absolute(source: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = source.split(".") if is_package else source.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports(source: str, path: Path) -> list[Import]:
    """The names ``source`` imports (``from m import a`` gives (m, a); ``import m`` gives (m, None)), anywhere in
    the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(source, path.name == "__init__.py", node.level, node.module)
            found += [Import(source, module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [Import(source, alias.name, None, node.lineno) for alias in node.names]
    return found


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of ``known`` it imports: ``from p import m`` is an arrow to the submodule p.m where that
    is a module, else to p. Importing a module runs its parents' ``__init__`` too; those arrows are not drawn
    (every module would otherwise import its own package)."""
    graph = {name: set() for name in known}
    for name, path in known.items():
        for imp in imports(name, path):
            sub = f"{imp.module}.{imp.name}"
            target = sub if imp.name and sub in known else imp.module
            if target in known and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan's algorithm), as a list of names."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(root: Path, tops=EVERYWHERE) -> list[str]:
    """Every use of another module's ``_private`` name in the files under ``tops``: ``from m import _x``,
    ``m._x`` on a module bound by an import (or by ``pytest.importorskip``), and ``setattr(m, "_x", …)``
    (monkeypatching). Only modules of this project count."""
    found = []
    ours = tuple(f"{top}." for top in PACKAGES) + PACKAGES
    for path in sorted(p for top in tops if (root / top).exists() for p in (root / top).rglob("*.py")):
        source = module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        bound = {}  # a local name → the module of ours it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = _absolute(source, path.name == "__init__.py", node.level, node.module)
                for alias in node.names:
                    if module.startswith(ours) and module != source and _private(alias.name):
                        found.append(f"{path.relative_to(root)}:{node.lineno}: from {module} import {alias.name}")
                    bound[alias.asname or alias.name] = f"{module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                call = node.value
                if getattr(call.func, "attr", None) == "importorskip" and call.args:
                    target = node.targets[0]
                    if isinstance(target, ast.Name) and isinstance(call.args[0], ast.Constant):
                        bound[target.id] = call.args[0].value
        bound = {k: v for k, v in bound.items() if v.startswith(ours)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                chain, base = [], node.value
                while isinstance(base, ast.Attribute):
                    chain.append(base.attr)
                    base = base.value
                if isinstance(base, ast.Name) and base.id in bound:
                    owner = ".".join([bound[base.id], *reversed(chain)])
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {owner}.{node.attr}")
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "setattr",
                "delattr",
            ):
                if len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id in bound:
                    name = node.args[1]
                    if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value):
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {bound[node.args[0].id]}.{name.value}")
    return found


def layer_blocks(page: str) -> list[list[list[str]]]:
    """The code blocks of the architecture page headed ``# layers``: per block, its lines (layers, the base first),
    each a list of units: a module by its name, or a package with all its modules as ``name.*``."""
    blocks = re.findall(r"```text\n# layers\n(.*?)```", page, flags=re.S)
    return [[line.split() for line in block.splitlines() if line.strip()] for block in blocks]


def _unit_of(module: str, units: list[str]) -> str | None:
    """The most specific unit holding ``module``: itself, or the deepest ``package.*`` above it."""
    if module in units:
        return module
    packages = [u for u in units if u.endswith(".*") and (module + ".").startswith(u[:-1])]
    return max(packages, key=len) if packages else None


def upward_arrows(graph: dict[str, set[str]], blocks) -> list[str]:
    """Arrows that point to a unit of the same block on the same or a lower line (each unit may import only from
    the lines above its own, and from itself). A module of ours that the first block does not place is reported
    too: a new module must take its place in the layers."""
    found = []
    first_units = [u for line in blocks[0] for u in line]
    found += [f"{m}: in no layer of the first block" for m in sorted(graph) if _unit_of(m, first_units) is None]
    for block in blocks:
        line_of = {u: i for i, line in enumerate(block) for u in line}
        for a in sorted(graph):
            ua = _unit_of(a, list(line_of))
            for b in sorted(graph[a]):
                ub = _unit_of(b, list(line_of))
                if ua is None or ub is None or ua == ub:
                    continue
                if line_of[ub] >= line_of[ua]:
                    found.append(f"{a} → {b}: {ua} (line {line_of[ua] + 1}) imports {ub} (line {line_of[ub] + 1})")
    return found


def public_face(init: Path) -> set[str] | None:
    """A package's face: the names of its ``__all__`` and of its ``OPTIONAL_MODULES`` (modules it does not import
    because they need an extra). None where it declares no ``__all__``."""
    names = None
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("__all__", "OPTIONAL_MODULES"):
                names = (names or set()) | set(ast.literal_eval(node.value))
    return names


def past_the_face(known: dict[str, Path], root: Path = ROOT) -> list[str]:
    """Imports from outside a subpackage P of something not on P's face: ``from P import x`` with x not in it, or
    ``P.m`` / ``from P.m import …`` with m not in it. The top packages themselves are not faces: their modules are
    the public API."""
    faces = {name: public_face(path) for name, path in known.items() if path.name == "__init__.py" and "." in name}
    found = []
    for source, path in known.items():
        for imp in imports(source, path):
            target = f"{imp.module}.{imp.name}" if imp.name else imp.module
            for package, face in faces.items():
                if source == package or source.startswith(package + "."):
                    continue  # inside the package: its modules may use each other
                if not target.startswith(package + "."):
                    continue
                first = target[len(package) + 1 :].split(".")[0]
                if face is None or first not in face:
                    found.append(f"{path.relative_to(root)}:{imp.line}: {target} is not on {package}'s face")
                break
    return found


def optimiser_type_tests(root: Path) -> list[str]:
    """``isinstance`` tests against a class of ``nqm/optim.py`` anywhere in ``nqm/`` but that file: what an optimiser
    is stays in ``nqm.optim`` (its methods, ``is_plain_sgd``), so that adding one touches no engine."""
    optim = root / "nqm" / "optim.py"
    classes = {node.name for node in ast.parse(optim.read_text()).body if isinstance(node, ast.ClassDef)}
    found = []
    for path in modules(root, ("nqm",)).values():
        if path == optim:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                named = {getattr(n, "id", None) or getattr(n, "attr", None) for n in ast.walk(node.args[1])}
                if named & classes:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: isinstance(…, {sorted(named & classes)})")
    return found


# -- the rules on the code --------------------------------------------------------------------------------------
PAGE = (ROOT / "docs" / "architecture.md").read_text()


def test_there_are_no_import_circles():
    assert cycles(import_graph(modules(ROOT))) == []


def test_no_module_uses_another_module_s_private_names():
    assert private_uses(ROOT) == []


def test_no_arrow_points_up_the_layers_of_the_architecture_page():
    blocks = layer_blocks(PAGE)
    assert len(blocks) >= 2  # the modules of nqm and validation; the rooms of nqm.dynamics
    assert upward_arrows(import_graph(modules(ROOT)), blocks) == []


def test_no_import_goes_past_a_package_s_public_face():
    assert past_the_face(modules(ROOT)) == []


def test_no_engine_tests_an_optimiser_s_type():
    assert optimiser_type_tests(ROOT) == []


def touching(root: Path, word: str) -> list[str]:
    """The files of ``nqm/`` and ``validation/`` whose code names ``word`` (as a word, in any case)."""
    pattern = re.compile(rf"\b{re.escape(word)}\b", flags=re.I)
    return sorted(str(path.relative_to(root)) for path in modules(root).values() if pattern.search(path.read_text()))


def test_the_worked_examples_touch_only_the_files_the_page_lists():
    """The page's code block headed ``# touches``: each optimiser added as a worked example is named in those files
    alone, so no engine special-cases it. Planted below: an engine that names one."""
    block = re.findall(r"```text\n# touches\n(.*?)```", PAGE, flags=re.S)
    assert block, "the architecture page lists no worked examples"
    for line in block[0].splitlines():
        word, *files = line.split()
        assert touching(ROOT, word) == sorted(files), word


# -- each rule on a planted violation ---------------------------------------------------------------------------
def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_circle_through_an_import_inside_a_function_is_found(tmp_path):
    root = _plant(
        tmp_path,
        {
            "nqm/__init__.py": "",
            "nqm/a.py": "from .b import f\n",
            "nqm/b.py": "def f():\n    from .c import g\n",
            "nqm/c.py": "from nqm import a\n",
            "nqm/d.py": "from . import a\n",
        },
    )
    assert cycles(import_graph(modules(root, ("nqm",)))) == [["nqm.a", "nqm.b", "nqm.c"]]


def test_private_names_reached_in_every_way_are_found(tmp_path):
    root = _plant(
        tmp_path,
        {
            "nqm/__init__.py": "",
            "nqm/a.py": "_x = 1\ny = _x\n",
            "nqm/b.py": "from .a import _x\n",
            "tests/test_c.py": "import nqm.a as a\nz = a._x\n",
            "tests/test_d.py": "from nqm import a\ndef test(monkeypatch):\n    monkeypatch.setattr(a, '_x', 2)\n",
            "tests/test_e.py": "import pytest\nk = pytest.importorskip('nqm.a')\nk._x\n",
            "tests/test_f.py": "import numpy as np\nnp._x\n",  # not ours
        },
    )
    found = private_uses(root, ("nqm", "tests"))
    assert [line.split(":")[0] for line in found] == [
        "nqm/b.py",
        "tests/test_c.py",
        "tests/test_d.py",
        "tests/test_e.py",
    ]


def test_an_upward_arrow_and_an_unplaced_module_are_found(tmp_path):
    root = _plant(
        tmp_path,
        {
            "nqm/__init__.py": "",
            "nqm/low.py": "from .high import f\n",
            "nqm/high.py": "from . import low\n",
            "nqm/new.py": "",
            "nqm/pkg/__init__.py": "",
            "nqm/pkg/base.py": "from .top import t\n",
            "nqm/pkg/top.py": "from .base import b\n",
        },
    )
    page = "```text\n# layers\nnqm.low\nnqm.high nqm.pkg.*\n```\n\n```text\n# layers\nnqm.pkg.base\nnqm.pkg.top\n```\n"
    found = upward_arrows(import_graph(modules(root, ("nqm",))), layer_blocks(page))
    assert found == [
        "nqm: in no layer of the first block",
        "nqm.new: in no layer of the first block",
        "nqm.low → nqm.high: nqm.low (line 1) imports nqm.high (line 2)",
        "nqm.pkg.base → nqm.pkg.top: nqm.pkg.base (line 1) imports nqm.pkg.top (line 2)",
    ]


def test_an_import_past_a_face_is_found(tmp_path):
    root = _plant(
        tmp_path,
        {
            "nqm/__init__.py": "",
            "nqm/pkg/__init__.py": "from .inner import f\n__all__ = ['f', 'extra']\nOPTIONAL_MODULES = ('lazy',)\n",
            "nqm/pkg/inner.py": "def f(): ...\ndef g(): ...\n",
            "nqm/pkg/extra.py": "",
            "nqm/pkg/lazy.py": "",
            "nqm/user.py": (
                "from .pkg import f\nfrom .pkg import extra\nfrom .pkg import lazy\n"
                "from .pkg.inner import g\nfrom .pkg import inner\n"
            ),
        },
    )
    found = past_the_face(modules(root, ("nqm",)), root)
    assert found == [
        "nqm/user.py:4: nqm.pkg.inner.g is not on nqm.pkg's face",
        "nqm/user.py:5: nqm.pkg.inner is not on nqm.pkg's face",
    ]


@pytest.mark.parametrize("rule", ["circle", "private", "layer", "face", "touches", "type test"])
def test_the_rules_fail_on_a_violation_planted_in_the_real_code(rule, tmp_path):
    """Copy the package, plant one violation of each rule in real modules, and see the rule report it."""
    import shutil

    for top in PACKAGES:
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    plant = {
        "circle": ("nqm/optim.py", "\ndef _planted():\n    from .dynamics import expected_loss\n"),
        "private": ("nqm/theory.py", "\nfrom .checks import _size\n"),
        "layer": ("nqm/noise.py", "\ndef _planted():\n    from .theory import optimal_lr\n"),
        "face": ("nqm/gallery.py", "\nfrom .dynamics.runs.search import optimal_tuned\n"),
        "touches": ("nqm/montecarlo/counter.py", "\n# a special case for Lion\n"),
        "type test": ("nqm/dynamics/runs/steps.py", "\ndef _planted(o):\n    return isinstance(o, optim.HeavyBall)\n"),
    }[rule]
    path = tmp_path / plant[0]
    path.write_text(path.read_text() + plant[1])
    graph = import_graph(modules(tmp_path))
    found = {
        "circle": lambda: cycles(graph),
        "private": lambda: private_uses(tmp_path, PACKAGES),
        "layer": lambda: upward_arrows(graph, layer_blocks(PAGE)),
        "face": lambda: past_the_face(modules(tmp_path), tmp_path),
        "touches": lambda: [f for f in touching(tmp_path, "lion") if f != "nqm/optim.py"],
        "type test": lambda: optimiser_type_tests(tmp_path),
    }[rule]()
    assert found, rule
