"""The claim registry: every ``validation/vN_*.py`` is one claim, found by its file name.

A claim module declares

* ``ID`` — "V4", the number matching its file name ``v4_….py``;
* ``TITLE`` — a few words for the progress log and the report;
* ``run(ctx: Context) -> Outcome`` — its checks (each with its planted-error controls) and its findings tables;
  figures go to ``ctx.out_dir``;
* and, for ``nqm validate --problem FILE``, either ``run_on_problem(ctx) -> Outcome`` (the claim held on the user's
  problem, ``ctx.problem``; ``ctx.families`` is then that problem alone) or ``NOT_ON_A_PROBLEM``, the reason it
  does not apply to one, which the report prints; optionally ``cannot_speak(problem) -> str | None``, why it
  cannot speak on a particular problem (a noiseless one, say), for the report too;
* ``SIZES`` (optional) — its experiment sizes, each once as a pair (quick, full) (:class:`validation.sizes.Sizes`),
  read with ``SIZES.at(ctx.quick)``; the report lists them;
* ``SECONDS`` (optional) — about how long it runs, (quick, full), on one core of a laptop: the runner starts the
  longest claims first and estimates the time left from these (the report records the measured times);
* ``SHARES`` (optional) — the names of costly shared experiments of the :class:`Context` it reads (V1 and V2:
  ``("one_step_grids",)``): claims sharing one run in the same process, so it is computed once.

Adding a claim is adding one file; :func:`discover` finds it and the report lists it in the order of the numbers.
What several claims share — the problem families and their points, the one-step grids of V1 and V2 — is built
on first use by the :class:`Context`, once in each process that runs claims (:mod:`validation.pool`).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from .families import Family, UserProblem, families, problem_family
from .one_step import OneStepGrid, run_grid
from .sizes import Sizes

__all__ = ["Claim", "Context", "Outcome", "discover", "GRID_SIZES"]

GRID_SIZES = Sizes(replicas=(600, 3000), replicas_examples=(300, 1500))
"""Replicas per (B, ε) cell of the one-step grids V1 and V2 share (``_examples``: per-example noise, which draws B
examples per replica)."""

DEFAULT_SECONDS = (10.0, 30.0)
"""The expected (quick, full) seconds of a claim that declares none."""

_CLAIM_FILE = re.compile(r"^v(\d+)_\w+$")


@dataclass
class Outcome:
    """What a claim returns: its checks and controls (:class:`validation.stats.Check`) and findings tables."""

    checks: list = field(default_factory=list)
    tables: list = field(default_factory=list)


class Context:
    """Everything a claim may use: where figures go, the budget (``quick``), the suite seed, the user's problem
    (or None), and shared experiments."""

    def __init__(self, out_dir: Path, quick: bool, seed: int, problem: UserProblem | None = None):
        self.out_dir, self.quick, self.seed, self.problem = out_dir, bool(quick), seed, problem
        self._grids: dict[str, list[OneStepGrid]] = {}

    @cached_property
    def families(self) -> dict[str, Family]:
        """The problem families of V1–V4 with their points θ along a training run, by key (the user's problem
        alone, as key ``"problem"``, when there is one)."""
        if self.problem is not None:
            return {"problem": problem_family(self.problem, self.seed)}
        return {f.key: f for f in families(self.quick, self.seed)}

    def one_step_grids(self, family: Family) -> list[OneStepGrid]:
        """ΔL on a (B, ε) grid at each of the family's points (shared by V1 and V2)."""
        if family.key not in self._grids:
            size = GRID_SIZES.at(self.quick)
            replicas = size.replicas if family.per_example is None else size.replicas_examples
            self._grids[family.key] = [run_grid(family, point, replicas, self.seed) for point in family.points]
        return self._grids[family.key]


@dataclass(frozen=True)
class Claim:
    """A registered claim: its id, title and entry points; on a user's problem, ``run_on_problem`` or, where the
    claim does not apply to one, ``not_on_a_problem`` (why)."""

    id: str
    title: str
    run: Callable[[Context], Outcome]
    module: str
    run_on_problem: Callable[[Context], Outcome] | None = None
    not_on_a_problem: str | None = None
    cannot_speak: Callable[[UserProblem], str | None] = lambda problem: None
    sizes: Sizes = field(default_factory=Sizes)
    seconds: tuple[float, float] = DEFAULT_SECONDS
    shares: tuple[str, ...] = ()

    def expected_seconds(self, quick: bool) -> float:
        """About how long the claim runs at the budget (its declared ``SECONDS``)."""
        return self.seconds[0 if quick else 1]


def discover(package: str = "validation") -> list[Claim]:
    """Every claim module of ``package``, in the order of their numbers; a clear error for a malformed one."""
    found = []
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        match = _CLAIM_FILE.match(info.name)
        if not match:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        missing = [name for name in ("ID", "TITLE", "run") if not hasattr(module, name)]
        if missing:
            raise ValueError(f"claim module {module.__name__} lacks {', '.join(missing)}")
        if module.ID != f"V{match.group(1)}":
            raise ValueError(f"claim module {module.__name__} declares ID {module.ID!r}; its file says V{match[1]}")
        on_problem, why_not = getattr(module, "run_on_problem", None), getattr(module, "NOT_ON_A_PROBLEM", None)
        if (on_problem is None) == (why_not is None):
            raise ValueError(f"claim module {module.__name__} must define one of run_on_problem, NOT_ON_A_PROBLEM")
        sizes = getattr(module, "SIZES", Sizes())
        if not isinstance(sizes, Sizes):
            raise ValueError(f"claim module {module.__name__}: SIZES must be a validation.sizes.Sizes, got {sizes!r}")
        seconds, shares = getattr(module, "SECONDS", DEFAULT_SECONDS), getattr(module, "SHARES", ())
        if not (
            isinstance(seconds, tuple)
            and len(seconds) == 2
            and all(isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 for t in seconds)
        ):
            raise ValueError(f"claim module {module.__name__}: SECONDS must be (quick, full) > 0, got {seconds!r}")
        if not (isinstance(shares, tuple) and all(hasattr(Context, name) for name in shares)):
            raise ValueError(f"claim module {module.__name__}: SHARES must name Context's experiments, got {shares!r}")
        claim = Claim(
            module.ID,
            module.TITLE,
            module.run,
            module.__name__,
            on_problem,
            why_not,
            sizes=sizes,
            seconds=seconds,
            shares=shares,
        )
        if hasattr(module, "cannot_speak"):
            claim = replace(claim, cannot_speak=module.cannot_speak)
        found.append((int(match.group(1)), claim))
    numbers = [n for n, _ in found]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"two claim modules share a number: {sorted(numbers)}")
    return [claim for _, claim in sorted(found, key=lambda pair: pair[0])]
