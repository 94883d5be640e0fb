"""The ``nqm`` command line.

``nqm validate [--quick] [--out DIR] [--seed N] [--only V4,V5]`` runs the validation suite;
``nqm plot NAME [--out FILE] [--d N] [--target T] [--seed N]`` draws a figure of :mod:`nqm.gallery`
(``nqm plot all --out DIR`` draws every one, ``nqm plot --list`` names them);
``nqm info --problem FILE [--target L] [--json]`` summarises a problem file (:mod:`nqm.info`).

A user error (a bad argument, an unreadable problem file) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys


def _plot_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="figure name (see --list), or 'all'")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    parser.add_argument("--out", default=None, help="output file (.png, .svg, .pdf); a directory for 'all'")
    parser.add_argument("--format", default="png", help="file format for 'all' (default png)")
    parser.add_argument("--d", type=int, default=None, help="problem dimension (default: per figure)")
    parser.add_argument("--target", type=float, default=None, help="target loss (default: per figure)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the simulated points (default 0)")


def _plot(args) -> int:
    from nqm import gallery

    if args.list:
        for name, fn in gallery.FIGURES.items():
            print(f"{name:12s} {fn.__doc__.splitlines()[0]}")
        return 0
    if not args.name:
        print("nqm plot: name a figure (nqm plot --list) or 'all'", file=sys.stderr)
        return 2
    options = {"d": args.d, "target": args.target, "seed": args.seed}
    if args.name == "all":
        for path in gallery.render_all(args.out or "nqm-figures", args.format, **options):
            print(path)
        return 0
    if args.name not in gallery.FIGURES:
        print(f"nqm plot: unknown figure {args.name!r}; choose from {', '.join(gallery.FIGURES)}", file=sys.stderr)
        return 2
    print(gallery.render(args.name, args.out or f"{args.name}.png", **options))
    return 0


def _info_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problem", required=True, help="a TOML problem file (see nqm.problem_file)")
    parser.add_argument("--target", type=float, default=None, help="a target loss: optimal runs and B_crit")
    parser.add_argument("--json", action="store_true", help="print JSON with stable keys instead of text")


def _info(args) -> int:
    import json

    from nqm import info, problem_file
    from nqm.problem import NoisyQuadratic

    parsed = problem_file.read(args.problem)
    p = NoisyQuadratic(parsed.h, parsed.c, sigma=parsed.sigma, basis=parsed.basis, name=parsed.name)
    facts = info.summary(p, init_var=parsed.init_var, target=args.target)
    print(json.dumps(facts, indent=1) if args.json else info.format_summary(facts))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nqm", description="Noisy quadratic model: theory and simulation.")
    sub = parser.add_subparsers(dest="command", required=True)
    from validation.runner import build_parser, run

    build_parser(sub.add_parser("validate", help="hold every claim against simulation; write a report"))
    _plot_parser(sub.add_parser("plot", help="draw a figure of large-batch theory"))
    _info_parser(sub.add_parser("info", help="summarise a problem file: noise scales, optimal runs, B_crit"))
    args = parser.parse_args(argv)
    if args.command == "info":
        try:
            return _info(args)
        except ValueError as e:
            print(f"nqm info: {e}", file=sys.stderr)
            return 2
    if args.command == "validate":
        summary = run(
            args.out, quick=args.quick, seed=args.seed, log=lambda m: print(m, file=sys.stderr), only=args.only
        )
        return 0 if summary["ok"] else 1
    if args.command == "plot":
        return _plot(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
