r"""The explorer: one self-contained web page where the theory can be touched (``nqm explore``).

The page (``explorer.html``, ``explorer.js``, ``explorer.css`` beside this module, inlined into one file: no
network, it opens from ``file://``) computes, in plain JavaScript, what :mod:`nqm.theory` and :mod:`nqm.dynamics`
compute, on a power-law problem it builds from its sliders or on a problem baked in here:

* the one-step law at θ with θᵢ² the initial variance (McCandlish et al. 2018, arXiv:1812.06162, eqs. 2.5–2.9),
  with a diagonal preconditioner P:

  .. math:: \mathbb E[\Delta L](\varepsilon) = \varepsilon G^\top PG - \tfrac12\varepsilon^2
            \bigl(G^\top PHPG + \operatorname{tr}(PHP\Sigma)/B\bigr),\quad
            \varepsilon_\text{opt}(B) = \frac{\varepsilon_\max}{1 + B_\text{noise}/B},\quad
            B_\text{noise} = \frac{\operatorname{tr}(PHP\Sigma)}{G^\top PHPG};

* the exact E[L_t] of SGD, preconditioned SGD (P = H^(−α)) and heavy ball, their steady state and the first step
  with E[L_t] ≤ target (Zhang et al. 2019, arXiv:1907.04164, §3), by iterating each coordinate's second moments.

``tests/test_explorer.py`` sets the page's controls (through the address's ``#`` part, which the page keeps in step
with its sliders) in headless chromium and holds the displayed numbers to nqm's for 24 settings.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np

from ..noise import example_variance

__all__ = ["page", "write", "MAX_DIMENSIONS"]

MAX_DIMENSIONS = 20_000
"""The most coordinates a baked-in problem may have: the page iterates each one per step of a run."""
MAX_BYTES = 1_000_000  # the page's size limit (a phone on a slow link)


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _baked(problem, init_var) -> str:
    """The problem as the page's ``NQM_PROBLEM`` (JSON), or ``null`` for the page's own power law."""
    if problem is None:
        return "null"
    if problem.d > MAX_DIMENSIONS:
        raise ValueError(f"problem has d = {problem.d} coordinates; the explorer takes at most {MAX_DIMENSIONS}")
    if problem.optimum is not None and np.any(problem.optimum):
        raise ValueError("problem has an optimum θ* ≠ 0; the explorer's dynamics start from a mean of 0")
    v0 = np.broadcast_to(np.asarray(init_var, dtype=np.float64), (problem.d,))
    data = {
        "name": problem.name,
        "h": problem.h.tolist(),
        "c": np.asarray(example_variance(problem), dtype=np.float64).tolist(),
        "init_var": v0.tolist(),
    }
    return json.dumps(data, allow_nan=False).replace("</", "<\\/")  # no early </script> from a name


def page(problem=None, init_var=1.0) -> str:
    """The explorer as one HTML document (str): a power-law problem set by its sliders, or ``problem`` (a
    :class:`nqm.NoisyQuadratic` with θ* = 0 and at most :data:`MAX_DIMENSIONS` coordinates) from ``init_var``
    (scalar or (d,))."""
    html = _asset("explorer.html")
    for marker, text in (
        ("/*STYLE*/", _asset("explorer.css")),
        ("/*SCRIPT*/", _asset("explorer.js")),
        ("/*PROBLEM*/", _baked(problem, init_var)),
    ):
        html = html.replace(marker, text, 1)
    size = len(html.encode("utf-8"))
    if size > MAX_BYTES:
        raise ValueError(f"the page would be {size} bytes, over {MAX_BYTES}; use fewer coordinates")
    return html


def write(path, problem=None, init_var=1.0) -> Path:
    """:func:`page` written to ``path`` (UTF-8); returns the path."""
    path = Path(path)
    path.write_text(page(problem, init_var), encoding="utf-8")
    return path
