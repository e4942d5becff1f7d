"""`kraft metadata-shell (--cluster DIR [--node N] | --snapshot FILE) [--print-sensitive]
[-- COMMAND [ARG ...]]`: a metadata image browsed as a file tree, like Kafka's
kafka-metadata-shell.sh. The image is a node's log replayed (`--cluster`) or a snapshot
checkpoint file loaded (`--snapshot`). A SCRAM credential's salt and keys show as
`(redacted)` unless `--print-sensitive`.

With a COMMAND it runs that one command and exits with its status (0 ok, 1 a path that
failed, 2 a command used wrongly); without, it reads commands from stdin (`help` lists
them). The header line and warnings go to stderr, so stdout holds only what the commands
print. The package `tools.metadata_shell` does the work.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.errors import usage_error
from tools.metadata_shell.commands import Shell
from tools.metadata_shell.session import run_interactive, run_one_shot, stream_reader
from tools.metadata_shell.snapshot_source import load_snapshot_image
from tools.metadata_shell.source import LoadedImage, load_node_image
from tools.metadata_shell.tree import build_image_tree


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cluster", type=Path, metavar="DIR",
                        help="a local cluster directory (as `kraft quorum start` makes)")
    source.add_argument("--snapshot", type=Path, metavar="FILE",
                        help="a snapshot checkpoint file "
                             "(<20-digit end offset>-<10-digit epoch>.checkpoint)")
    parser.add_argument("--node", type=int, metavar="N",
                        help="with --cluster: the node whose metadata log is read "
                             "(default: the first voter)")
    parser.add_argument("--print-sensitive", action="store_true",
                        help="show secrets (a SCRAM credential's salt and keys) instead of "
                             "(redacted)")
    parser.add_argument("command", nargs="*", metavar="COMMAND",
                        help="run this one command and exit; put it after --, "
                             "e.g. -- cat /image/provenance")


def run(args: argparse.Namespace) -> int:
    loaded = _load(args)
    for line in (loaded.header, *loaded.warnings):
        print(line, file=sys.stderr)
    shell = Shell(build_image_tree(loaded.image, loaded.provenance,
                                   print_sensitive=args.print_sensitive))
    if args.command:
        return run_one_shot(shell, args.command, sys.stdout, sys.stderr)
    if not sys.stdin.isatty():
        return run_interactive(shell, stream_reader(sys.stdin), sys.stdout, sys.stderr,
                               prompt=False)
    import readline  # noqa: F401  (imported for its side effect: input() gets line editing)

    print("type help for the commands; exit or Ctrl-D leaves", file=sys.stderr)
    return run_interactive(shell, input, sys.stdout, sys.stderr, prompt=True)


def _load(args: argparse.Namespace) -> LoadedImage:
    if args.snapshot is None:
        return load_node_image(args.cluster, args.node)
    if args.node is not None:  # a snapshot file belongs to no node this command could pick
        raise usage_error("--node goes with --cluster, not with --snapshot")
    return load_snapshot_image(args.snapshot)
