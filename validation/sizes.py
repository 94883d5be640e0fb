"""A claim's experiment sizes, each declared once in the claim's own file as a pair (quick, full).

A claim module says ``SIZES = Sizes(replicas=(1000, 3000), d=(32, 64))`` and reads them at run time with
``SIZES.at(ctx.quick)``: the quick budget (``nqm validate --quick``, the tests, a first look) takes the first
of each pair, the default budget the second. The runner lists every size of the claims it ran in the report's
metadata (``results.json``, key ``budget``), so a report says what it was computed with.
"""

from __future__ import annotations

from types import SimpleNamespace


class Sizes:
    """Named sizes, each a pair ``(quick, full)`` of positive integers."""

    def __init__(self, **sizes: tuple[int, int]):
        for name, pair in sizes.items():
            ok = isinstance(pair, tuple) and len(pair) == 2
            if not ok or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in pair):
                raise ValueError(f"size {name!r} must be a pair (quick, full) of positive integers, got {pair!r}")
        self.pairs = dict(sizes)

    def at(self, quick: bool) -> SimpleNamespace:
        """The sizes of one budget, as attributes: ``SIZES.at(ctx.quick).replicas``."""
        return SimpleNamespace(**self.as_dict(quick))

    def as_dict(self, quick: bool) -> dict[str, int]:
        return {name: pair[0 if quick else 1] for name, pair in self.pairs.items()}

    def __repr__(self) -> str:
        return f"Sizes({', '.join(f'{name}={pair}' for name, pair in self.pairs.items())})"
