"""``python -m validation ARGS`` is ``nqm validate ARGS``: one front door, with its one-line user errors."""

import sys

from nqm.cli import main

sys.exit(main(["validate", *sys.argv[1:]]))
