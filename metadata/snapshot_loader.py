"""Start-up: the metadata image a node begins from, out of its newest usable snapshot.

`load_start_image(partition_dir, log_end_offset)` reads the node's high-watermark
checkpoint, decides with `metadata.snapshot_policy.plan_start` which snapshots it may
use, loads the newest valid one (`raft.snapshot.newest_valid`: a corrupt one is a
WARNING naming it, and an older one is tried), rebuilding its image batch by batch as
the file is checked (`raft.snapshot.stream_snapshot`, `metadata.image_snapshot.
image_from_batches`). The node then replays only the committed
log records from the snapshot's end offset on (`RaftNode(publish_from=...)`). A log that
starts above 0 needs a snapshot at or above its start.

A snapshot fetched from the leader while running is loaded from the records the fetch
checked (`fetched_snapshot_image`), not read again.

Without a usable snapshot the image starts empty and the whole committed log is
replayed. Snapshots that exist but none of which is valid, none for a log that starts
above 0, or one whose records do not make an image: `SnapshotStartError`, one message
naming the files (`kraft node` prints it and exits non-zero).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from metadata import records as rec
from metadata.image import MetadataImage
from metadata.image_snapshot import ImageSnapshotError, image_from_batches
from metadata.snapshot_policy import SnapshotStartError, plan_start
from raft.common.gc_pause import gc_paused
from raft.snapshot import (
    NoValidSnapshotError,
    SnapshotError,
    SnapshotId,
    list_snapshots,
    newest_valid,
    read_snapshot,
    stream_snapshot,
)
from raft.storage import read_high_watermark_checkpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StartImage:
    """The image a node starts from and the snapshot it came from (None: the empty
    image, before offset 0)."""

    image: MetadataImage
    snapshot_id: SnapshotId | None = None
    path: Path | None = None

    @property
    def replay_from(self) -> int:
        """The first log offset the image still needs: the snapshot's end offset."""
        return 0 if self.snapshot_id is None else self.snapshot_id.end_offset

    @property
    def epoch(self) -> int:
        """The epoch of the last record the image holds (0: none)."""
        return 0 if self.snapshot_id is None else self.snapshot_id.epoch


def load_start_image(partition_dir: Path, *, log_end_offset: int,
                     log_start_offset: int = 0) -> StartImage:
    """The image to start from (see the module docstring); SnapshotStartError when the
    snapshots in `partition_dir` forbid starting. A returned snapshot may end beyond the
    log (`metadata.snapshot_policy.plan_start`): the caller restarts the log there."""
    try:
        snapshots = list_snapshots(partition_dir)
    except SnapshotError as exc:  # a .checkpoint file that is no snapshot's
        raise SnapshotStartError(str(exc)) from None
    if not snapshots and not log_start_offset:
        return StartImage(MetadataImage.empty())
    committed = read_high_watermark_checkpoint(partition_dir)
    plan = plan_start(snapshots, log_end_offset=log_end_offset, committed_end_offset=committed,
                      log_start_offset=log_start_offset)
    for unproven in plan.unproven:
        log.warning("snapshot not used: it ends above the committed offsets this node can "
                    "prove", extra={"file": str(unproven.path),
                                    "end_offset": unproven.snapshot_id.end_offset,
                                    "high_watermark_checkpoint": committed})
    started = time.perf_counter()
    try:
        loaded = newest_valid(partition_dir, _streamed_image,
                              max_end_offset=plan.max_end_offset,
                              min_end_offset=plan.min_end_offset)
    except NoValidSnapshotError as exc:
        raise SnapshotStartError(f"cannot start: {exc}") from None
    if loaded is None and log_start_offset:
        raise SnapshotStartError(f"cannot start: the log in {partition_dir} starts at offset "
                                 f"{log_start_offset} and no valid snapshot ends there or "
                                 "later to stand in for the records below it")
    if loaded is None:
        return StartImage(MetadataImage.empty())
    path, snapshot_id, image = loaded
    log.info("loaded snapshot", extra={
        "file": str(path), "end_offset": snapshot_id.end_offset,
        "epoch": snapshot_id.epoch, "topics": len(image.topics),
        "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
        "replay_from": snapshot_id.end_offset})
    return StartImage(image, snapshot_id, path)


def _streamed_image(path: Path) -> tuple[Path, SnapshotId, MetadataImage]:
    """The image in the snapshot file `path`, built batch by batch as the file is checked
    (`raft.snapshot.stream_snapshot`: no million records held at once, 0.15 s less at a
    million partitions); a SnapshotError on the way drops what was built."""
    snapshot_id, batches = stream_snapshot(path)
    return path, snapshot_id, _image_of(path, snapshot_id, batches)


def load_snapshot_image(path: Path) -> MetadataImage:
    """Blocking: the image in the snapshot file `path` (one fetched from the leader);
    SnapshotStartError naming the file when it is not whole or holds no image."""
    try:
        snapshot = read_snapshot(path)
    except SnapshotError as exc:
        raise SnapshotStartError(str(exc)) from None
    return _image_of(path, snapshot.snapshot_id, (snapshot.records,))


def fetched_snapshot_image(path: Path, snapshot_id: SnapshotId,
                           records: Sequence[bytes]) -> MetadataImage:
    """Blocking: the image of the snapshot `snapshot_id` fetched from the leader into
    `path`, from the `records` the fetch checked whole (`RaftNode`'s snapshot listener):
    the file is not read and checked again. SnapshotStartError naming the file when they
    hold no image."""
    return _image_of(path, snapshot_id, (records,))


def _image_of(path: Path, snapshot_id: SnapshotId,
              batches: Iterable[Sequence[bytes]]) -> MetadataImage:
    """The image a whole (CRC-checked) snapshot holds. Records that do not decode or do
    not make an image mean the file was written wrong, not torn: the node stops rather
    than guess (falling back would hide a writer bug)."""
    try:  # decoded as replayed, not listed first: a million records at once cost memory
        # the collector: a third of the time otherwise, and then the image left out of
        # every later collection (raft.common.gc_pause)
        with gc_paused(freeze=True):
            return image_from_batches(batches, snapshot_id.end_offset - 1)
    except (rec.RecordError, ImageSnapshotError) as exc:
        raise SnapshotStartError(f"{path}: the snapshot holds no valid image: {exc}"
                                 ) from None
