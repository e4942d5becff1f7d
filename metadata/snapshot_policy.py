"""When a node snapshots its metadata image, and which snapshot it may start from: pure
decisions, no I/O. The shells are `metadata.snapshot_writer` (writing) and
`metadata.snapshot_loader` (start-up).

Writing: a node snapshots its committed image every `max_bytes_between` bytes of
committed records (Kafka's `metadata.log.max.record.bytes.between.snapshots`, default
20 MiB) since its last snapshot. The bytes are the records' own bytes (`Batch.size_bytes`,
batch framing aside), counted as the node applies them; a node that replayed its log
from offset 0 at start counts that replay too, so a long log without a snapshot gets one
soon after start.

Start-up: a snapshot may stand in for the log below its end offset only if the node can
prove those records committed. Snapshots are written only at published (committed)
offsets, after the high-watermark checkpoint has caught up with them
(`metadata.snapshot_writer`), so every snapshot ends at or below the checkpoint on disk;
one above it (the checkpoint lost, say) is passed over. The log may start above 0 (its
segments below a snapshot deleted, or a snapshot fetched from the leader replaced it):
then a snapshot at or above its start is needed (`plan_start`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raft.snapshot import SnapshotFile

DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024  # Kafka's default
DEFAULT_MAX_RETENTION_BYTES = 100 * 1024 * 1024  # Kafka's metadata.max.retention.bytes


def should_advance_log_start(log_bytes: int, max_retention_bytes: int) -> bool:
    """After a snapshot: start the log at it (deleting the segments below) once the log
    holds more than `max_retention_bytes` (-1: keep the whole log)."""
    return max_retention_bytes >= 0 and log_bytes > max_retention_bytes


class SnapshotStartError(Exception):
    """The node cannot start from its snapshots (none valid, one ahead of the log, one
    that does not make an image); the message names the files."""


@dataclass(slots=True)
class SnapshotSchedule:
    """Byte accounting between snapshots. `committed_bytes` counts every committed record
    byte applied since start; `covered_bytes` is the count when the image of the last
    snapshot (attempt) was read, so records committed while a snapshot is being written
    count towards the next one."""

    max_bytes_between: int
    committed_bytes: int = 0
    covered_bytes: int = 0

    def __post_init__(self) -> None:
        if self.max_bytes_between < 1:
            raise ValueError(f"max_bytes_between must be at least 1, not "
                             f"{self.max_bytes_between}")

    def record_committed(self, size_bytes: int) -> None:
        self.committed_bytes += size_bytes

    @property
    def bytes_since_snapshot(self) -> int:
        return self.committed_bytes - self.covered_bytes

    @property
    def due(self) -> bool:
        return self.bytes_since_snapshot >= self.max_bytes_between

    def snapshot_taken(self, covered_bytes: int) -> None:
        """A snapshot of the image read when `committed_bytes` was `covered_bytes` was
        written, or failed: a failure waits for another interval too, so a disk that
        stays full costs one error per interval rather than one per batch."""
        if not self.covered_bytes <= covered_bytes <= self.committed_bytes:
            raise ValueError(f"covered bytes {covered_bytes} outside [{self.covered_bytes}, "
                             f"{self.committed_bytes}]")
        self.covered_bytes = covered_bytes


@dataclass(frozen=True, slots=True)
class StartPlan:
    """Load the newest valid snapshot ending in [`min_end_offset`, `max_end_offset`];
    `unproven` lists the snapshots above it (kept on disk, not used), newest first.
    `reset_log`: the chosen snapshot may end beyond the log (one fetched from the leader
    just before a crash): the log then restarts at its end offset."""

    max_end_offset: int
    unproven: tuple[SnapshotFile, ...]
    min_end_offset: int = 0
    reset_log: bool = False


def plan_start(snapshots: Sequence[SnapshotFile], *, log_end_offset: int,
               committed_end_offset: int | None, log_start_offset: int = 0) -> StartPlan:
    """Which snapshots a node whose log spans [`log_start_offset`, `log_end_offset`) may
    start from; `committed_end_offset` is its high-watermark checkpoint (None: there is
    none, so no snapshot above the log start is proven).

    - A snapshot below the log start cannot be continued by the log: never used.
    - The snapshot at the log start stands in for the records below it: always usable.
    - A snapshot beyond the log's end was fetched from the leader (the core checked it
      whole before naming it) and the node stopped before its log restarted there, as
      Kafka's truncation to the latest snapshot does: the newest such one is used.
    - Otherwise a snapshot is used only if the checkpoint proves its records committed."""
    ahead = [s for s in snapshots if s.snapshot_id.end_offset > log_end_offset]
    if ahead:
        return StartPlan(max_end_offset=max(ahead).snapshot_id.end_offset, unproven=(),
                         min_end_offset=log_start_offset, reset_log=True)
    limit = max(min(committed_end_offset or 0, log_end_offset), log_start_offset)
    unproven = tuple(sorted((s for s in snapshots if s.snapshot_id.end_offset > limit),
                            reverse=True))
    return StartPlan(max_end_offset=limit, unproven=unproven, min_end_offset=log_start_offset)
