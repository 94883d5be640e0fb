"""Problem files: a noisy quadratic described in TOML, for the command line and for sharing a setup.

A file names a spectrum, a noise model, optionally a rotation of the simulator's basis, and the initial variance::

    name = "power law 1.0"
    [spectrum]
    kind = "power_law"        # power_law (d, exponent, scale) | log_uniform (d, low, high) | uniform (d, low, high)
    d = 1000                  # | bulk_outliers (d, low, high, outliers) | file (path: .npy or text, one per line)
    exponent = 1.0
    [noise]
    kind = "power"            # power (scale, q): c = scale·h^q | misaligned (scale, q, strength, seed): that c
    scale = 1.0               # rotated away from H | file (path): c per coordinate | dense (path): a (d, d) .npy Σ
    q = 1.0                   # (scale and q default to 1: c = h)
    [basis]                   # optional: simulate on x = Qθ with Q = spectra.random_rotation(d, strength, seed)
    strength = 1.0
    seed = 0
    [init]
    var = 1.0                 # E[θ₀²] per coordinate (default 1)
    [optimum]                 # optional: θ* ≠ 0, which weight decay does not pull towards
    kind = "normal"           # normal (scale, seed): θ* ~ N(0, scale²) drawn once | file (path): θ* per coordinate
    scale = 1.0

Paths are relative to the file. :func:`parse` turns such a mapping into arrays (it knows nothing of
:class:`nqm.NoisyQuadratic`, which builds itself from them: ``NoisyQuadratic.from_file(path)`` and ``from_dict``);
every error names the file, the table and the key.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import spectra

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["ParsedProblem", "read", "parse", "SPECTRUM_KINDS", "NOISE_KINDS", "OPTIMUM_KINDS", "DENSE_D_MAX"]

SPECTRUM_KINDS = {
    "power_law": ("d", "exponent", "scale"),
    "log_uniform": ("d", "low", "high"),
    "uniform": ("d", "low", "high"),
    "bulk_outliers": ("d", "low", "high", "outliers"),
    "file": ("path",),
}
"""The spectrum kinds of a problem file and the keys each takes."""
NOISE_KINDS = {
    "power": ("scale", "q"),
    "misaligned": ("scale", "q", "strength", "seed"),
    "file": ("path",),
    "dense": ("path",),
}
"""The noise kinds of a problem file and the keys each takes."""
_OPTIONAL = {"scale": 1.0, "q": 1.0, "strength": 1.0, "seed": 0}
DENSE_D_MAX = 10_000
"""The largest d for which a file may ask nqm to build a dense d × d matrix (a ``[basis]`` rotation or
``misaligned`` noise): each is 8d² bytes (0.8 GB at 10⁴) and O(d³) work to draw; past it the file is refused
rather than left to exhaust memory (a dense Σ read from a ``.npy`` the user made is not limited)."""
_TOP_KEYS = ("name", "spectrum", "noise", "basis", "init", "optimum")
OPTIMUM_KINDS = {"normal": ("scale", "seed"), "file": ("path",)}
"""The optimum kinds of a problem file and the keys each takes."""


@dataclass(frozen=True)
class ParsedProblem:
    """What a problem file describes, as arrays: ``h``; ``c`` or a dense ``sigma``; an optional ``basis``; the
    ``init_var`` (scalar or (d,)), the ``name``, an optional ``optimum`` θ* (None: 0) and the ``source`` it came
    from (the file, for errors)."""

    h: np.ndarray
    c: np.ndarray | None
    sigma: np.ndarray | None
    basis: np.ndarray | None
    init_var: float | np.ndarray
    name: str
    optimum: np.ndarray | None = None
    source: str = "<dict>"


def read(path) -> ParsedProblem:
    """Parse the TOML problem file at ``path`` (errors name the file and the key)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"problem file {str(path)!r} is a directory; give a .toml file")
    if path.exists() and not path.is_file():  # a device or a pipe (/dev/zero) would be read without end
        raise ValueError(f"problem file {str(path)!r} is not a regular file")
    try:
        with open(path, "rb") as f:
            spec = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"problem file {str(path)!r} does not exist") from None
    except UnicodeDecodeError as e:  # TOML is UTF-8 by definition
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e})") from None
    except OSError as e:
        raise ValueError(f"problem file {str(path)!r} cannot be read ({e.strerror})") from None
    return parse(spec, source=str(path), base_dir=path.parent)


