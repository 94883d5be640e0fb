"""Probe the public API and the CLI as a new user would, and sort each answer into the hardening categories.

    python bench/probe.py                # every probe, a table by category and the lines that are not clear/sensible
    python bench/probe.py --verbose      # every probe's line

Categories: **clear** (a ValueError/TypeError, or a CLI exit 2 with one line, whose message names what it was
told to name), **unclear** (such an error without that word), **sensible** (a result that passes the probe's
own check), **silent wrong** (a result that fails it: NaN, a wrong value, a file changed), **traceback** (any
other exception, or a CLI traceback), **runaway** (more than ``--timeout`` seconds). Each probe runs in a child
process (a runaway is killed, memory is capped at 4 GiB), in a scratch directory it may write to.

Run it against another checkout with ``PYTHONPATH=that/checkout python bench/probe.py`` to compare before and after.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

TOML = '[spectrum]\nkind = "power_law"\nd = 20\nexponent = 1.0\n[noise]\nkind = "power"\n'


def _write(name, text):
    Path(name).write_text(text)
    return name


def _npy(name, array):
    with open(name, "wb") as f:
        np.save(f, array)
    return name


def _cli(*argv):
    from nqm.cli import main

    return main(list(argv))


def _finite(x):
    return bool(np.all(np.isfinite(np.asarray(x, dtype=float))))


# (name, call, expect): expect is a word a clear error must contain, or a check of the result (True: sensible)
PROBES = []


def probe(name, expect):
    def register(fn):
        PROBES.append((name, fn, expect))
        return fn

    return register


# -- problems ---------------------------------------------------------------------------------------
@probe("NoisyQuadratic sigma complex", "sigma")
def _():
    import nqm

    return nqm.NoisyQuadratic([1.0, 2.0], sigma=np.eye(2) * (1 + 1j))


@probe("NoisyQuadratic sigma bool", "sigma")
def _():
    import nqm

    return nqm.NoisyQuadratic([1.0, 2.0], sigma=np.eye(2, dtype=bool))


@probe("NoisyQuadratic basis complex", "basis")
def _():
    import nqm

    return nqm.NoisyQuadratic([1.0, 2.0], [1.0, 1.0], basis=np.eye(2) * (1 + 0j))


@probe("with_parameter_noise non-symmetric sigma_x", "symmetric")
def _():
    import nqm

    return nqm.NoisyQuadratic.with_parameter_noise([1.0, 2.0], np.eye(2), [[1.0, 0.5], [0.1, 1.0]])


@probe("problem file: kind is a list", "kind")
def _():
    import nqm

    return nqm.NoisyQuadratic.from_file(_write("p.toml", TOML.replace('kind = "power_law"', 'kind = ["power"]')))


@probe("problem file: a directory", "directory")
def _():
    import nqm

    return nqm.NoisyQuadratic.from_file(".")


@probe("problem file: not UTF-8", "UTF-8")
def _():
    import nqm

    Path("l.toml").write_bytes('name = "caf\xe9"\n'.encode("latin-1") + TOML.encode())
    return nqm.NoisyQuadratic.from_file("l.toml")


@probe("problem file: structured .npy spectrum", "real numbers")
def _():
    import nqm

    _npy("s.npy", np.zeros(3, dtype=[("a", "f8"), ("b", "f8")]))
    return nqm.NoisyQuadratic.from_file(
        _write("p.toml", '[spectrum]\nkind = "file"\npath = "s.npy"\n[noise]\nkind = "power"\n')
    )


@probe("problem file: complex .npy spectrum", "real numbers")
def _():
    import nqm

    _npy("c.npy", np.array([1 + 1j, 2.0]))
    return nqm.NoisyQuadratic.from_file(
        _write("p.toml", '[spectrum]\nkind = "file"\npath = "c.npy"\n[noise]\nkind = "power"\n')
    )


@probe("problem file: .npz spectrum", "npz")
def _():
    import nqm

    with open("z.npz", "wb") as f:
        np.savez(f, h=np.ones(3))
    return nqm.NoisyQuadratic.from_file(
        _write("p.toml", '[spectrum]\nkind = "file"\npath = "z.npz"\n[noise]\nkind = "power"\n')
    )


@probe("problem file: .NPY spectrum", lambda p: p.d == 3)
def _():
    import nqm

    _npy("h.NPY", np.array([3.0, 2.0, 1.0]))
    return nqm.NoisyQuadratic.from_file(
        _write("p.toml", '[spectrum]\nkind = "file"\npath = "h.NPY"\n[noise]\nkind = "power"\n')
    )


@probe("problem file: negative seed", "seed")
def _():
    import nqm

    return nqm.NoisyQuadratic.from_file(_write("p.toml", TOML + "[basis]\nseed = -1\n"))


@probe("problem file: d = 2.7", "d")
def _():
    import nqm

    return nqm.NoisyQuadratic.from_file(_write("p.toml", TOML.replace("d = 20", "d = 2.7")))


@probe("problem file: docstring's own example", lambda p: p.d == 1000 and p.basis is not None)
def _():
    import textwrap

    import nqm
    from nqm import problem_file

    example = problem_file.__doc__.split("::\n", 1)[1].split("\n\n", 1)[0]
    return nqm.NoisyQuadratic.from_file(_write("p.toml", textwrap.dedent(example)))


@probe("problem file: negative variance from a file", "p.toml")
def _():
    import nqm

    Path("c.txt").write_text("0.1\n" * 19 + "-1\n")
    return nqm.NoisyQuadratic.from_file(
        _write("p.toml", TOML.replace('kind = "power"', 'kind = "file"\npath = "c.txt"'))
    )


@probe("problem file: /dev/zero", "regular file")
def _():
    import nqm

    return nqm.NoisyQuadratic.from_file("/dev/zero")


@probe("problem file: [basis] at d = 50000", "dense")
def _():
    import nqm

    return nqm.NoisyQuadratic.from_file(_write("p.toml", TOML.replace("d = 20", "d = 50000") + "[basis]\nseed = 1\n"))


# -- optimisers ---------------------------------------------------------------------------------------------
@probe("sgd(0.1, weight_decay=0.5).update at g = 0", lambda r: np.allclose(r[0], 0.95))
def _():
    from nqm import optim

    return optim.sgd(0.1, weight_decay=0.5).update((np.ones((1, 2)),), np.zeros((1, 2)))


@probe("HeavyBall(0.1, 1.5) built directly", "momentum")
def _():
    from nqm import optim

    return optim.HeavyBall(0.1, 1.5)


@probe("adamw weight_decay='0.1'", "weight_decay")
def _():
    from nqm import optim

    return optim.adamw(0.1, weight_decay="0.1")


# -- tuners and critical batch sizes -----------------------------------------------------------------------
@probe("tuned SGD, d = 1, target 0.01, B = 64 and 8192", lambda r: list(r.steps) == [1.0, 1.0])
def _():
    import nqm
    from nqm import dynamics

    return dynamics.optimal_steps_to_target(nqm.NoisyQuadratic([1.0], [1.0]), 0.01, [64, 8192])


@probe("heavy ball, target above L0", lambda r: list(r.steps) == [0.0])
def _():
    import nqm
    from nqm import dynamics

    return dynamics.optimal_steps_to_target(nqm.NoisyQuadratic.zhang2019(50), 1e6, [64], family="heavy_ball")


@probe("critical_batch_sizes, target 1e-6, B in [1, 2]", lambda r: _finite(r.b_noise_mean))
def _():
    import nqm
    from nqm import dynamics

    return dynamics.critical_batch_sizes(nqm.NoisyQuadratic.zhang2019(100), 1e-6, batch_sizes=[1, 2])


@probe("simulate a diverging step", lambda r: np.isfinite(r.mean[0]) and np.isinf(r.mean[-1]))
def _():
    import nqm

    return nqm.simulate(nqm.NoisyQuadratic.zhang2019(20), 5.0, 8, 400, 16, progress=False)


# -- finite data -------------------------------------------------------------------------------------
@probe("FiniteDataset.draw keeps the basis", lambda d: d.basis is not None)
def _():
    import nqm
    from nqm import spectra

    p = nqm.NoisyQuadratic(np.ones(4), np.ones(4), basis=spectra.random_rotation(4, seed=1))
    return nqm.FiniteDataset.draw(p, 10)


@probe("FiniteDataset epochs, exact", lambda r: _finite(r[0].mean))
def _():
    import nqm
    from nqm import optim

    data = nqm.FiniteDataset.draw(nqm.NoisyQuadratic.zhang2019(10), 64)
    return data.expected_losses(optim.sgd(0.5), 8, 50, sampling="epochs")


# -- sweeps ------------------------------------------------------------------------------------------------
def _one_task_sweep(path):
    from nqm import sweep

    fixed = {"d": 20, "batch_size": 8, "target": 0.1}
    sweep.run("steps_to_target", [{"lr": 0.5}], fixed=fixed, path=path, progress=False)


@probe("sweep.load leaves a running file alone", lambda same: same)
def _():
    from nqm import sweep

    _one_task_sweep("s.jsonl")
    with open("s.jsonl", "a") as f:
        f.write('{"params":{"lr":0.25},"seed":1')
    before = Path("s.jsonl").read_bytes()
    sweep.load("s.jsonl")
    return Path("s.jsonl").read_bytes() == before


@probe("sweep record without its result", "result")
def _():
    from nqm import sweep

    _one_task_sweep("r.jsonl")
    head = Path("r.jsonl").read_text().splitlines()[0]
    Path("r.jsonl").write_text(head + '\n{"params":{"lr":0.5},"seed":1,"seconds":0.1}\n')
    return sweep.load("r.jsonl")


# -- the command line --------------------------------------------------------------------------------
@probe("nqm info on a noiseless problem, --json", lambda rc: rc == 0)
def _():
    return _cli(
        "info", "--problem", _write("q.toml", TOML.replace('kind = "power"', 'kind = "power"\nscale = 0')), "--json"
    )


@probe("nqm info, target 1e-20", lambda rc: rc in (0, 2))
def _():
    return _cli("info", "--problem", _write("p.toml", TOML), "--target", "1e-20")


@probe("nqm plot laws on a noiseless problem", "noiseless")
def _():
    return _cli(
        "plot", "laws", "--problem", _write("q.toml", TOML.replace('kind = "power"', 'kind = "power"\nscale = 0'))
    )


@probe("nqm plot laws --target 0.5", "target")
def _():
    return _cli("plot", "laws", "--target", "0.5", "--d", "30")


@probe("nqm plot parabolas --out paper.pdf over a user's file", "force")
def _():
    Path("paper.pdf").write_text("my paper")
    rc = _cli("plot", "parabolas", "--d", "30", "--out", "paper.pdf")
    if Path("paper.pdf").read_text(errors="replace") != "my paper":
        return "FILE LOST"
    return rc


@probe("nqm plot parabolas --out LAWS.PNG", lambda rc: rc == 0 and Path("LAWS.PNG").read_bytes()[:4] == b"\x89PNG")
def _():
    return _cli("plot", "parabolas", "--d", "30", "--out", "LAWS.PNG")


@probe("nqm plot parabolas --format svg", lambda rc: rc == 0 and Path("parabolas.svg").exists())
def _():
    return _cli("plot", "parabolas", "--d", "30", "--format", "svg")


@probe("nqm validate --out over a user's directory", "not an nqm report")
def _():
    Path("mine").mkdir()
    Path("mine/results.json").write_text('{"mine": 1}')
    Path("mine/notes.md").write_text("notes")
    rc = _cli("validate", "--quick", "--only", "V5", "--out", "mine")
    if Path("mine/notes.md").read_text() != "notes":
        return "FILE LOST"
    return rc


@probe("nqm validate --problem on a noiseless problem", lambda rc: rc == 0)
def _():
    return _cli(
        "validate",
        "--quick",
        "--only",
        "V2,V4",
        "--problem",
        _write("q.toml", TOML.replace('kind = "power"', 'kind = "power"\nscale = 0')),
        "--out",
        "vq",
    )


@probe("nqm validate --problem on an isotropic problem", lambda rc: rc == 0)
def _():
    iso = '[spectrum]\nkind = "uniform"\nd = 20\nlow = 1.0\nhigh = 1.0\n[noise]\nkind = "power"\n'
    return _cli("validate", "--quick", "--only", "V4", "--problem", _write("i.toml", iso), "--out", "vi")


# -- fuzz: each public theory/dynamics function, one argument at a time replaced by a bad value -------------
BAD = {"nan": float("nan"), "-1": -1.0, "0": 0.0, "inf": float("inf"), "str": "0.5", "complex": 1 + 1j, "empty": []}
FUZZ_MODULES = ("theory", "dynamics", "montecarlo", "estimators", "spectra", "finite_data")


def _baseline():
    """Valid arguments by name for the functions the fuzz calls (a d = 20 problem, a θ away from the optimum)."""
    import nqm
    from nqm import optim

    return {
        "p": nqm.NoisyQuadratic.zhang2019(20),
        "theta": 0.3 * np.random.default_rng(0).standard_normal(20),
        "batch_size": 16,
        "lr": 0.5,
        "steps": 30,
        "step": 10,
        "target": 0.05,
        "batch_sizes": [8, 64],
        "opt": optim.sgd(0.5),
        "precond_x": np.ones(20),
        "t": [0, 5, 10],
        "exponent": 1.5,  # the scaling laws need exponents above 1
        "noise_exponent": 1.0,
        "s_min": 10.0,
        "e_min": 1000.0,
        "reference_batch": 1.0,
        "tolerance": 0.2,
        "replicas": 8,
        "at": [0, 5, 10],
        "max_steps": 200,
        "b_small": 2,
        "b_big": 16,
        "sq_small": np.array([3.0, 2.5]),
        "sq_big": np.array([1.2, 1.1]),
        "mean_sq": np.array([3.0, 2.5]),
        "sq_of_mean": np.array([1.2, 1.1]),
        "values": np.array([1.0, 2.0, 3.0]),
        "beta": 0.9,
        "d": 10,
        "low": 0.1,
        "high": 1.0,
        "h": np.linspace(0.1, 1.0, 10),
        "c": np.ones(10),
        "n": 64,
    }


def fuzz_probes():
    """(name, call, expect-word) for every public theory/dynamics function whose required arguments the baseline
    names, each argument but the problem in turn given each bad value; a clear error names the argument."""
    import importlib
    import inspect

    base = _baseline()
    probes = []
    for module_name in FUZZ_MODULES:
        module = importlib.import_module(f"nqm.{module_name}")
        for fname in module.__all__:
            fn = getattr(module, fname)
            if not inspect.isfunction(fn):
                continue
            params = inspect.signature(fn).parameters
            required = [
                k for k, v in params.items() if v.default is inspect.Parameter.empty and v.kind != v.VAR_KEYWORD
            ]
            if not required or any(k not in base for k in required):
                continue
            for arg in required:
                if arg == "p":
                    continue  # a problem is built and checked by NoisyQuadratic (probed above)
                for label, bad in BAD.items():
                    kwargs = {k: base[k] for k in required}
                    kwargs[arg] = bad
                    call = lambda fn=fn, kw=kwargs: _Result(fn(**kw))  # noqa: E731 - one line per probe
                    probes.append((f"{module_name}.{fname}({arg}={label})", call, arg))
    return probes


class _Result:
    """An API function's return value (an int there is a result, not a CLI's exit status)."""

    def __init__(self, value):
        self.value = value


def _has_nan(value) -> bool:
    """Whether a result holds a NaN anywhere: an array, a number, a tuple of them, or an object's fields."""
    if isinstance(value, (tuple, list)):
        return any(_has_nan(v) for v in value)
    if value is None:  # an absent field (a curve's n, a run's momentum), not a number
        return False
    if hasattr(value, "__dict__") and not isinstance(value, np.ndarray):
        return any(_has_nan(v) for v in vars(value).values())
    try:
        return bool(np.any(np.isnan(np.asarray(value, dtype=float))))
    except (TypeError, ValueError):
        return False


