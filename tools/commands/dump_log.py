"""`kraft dump-log (--dir DIR | --files FILE [FILE ...]) [--json] [--print-sensitive]`:
every batch and every record of a metadata log's segments and snapshot checkpoints, as
kafka-dump-log.sh shows them. A SCRAM credential's salt and keys show as `(redacted)`,
as Kafka's RecordRedactor shows them, unless `--print-sensitive`.

`--dir` dumps a partition directory's segments and checkpoints in name order; `--files`
dumps the files named, each a segment (`.log`) or a checkpoint (`.checkpoint`). Read-only:
every file is checked as opening the log or loading the snapshot would check it, but
nothing is repaired. A corrupt segment or checkpoint is one error line naming the file
and byte offset (exit 2); a torn tail is a warning, since opening the log would truncate
it. The package `tools.log_dump` does the work.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from raft.log import METADATA_PARTITION_DIR, LogCorruptionError
from raft.segment import list_segments
from raft.snapshot import SNAPSHOT_SUFFIX, SnapshotError
from tools.errors import CommandError, usage_error
from tools.log_dump.files import dump_lines, files_lines, why_not_dumpable


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dir", type=Path,
                        help=f"a node's log directory, or its {METADATA_PARTITION_DIR} "
                             "directory: every segment and checkpoint in it")
    source.add_argument("--files", type=Path, nargs="+", metavar="FILE",
                        help="segments (.log) and checkpoints (.checkpoint), dumped in turn")
    parser.add_argument("--json", action="store_true", help="one JSON object per record")
    parser.add_argument("--print-sensitive", action="store_true",
                        help="show secrets (a SCRAM credential's salt and keys) instead of "
                             "(redacted)")


def run(args: argparse.Namespace) -> int:
    try:
        for line in _lines(args):
            print(line)
    except (LogCorruptionError, SnapshotError) as exc:
        sys.stdout.flush()  # what was shown before the damage stays ahead of the error
        raise CommandError(str(exc), exit_code=2) from None
    except BrokenPipeError:  # the reader stopped early (`| head`): the dump was wanted no further
        # stdout onto /dev/null, so that the interpreter's flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _lines(args: argparse.Namespace) -> Iterator[str]:
    if args.dir is not None:
        return dump_lines(resolve_partition_dir(args.dir), as_json=args.json,
                          print_sensitive=args.print_sensitive)
    # every name checked before the first file is dumped: a typo is not found halfway
    for path in args.files:
        if (reason := why_not_dumpable(path)) is not None:
            raise usage_error(reason)
    return files_lines(args.files, as_json=args.json, print_sensitive=args.print_sensitive)


def resolve_partition_dir(path: Path) -> Path:
    if (path / METADATA_PARTITION_DIR).is_dir():
        return path / METADATA_PARTITION_DIR
    if path.is_dir() and (list_segments(path) or any(path.glob(f"*{SNAPSHOT_SUFFIX}"))
                          or path.name == METADATA_PARTITION_DIR):
        return path
    raise usage_error(f"{path}: neither a log directory with {METADATA_PARTITION_DIR} "
                      "nor a partition directory with segments or checkpoints")
