"""The ``nqm`` command line: ``nqm validate [--quick] [--out DIR] [--seed N] [--only V4,V5]``."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nqm", description="Noisy quadratic model: theory and simulation.")
    sub = parser.add_subparsers(dest="command", required=True)
    from validation.runner import build_parser, run

    build_parser(sub.add_parser("validate", help="hold every claim against simulation; write a report"))
    args = parser.parse_args(argv)
    if args.command == "validate":
        summary = run(
            args.out, quick=args.quick, seed=args.seed, log=lambda m: print(m, file=sys.stderr), only=args.only
        )
        return 0 if summary["ok"] else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
