"""Entry point for `spark-submit tools/replay/__main__.py ARGS` (and `python -m
tools.replay ARGS`): the same as `kraft replay ARGS`; see the package docstring."""

import sys

from tools.cli import main

if __name__ == "__main__":
    sys.exit(main(["replay", *sys.argv[1:]]))