def _child(fn, expect, conn):
    import contextlib
    import io

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            value = fn()
        if callable(expect):  # the result's check runs here, beside the files it may read
            try:
                ok = bool(expect(value))
            except Exception as e:
                ok, value = False, f"{value!r} ({type(e).__name__} in the check)"
            value = ("checked", ok, str(value)[:160])
        elif isinstance(value, _Result) or not isinstance(value, (int, str)):
            value = value.value if isinstance(value, _Result) else value
            value = f"{'NaN in' if _has_nan(value) else 'accepted:'} {str(value)[:120]}"
        conn.send(("value", value, err.getvalue()))
    except (ValueError, TypeError) as e:
        conn.send(("error", f"{type(e).__name__}: {e}", err.getvalue()))
    except BaseException:
        conn.send(("traceback", traceback.format_exc(limit=3), err.getvalue()))


def _names(message: str, word: str) -> bool:
    """Whether an error message names ``word`` (an argument: batch_sizes is named by "batch size" too)."""
    message, word = message.lower(), word.lower()
    aliases = {word, word.replace("_", " "), word.replace("_", " ").rstrip("s")}
    if word == "opt":  # a number where an optimiser is expected is SGD's step size (nqm.optim.as_optimizer)
        aliases |= {"optimiser", "optimizer", "step size (lr)"}
    return any(w in message for w in aliases)