def parse(spec: dict, *, source: str = "<dict>", base_dir=None) -> ParsedProblem:
    """Turn a problem description (the mapping a TOML file holds) into arrays; see the module docstring."""
    where = _Where(source, Path(base_dir) if base_dir is not None else Path.cwd())
    if not isinstance(spec, dict):
        raise ValueError(f"{source}: a problem description is a table of keys, got {type(spec).__name__}")
    where.only(spec, _TOP_KEYS, "the top level")
    h = _spectrum(where.table(spec, "spectrum", required=True), where)
    noise = where.table(spec, "noise", required=True)
    c, sigma = _noise(noise, h, where)
    basis_spec = where.table(spec, "basis")
    basis = None
    if basis_spec is not None:
        where.only(basis_spec, ("strength", "seed"), "[basis]")
        where.dense(h.size, "[basis]")
        strength = where.number(basis_spec, "strength", "[basis]", 1.0, positive=False)
        if strength > 1:
            raise ValueError(f"{source}: [basis] strength must lie in [0, 1], got {strength:g}")
        basis = spectra.random_rotation(h.size, strength, where.seed(basis_spec, "[basis]"))
    init = where.table(spec, "init") or {}
    where.only(init, ("var",), "[init]")
    init_var = where.number(init, "var", "[init]", 1.0, positive=False)
    if init_var < 0:
        raise ValueError(f"{source}: [init] var must be >= 0, got {init_var!r}")
    name = spec.get("name", Path(source).stem if source != "<dict>" else "problem")
    if not isinstance(name, str):
        raise ValueError(f"{source}: name must be a string, got {name!r}")
    optimum = _optimum(where.table(spec, "optimum"), h.size, where)
    return ParsedProblem(h, c, sigma, basis, init_var, name, optimum, source)


def _optimum(table: dict | None, d: int, where: _Where) -> np.ndarray | None:
    if table is None:
        return None
    kind = where.kind(table, "[optimum]", OPTIMUM_KINDS)
    where.only(table, ("kind", *OPTIMUM_KINDS[kind]), f"[optimum] (kind {kind!r})")
    if kind == "file":
        values = where.array(table, "[optimum]", 1)
        if values.size != d:
            raise ValueError(f"{where.source}: [optimum] has {values.size} values for d = {d} coordinates")
        return values
    scale = where.number(table, "scale", "[optimum]", 1.0)
    seed = where.seed(table, "[optimum]")
    return scale * np.random.default_rng(seed).standard_normal(d)


def _spectrum(table: dict, where: _Where) -> np.ndarray:
    kind = where.kind(table, "[spectrum]", SPECTRUM_KINDS)
    where.only(table, ("kind", *SPECTRUM_KINDS[kind]), f"[spectrum] kind {kind!r}")
    if kind == "file":
        h = where.array(table, "[spectrum]", ndim=1)
        if not np.all(h > 0):
            raise ValueError(f"{where.source}: [spectrum] curvatures must be > 0; the file holds {h.min():g}")
        return h
    d = where.integer(table, "d", "[spectrum]")
    if kind == "power_law":  # the keys are read (and their errors worded) before the spectrum is built
        exponent, scale = where.number(table, "exponent", "[spectrum]"), where.number(table, "scale", "[spectrum]", 1.0)
    else:
        low, high = where.number(table, "low", "[spectrum]"), where.number(table, "high", "[spectrum]")
    try:
        if kind == "power_law":
            return spectra.power_law(d, exponent, scale)
        if kind == "bulk_outliers":
            outliers = table.get("outliers")
            if not isinstance(outliers, list) or not outliers:
                raise ValueError("outliers must be a non-empty list of numbers")
            return spectra.bulk_outliers(d, (low, high), outliers)
        return (spectra.log_uniform if kind == "log_uniform" else spectra.uniform)(d, low, high)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where.source}: [spectrum] {e}") from None


