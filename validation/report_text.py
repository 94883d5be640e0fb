"""What report.md and report.html say alike: the preamble, the verdicts and how numbers are written."""

from __future__ import annotations

import math

__all__ = ["number", "preamble", "problem_scope", "verdict"]


def number(x) -> str:
    """Numbers to 4 significant digits (inf and nan as words); anything else as its text."""
    if isinstance(x, float):
        return str(x) if not math.isfinite(x) else f"{x:.4g}"
    return str(x)


def preamble(meta: dict) -> str:
    """The report's opening: seed, budget, run time and the statistical decision rule."""
    return (
        f"Seed {meta['seed']}, {'quick' if meta['quick'] else 'default'} budget, {meta['seconds']:.1f} s. "
        f"Suite-wide false-alarm budget α = {meta['alpha']} over K = {meta['statistical_cells']} statistical "
        f"comparisons (Bonferroni) ⇒ critical |z| = {meta['z_crit']:.3f}. A check passes when every cell has "
        "|measured − predicted| ≤ z·SE + 1e-9·|predicted|; each row shows its worst cell. A cell that is the mean "
        "of skewed replicas (V1's one-step changes, V4's losses) is decided on Hall's skewness-corrected z. Exact "
        "checks use the float tolerance only. Planted errors (negative controls) must be rejected by the checks they "
        "accompany. To touch the theory behind the checks, `nqm explore` writes an offline page of its closed forms "
        "and dynamics."
    )


def problem_scope(meta: dict) -> tuple[str, list[str]] | None:
    """For a run on a problem file: a sentence naming the problem and the claims that ran on it, and one line per
    claim that did not, with the reason; None for the suite's own families."""
    if (scope := meta.get("problem")) is None:
        return None
    head = (
        f"Problem: {scope['name']} (from {scope['source']}, d = {scope['d']}; whole runs aim at E[L] ≤ "
        f"{scope['target']:.4g}). Claims run on it: {', '.join(scope['ran']) or 'none'}."
    )
    lines = [f"{c['id']} ({c['title']}): {c['reason']}" for c in scope["not_run"]]
    lines += [
        f"{name}: without power on this problem (its planted error moves no cell by more than 2·(z·SE + tolerance))"
        for name in scope.get("controls_without_power", [])
    ]
    return head, lines


def verdict(record: dict) -> str:
    if record["kind"] == "check":
        return "PASS" if record["passed"] else "FAIL"
    return "rejected" if record["passed"] else "NOT REJECTED"
