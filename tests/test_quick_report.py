"""``nqm validate --quick`` end to end, run once (``quick_report``, tests/conftest.py) for every test here: it passes,
every claim speaks in it, and its ``report.html`` is self-contained, complete, and rendered by a real headless
browser (Debian's chromium). The tests run one module per worker, so the quick suite runs once."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser

import matplotlib.image
import numpy as np
import pytest


def test_nqm_validate_quick_end_to_end(quick_report):
    """The quick suite passes, rejects every control, and writes the report, results and figures."""
    tmp_path, status = quick_report
    assert status == 0
    results = json.loads((tmp_path / "results.json").read_text())
    checks = results["checks"]
    assert {"name", "claim", "kind", "predicted", "measured", "se", "z", "passed"} <= set(checks[0])
    kinds = {c["kind"] for c in checks}
    assert kinds == {"check", "negative_control"}
    assert all(c["passed"] for c in checks)
    for c in checks:
        if c["figure"]:
            assert (tmp_path / c["figure"]).stat().st_size > 10_000
    assert "negative controls rejected" in (tmp_path / "report.md").read_text()
    assert "`nqm explore`" in (tmp_path / "report.md").read_text()  # the report points to the explorer
    # every cell's z is recorded (bench/calibration.py reads them); V1's and V4's cells are decided skew-corrected
    for c in checks:
        assert len(c["all_cells"]["z"]) == c["cells"]
    skewed = [c for c in checks if c["name"].startswith(("V4 dynamics", "V1 one-step law"))]
    assert len(skewed) >= 13 and all(len(c["all_cells"]["z_uncorrected"]) == c["cells"] for c in skewed)


def test_every_discovered_claim_speaks_in_the_quick_report(quick_report):
    """Each claim the runner finds reports under its own ID: checks named after it (statistical ones with a planted
    control rejected), or findings tables tagged with it; and the report lists the sizes each claim declared."""
    from validation.claims import discover

    tmp_path, _ = quick_report
    results = json.loads((tmp_path / "results.json").read_text())
    checks, findings = results["checks"], results["findings"]
    for claim in discover():
        own = [c for c in checks if c["name"].split()[0] == claim.id]
        tables = [t for t in findings if t["claim"] == claim.id]
        assert own or tables, f"{claim.id} reported nothing"
        if any(c["kind"] == "check" and not c["exact"] for c in own):
            assert any(c["kind"] == "negative_control" for c in own), f"{claim.id} has no planted control"
        assert results["meta"]["budget"].get(claim.id, {}) == claim.sizes.as_dict(True)


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.images, self.links, self.scripts, self.text = 0, [], [], 0, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and self.rows is not None:
            self.rows += 1
        if tag == "img":
            self.images.append(a.get("src", ""))
        if tag in ("link", "script") or (tag == "a" and not a.get("href", "#").startswith("#")):
            self.links.append((tag, a))
        if tag == "script":
            self.scripts += 1

    def handle_data(self, data):
        self.text.append(data)


def test_the_page_is_self_contained_and_lists_every_check(quick_report):
    out, status = quick_report
    assert status == 0
    page = _Page()
    page.feed((out / "report.html").read_text(encoding="utf-8"))
    results = json.loads((out / "results.json").read_text())
    summary = results["summary"]
    text = " ".join(page.text)
    assert f"{summary['checks_passed']}/{summary['checks']}" in text
    assert f"{summary['controls_rejected']}/{summary['controls']}" in text
    for c in results["checks"]:
        assert c["name"] in text
    figures = {c["figure"] for c in results["checks"] if c["figure"]} | {
        f["figure"] for f in results["findings"] if f["figure"]
    }
    assert len(page.images) >= len(figures) > 0
    assert all(src.startswith("data:image/png;base64,") for src in page.images)  # nothing to fetch
    assert page.links == [] and page.scripts == 0


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_chromium_renders_the_report(quick_report, tmp_path):
    out, _ = quick_report
    url = (out / "report.html").as_uri()
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "checks pass" in dom.stdout and "planted errors rejected" in dom.stdout
    shot = tmp_path / "report.png"
    run = subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1280,1600", url], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and shot.stat().st_size > 20_000, run.stderr[-2000:]
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (1600, 1280)
    dark = np.mean(pixels.mean(axis=2) < 0.5)  # text and table rules: a blank or unstyled page has none
    green = np.mean((pixels[..., 1] > pixels[..., 0] + 0.02) & (pixels[..., 1] > 0.85))  # the "all pass" tiles
    assert 0.005 < dark < 0.5 and green > 0.001
