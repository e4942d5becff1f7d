"""The Trio shell that writes snapshots of a node's committed metadata image.

`install_snapshotter(node, rpc, directory, image, ...)` adds to a `RaftNode` (and its
`raft.rpc_host.RpcHost`):
- a commit listener (after the image's own) that counts committed record bytes
  (`metadata.snapshot_policy.SnapshotSchedule`) and remembers the epoch of the last
  applied batch: the image only ever holds published, so committed, records;
- a background task that writes a snapshot whenever the schedule is due, once the image
  has caught up with the leader's high watermark first heard after start (as Kafka's
  metadata loader feeds its snapshot generator only then): a node replaying a long log
  (a broker fetching it from offset 0, a voter's restart) would otherwise write a
  snapshot every 20 MiB of it, each a walk of the whole image so far in a thread that
  holds the interpreter's lock while the replay waits (five of them, 2-6 s each, while a
  broker caught up a million partitions);
- the `WriteSnapshot` api: a snapshot now, answered with its id, file, size and time (or
  the error). A broker serves it on its status port too (`broker.server`).

A snapshot of the image as of offset O is `SnapshotId(O + 1, epoch of the batch holding
O)`. Before the file is written the high-watermark checkpoint is brought up to date, so
no snapshot ends above the checkpoint on disk (what start-up can prove committed,
`metadata.snapshot_policy.plan_start`). The file is written in a worker thread (the
image is immutable, so the node keeps serving), one snapshot at a time. A snapshot of an
image that already has one is that file, not rewritten (unless the file is corrupt). A
failed write is one ERROR naming the file, and the node keeps running: its log still
holds every record.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from metadata.image import MetadataImage
from metadata.image_snapshot import image_record_bytes
from metadata.snapshot_loader import StartImage
from metadata.snapshot_policy import KEEP_EVERYTHING, Retention, SnapshotSchedule
from raft.common.errors import ErrorCode
from raft.node import RaftNode
from raft.rpc_host import ApiError, RpcHost
from raft.snapshot import SnapshotError, SnapshotId, read_snapshot, write_snapshot
from raft.types import Batch

log = logging.getLogger(__name__)

WRITE_SNAPSHOT_API = "WriteSnapshot"


class SnapshotWriteError(Exception):
    """A snapshot could not be written (already logged); the message names the file."""


@dataclass(frozen=True, slots=True)
class WrittenSnapshot:
    snapshot_id: SnapshotId
    path: Path
    size_bytes: int
    elapsed_ms: float
    created: bool  # False: the image already had this snapshot

    def to_body(self, node_id: int) -> dict[str, Any]:
        return {"error_code": 0, "node_id": node_id, "path": str(self.path),
                "file": self.path.name, "end_offset": self.snapshot_id.end_offset,
                "epoch": self.snapshot_id.epoch, "size_bytes": self.size_bytes,
                "elapsed_ms": self.elapsed_ms, "created": self.created}


def write_image_snapshot(directory: Path, snapshot_id: SnapshotId, image: MetadataImage,
                         last_contained_log_timestamp: int,
                         raft_records: Sequence[bytes] = ()) -> Path:
    """Blocking: the records of `image` into the snapshot file `snapshot_id`, after
    raft's own (`RaftNode.snapshot_control_records`: the voter set of a dynamic quorum)."""
    return write_snapshot(directory, snapshot_id,
                          itertools.chain(raft_records, image_record_bytes(image)),
                          last_contained_log_timestamp=last_contained_log_timestamp)


@dataclass(frozen=True, slots=True)
class LogSize:
    """What retention looks at: the log's bytes, and how long ago its oldest segment was
    last written."""

    total_bytes: int
    oldest_age_ms: int


def _NO_LOG() -> LogSize:  # noqa: N802 - a default, for nodes without retention
    return LogSize(0, 0)


def _monotonic_ms() -> int:
    return int(trio.current_time() * 1000)


