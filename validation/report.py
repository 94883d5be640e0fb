"""Writes the validation report: ``report.md`` (a table per kind), ``report.html`` (the same with the figures,
self-contained) and ``results.json`` (every check)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from nqm import plots

from .html_report import write_html
from .report_text import number, preamble, problem_scope, verdict
from .stats import Check, worst_cell


def _cell(v) -> str:
    """A markdown table cell: numbers formatted, literal | escaped (it would split the cell)."""
    return number(v).replace("|", "\\|")


@dataclass
class Table:
    """A measured finding that is reported, not judged (e.g. how biased an estimator is)."""

    title: str
    columns: list[str]
    rows: list[list]
    note: str = ""
    figure: str | None = None
    claim: str = ""  # the claim's ID, set by the runner

    def markdown(self) -> list[str]:
        cells = [[_cell(v) for v in row] for row in self.rows]
        lines = [f"### {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        lines += ["| " + " | ".join(_cell(c) for c in self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        if self.figure:
            lines += ["", f"![{self.title}]({self.figure})"]
        return lines + [""]


def save_figure(fig, out_dir, name: str) -> str:
    """Save a claim's figure as ``out_dir/name`` and close it; returns ``name``, what a :class:`Table` or a
    :class:`~validation.stats.Check` links (the report's figures sit beside it)."""
    plots.save(fig, out_dir / name)
    return name


def _record(c: Check) -> dict:
    i = worst_cell(c)
    return {
        "name": c.name,
        "claim": c.claim,
        "kind": c.kind,
        "family": c.family,
        "cells": c.cells,
        "predicted": float(c.predicted[i]),
        "measured": float(c.measured[i]),
        "se": float(c.se[i]),
        "z": float(c.z[i]),
        "z_crit": c.z_crit,
        "passed": bool(c.passed),
        **({"rejected": bool(c.passed)} if c.kind == "negative_control" else {}),
        "exact": c.exact,
        "figure": c.figure,
        "all_cells": {
            "predicted": c.predicted.tolist(),
            "measured": c.measured.tolist(),
            "se": c.se.tolist(),
            "z": c.z.tolist(),
            **({} if c.z_uncorrected is None else {"z_uncorrected": c.z_uncorrected.tolist()}),
        },
        "notes": c.notes,
    }


def write(checks: list[Check], out_dir, meta: dict, tables: list[Table] = ()) -> dict:
    records = [_record(c) for c in checks]
    summary = {
        "checks": sum(c.kind == "check" for c in checks),
        "checks_passed": sum(c.kind == "check" and c.passed for c in checks),
        "controls": sum(c.kind == "negative_control" for c in checks),
        "controls_rejected": sum(c.kind == "negative_control" and c.passed for c in checks),
        "failed": [c.name for c in checks if not c.passed],  # failed checks and unrejected controls
    }
    summary["ok"] = (
        summary["checks"] == summary["checks_passed"] and summary["controls"] == summary["controls_rejected"]
    )
    (out_dir / "results.json").write_text(
        json.dumps(
            {"meta": meta, "summary": summary, "checks": records, "findings": [asdict(t) for t in tables]},
            indent=1,
            default=_json_default,
        )
    )
    lines = [
        "# nqm validation report",
        "",
        preamble(meta),
        "",
        *_scope_lines(meta),
        f"**{summary['checks_passed']}/{summary['checks']} checks pass; "
        f"{summary['controls_rejected']}/{summary['controls']} negative controls rejected.**",
        "",
    ]
    for kind, title in (("check", "Checks"), ("negative_control", "Negative controls (planted errors)")):
        lines += [
            f"## {title}",
            "",
            "| check | claim | cells | predicted | measured ± SE | z | verdict | figure |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in records:
            if r["kind"] != kind:
                continue
            fig = f"[{r['figure']}]({r['figure']})" if r["figure"] else ""
            se = "exact" if r["exact"] else number(r["se"])
            lines.append(
                f"| {_cell(r['name'])} | {_cell(r['claim'])} | {r['cells']} | {number(r['predicted'])} | "
                f"{number(r['measured'])} ± {se} | {number(r['z'])} | {verdict(r)} | {fig} |"
            )
        lines.append("")
    if tables:
        lines += ["## Measured findings", ""]
        for t in tables:
            lines += t.markdown()
    (out_dir / "report.md").write_text("\n".join(lines))
    write_html(records, summary, meta, tables, out_dir)
    return summary


def _scope_lines(meta: dict) -> list[str]:
    if (scope := problem_scope(meta)) is None:
        return []
    head, not_run = scope
    return [head, "", *(["Left out on this problem:", "", *(f"* {line}" for line in not_run), ""] if not_run else [])]


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(type(x))
