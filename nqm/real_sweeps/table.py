"""A measured batch-size sweep: the fewest steps to a target at each batch size, as a table of records.

The format is a CSV file (lines starting with ``#`` are comments) with a header naming its columns:

* ``batch_size`` (> 0) and ``steps`` (> 0, or ``inf`` where the target was not reached): required;
* ``group``: the model or run family a row belongs to (one group when absent);
* ``target``: the target loss; ``examples_per_step``: what one batch element holds (tokens per sequence, say);
* ``parameters``: the model's size; ``seed``: which repeat a row is (several rows of one group and batch size
  need distinct seeds); ``lr``: the step size of the row (rows that differ only in ``lr`` are a step-size sweep:
  the frontier takes the fewest steps among them).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["COLUMNS", "Sweep", "SweepFileError", "read_sweep", "zhang2024"]

COLUMNS = ("group", "batch_size", "steps", "target", "examples_per_step", "parameters", "seed", "lr")
"""The columns a sweep file may have (``batch_size`` and ``steps`` required), in :class:`Sweep`'s order."""
_REQUIRED = ("batch_size", "steps")
_POSITIVE = ("batch_size", "target", "examples_per_step", "parameters", "lr")

ZHANG2024_CITATION = (
    "Zhang, Morwani, Vyas, Wu, Zou, Ghai, Foster, Kakade, 'How Does Critical Batch Size Scale in Pre-training?', "
    "arXiv:2410.21676 (ICLR 2025); figures from the authors' plotting notebook (hlzhang109/critical-batch-size, "
    "MIT licence)"
)


class SweepFileError(ValueError):
    """A sweep file that cannot be read: the message names the file, the line and the column."""


@dataclass(frozen=True)
class Sweep:
    """Rows of a sweep as parallel arrays (one entry per row).

    Attributes:
        group: (n,) str; batch_size, steps: (n,) float64 (steps inf where unreached);
        target, examples_per_step, parameters, lr: (n,) float64, NaN where the file does not give them;
        seed: (n,) int64, −1 where absent; source: where the rows come from (a file name or a citation).
    """

    group: np.ndarray
    batch_size: np.ndarray
    steps: np.ndarray
    target: np.ndarray
    examples_per_step: np.ndarray
    parameters: np.ndarray
    seed: np.ndarray
    lr: np.ndarray
    source: str = field(default="")

    def __len__(self) -> int:
        return int(self.batch_size.size)

    def groups(self) -> list[str]:
        """The groups in the order they first appear."""
        return list(dict.fromkeys(self.group.tolist()))

    def select(self, group: str) -> Sweep:
        """The rows of one group."""
        if group not in self.groups():
            raise ValueError(f"group {group!r} is not in the sweep; it has {', '.join(self.groups())}")
        keep = self.group == group
        return Sweep(**{c: getattr(self, c)[keep] for c in COLUMNS}, source=self.source)

    def best_steps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The frontier's points: per (batch size, seed), the fewest steps over the rows' step sizes.

        Returns (batch_size, steps, seed) sorted by batch size then seed. One group only (see :meth:`select`).
        """
        if len(self.groups()) > 1:
            raise ValueError(f"best_steps needs one group; select one of {', '.join(self.groups())}")
        keys = sorted(set(zip(self.batch_size.tolist(), self.seed.tolist())))
        steps = [self.steps[(self.batch_size == b) & (self.seed == s)].min() for b, s in keys]
        b, s = (np.array(v) for v in zip(*keys))
        return b.astype(np.float64), np.array(steps, dtype=np.float64), s.astype(np.int64)

    def value(self, column: str) -> float:
        """The one value a group's rows share in ``column`` (``target``, ``parameters``, …); NaN when absent."""
        values = np.unique(getattr(self, column))
        if values.size > 1:
            raise ValueError(f"the rows do not share one {column}: {values.tolist()}")
        return float(values[0])


