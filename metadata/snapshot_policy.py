"""When a node snapshots its metadata image, and which snapshot it may start from: pure
decisions, no I/O. The shells are `metadata.snapshot_writer` (writing) and
`metadata.snapshot_loader` (start-up).

Writing: a node snapshots its committed image every `max_bytes_between` bytes of
committed records (Kafka's `metadata.log.max.record.bytes.between.snapshots`, default
20 MiB) since its last snapshot, and at least every `max_interval_ms` while anything new
has committed (Kafka's `metadata.log.max.snapshot.interval.ms`, default 1 hour; 0: bytes
only), so a quiet cluster's log is bounded too. The bytes are the records' own bytes
(`Batch.size_bytes`, batch framing aside), counted as the node applies them; a node that
replayed its log from offset 0 at start counts that replay too, so a long log without a
snapshot gets one soon after start.

Retention: after a snapshot, the log starts at it (segments below deleted) once the log
holds more than `metadata.max.retention.bytes` or its oldest segment was last written more
than `metadata.max.retention.ms` ago (Kafka's keys and defaults, 100 MiB and 7 days). As
in Kafka, both are soft: nothing is deleted that the newest snapshot does not replace.

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
DEFAULT_MAX_SNAPSHOT_INTERVAL_MS = 60 * 60 * 1000  # metadata.log.max.snapshot.interval.ms
DEFAULT_MAX_RETENTION_BYTES = 100 * 1024 * 1024  # Kafka's metadata.max.retention.bytes
DEFAULT_MAX_RETENTION_MS = 7 * 24 * 60 * 60 * 1000  # Kafka's metadata.max.retention.ms


@dataclass(frozen=True, slots=True)
class Retention:
    """How much log a node keeps below its newest snapshot (-1: no limit of that kind)."""

    max_bytes: int = DEFAULT_MAX_RETENTION_BYTES
    max_ms: int = DEFAULT_MAX_RETENTION_MS

    def should_advance_log_start(self, log_bytes: int, oldest_segment_age_ms: int) -> bool:
        """After a snapshot: start the log at it (deleting the segments below) once the
        log holds more than `max_bytes`, or its oldest segment is older than `max_ms`."""
        return (0 <= self.max_bytes < log_bytes) or (0 <= self.max_ms < oldest_segment_age_ms)


KEEP_EVERYTHING = Retention(max_bytes=-1, max_ms=-1)


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
    max_interval_ms: int = 0  # 0: by bytes only
    committed_bytes: int = 0
    covered_bytes: int = 0
    last_snapshot_ms: int = 0  # when the last snapshot (attempt) read its image

    def __post_init__(self) -> None:
        if self.max_bytes_between < 1:
            raise ValueError(f"max_bytes_between must be at least 1, not "
                             f"{self.max_bytes_between}")
        if self.max_interval_ms < 0:
            raise ValueError(f"max_interval_ms must be 0 or more, not {self.max_interval_ms}")

    def record_committed(self, size_bytes: int) -> None:
        self.committed_bytes += size_bytes

    @property
    def bytes_since_snapshot(self) -> int:
        return self.committed_bytes - self.covered_bytes

    @property
    def due(self) -> bool:
        return self.bytes_since_snapshot >= self.max_bytes_between

    def due_at(self, now_ms: int) -> bool:
        """Due by bytes, or by time with something new committed since the last one."""
        return self.due or (self.bytes_since_snapshot > 0
                            and 0 < self.max_interval_ms <= now_ms - self.last_snapshot_ms)

    @property
    def interval_deadline_ms(self) -> int | None:
        """When a snapshot falls due by time (if anything new commits); None: never."""
        return self.last_snapshot_ms + self.max_interval_ms if self.max_interval_ms else None

    def snapshot_taken(self, covered_bytes: int, now_ms: int) -> None:
        """A snapshot of the image read when `committed_bytes` was `covered_bytes` (at
        `now_ms`) was written, or failed: a failure waits for another interval too, so a
        disk that stays full costs one error per interval rather than one per batch."""
        if not self.covered_bytes <= covered_bytes <= self.committed_bytes:
            raise ValueError(f"covered bytes {covered_bytes} outside [{self.covered_bytes}, "
                             f"{self.committed_bytes}]")
        self.covered_bytes = covered_bytes
        self.last_snapshot_ms = now_ms


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
