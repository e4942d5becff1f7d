"""Shared vocabulary of the raft layer: offsets, batches, election state, the log seam and
the `Ready` handed from the pure core to its shell.

Contract between `raft.core` and a shell (the Trio node or the simulator):

1. The core appends to and truncates its `RaftLog` directly (appends are unflushed: the
   page cache on disk, or the volatile part of the simulated disk; a truncation is
   durable, with everything before it, when `truncate_to` returns).
2. `core.ready()` returns a `Ready`. The shell persists `election` (quorum-state, fsync),
   then calls `log.flush()` if `entries` or `truncate_to` are set, then sends `messages`,
   then hands records below `high_watermark` to the metadata loader, then calls
   `core.advance(ready)`, which tells the core those entries are durable (a leader only
   counts its own log end once it is flushed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NewType, Protocol

from raft.common.uuid import Uuid

NodeId = NewType("NodeId", int)
Epoch = NewType("Epoch", int)
Offset = NewType("Offset", int)

NO_EPOCH = -1  # Kafka's UNDEFINED_EPOCH
NO_OFFSET = -1  # Kafka's UNDEFINED_OFFSET


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """Consecutive records written by one leader in one epoch; record i has offset base+i.

    Each record is its own msgpack-encoded bytes, opaque to the raft layer.
    `append_time_ms` is the leader's wall-clock time when it created the batch, kept as it
    is by every replica; None for a batch written before batches were timed.
    """

    base_offset: int
    epoch: int
    records: tuple[bytes, ...]
    append_time_ms: int | None = None

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    @property
    def size_bytes(self) -> int:
        return sum(len(r) for r in self.records)

    def records_between(self, start: int, stop: int) -> Batch:
        """The records at offsets [start, stop) of this batch, with its epoch and time."""
        return Batch(base_offset=start, epoch=self.epoch, append_time_ms=self.append_time_ms,
                     records=self.records[start - self.base_offset:stop - self.base_offset])


MAX_END_OFFSET = (1 << 63) - 1  # batch base offsets are i64 (raft.segment.HEADER)
MAX_EPOCH = (1 << 31) - 1  # batch epochs are i32
SNAPSHOT_SUFFIX = ".checkpoint"  # snapshot files: `raft.snapshot`


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """The state after every record below `end_offset`; `epoch` is the epoch of the
    record at `end_offset - 1`. Ordered by end offset, then epoch: later is newer."""

    end_offset: int
    epoch: int

    def __post_init__(self) -> None:
        if not 0 <= self.end_offset <= MAX_END_OFFSET:
            raise ValueError(f"snapshot end offset {self.end_offset} outside "
                             f"[0, {MAX_END_OFFSET}]")
        if not 0 <= self.epoch <= MAX_EPOCH:
            raise ValueError(f"snapshot epoch {self.epoch} outside [0, {MAX_EPOCH}]")

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionState:
    """What `quorum-state` holds: persisted (fsync) before any reply that depends on it."""

    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None
    voters: tuple[int, ...] = ()
    # KIP-853: the vote belongs to a replica key, the candidate's id and directory id
    # (None: a static voter's, or a candidate that sent none).
    voted_directory_id: Uuid | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"epoch": self.epoch, "leader_id": self.leader_id,
                                "voted_id": self.voted_id, "voters": list(self.voters)}
        if self.voted_directory_id is not None:
            data["voted_directory_id"] = str(self.voted_directory_id)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ElectionState:
        directory = data.get("voted_directory_id")
        return cls(epoch=int(data["epoch"]), leader_id=data.get("leader_id"),
                   voted_id=data.get("voted_id"),
                   voters=tuple(int(v) for v in data.get("voters", ())),
                   voted_directory_id=None if directory is None
                   else Uuid.from_string(directory))


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    """A message between nodes.

    `src`/`dst` are node ids; the Trio shell gives anonymous clients (tools) negative ids.
    A response carries the `correlation_id` of its request; the core numbers its own
    outgoing requests.
    """

    src: int
    dst: int
    correlation_id: int
    message: Any  # one of raft.messages' request/response dataclasses


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready:
    election: ElectionState | None = None  # 1. persist quorum-state, fsync
    truncate_to: int | None = None  # 2. already applied to the log: flush before sending
    entries: tuple[Batch, ...] = ()
    messages: tuple[Envelope, ...] = ()  # 3. send only after 1-2 are durable...
    # ...except the first `early` ones (`early_messages`), which may go before the log
    # flush (2), never before 1: the leader's answers to fetches, which copy its records
    # while it writes them to its own disk (Raft thesis §10.2.1). Safe because the leader
    # counts its own log toward the high watermark only up to `flushed_end_offset`.
    # Always 0 when `election` is set.
    early: int = 0
    high_watermark: int | None = None  # 4. new HW (exclusive): hand committed records over
    # A fetched snapshot replaced the log (already durable): the state machine reloads
    # from it before records from its end offset on are handed over.
    loaded_snapshot: SnapshotId | None = None
    # 5. the leader's high watermark as last heard, when it rose. A follower's own is
    # capped at its log end, so only this tells how far behind a catching-up node is.
    leader_high_watermark: int | None = None

    @property
    def early_messages(self) -> tuple[Envelope, ...]:
        return self.messages[:self.early]

    @property
    def late_messages(self) -> tuple[Envelope, ...]:
        """The messages that wait for the flush."""
        return self.messages[self.early:] if self.early else self.messages

    @property
    def needs_flush(self) -> bool:
        return bool(self.entries) or self.truncate_to is not None

    @property
    def is_empty(self) -> bool:
        return (self.election is None and not self.needs_flush and not self.messages
                and self.high_watermark is None and self.loaded_snapshot is None
                and self.leader_high_watermark is None)


class LogSync(Protocol):
    """A flush begun by `RaftLog.begin_flush`: `run()` (in another thread), then back to
    the log's `finish_flush`."""

    @property
    def end_offset(self) -> int:
        """The log end when the flush began: durable once `run()` returned, unless the
        log was truncated or reset since."""
        ...

    @property
    def generation(self) -> int:
        """The log's count of truncations and resets when the flush began."""
        ...

    def run(self) -> None: ...


