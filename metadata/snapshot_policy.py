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
one above it (the checkpoint lost, say) is passed over. One above the log's end means the
log lost committed records (the log is never truncated below a snapshot yet): the node
refuses to start rather than serve an image its log cannot continue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raft.snapshot import SnapshotFile

DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024  # Kafka's default


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
    """Load the newest valid snapshot ending at or below `max_end_offset`; `unproven`
    lists the snapshots above it (kept on disk, not used), newest first."""

    max_end_offset: int
    unproven: tuple[SnapshotFile, ...]


def plan_start(snapshots: Sequence[SnapshotFile], *, log_end_offset: int,
               committed_end_offset: int | None) -> StartPlan:
    """Which snapshots a node starting with a log ending at `log_end_offset` may use;
    `committed_end_offset` is its high-watermark checkpoint (None: there is none, so no
    snapshot is proven). SnapshotStartError when a snapshot ends beyond the log."""
    ahead = [s for s in snapshots if s.snapshot_id.end_offset > log_end_offset]
    if ahead:
        names = ", ".join(str(s.path) for s in sorted(ahead, reverse=True))
        raise SnapshotStartError(
            f"snapshot(s) {names} end beyond the log's end offset {log_end_offset}: the "
            "log lost committed records; refusing to start from them")
    limit = min(committed_end_offset or 0, log_end_offset)
    unproven = tuple(sorted((s for s in snapshots if s.snapshot_id.end_offset > limit),
                            reverse=True))
    return StartPlan(max_end_offset=limit, unproven=unproven)