def classify(name, fn, expect, timeout: float) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as scratch:
        here = os.getcwd()
        os.chdir(scratch)
        try:
            parent, child = mp.Pipe(duplex=False)
            proc = mp.get_context("fork").Process(target=_child, args=(fn, expect, child))
            proc.start()
            if not parent.poll(timeout):
                proc.kill()
                proc.join()
                return "runaway", f"over {timeout:g} s"
            kind, value, stderr = parent.recv()
            proc.join()
        finally:
            os.chdir(here)
    if kind == "traceback" or "Traceback" in stderr:
        return "traceback", (value if kind == "traceback" else stderr).strip().splitlines()[-1]
    if kind == "error":
        named = isinstance(expect, str) and _names(value, expect)
        return ("clear" if named else "unclear"), value
    if isinstance(value, str) and value == "FILE LOST":
        return "file lost", "the user's file was changed"
    if isinstance(value, tuple):
        _, ok, detail = value
        return ("sensible" if ok else "silent wrong"), detail
    if isinstance(expect, str):  # an error was expected: a CLI says it by exit status 2 and one line
        if isinstance(value, int) and value == 2 and _names(stderr, expect) and len(stderr.strip().splitlines()) == 1:
            return "clear", stderr.strip()
        if isinstance(value, int) and value == 2:
            return "unclear", stderr.strip()[-200:]
        if isinstance(value, str) and value.startswith("accepted: "):
            return "accepted", value  # a value where an error was expected: for a person to judge
        if isinstance(value, str) and value.startswith("NaN in") and name.endswith("=nan)"):
            return "NaN in, NaN out", value
        return "silent wrong", str(value)
    raise AssertionError("unreachable: a callable expectation is checked in the child")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--fuzz", action="store_true", help="also each theory/dynamics function's bad arguments")
    args = parser.parse_args(argv)
    import nqm

    print(f"nqm from {Path(nqm.__file__).parent}")
    counts = collections.Counter()
    for name, fn, expect in PROBES + (fuzz_probes() if args.fuzz else []):
        category, detail = classify(name, fn, expect, args.timeout)
        counts[category] += 1
        if args.verbose or category not in ("clear", "sensible"):
            print(f"{category:12s} {name}: {detail}")
    order = ("clear", "sensible", "accepted", "NaN in, NaN out", "unclear", "traceback", "silent wrong", "runaway",
             "file lost")  # fmt: skip
    print("| " + " | ".join(order) + " |\n|" + "---|" * len(order))
    print("| " + " | ".join(str(counts[c]) for c in order) + f" |  ({sum(counts.values())} probes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
