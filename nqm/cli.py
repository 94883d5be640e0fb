"""The ``nqm`` command line.

``nqm validate [--quick] [--out DIR] [--seed N] [--jobs N] [--only V4,V5] [--problem FILE [--target L]]`` runs the
validation suite on N processes (with ``--problem``, the claims that apply to a given problem, on that problem);
``nqm plot NAME [--out FILE | --format F] [--force] [--d N] [--target T] [--seed N]`` draws a figure of
:mod:`nqm.gallery` (``nqm plot all --out DIR`` draws every one, ``nqm plot --list`` names them, ``--problem FILE``
draws on a problem file's problem; an existing file not named after the figure is replaced only with ``--force``);
``nqm info --problem FILE [--target L] [--json]`` summarises a problem file (:mod:`nqm.info`);
``nqm frontier SWEEP [--group G] [--json] [--plot FILE] [--nqm-shape] [--problem FILE]`` puts a measured sweep
(a CSV file, or ``zhang2024``) through the critical-batch definitions (:mod:`nqm.real_sweeps`).

A user error (a bad argument, an unreadable problem file) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path


def _plot_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="figure name (see --list), or 'all'")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    parser.add_argument("--out", default=None, help="output file (.png, .svg, .pdf); a directory for 'all'")
    parser.add_argument("--format", default=None, help="file format when --out names no file (default png)")
    parser.add_argument("--force", action="store_true", help="replace an existing file not named after the figure")
    parser.add_argument("--d", type=int, default=None, help="problem dimension (default: per figure)")
    parser.add_argument("--target", type=float, default=None, help="target loss (default: per figure)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the simulated points (default 0)")
    parser.add_argument("--problem", default=None, help="a TOML problem file to draw on (default: zhang2019(d))")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line (the program and the message) with exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}\n")


def _fail(command: str, message: str) -> int:
    """A user error: one line on stderr, exit status 2."""
    print(f"nqm {command}: {message}", file=sys.stderr)
    return 2


def _writable_directory(path) -> str | None:
    """None when ``path`` is (or can be made) a writable directory, else what is wrong with it."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        return f"--out {str(path)!r} is a file; give a directory"
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / ".nqm-write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        return f"--out {str(path)!r} cannot be written ({e.strerror or e}); choose a writable directory"
    return None


def _image_formats() -> set[str]:
    from matplotlib.figure import Figure

    return set(Figure().canvas.get_supported_filetypes())


def _plot_errors(args) -> str | None:
    """What is wrong with the plot command's arguments, checked before any figure is computed."""
    from nqm import gallery

    if args.d is not None and args.d < 1:
        return f"--d must be an integer >= 1, got {args.d}"
    if args.target is not None and not (args.target > 0 and args.target < float("inf")):
        return f"--target must be a finite loss > 0, got {args.target}"
    if args.seed is not None and args.seed < 0:
        return f"--seed must be an integer >= 0, got {args.seed}"
    if args.problem is not None and args.d is not None:
        return "--d sets the built-in problem's dimension; leave it out with --problem (the file sets d)"
    if args.name != "all" and (why := gallery.missing_extra(args.name)):
        return f"figure {args.name} {why}"
    if args.name in gallery.NOT_ON_A_PROBLEM and args.problem is not None:
        return f"figure {args.name} {gallery.NOT_ON_A_PROBLEM[args.name]}: leave out --problem"
    if args.name in gallery.NO_TARGET and args.target is not None:
        return f"figure {args.name} draws no run to a target loss: leave out --target"
    if args.format is not None and args.format.lower() not in _image_formats():
        return f"--format {args.format!r} is not an image format; choose from {', '.join(sorted(_image_formats()))}"
    if args.name == "all":
        return _writable_directory(args.out or "nqm-figures")
    out = Path(args.out or f"{args.name}.{args.format or 'png'}")
    if args.format is not None and args.out is not None and out.suffix.lstrip(".").lower() != args.format.lower():
        return f"--format {args.format} disagrees with --out {str(out)!r}; give one of them"
    if problem := _image_file_errors(out, "--out"):
        return problem
    if out.exists() and out.stem != args.name and not args.force:
        return f"--out {str(out)!r} exists and is not named after the figure; add --force to replace it"
    return None


