"""The files `kraft dump-log` reads, each checked whole before any of it is shown.

A partition directory: its segments checked as recovery checks them
(`raft.log.scan_log_dir`: offsets continue from segment to segment, only the last may
have a torn tail) and its checkpoints, listed together in name order, as `ls` and
kafka-dump-log.sh over `dir/*` list them: a checkpoint comes before the segment that
starts at or after its end offset. Files named one by one are told apart by extension
(`.log`, `.checkpoint`); a segment named alone is judged as a log's last segment.

Nothing is repaired. A damaged segment raises LogCorruptionError, a damaged checkpoint
SnapshotError (`raft.snapshot.parse_snapshot` checks every CRC, the offsets, the epochs,
the header first and the footer last); both name the file and the byte offset. A torn
tail and a checkpoint a crash left half-written are warnings on stderr: opening the
directory would cut or delete them.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

from raft.log import SegmentScan, scan_log_dir, scan_segment
from raft.segment import SEGMENT_SUFFIX, iter_batches, segment_base_offset
from raft.snapshot import (
    PARTIAL_SUFFIX,
    SNAPSHOT_SUFFIX,
    SnapshotError,
    list_snapshots,
    parse_snapshot,
    parse_snapshot_name,
)
from tools.log_dump.render import DumpedFile, batch_lines


def dump_lines(directory: Path, *, as_json: bool = False, print_sensitive: bool = False
               ) -> Iterator[str]:
    """A partition directory's segments and checkpoints, in name order."""
    for partial in sorted(directory.glob(f"*{PARTIAL_SUFFIX}")):
        _warn(f"{partial}: a checkpoint whose writing never finished (not dumped; opening "
              "the directory deletes it)", as_json=as_json)
    checkpoints = deque(sorted(list_snapshots(directory)))  # oldest first
    for path, scan in scan_log_dir(directory):
        base_offset = segment_base_offset(path)
        while checkpoints and checkpoints[0].snapshot_id.end_offset <= base_offset:
            yield from checkpoint_lines(checkpoints.popleft().path, as_json=as_json,
                                        print_sensitive=print_sensitive)
        yield from _scanned_segment_lines(path, scan, as_json=as_json,
                                          print_sensitive=print_sensitive)
    for checkpoint in checkpoints:
        yield from checkpoint_lines(checkpoint.path, as_json=as_json,
                                    print_sensitive=print_sensitive)


def files_lines(paths: Iterable[Path], *, as_json: bool = False,
                print_sensitive: bool = False) -> Iterator[str]:
    """Each file in turn, a segment or a checkpoint by its extension (see `why_not_dumpable`)."""
    for path in paths:
        if path.name.endswith(SNAPSHOT_SUFFIX):
            yield from checkpoint_lines(path, as_json=as_json, print_sensitive=print_sensitive)
        else:
            yield from segment_lines(path, as_json=as_json, print_sensitive=print_sensitive)


def why_not_dumpable(path: Path) -> str | None:
    """Why `path` cannot be dumped as a segment or a checkpoint; None when it can."""
    if not path.is_file():
        return f"{path}: no such file"
    if path.name.endswith(SNAPSHOT_SUFFIX):
        try:
            parse_snapshot_name(path)
        except SnapshotError as exc:
            return str(exc)
        return None
    if path.name.endswith(SEGMENT_SUFFIX):
        if not path.name[:-len(SEGMENT_SUFFIX)].isdigit():
            return f"{path}: not a segment name (expected <base offset, 20 digits>.log)"
        return None
    return f"{path}: neither a segment (.log) nor a checkpoint ({SNAPSHOT_SUFFIX})"


def segment_lines(path: Path, *, as_json: bool = False, print_sensitive: bool = False
                  ) -> Iterator[str]:
    """One segment named alone: judged as the last of its log, so a torn tail at its end
    is a warning, not corruption."""
    scan = scan_segment(path.read_bytes(), path, expected_offset=segment_base_offset(path),
                        is_last=True)
    yield from _scanned_segment_lines(path, scan, as_json=as_json,
                                      print_sensitive=print_sensitive)


def checkpoint_lines(path: Path, *, as_json: bool = False, print_sensitive: bool = False
                     ) -> Iterator[str]:
    """One checkpoint, shown only once the whole file reads as a snapshot."""
    snapshot_id = parse_snapshot_name(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SnapshotError(path, None, f"unreadable: {exc}") from None
    parse_snapshot(data, path, snapshot_id.epoch)  # raises before anything is printed
    if not as_json:
        yield f"Dumping {path}"
        yield f"Snapshot end offset: {snapshot_id.end_offset}, epoch: {snapshot_id.epoch}"
    source = DumpedFile(path, snapshot_end_offset=snapshot_id.end_offset)
    for stored in iter_batches(data, str(path)):
        yield from batch_lines(stored, source, as_json=as_json, print_sensitive=print_sensitive)


def _scanned_segment_lines(path: Path, scan: SegmentScan, *, as_json: bool,
                           print_sensitive: bool) -> Iterator[str]:
    if not as_json:
        yield f"Dumping {path}"
    for stored in scan.batches:
        yield from batch_lines(stored, DumpedFile(path), as_json=as_json,
                               print_sensitive=print_sensitive)
    if scan.torn_reason is not None:
        _warn(f"{path}: torn tail at byte offset {scan.valid_bytes}: {scan.torn_reason} "
              "(opening the log truncates it)", as_json=as_json)


def _warn(warning: str, *, as_json: bool) -> None:
    print(json.dumps({"warning": warning}) if as_json else f"warning: {warning}",
          file=sys.stderr)
