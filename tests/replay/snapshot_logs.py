"""Snapshots and cut logs in a node's metadata partition, written by the real code for the
replay tests: the image of the log below an offset (`metadata.delta`), as a snapshot's
records (`metadata.image_snapshot.image_records`) in a checkpoint file
(`raft.snapshot.write_snapshot`); and the log cut below it by `DiskLog.advance_start`
(the `log-start-offset` file, then the segments wholly below it deleted) or dropped for a
fetched snapshot by `DiskLog.reset_to`, as a node does (`raft/log.py`).

A snapshot's `kind` plants what is wrong with it: GOOD, OTHER_CONTENT (one broker more
than the log holds), OTHER_EPOCH (named one epoch above its last record's) or CORRUPT (a
byte changed after it was written, so a CRC fails).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from metadata import records as rec
from metadata.delta import replay_bytes
from metadata.image import MetadataImage
from metadata.image_snapshot import image_records
from raft.common.uuid import Uuid
from raft.log import DiskLog
from raft.snapshot import SnapshotId, write_snapshot
from raft.types import Batch
from tests.support.snapshot_support import corrupt
from tools.replay import METADATA_DIR

GOOD, OTHER_CONTENT, OTHER_EPOCH, CORRUPT = "good", "other_content", "other_epoch", "corrupt"
EXTRA_BROKER = rec.RegisterBroker(broker_id=99, incarnation_id=Uuid(99), broker_epoch=1)


def image_below(batches: Sequence[Batch], end: int) -> MetadataImage:
    """The image a replay of the records below `end` builds."""
    return replay_bytes((b.base_offset + i, r) for b in batches for i, r in enumerate(b.records)
                        if b.base_offset + i < end)


def epoch_before(batches: Sequence[Batch], end: int) -> int:
    """The epoch of the record at `end - 1`."""
    return next(b.epoch for b in batches if b.base_offset < end <= b.next_offset)


def write_snapshot_of(log_dir: Path, batches: Sequence[Batch], end: int,
                      kind: str = GOOD) -> Path:
    """The snapshot of `batches` below `end` in the node's partition directory."""
    records = image_records(image_below(batches, end))
    if kind == OTHER_CONTENT:
        records.append(EXTRA_BROKER)
    epoch = epoch_before(batches, end) + (kind == OTHER_EPOCH)
    path = write_snapshot(log_dir / METADATA_DIR, SnapshotId(end, epoch),
                          [r.encode() for r in records], last_contained_log_timestamp=0)
    if kind == CORRUPT:
        corrupt(path)
    return path


def cut_log(log_dir: Path, start: int) -> None:
    """The node's log starts at `start` from now on (`DiskLog.advance_start`)."""
    with DiskLog.open_metadata_log(log_dir) as log:
        log.advance_start(start)


def drop_log(log_dir: Path, start: int, epoch: int) -> None:
    """The node's log is empty from `start` on, after a fetched snapshot replaced it
    (`DiskLog.reset_to`)."""
    with DiskLog.open_metadata_log(log_dir) as log:
        log.reset_to(start, epoch)
