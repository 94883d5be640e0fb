"""The explorer (``nqm explore``) in a real browser: the numbers it shows are nqm's.

Headless chromium opens the page from ``file://`` with its settings in the address's ``#`` part (the page reads its
controls from there, as a shared link does), runs its JavaScript and hands back the DOM; every ``<output>`` carries
its value at full precision in ``data-value``. For 24 settings (three optimisers, spectra from d = 1 to 300) the
one-step closed forms and E[L_t] at two steps and at t → ∞ must equal :mod:`nqm.theory` and :mod:`nqm.dynamics`
to 1e-9 relative, the steps to the target exactly, the frontier's fewest steps over ε at B = 1, 2, 4, … exactly
(``steps_to_target`` at the page's ε; never more than ``optimal_steps_to_target``) and its S_min and E_min to 1e-7
(``fit_frontier``). A copy of the page with one formula planted wrong fails.
Screenshots at 1280×800 and at a phone's 390×844 are left in the test's directory for a person to look at."""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser

import matplotlib.image
import numpy as np
import pytest

import nqm
from nqm import dynamics, explore, optim, theory
from nqm.cli import main as cli_main

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")

BROWSER = [
    "chromium",
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
]
RTOL = 1e-9
FIT_RTOL = 1e-7


def _load(page, state: dict, tmp_path, tag: str) -> tuple[dict, str]:
    """({output id: value}, chromium's log) of the page opened at ``state``."""
    fragment = "&".join(f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}" for k, v in state.items())
    args = [*BROWSER, f"--user-data-dir={tmp_path / ('profile-' + tag)}", "--virtual-time-budget=20000", "--dump-dom"]
    done = subprocess.run([*args, f"{page.as_uri()}#{fragment}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'data-ready="1"' in done.stdout, "the page's script did not finish"
    values = {
        m.group(1): float(m.group(2).replace("Infinity", "inf"))
        for m in re.finditer(r'<output id="out-([a-z0-9-]+)" data-value="([^"]*)"', done.stdout)
    }
    frontier = r'<output id="out-frontier" data-value="[^"]*" data-steps="([^"]*)" data-lrs="([^"]*)"'
    found = re.search(frontier, done.stdout)
    for key, text in zip(("frontier", "frontier_lr"), found.groups()):
        values[key] = np.array([float(x.replace("Infinity", "inf")) for x in text.split(",")])
    errors = re.search(r'<pre id="errors"[^>]*>(.*?)</pre>', done.stdout, re.S).group(1)
    return values, errors + "\n".join(line for line in done.stderr.splitlines() if "CONSOLE" in line)


def _settings(n: int = 24) -> list[dict]:
    """Settings that cover the three optimisers, tiny and larger spectra, stable steps and reachable targets."""
    rng = np.random.default_rng(41)
    out = []
    for k in range(n):
        opt = ("sgd", "heavy_ball", "precond")[k % 3]
        st = {
            "a": round(float(rng.uniform(0.3, 2.0)), 2),
            "d": int(rng.choice([1, 7, 50, 300])),
            "q": round(float(rng.uniform(0.0, 1.5)), 2),
            "s": float(10 ** rng.uniform(-1, 1)),
            "v0": float(10 ** rng.uniform(-1, 1)),
            "opt": opt,
            "beta": round(float(rng.uniform(0.5, 0.95)), 2),
            "alpha": round(float(rng.uniform(0.25, 1.0)), 2),
            "B": float(np.round(10 ** rng.uniform(0, 3))),
            "T": int(rng.integers(50, 2000)),
        }
        p, pre, family = _nqm(st)
        edge = (2 * (1 + st["beta"]) if opt == "heavy_ball" else 2.0) / float(np.max(pre * p.h))
        st["lr"] = float(edge * 10 ** rng.uniform(-1.5, -0.1))  # stable, from slow to near the edge
        # B so that the steady state sits below 0.3% of L₀: every target of 1%–20% of L₀ is reached
        loss0 = 0.5 * float(np.sum(p.h)) * st["v0"]
        floor = dynamics.steady_state_loss(p, family(st["lr"]), st["B"]) / loss0
        st["B"] = float(np.ceil(st["B"] * max(1.0, floor / 0.003)))
        st["target"] = float(10 ** rng.uniform(-2, -0.7))
        out.append(st)
    return out


def _nqm(st):
    """The page's problem as nqm builds it: (problem, P's diagonal, optimiser of ε)."""
    h = np.arange(1, st["d"] + 1, dtype=float) ** -st["a"]
    p = nqm.NoisyQuadratic(h, st["s"] * h ** st["q"])
    pre = h ** -st["alpha"] if st["opt"] == "precond" else np.ones(st["d"])
    family = {
        "sgd": lambda lr: optim.sgd(lr),
        "heavy_ball": lambda lr: optim.heavy_ball(lr, st["beta"]),
        "precond": lambda lr: optim.sgd(lr, pre),
    }[st["opt"]]
    return p, pre, family


def _expected(st, target: float) -> dict:
    p, pre, family = _nqm(st)
    theta = np.sqrt(np.full(p.d, st["v0"]))
    precond = pre if st["opt"] == "precond" else None
    opt, b, t = family(st["lr"]), st["B"], st["T"]
    curve = dynamics.expected_loss(p, opt, b, t, init_var=st["v0"], at=[t // 2, t])
    return {
        "epsmax": theory.max_step(p, theta, precond),
        "dlmax": theory.max_improvement(p, theta, precond),
        "epsopt": theory.optimal_step(p, theta, b, precond),
        "dlopt": theory.optimal_improvement(p, theta, b, precond),
        "improvement": theory.expected_improvement(p, theta, st["lr"], b, precond),
        "bnoise": theory.noise_scale(p, theta, precond),
        "bsimple": theory.simple_noise_scale(p, theta),
        "loss-half": curve.mean[0],
        "loss-end": curve.mean[1],
        "steady": dynamics.steady_state_loss(p, opt, b),
        "steps": dynamics.steps_to_target(p, opt, b, target, init_var=st["v0"]),
    }


def _frontier_mismatches(shown: dict, st) -> list[str]:
    """The page's frontier against nqm. Its fewest steps over ε at B = 1, 2, 4, … are first hits: nqm's
    ``steps_to_target`` at the page's ε gives them exactly. They are never more than ``optimal_steps_to_target``'s,
    and equal where the page's ε has its stationary loss below the target: nqm searches ε only there, which misses a
    run that dips below the target on its way to a stationary loss above it (slow coordinates that start below
    their noise floor). S_min and E_min are ``fit_frontier``'s of the page's steps."""
    p, pre, _ = _nqm(st)
    precond = pre if st["opt"] == "precond" else None
    b = 2.0 ** np.arange(shown["frontier"].size)
    target = shown["target"]
    hits = [  # searched to twice the page's count: a run that needs more is a mismatch either way
        dynamics.steps_to_target(p, optim.sgd(lr, precond), bb, target, init_var=st["v0"], max_steps=int(2 * s + 10))
        for lr, bb, s in zip(shown["frontier_lr"], b, shown["frontier"])
    ]
    runs = dynamics.optimal_steps_to_target(p, target, b, family="sgd", init_var=st["v0"], precond=precond)
    bad = [] if np.array_equal(hits, shown["frontier"]) else [f"frontier {shown['frontier']} != first hits {hits}"]
    page, tuned = shown["frontier"], runs.steps
    settles = np.array([
        dynamics.steady_state_loss(p, optim.sgd(lr, precond), bb) <= target for lr, bb in zip(shown["frontier_lr"], b)
    ])  # fmt: skip
    if np.any(page > tuned) or np.any((page != tuned) & settles):
        bad.append(f"frontier {page.tolist()} against nqm's {tuned.tolist()} (settles {settles.tolist()})")
    b20 = dynamics.linear_scaling_on_frontier(shown["smin"], shown["emin"], 1.0, 0.2)
    bad += [] if np.isclose(shown["b20"], b20, rtol=RTOL, atol=0) else ["frontier's 20% rule"]
    over = np.nonzero(page * b > 1.2 * page[0])[0]
    bad += [] if shown["b20-grid"] == (b[over[0]] if over.size else np.nan) or not over.size else ["20% on the grid"]
    s_min, e_min, _ = dynamics.fit_frontier(b, page)
    # a fit, not a closed form: both stop their Gauss–Newton polish where the spread is flat to rounding, which
    # leaves S_min (at its smallest, 0.5 against E_min = 577) a few 1e-9 apart
    bad += [k for k, v in (("smin", s_min), ("emin", e_min)) if not np.isclose(shown[k], v, rtol=FIT_RTOL, atol=0)]
    return bad


def _mismatches(shown: dict, st) -> list[str]:
    want = _expected(st, shown["target"])
    bad = [k for k in want if k != "steps" and not np.isclose(shown[k], want[k], rtol=RTOL, atol=0)]
    if shown["steps"] != want["steps"]:
        bad.append(f"steps {shown['steps']} != {want['steps']}")
    return bad + _frontier_mismatches(shown, st)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("explorer") / "explorer.html"
    assert cli_main(["explore", "--out", str(out)]) == 0
    return out


def test_the_page_shows_nqm_s_numbers_for_24_settings(page, tmp_path):
    settings = _settings()
    assert {s["opt"] for s in settings} == {"sgd", "heavy_ball", "precond"} and min(s["d"] for s in settings) == 1
    with ThreadPoolExecutor(2) as pool:
        loaded = list(pool.map(lambda k: _load(page, settings[k], tmp_path, str(k)), range(len(settings))))
    for st, (shown, errors) in zip(settings, loaded):
        assert errors.strip() == "", errors
        assert np.isclose(shown["loss0"], 0.5 * np.sum(np.arange(1, st["d"] + 1) ** -st["a"]) * st["v0"], rtol=RTOL)
        assert _mismatches(shown, st) == [], st
        assert np.isfinite(shown["steps"]) and shown["examples"] == shown["steps"] * st["B"]


PLANTED = {
    "epsopt": ("epsOpt: (B) => gpg / (gphpg + tr / B)", "epsOpt: (B) => gpg / (gphpg + tr / (2 * B))"),
    "frontier": ("q = (eps * p[i]) * (eps * p[i]) * P.c[i] / B;", "q = (eps * p[i]) * (eps * p[i]) * P.c[i] / B / 2;"),
}


@pytest.mark.parametrize("name", PLANTED)
def test_a_formula_planted_wrong_in_the_page_fails(page, tmp_path, name):
    """ε_opt(B) with the noise term halved (tr/(2B)), or the frontier's SGD loss with half the noise: the same
    comparison names what each moves, and nothing else."""
    right, wrong = PLANTED[name]
    source = page.read_text()
    assert source.count(right) == 1
    planted = tmp_path / "planted.html"
    planted.write_text(source.replace(right, wrong))
    st = _settings()[0]
    shown, _ = _load(planted, st, tmp_path, "planted")
    bad = _mismatches(shown, st)
    assert bad and all(b.startswith(name) for b in bad), bad


def test_a_problem_file_is_baked_in(tmp_path, example_toml):
    """``nqm explore --problem``: the page shows the file's problem and its numbers (d = 1000, power law 1)."""
    toml = tmp_path / "p.toml"
    toml.write_text(example_toml)
    out = tmp_path / "baked.html"
    assert cli_main(["explore", "--out", str(out), "--problem", str(toml)]) == 0
    st = {"a": 1.0, "d": 1000, "q": 1.0, "s": 1.0, "v0": 1.0, "opt": "sgd", "beta": 0.9, "alpha": 0.5, "B": 64.0,
          "lr": 0.7, "target": 0.05, "T": 500}  # fmt: skip
    shown, errors = _load(out, {k: st[k] for k in ("opt", "B", "lr", "target", "T")}, tmp_path, "baked")
    assert errors.strip() == ""
    assert _mismatches(shown, st) == []
    assert "power law 1.0" in out.read_text()


def test_nqm_explore_says_what_is_wrong(tmp_path, capsys):
    assert cli_main(["explore", "--out", str(tmp_path)]) == 2
    assert "--out" in capsys.readouterr().err
    big = tmp_path / "big.toml"
    big.write_text(
        '[spectrum]\nkind = "power_law"\nd = 30000\nexponent = 1.0\n[noise]\nkind = "power"\nscale = 1.0\nq = 1.0\n'
    )
    assert cli_main(["explore", "--out", str(tmp_path / "x.html"), "--problem", str(big)]) == 2
    assert "--problem" in capsys.readouterr().err and not (tmp_path / "x.html").exists()


class _Controls(HTMLParser):
    def __init__(self):
        super().__init__()
        self.inputs, self.labels = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("input", "select") and a.get("type") != "radio":
            self.inputs.append(a.get("id"))
        if tag == "label" and a.get("for"):
            self.labels.add(a["for"])


def test_the_page_is_offline_small_labelled_and_readable(page, tmp_path):
    """No network (nothing fetched), under 1 MB, every slider and menu labelled (keyboard users reach them by Tab and
    move them by the arrow keys, as native controls), and screenshots at desktop and phone width that are not
    blank; their paths are printed."""
    html = page.read_text()
    assert len(html.encode()) < explore.MAX_BYTES
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html) and "fetch(" not in html
    controls = _Controls()
    controls.feed(html)
    assert controls.inputs and set(controls.inputs) <= controls.labels
    for name, size in (("desktop", "1280,800"), ("phone", "390,844")):
        shot = tmp_path / f"explorer-{name}.png"
        args = [*BROWSER, f"--user-data-dir={tmp_path / name}", "--hide-scrollbars", f"--window-size={size}"]
        done = subprocess.run([*args, "--virtual-time-budget=20000", f"--screenshot={shot}", page.as_uri()],
                              capture_output=True, timeout=120)  # fmt: skip
        assert done.returncode == 0 and shot.exists()
        pixels = matplotlib.image.imread(shot)
        assert pixels.std() > 0.05, f"{name} screenshot is blank"
        print(f"explorer screenshot ({name}): {shot}")