class RaftLog(Protocol):
    """The replicated log as the core sees it. Offsets are record offsets; the log end
    offset is the next offset to be written. Appends are volatile until `flush()`; a
    truncation is durable when `truncate_to` returns."""

    @property
    def start_offset(self) -> int:
        """0, or the end offset of the snapshot that stands in for the records below."""
        ...

    @property
    def start_epoch(self) -> int:
        """The epoch of the record before `start_offset` (the snapshot's); 0 at 0."""
        ...

    @property
    def end_offset(self) -> int: ...

    @property
    def flushed_end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int:
        """Epoch of the last batch; `start_epoch` for an empty log."""
        ...

    def append(self, epoch: int, records: Sequence[bytes],
               append_time_ms: int | None = None) -> Batch:
        """Leader append: assigns offsets from the log end; the batch carries the leader's
        `append_time_ms`."""
        ...

    def append_batches(self, batches: Sequence[Batch]) -> None:
        """Follower append of batches copied from the leader; the first one must start at
        the log end (ValueError otherwise)."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> list[Batch]:
        """Whole batches from the one containing `start_offset`; at least one batch if any
        exists at or after it, then more while under `max_bytes`."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every record at `offset` or above (and the epoch cache entries past it),
        durably: when it returns, a crash keeps exactly the records below `offset`, the
        head of a batch cut in two included (acknowledged offsets never become
        undurable)."""
        ...

    def advance_start(self, offset: int) -> None:
        """Start the log at `offset` (the end offset of a snapshot this node holds,
        within the log), durably; records below it may be deleted."""
        ...

    def reset_to(self, offset: int, epoch: int) -> None:
        """Drop every record, durably: the log restarts empty at `offset`, after a record
        of `epoch` (a snapshot loaded in place of the log)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch: (largest epoch <= `epoch` present in the log,
        the end offset of that epoch, i.e. the start of the next higher epoch or the log
        end). (NO_EPOCH, NO_OFFSET) when `epoch` is below every epoch in the log."""
        ...

    def epoch_at(self, offset: int) -> int:
        """Epoch of the record at `offset` (which must lie in the log)."""
        ...

    def flush(self) -> None: ...

    def begin_flush(self) -> LogSync:
        """`flush()` in two steps, for a node whose flush is on no commit's path: the
        returned sync's `run()` fsyncs in another thread while this log goes on taking
        appends, then `finish_flush(sync)` (in this log's thread) raises
        `flushed_end_offset` to the log end as it was here, unless a truncation or
        reset came in between. One sync at a time."""
        ...

    def finish_flush(self, sync: LogSync) -> None: ...
