"""The explorer used as a person uses it: the keyboard moves a slider, a drag on a view moves the point, and every
view answers with nqm's numbers. Debian's chromium driven through chromedriver's W3C WebDriver protocol (plain
HTTP and JSON, no client library)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from urllib.parse import unquote

import numpy as np
import pytest

import nqm
from nqm import explore, theory

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None or shutil.which("chromedriver") is None,
    reason="Debian's chromium and chromium-driver are not installed",
)
ARROW_RIGHT, END = "\ue014", "\ue010"


class _Browser:
    """A minimal W3C WebDriver session."""

    def __init__(self, profile):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.driver = subprocess.Popen(["chromedriver", f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)  # fmt: skip
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900", f"--user-data-dir={profile}",
                "--disable-background-networking", "--disable-component-update", "--no-first-run"]  # fmt: skip
        caps = {"browserName": "chrome", "goog:chromeOptions": {"binary": shutil.which("chromium"), "args": args}}
        for _ in range(100):  # the driver takes a moment to listen
            try:
                self.session = self.call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["sessionId"]
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("chromedriver did not start")

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:  # the driver says why in the body
            raise AssertionError(f"{method} {path}: {e.read().decode()[:2000]}") from None

    def __call__(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def script(self, code):
        return self("POST", "/execute/sync", {"script": code, "args": []})

    def element(self, css):
        found = self("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(found.values()))

    def state(self) -> dict:
        return dict(part.split("=") for part in unquote(self.script("return location.hash")).lstrip("#").split("&"))

    def shown(self, name) -> float:
        return float(self.script(f"return document.getElementById('out-{name}').dataset.value"))

    def close(self):
        try:
            self("DELETE", "")
        finally:
            self.driver.terminate()
            self.driver.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    page = explore.write(tmp_path_factory.mktemp("explorer") / "explorer.html")
    b = _Browser(tmp_path_factory.mktemp("profile"))
    b("POST", "/url", {"url": page.as_uri() + "#opt=sgd&B=16&lr=0.5"})
    yield b
    b.close()


def _epsopt(st) -> float:
    """nqm's ε_opt(B) on the page's default power law (h = c = i⁻¹, d = 100, θᵢ² = 1) at the page's state."""
    d, a = int(float(st["d"])), float(st["a"])
    h = np.arange(1, d + 1) ** -a
    p = nqm.NoisyQuadratic(h, float(st["s"]) * h ** float(st["q"]))
    return float(theory.optimal_step(p, np.sqrt(np.full(d, float(st["v0"]))), float(st["B"])))


def test_the_keyboard_moves_the_batch_slider_and_the_views_follow(browser):
    """Five presses of → on the batch slider: log₁₀ B moves five of its 0.01 steps from where the slider snapped B
    (16 sits at 1.20), the hash and the label follow, and ε_opt(B) is nqm's at the new B."""
    assert browser.script("return document.getElementById('errors').textContent") == ""
    before = browser.state()
    slider = browser.element("#in-B")
    for _ in range(5):
        browser("POST", f"/element/{slider}/value", {"text": ARROW_RIGHT})
    after = browser.state()
    snapped = round(np.log10(float(before["B"])) / 0.01) * 0.01
    assert float(after["B"]) == pytest.approx(10 ** (snapped + 0.05), rel=1e-12)
    assert browser.shown("epsopt") == pytest.approx(_epsopt(after), rel=1e-9)
    assert browser.shown("epsopt") > _epsopt(before)
    label = browser.script("return document.getElementById('val-B').textContent")
    assert label == f"{float(after['B']):.4g}"


def test_a_drag_on_the_noise_scale_view_sets_b_in_every_view(browser):
    """Press a quarter of the way across the B view and drag to 80%: B follows the pointer (an integer, larger than
    where it was pressed) and the one-step view's ε_opt(B) is nqm's there."""
    browser.script("document.getElementById('view-batch').scrollIntoView()")
    x, y, w, h = browser.script(
        "const r = document.getElementById('view-batch').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]"
    )
    at = lambda f: {"type": "pointerMove", "origin": "viewport", "x": int(x + f * w), "y": int(y + h / 2)}  # noqa: E731
    moves = [at(0.25), {"type": "pointerDown", "button": 0}, {**at(0.5), "duration": 100}, {**at(0.8), "duration": 100},
             {"type": "pointerUp", "button": 0}]  # fmt: skip
    browser("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "actions": moves}]})
    browser("DELETE", "/actions")
    st = browser.state()
    assert float(st["B"]) == round(float(st["B"])) and float(st["B"]) >= 1
    assert browser.shown("epsopt") == pytest.approx(_epsopt(st), rel=1e-9)
    click = [moves[0], moves[1], moves[4]]  # press and let go where the drag began: a smaller B
    browser("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "actions": click}]})
    assert float(browser.state()["B"]) < float(st["B"])