def _image_file_errors(out: Path, flag: str) -> str | None:
    """What is wrong with ``out`` as an image file to write (named by its option ``flag``; any case of the
    extension)."""
    if out.suffix.lstrip(".").lower() not in _image_formats():
        return f"{flag} {str(out)!r} has no image extension; use .png, .svg or .pdf"
    if out.is_dir():
        return f"{flag} {str(out)!r} is a directory; give a file name"
    return _writable_directory(out.parent if str(out.parent) else ".")


def _plot(args) -> int:
    from nqm import gallery

    if args.list:
        for name, fn in gallery.FIGURES.items():
            print(f"{name:12s} {fn.__doc__.splitlines()[0]}")
        return 0
    if not args.name:
        print("nqm plot: name a figure (nqm plot --list) or 'all'", file=sys.stderr)
        return 2
    if args.name != "all" and args.name not in gallery.FIGURES:
        return _fail("plot", f"unknown figure {args.name!r}; choose from {', '.join(gallery.FIGURES)} or 'all'")
    if problem := _plot_errors(args):
        return _fail("plot", problem)
    options = {"d": args.d, "target": args.target, "seed": args.seed}
    try:
        if args.problem is not None:
            options["problem"], options["init_var"] = _read_problem(args.problem)
        if args.name == "all":
            with warnings.catch_warnings(record=True) as skipped:  # a figure left out: one line, not a warning
                warnings.simplefilter("always", UserWarning)
                for path in gallery.render_all(args.out or "nqm-figures", (args.format or "png").lower(), **options):
                    print(path)
            for w in skipped:
                print(f"nqm plot: {w.message}", file=sys.stderr)
            return 0
        if why := gallery.cannot_draw(args.name, options.get("problem")):
            return _fail("plot", f"figure {args.name} {why}")
        print(gallery.render(args.name, args.out or f"{args.name}.{(args.format or 'png').lower()}", **options))
    except ValueError as e:  # an argument the figure cannot use (a target above its initial loss, say)
        return _fail("plot", str(e))
    return 0


def _validate_errors(args) -> str | None:
    """What is wrong with the validate command's arguments, checked before any work (the problem file is read
    into ``args.user_problem``)."""
    from validation.claims import discover
    from validation.families import UserProblem
    from validation.output import refusal

    if args.seed < 0:
        return f"--seed must be an integer >= 0, got {args.seed}"
    if args.jobs is not None and args.jobs < 1:
        return f"--jobs must be an integer >= 1, got {args.jobs}"
    if args.only is not None:
        ids = [c.id for c in discover()]
        chosen = {part.strip().upper() for part in str(args.only).split(",") if part.strip()}
        if not chosen or chosen - set(ids):
            wrong = sorted(chosen - set(ids)) or [args.only]
            return f"--only names no check {', '.join(map(str, wrong))}; choose from {', '.join(ids)}"
    args.user_problem = None
    if args.problem is None:
        if args.target is not None:
            return "--target needs --problem FILE (the suite's own claims have their own targets)"
    else:
        try:
            args.user_problem = UserProblem.read(args.problem, args.target)
        except ValueError as e:
            return str(e)
        if args.only is not None:
            refused = [c for c in discover() if c.id in chosen and c.run_on_problem is None]
            if refused:
                return f"--only {refused[0].id} does not run on a problem file: {refused[0].not_on_a_problem}"
    return refusal(args.out) or _writable_directory(Path(args.out).parent)


def _info_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problem", required=True, help="a TOML problem file (see nqm.problem_file)")
    parser.add_argument("--target", type=float, default=None, help="a target loss: optimal runs and B_crit")
    parser.add_argument("--json", action="store_true", help="print JSON with stable keys instead of text")


def _read_problem(path):
    """(the problem, its initial variance) of a problem file."""
    from nqm import problem_file
    from nqm.problem import NoisyQuadratic

    parsed = problem_file.read(path)
    return NoisyQuadratic.from_parsed(parsed), parsed.init_var


def _strict_json(facts) -> str:
    """``facts`` as strict JSON: inf and nan as the strings "inf", "-inf", "nan" (the sweep files' convention),
    never the ``Infinity``/``NaN`` that JSON parsers other than Python's refuse."""
    import json

    from nqm.sweep import encode

    return json.dumps(encode(facts), indent=1, allow_nan=False)


