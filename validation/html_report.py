"""``report.html``: the summary, every check and control, the measured findings and the figures in one
self-contained page (styles inline, figures embedded as data URIs), readable offline and printable."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from .report_text import number, preamble, problem_scope, verdict

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1a1a1a; margin: 0 auto;
       max-width: 1180px; padding: 24px 32px; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { font-size: 19px; margin-top: 32px; border-bottom: 1px solid #ccc; }
h3 { font-size: 15px; margin-top: 22px; }
.summary { display: flex; gap: 16px; margin: 16px 0; }
.tile { border: 1px solid #bbb; border-radius: 6px; padding: 10px 16px; min-width: 150px; }
.tile b { font-size: 22px; display: block; }
.ok { background: #eef7ee; border-color: #6a6; } .bad { background: #fbeeee; border-color: #c66; }
table { border-collapse: collapse; width: 100%; margin: 8px 0 12px; font-size: 12.5px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; position: sticky; top: 0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.fail td { background: #fbeeee; } .verdict { font-weight: 600; }
figure { margin: 14px 0 22px; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 12px; color: #555; } .note { color: #333; max-width: 900px; }
"""


def _text(v) -> str:
    """A table cell's text, escaped; markdown **bold** (used in the findings' tables) becomes <b>."""
    s = html.escape(str(v))
    return f"<b>{s[2:-2]}</b>" if len(s) > 4 and s.startswith("**") and s.endswith("**") else s


def _figure_uri(out_dir: Path, name: str) -> str | None:
    path = out_dir / name
    if not path.is_file():
        return None
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _anchor(name: str) -> str:
    return "fig-" + "".join(c if c.isalnum() else "-" for c in name)


def _checks_table(records: list[dict], kind: str) -> list[str]:
    rows = [
        "<table><thead><tr><th>check</th><th>claim</th><th>cells</th><th>predicted</th><th>measured ± SE</th>"
        "<th>z</th><th>verdict</th><th>figure</th></tr></thead><tbody>"
    ]
    for r in records:
        if r["kind"] != kind:
            continue
        se = "exact" if r["exact"] else number(r["se"])
        fig = f'<a href="#{_anchor(r["figure"])}">{html.escape(r["figure"])}</a>' if r["figure"] else ""
        rows.append(
            f'<tr class="{"" if r["passed"] else "fail"}"><td>{html.escape(r["name"])}</td>'
            f"<td>{html.escape(r['claim'])}</td><td class=num>{r['cells']}</td>"
            f"<td class=num>{number(r['predicted'])}</td><td class=num>{number(r['measured'])} ± {se}</td>"
            f"<td class=num>{number(r['z'])}</td><td class=verdict>{verdict(r)}</td><td>{fig}</td></tr>"
        )
    return rows + ["</tbody></table>"]


def _finding(table, out_dir: Path) -> list[str]:
    out = [f"<h3>{html.escape(table.title)}</h3>"]
    if table.note:
        out.append(f'<p class="note">{html.escape(table.note)}</p>')
    out.append("<table><thead><tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns))
    out.append("</tr></thead><tbody>")
    for row in table.rows:
        cells = "".join(
            f"<td class=num>{number(v)}</td>" if isinstance(v, (int, float)) else f"<td>{_text(v)}</td>" for v in row
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table>")
    if table.figure and (uri := _figure_uri(out_dir, table.figure)):
        out.append(f'<figure><img src="{uri}" alt="{html.escape(table.title)}"></figure>')
    return out


def _scope(meta: dict) -> list[str]:
    if (scope := problem_scope(meta)) is None:
        return []
    head, not_run = scope
    items = "".join(f"<li>{html.escape(line)}</li>" for line in not_run)
    return [f'<p id="problem">{html.escape(head)}</p>'] + (
        [f"<p>Left out on this problem:</p><ul>{items}</ul>"] if items else []
    )


def write_html(records: list[dict], summary: dict, meta: dict, tables, out_dir: Path) -> Path:
    """Write ``out_dir/report.html`` and return its path."""
    ok = summary["ok"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>nqm validation report — {'all pass' if ok else 'FAILURES'}</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>nqm validation report</h1>",
        f"<p>{html.escape(preamble(meta))}</p>",
        *_scope(meta),
        '<div class="summary" id="summary">',
        f'<div class="tile {"ok" if summary["checks_passed"] == summary["checks"] else "bad"}">'
        f"<b>{summary['checks_passed']}/{summary['checks']}</b>checks pass</div>",
        f'<div class="tile {"ok" if summary["controls_rejected"] == summary["controls"] else "bad"}">'
        f"<b>{summary['controls_rejected']}/{summary['controls']}</b>planted errors rejected</div>",
        f'<div class="tile {"ok" if ok else "bad"}"><b>{"OK" if ok else "FAIL"}</b>verdict</div>',
        "</div>",
        "<h2>Checks</h2>",
        *_checks_table(records, "check"),
        "<h2>Negative controls (planted errors)</h2>",
        *_checks_table(records, "negative_control"),
    ]
    if tables:
        parts.append("<h2>Measured findings</h2>")
        for t in tables:
            parts += _finding(t, out_dir)
    figures = list(dict.fromkeys(r["figure"] for r in records if r["figure"]))
    if figures:
        parts.append("<h2>Figures of the checks</h2>")
        for name in figures:
            if uri := _figure_uri(out_dir, name):
                parts.append(
                    f'<figure id="{_anchor(name)}"><img src="{uri}" alt="{html.escape(name)}">'
                    f"<figcaption>{html.escape(name)}</figcaption></figure>"
                )
    parts.append("</body></html>")
    path = out_dir / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
