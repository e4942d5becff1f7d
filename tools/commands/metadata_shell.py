"""`kraft metadata-shell --cluster DIR [--node N] [-- COMMAND [ARG ...]]`: a node's
metadata image browsed as a file tree, like Kafka's kafka-metadata-shell.sh.

With a COMMAND it runs that one command and exits with its status (0 ok, 1 a path that
failed, 2 a command used wrongly); without, it reads commands from stdin (`help` lists
them). The header line and warnings go to stderr, so stdout holds only what the commands
print. The package `tools.metadata_shell` does the work.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.metadata_shell.commands import Shell
from tools.metadata_shell.session import run_interactive, run_one_shot, stream_reader
from tools.metadata_shell.source import load_node_image
from tools.metadata_shell.tree import build_image_tree


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--cluster", type=Path, required=True, metavar="DIR",
                        help="a local cluster directory (as `kraft quorum start` makes)")
    parser.add_argument("--node", type=int, metavar="N",
                        help="the node whose metadata log is read (default: the first voter)")
    parser.add_argument("command", nargs="*", metavar="COMMAND",
                        help="run this one command and exit; put it after --, "
                             "e.g. -- cat /image/provenance")


def run(args: argparse.Namespace) -> int:
    loaded = load_node_image(args.cluster, args.node)
    for line in (loaded.header, *loaded.warnings):
        print(line, file=sys.stderr)
    shell = Shell(build_image_tree(loaded.image, loaded.provenance))
    if args.command:
        return run_one_shot(shell, args.command, sys.stdout, sys.stderr)
    if not sys.stdin.isatty():
        return run_interactive(shell, stream_reader(sys.stdin), sys.stdout, sys.stderr,
                               prompt=False)
    import readline  # noqa: F401  (imported for its side effect: input() gets line editing)

    print("type help for the commands; exit or Ctrl-D leaves", file=sys.stderr)
    return run_interactive(shell, input, sys.stdout, sys.stderr, prompt=True)