def _info(args) -> int:
    from nqm import info

    p, init_var = _read_problem(args.problem)
    facts = info.summary(p, init_var=init_var, target=args.target)
    print(_strict_json(facts) if args.json else info.format_summary(facts))
    return 0


def _frontier_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep", help="a sweep CSV file (see nqm.real_sweeps.table), or 'zhang2024' (shipped)")
    parser.add_argument("--group", action="append", default=None, help="a group to fit (repeatable; default all)")
    parser.add_argument("--json", action="store_true", help="print JSON with stable keys instead of text")
    parser.add_argument("--plot", default=None, help="draw steps against batch size with the fits to this file")
    parser.add_argument("--nqm-shape", action="store_true", help="also fit the NQM's optimal-run curves (~20 s)")
    parser.add_argument("--problem", default=None, help="with --nqm-shape/--plot: the NQM's problem file")
    parser.add_argument("--draws", type=int, default=2000, help="bootstrap draws (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def _frontier(args) -> int:
    from nqm import real_sweeps
    from nqm.real_sweeps import summary

    if args.plot and (problem := _image_file_errors(Path(args.plot), "--plot")):
        return _fail("frontier", problem)
    if args.draws < 2:
        return _fail("frontier", f"--draws must be an integer >= 2, got {args.draws}")
    sweep = real_sweeps.zhang2024() if args.sweep == "zhang2024" else real_sweeps.read_sweep(args.sweep)
    for g in args.group or []:
        sweep.select(g)  # names the groups the file has when ``g`` is not one of them
    fits = summary.fit_all(sweep, args.group, draws=args.draws, seed=args.seed)
    shapes = None
    if args.nqm_shape or args.plot:
        problem, init_var = _read_problem(args.problem) if args.problem else (None, 1.0)
        shapes = summary.all_shape_fits(fits, real_sweeps.nqm_curves(problem, init_var=init_var))
    facts = summary.frontier_facts(sweep, fits, shapes if args.nqm_shape else None)
    print(_strict_json(facts) if args.json else summary.format_frontier(facts))
    if args.plot:
        summary.plot_frontier(fits, shapes, args.plot)
    return 0


def _explore_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="explorer.html", help="the page to write (default explorer.html)")
    parser.add_argument("--problem", default=None, help="a problem file whose spectrum the page uses")


def _explore(args) -> int:
    from nqm import explore

    out = Path(args.out)
    if out.is_dir():
        return _fail("explore", f"--out {str(out)!r} is a directory; give a file name")
    if problem := _writable_directory(out.parent if str(out.parent) else "."):
        return _fail("explore", problem)
    try:
        p, init_var = _read_problem(args.problem) if args.problem else (None, 1.0)
        explore.write(out, p, init_var)
    except ValueError as e:
        return _fail("explore", f"--problem: {e}" if args.problem else str(e))
    print(f"wrote {out} ({out.stat().st_size // 1024} KiB): open it in a browser", file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = _Parser(prog="nqm", description="Noisy quadratic model: theory and simulation.")
    sub = parser.add_subparsers(dest="command", required=True)
    from validation.runner import build_parser, run

    build_parser(sub.add_parser("validate", help="hold every claim against simulation; write a report"))
    _plot_parser(sub.add_parser("plot", help="draw a figure of large-batch theory"))
    _info_parser(sub.add_parser("info", help="summarise a problem file: noise scales, optimal runs, B_crit"))
    _frontier_parser(sub.add_parser("frontier", help="a measured sweep: S_min, E_min, B_crit with SEs, the 20% rule"))
    _explore_parser(sub.add_parser("explore", help="write the explorer: one offline web page to touch the theory"))
    args = parser.parse_args(argv)
    if args.command == "explore":
        return _explore(args)
    if args.command == "frontier":
        try:
            return _frontier(args)
        except ValueError as e:
            return _fail("frontier", str(e))
    if args.command == "info":
        try:
            return _info(args)
        except ValueError as e:
            return _fail("info", str(e))
    if args.command == "validate":
        if problem := _validate_errors(args):
            return _fail("validate", problem)
        summary = run(
            args.out,
            quick=args.quick,
            seed=args.seed,
            log=lambda m: print(m, file=sys.stderr),
            only=args.only,
            problem=args.user_problem,
            jobs=args.jobs,
        )
        return 0 if summary["ok"] else 1
    if args.command == "plot":
        return _plot(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