def read_sweep(source, *, name: str | None = None) -> Sweep:
    """Read a sweep from a CSV path or an open text file (see the module for the format).

    Every row is checked; the first bad one raises :class:`SweepFileError` naming its line, e.g.
    ``sweep.csv, line 4: steps must be > 0 (or inf), got '-3'``.
    """
    if hasattr(source, "read"):
        text, label = source.read(), name or getattr(source, "name", "<sweep>")
    else:
        path = Path(source)
        if not path.is_file():
            raise SweepFileError(f"{path}: no such sweep file")
        text, label = path.read_text(encoding="utf-8"), name or path.name
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip() and not line.startswith("#")]
    if not lines:
        raise SweepFileError(f"{label}: no header and no rows")
    header_line, *row_lines = lines
    header = [h.strip() for h in next(csv.reader([header_line[1]]))]
    unknown = [h for h in header if h not in COLUMNS]
    if unknown:
        raise SweepFileError(
            f"{label}, line {header_line[0]}: unknown column {unknown[0]!r} (the columns are {', '.join(COLUMNS)})"
        )
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise SweepFileError(f"{label}, line {header_line[0]}: the header has no {missing[0]!r} column")
    if len(set(header)) < len(header):
        raise SweepFileError(f"{label}, line {header_line[0]}: a column is named twice")
    if not row_lines:
        raise SweepFileError(f"{label}: a header and no rows")
    columns = {c: [] for c in COLUMNS}
    seen: dict[tuple, int] = {}
    for number, line in row_lines:
        cells = [c.strip() for c in next(csv.reader(io.StringIO(line)))]
        if len(cells) != len(header):
            raise SweepFileError(f"{label}, line {number}: {len(cells)} cells for {len(header)} columns")
        row = dict(zip(header, cells))
        parsed = {c: _cell(label, number, c, row.get(c, "")) for c in COLUMNS}
        lr = None if np.isnan(parsed["lr"]) else parsed["lr"]  # NaN ≠ NaN would hide every repeat
        key = (parsed["group"], parsed["batch_size"], parsed["seed"], lr)
        if key in seen:
            hint = "give the repeats distinct seeds" if "seed" not in header else "repeat seeds differ"
            raise SweepFileError(
                f"{label}, line {number}: repeats line {seen[key]} (group {parsed['group']!r}, batch size "
                f"{parsed['batch_size']:g}, same seed and lr); {hint}"
            )
        seen[key] = number
        for c in COLUMNS:
            columns[c].append(parsed[c])
    return Sweep(
        group=np.array(columns["group"], dtype=str),
        seed=np.array(columns["seed"], dtype=np.int64),
        **{c: np.array(columns[c], dtype=np.float64) for c in COLUMNS if c not in ("group", "seed")},
        source=label,
    )


def _cell(label: str, number: int, column: str, text: str):
    """One cell parsed and checked; absent optional cells become '' (group), −1 (seed) or NaN."""
    where = f"{label}, line {number}"
    if column == "group":
        return text
    if column == "seed":
        if text == "":
            return -1
        try:
            seed = int(text)
        except ValueError:
            raise SweepFileError(f"{where}: seed must be a whole number ≥ 0, got {text!r}") from None
        if seed < 0:
            raise SweepFileError(f"{where}: seed must be a whole number ≥ 0, got {text!r}")
        return seed
    if text == "":
        if column in _REQUIRED:
            raise SweepFileError(f"{where}: {column} is empty")
        return float("nan")
    try:
        value = float(text)
    except ValueError:
        raise SweepFileError(f"{where}: {column} must be a number, got {text!r}") from None
    if column == "steps":
        if not value > 0:
            raise SweepFileError(f"{where}: steps must be > 0 (or inf where the target was not reached), got {text!r}")
    elif not (value > 0 and np.isfinite(value)):
        raise SweepFileError(f"{where}: {column} must be a finite number > 0, got {text!r}")
    return value


def zhang2024() -> Sweep:
    """Zhang et al. 2024's steps to a C4 validation loss for five language models (85M … 1.2B parameters,
    sequence length 512) at batch sizes 2⁶ … 2¹⁴ sequences, each the fewest over the authors' sweep of step size,
    β₂ and EWA decay with a constant schedule (AdamW). Groups are the models, ``target`` the C4 loss,
    ``examples_per_step`` the sequence length. Cite the paper wherever it is used (``Sweep.source``).

    Example:
        >>> s = zhang2024()
        >>> s.groups(), len(s)
        (['85M', '151M', '302M', '604M', '1.2B'], 45)
    """
    with resources.files("nqm.real_sweeps").joinpath("zhang2024_steps_to_target.csv").open(encoding="utf-8") as f:
        sweep = read_sweep(f, name="zhang2024_steps_to_target.csv")
    return Sweep(**{c: getattr(sweep, c) for c in COLUMNS}, source=ZHANG2024_CITATION)
