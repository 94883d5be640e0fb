"""``report.html``: self-contained, complete, and rendered by a real headless browser (Debian's chromium)."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser

import matplotlib.image
import numpy as np
import pytest


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