class ImageSnapshotter:
    def __init__(self, node: RaftNode, directory: Path, image: Callable[[], MetadataImage],
                 *, start: StartImage, max_bytes_between: int,
                 max_interval_ms: int = 0, log_size: Callable[[], LogSize] = _NO_LOG,
                 retention: Retention = KEEP_EVERYTHING,
                 wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                 checkpoint_high_watermark: Callable[[], Awaitable[None]]) -> None:
        self._node = node
        self._checkpoint_high_watermark = checkpoint_high_watermark
        self._log_size = log_size
        self._retention = retention
        self._directory = directory
        self._image = image
        self._wall_clock_ms = wall_clock_ms
        self.schedule = SnapshotSchedule(max_bytes_between, max_interval_ms=max_interval_ms)
        # the last applied offset and its batch's epoch, and when it was applied here
        # (batches carry no timestamps: the snapshot header gets this instead)
        self._last_offset = start.replay_from - 1
        self._last_epoch = start.epoch
        self._last_applied_ms = wall_clock_ms()
        self._due = trio.Event()
        self._catch_up_to: int | None = None  # the leader's high watermark first heard
        self._woken_caught_up = False  # the writer was woken once the image caught up
        self._one_at_a_time = trio.Lock()
        # snapshots known to be whole: written or loaded by this process
        self._known_whole: set[SnapshotId] = set() if start.snapshot_id is None \
            else {start.snapshot_id}

    def install(self, rpc: RpcHost) -> ImageSnapshotter:
        self._node.add_commit_listener(self._on_commit)
        self._node.add_leader_high_watermark_listener(self._on_leader_high_watermark)
        self._node.add_background_task(self._snapshot_when_due)
        rpc.add_api_handler(WRITE_SNAPSHOT_API, self._handle_write_snapshot)
        return self

    def on_snapshot_loaded(self, snapshot_id: SnapshotId) -> None:
        """A snapshot fetched from the leader replaced the log and the image (core task)."""
        self._last_offset, self._last_epoch = snapshot_id.end_offset - 1, snapshot_id.epoch
        self._known_whole.add(snapshot_id)

    # --- the committed log (runs in the node's core task: quick, never blocks) --------

    def _on_commit(self, batch: Batch) -> None:
        self.schedule.record_committed(batch.size_bytes)
        self._last_offset, self._last_epoch = batch.last_offset, batch.epoch
        self._last_applied_ms = self._wall_clock_ms()
        self._wake_if_due()

    def _on_leader_high_watermark(self, high_watermark: int) -> None:
        if self._catch_up_to is None:
            self._catch_up_to = high_watermark
            self._wake_if_due()

    def _wake_if_due(self) -> None:
        """Wake the writer when a snapshot is due by bytes, and once when the image has
        caught up (from then on the interval's deadline counts too)."""
        if self.caught_up and (self.schedule.due or not self._woken_caught_up):
            self._woken_caught_up = True
            self._due.set()

    @property
    def caught_up(self) -> bool:
        """The image holds the log up to the leader's high watermark first heard after
        start: the automatic snapshots begin."""
        return self._catch_up_to is not None and self._last_offset + 1 >= self._catch_up_to

    # --- writing ----------------------------------------------------------------------

    async def _snapshot_when_due(self) -> None:
        self.schedule.last_snapshot_ms = _monotonic_ms()  # the interval counts from start
        while True:
            deadline_ms = self.schedule.interval_deadline_ms if self.caught_up else None
            with trio.move_on_at(math.inf if deadline_ms is None else deadline_ms / 1000):
                await self._due.wait()
            self._due = trio.Event()
            # an on-demand snapshot may have covered it meanwhile
            if self.caught_up and self.schedule.due_at(_monotonic_ms()):
                try:
                    await self.snapshot_now()
                except SnapshotWriteError:
                    pass  # logged; the next interval tries again
                except ValueError as exc:  # the image is about to be replaced
                    log.info("snapshot skipped", extra={"node": self._node.node_id,
                                                        "reason": str(exc)})

    async def snapshot_now(self) -> WrittenSnapshot:
        """Snapshot the committed image as it is now; SnapshotWriteError on failure,
        ValueError when nothing has been applied yet or the log start has moved past
        the image (a fetched snapshot is being loaded in its place)."""
        async with self._one_at_a_time:
            # read together, with no await between: the image, its offset and raft's
            # records there (the voter set) agree; a snapshot loaded later moves them all
            image, covered = self._image(), self.schedule.committed_bytes
            read_ms = _monotonic_ms()
            offset, epoch = self._last_offset, self._last_epoch
            applied_ms = self._last_applied_ms
            if offset < 0:
                raise ValueError("no committed record has been applied yet")
            if image.last_applied_offset != offset:
                raise AssertionError(f"image at offset {image.last_applied_offset}, but the "
                                     f"last committed batch ends at {offset}")
            snapshot_id = SnapshotId(end_offset=offset + 1, epoch=epoch)
            raft_records = self._node.snapshot_control_records(snapshot_id.end_offset)
            path = self._directory / snapshot_id.file_name
            started = time.perf_counter()
            try:
                created = await self._write(snapshot_id, path, image, applied_ms,
                                            raft_records)
                size = path.stat().st_size
            except OSError as exc:
                self.schedule.snapshot_taken(covered, read_ms)
                log.error("snapshot failed, the node keeps running on its log", extra={
                    "node": self._node.node_id, "file": str(path), "error": str(exc)})
                raise SnapshotWriteError(f"{path}: snapshot failed: {exc}") from None
            self.schedule.snapshot_taken(covered, read_ms)
            written = WrittenSnapshot(snapshot_id, path, size,
                                      round((time.perf_counter() - started) * 1000, 1), created)
            if created:
                log.info("wrote snapshot", extra={
                    "node": self._node.node_id, "file": str(path),
                    "end_offset": snapshot_id.end_offset, "epoch": snapshot_id.epoch,
                    "size_bytes": size, "elapsed_ms": written.elapsed_ms})
            await self._maybe_advance_log_start(snapshot_id)
            return written

    async def _maybe_advance_log_start(self, snapshot_id: SnapshotId) -> None:
        size = self._log_size()
        if self._retention.should_advance_log_start(size.total_bytes, size.oldest_age_ms) and \
                await self._node.advance_log_start(snapshot_id):
            log.info("log start advanced to the snapshot", extra={
                "node": self._node.node_id, "start_offset": snapshot_id.end_offset})

    async def _write(self, snapshot_id: SnapshotId, path: Path, image: MetadataImage,
                     applied_ms: int, raft_records: Sequence[bytes]) -> bool:
        """Write the file unless it already holds this snapshot whole; False when it did."""
        if snapshot_id in self._known_whole or \
                await trio.to_thread.run_sync(self._holds_whole_snapshot, path):
            self._known_whole.add(snapshot_id)
            return False
        await self._checkpoint_high_watermark()  # before: see the module docstring
        await trio.to_thread.run_sync(write_image_snapshot, self._directory, snapshot_id,
                                      image, applied_ms, raft_records)
        self._known_whole.add(snapshot_id)
        return True

    def _holds_whole_snapshot(self, path: Path) -> bool:
        """Blocking. Whether a file this process neither wrote nor loaded is a whole
        snapshot; a corrupt one (start-up passed over it) is removed so that its offset
        gets a good snapshot, instead of being reported as written."""
        if not path.exists():
            return False
        try:
            read_snapshot(path)
        except SnapshotError as exc:
            log.warning("replacing a corrupt snapshot", extra={
                "node": self._node.node_id, "file": str(path), "error": str(exc)})
            path.unlink()
            return False
        return True

    # --- the WriteSnapshot api ------------------------------------------------------------

    async def _handle_write_snapshot(self, body: Any, cluster_id: str) -> dict[str, Any]:
        try:
            written = await self.snapshot_now()
        except ValueError as exc:
            raise ApiError(ErrorCode.OFFSET_NOT_AVAILABLE, str(exc)) from None
        except SnapshotWriteError as exc:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        return written.to_body(self._node.node_id)


def install_snapshotter(node: RaftNode, rpc: RpcHost, directory: Path,
                        image: Callable[[], MetadataImage], *, start: StartImage,
                        max_bytes_between: int, max_interval_ms: int = 0,
                        log_size: Callable[[], LogSize] = _NO_LOG,
                        retention: Retention = KEEP_EVERYTHING,
                        checkpoint_high_watermark: Callable[[], Awaitable[None]]
                        ) -> ImageSnapshotter:
    """Snapshot `image()` (the node's committed image, read in its Trio task) into
    `directory` (the metadata partition's); install after the listener that builds the
    image and before `node.run()`. After each snapshot, once the log (`log_size()`) is
    past `retention`, the log starts at the snapshot. `checkpoint_high_watermark()`
    writes the node's high-watermark checkpoint now (`tools.server.durability`)."""
    return ImageSnapshotter(node, directory, image, start=start,
                            max_bytes_between=max_bytes_between,
                            max_interval_ms=max_interval_ms, log_size=log_size,
                            retention=retention,
                            checkpoint_high_watermark=checkpoint_high_watermark).install(rpc)