def _noise(table: dict, h: np.ndarray, where: _Where):
    kind = where.kind(table, "[noise]", NOISE_KINDS)
    where.only(table, ("kind", *NOISE_KINDS[kind]), f"[noise] kind {kind!r}")
    if kind == "file":
        c = where.array(table, "[noise]", ndim=1)
        if c.size != h.size:
            raise ValueError(f"{where.source}: [noise] file holds {c.size} variances; the spectrum has d = {h.size}")
        return c, None
    if kind == "dense":
        sigma = where.array(table, "[noise]", ndim=2)
        if sigma.shape != (h.size, h.size):
            raise ValueError(f"{where.source}: [noise] dense Σ has shape {sigma.shape}; expected ({h.size}, {h.size})")
        return None, sigma
    c = spectra.noise_power(
        h,
        where.number(table, "scale", "[noise]", 1.0, positive=False),
        where.number(table, "q", "[noise]", 1.0, positive=False),
    )
    if kind == "power":
        return c, None
    strength = where.number(table, "strength", "[noise]", 1.0, positive=False)
    where.dense(h.size, "[noise] kind 'misaligned'")
    return None, spectra.misaligned_sigma(c, strength, seed=where.seed(table, "[noise]"))


class _Where:
    """Where a description comes from, and the checks whose errors name it."""

    def __init__(self, source: str, base_dir: Path):
        self.source, self.base_dir = source, base_dir

    def only(self, table: dict, allowed, place: str) -> None:
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            raise ValueError(
                f"{self.source}: unknown key {unknown[0]!r} in {place}; expected one of {', '.join(allowed)}"
            )

    def table(self, spec: dict, key: str, required: bool = False):
        value = spec.get(key)
        if value is None:
            if required:
                raise ValueError(f"{self.source}: missing table [{key}]")
            return None
        if not isinstance(value, dict):
            raise ValueError(f"{self.source}: [{key}] must be a table, got {value!r}")
        return value

    def kind(self, table: dict, place: str, kinds: dict) -> str:
        kind = table.get("kind")
        if not isinstance(kind, str) or kind not in kinds:
            raise ValueError(f"{self.source}: {place} kind must be one of {', '.join(kinds)}, got {kind!r}")
        return kind

    def number(self, table: dict, key: str, place: str, default=None, positive: bool = True) -> float:
        if key not in table:
            if default is None:
                raise ValueError(f"{self.source}: {place} needs the key {key!r}")
            return float(default)
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
            raise ValueError(f"{self.source}: {place} {key} must be a finite number, got {value!r}")
        if positive and value <= 0:
            raise ValueError(f"{self.source}: {place} {key} must be > 0, got {value!r}")
        return float(value)

    def dense(self, d: int, place: str) -> None:
        if d > DENSE_D_MAX:
            raise ValueError(
                f"{self.source}: {place} builds a dense {d} × {d} matrix ({8 * d * d / 2**30:.1f} GiB, O(d³) to "
                f"draw); files may ask for one up to d = {DENSE_D_MAX}: use a diagonal problem, or build Σ yourself"
            )

    def integer(self, table: dict, key: str, place: str, default=None, low: int = 1) -> int:
        """A whole number ≥ ``low`` (2.7 is refused, not truncated; 3.0 is 3)."""
        value = self.number(table, key, place, default, positive=False)
        if value != int(value) or value < low:
            raise ValueError(f"{self.source}: {place} {key} must be a whole number >= {low}, got {table.get(key)!r}")
        return int(value)

    def seed(self, table: dict, place: str) -> int:
        """A seed: a whole number ≥ 0 (default 0)."""
        return self.integer(table, "seed", place, 0, low=0)

    def array(self, table: dict, place: str, ndim: int) -> np.ndarray:
        if not isinstance(table.get("path"), str):
            raise ValueError(f"{self.source}: {place} kind 'file' needs a path string")
        path = self.base_dir / table["path"]
        if path.exists() and not path.is_file():
            raise ValueError(f"{self.source}: {place} {str(path)!r} is not a regular file")
        suffix = path.suffix.lower()
        if suffix == ".npz":
            raise ValueError(f"{self.source}: {place} {str(path)!r} is a .npz archive; save the one array with np.save")
        try:
            if suffix == ".npy":
                values = np.load(path, allow_pickle=False)
            else:
                values = np.loadtxt(path, ndmin=ndim)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            why = "not text numbers, one per line" if isinstance(e, UnicodeDecodeError) else e
            raise ValueError(f"{self.source}: {place} cannot read {str(path)!r} ({why})") from None
        if values.dtype.kind not in "iuf":  # complex, bool, structured, strings: no silent cast
            raise ValueError(f"{self.source}: {place} {str(path)!r} holds {values.dtype}; it must hold real numbers")
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != ndim or not np.all(np.isfinite(values)):
            raise ValueError(f"{self.source}: {place} {str(path)!r} must hold a finite {ndim}-D array")
        return values
