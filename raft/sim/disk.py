"""The simulated disk of one node: its metadata log (a `MemoryLog`, volatile until
flushed), its `quorum-state` file, durable only once the simulated fsync completes, and
its snapshots (`SimSnapshotStore`: whole snapshots are durable once written, as
`raft.snapshot.write_snapshot` makes them; a download in progress is not).

A crash keeps exactly what was flushed and the whole snapshots; `wipe()` models a node
that lost its whole disk, snapshots included. A crash may also tear the write in
progress (`crash(tear=rng)`): the log's bytes, its flushed batches in the segment
format followed by a prefix or a corrupted copy of the first unflushed batch, go
through the real recovery scan (`raft.log.scan_segment`), and the log keeps what it
recovers. A corrupted `quorum-state` makes the node refuse to start
(`QuorumStateStore.corrupt`), as `raft.storage.read_quorum_state` does. The log
remembers every tail it cut (`RemovedTail`), for the sweep's divergence counts.

The disk also keeps a `Ledger`: every write it was handed and every fsync it
acknowledged, by content (epoch, checksum) per offset. The invariant checker judges
commitment and durability from it, not from what the node's log later claims to hold,
so a disk that lies (`DiskConfig.lying_fsync_writes`: a crash loses the last writes it
acknowledged) is caught when the node recovers short of what its fsyncs promised.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raft.log import MemoryLog, scan_segment
from raft.segment import encode_batch
from raft.sim.invariants import Entry, entry_of
from raft.snapshot_store import MemorySnapshotStore
from raft.storage import StorageError
from raft.types import Batch, ElectionState, SnapshotId

_ALL = 1 << 62  # read everything


@dataclass(frozen=True, slots=True)
class RemovedTail:
    """Records [start, end) cut from a log; they were written in epochs
    first_epoch..last_epoch (epochs only grow along a log)."""

    start: int
    end: int
    first_epoch: int
    last_epoch: int

    @property
    def spans_epochs(self) -> bool:
        return self.first_epoch != self.last_epoch


class Ledger:
    """What a disk was asked to write and acknowledged, by content: `entries[offset]` is
    the (epoch, checksum) written there (None below a snapshot that replaced the log:
    the snapshot stands in for it), `durable_end` where the last acknowledged fsync left
    the log. Truncations are durable at once, as the log's are."""

    __slots__ = ("entries", "durable_end")

    def __init__(self) -> None:
        self.entries: list[Entry | None] = []
        self.durable_end = 0

    def write(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            del self.entries[batch.base_offset:]
            self.entries.extend(entry_of(batch.epoch, record) for record in batch.records)

    def synced(self) -> None:
        self.durable_end = len(self.entries)

    def truncate(self, offset: int) -> None:
        del self.entries[offset:]
        self.durable_end = min(self.durable_end, offset)

    def reset(self, offset: int) -> None:
        self.entries = [None] * offset
        self.durable_end = offset

    def trim(self, offset: int) -> None:
        """The log starts at `offset` now: a snapshot stands in for what lies below."""
        self.entries[:offset] = [None] * offset

    def crash(self) -> None:
        del self.entries[self.durable_end:]

    def durable_entry(self, offset: int) -> Entry | None:
        """The acknowledged entry at `offset`; None when not durably written there or
        stood in for by a snapshot (`holds` tells which)."""
        return self.entries[offset] if offset < self.durable_end else None

    def holds(self, offset: int, entry: Entry | None) -> bool:
        """Whether this disk durably holds `entry` at `offset` (by content; below a
        loaded snapshot's end, the snapshot holds it)."""
        if offset >= self.durable_end:
            return False
        mine = self.entries[offset]
        return mine is None or mine == entry


class SimLog(MemoryLog):
    """`MemoryLog` that notes every non-empty tail it truncates, before cutting it (the
    core's `Ready` only says where the log now ends, not what was there), and keeps the
    disk's `Ledger` of every write and fsync. With `lose_on_crash` N, a crash also loses
    the last N batches it had acknowledged as flushed (a lying fsync)."""

    def __init__(self, lose_on_crash: int = 0) -> None:
        super().__init__()
        self.ledger = Ledger()
        self._cutting = False  # inside truncate_to: its re-append of a batch's head
        self.lose_on_crash = lose_on_crash
        self.removed: list[RemovedTail] = []  # drained by the cluster after each event
        # (offset, epoch, record) the last `reset_to` dropped, drained by the cluster:
        # which of them were a diverging tail only the committed history tells.
        self.replaced: list[tuple[int, int, bytes]] = []

    def append_batches(self, batches: Sequence[Batch]) -> None:
        super().append_batches(batches)
        if not self._cutting:
            self.ledger.write(batches)

    def truncate_to(self, offset: int) -> None:
        end = self.end_offset
        if self.start_offset <= offset < end:
            self.removed.append(RemovedTail(offset, end, self.epoch_at(offset),
                                            self.last_epoch))
        self._cutting = True
        try:
            super().truncate_to(offset)
        finally:
            self._cutting = False
        if offset < end:
            self.ledger.truncate(offset)

    def reset_to(self, offset: int, epoch: int) -> None:
        """A snapshot replaces the log: note every record dropped."""
        start = self.start_offset
        self.replaced = []
        for batch in self.read(start, _ALL):
            for index, record in enumerate(batch.records):
                if batch.base_offset + index >= start:
                    self.replaced.append((batch.base_offset + index, batch.epoch, record))
        super().reset_to(offset, epoch)
        self.ledger.reset(offset)

    def advance_start(self, offset: int) -> None:
        super().advance_start(offset)
        self.ledger.trim(offset)

    def flush(self) -> None:
        super().flush()
        self.ledger.synced()

    def crash(self, tear: random.Random | None = None) -> None:
        """Lose what was not flushed; with `tear`, the first unflushed batch was being
        written: recover through the segment scan (see the module docstring)."""
        torn = self.read(self.flushed_end_offset, _ALL) if tear is not None else []
        super().crash()
        self.ledger.crash()
        if self.lose_on_crash:
            self._lose_acknowledged(self.lose_on_crash)
        if tear is not None and torn:
            self._recover(torn[0], tear)

    def _recover(self, torn: Batch, rng: random.Random) -> None:
        batches = self.read(self.start_offset, _ALL) if self.end_offset > self.start_offset \
            else []
        tail = bytearray(encode_batch(torn))
        if rng.random() < 0.5:
            del tail[rng.randrange(1, len(tail)):]  # torn: only a prefix reached the disk
        else:
            tail[rng.randrange(len(tail))] ^= 1 << rng.randrange(8)  # corrupted in place
        data = b"".join(encode_batch(batch) for batch in batches) + bytes(tail)
        first = batches[0].base_offset if batches else self.end_offset
        scan = scan_segment(data, "simulated segment", expected_offset=first, is_last=True)
        recovered = scan.batches[-1].batch.next_offset if scan.batches else first
        if recovered < self.end_offset:  # a scan that cut a flushed batch: the ledger says
            self._cutting = True
            try:
                MemoryLog.truncate_to(self, max(recovered, self.start_offset))
            finally:
                self._cutting = False

    def _lose_acknowledged(self, count: int) -> None:
        """The disk acknowledged writes it never made: the last `count` batches above the
        log start are gone (the ledger still says they were flushed)."""
        batches = self.read(self.start_offset, _ALL)
        kept = batches[:max(0, len(batches) - count)]
        cut = kept[-1].next_offset if kept else self.start_offset
        self._cutting = True  # no write the disk was handed: the ledger keeps them
        try:
            MemoryLog.truncate_to(self, cut)
        finally:
            self._cutting = False


class SimSnapshotStore(MemorySnapshotStore):
    """`MemorySnapshotStore` that tells `on_stored(snapshot_id, data)` of every snapshot
    that becomes whole in it (written by the node's state machine, or fetched and
    checked by `finish`), so the invariant checker sees each one."""

    def __init__(self, on_stored: Callable[[SnapshotId, bytes], None] | None = None) -> None:
        super().__init__()
        self._on_stored = on_stored

    def add(self, snapshot_id: SnapshotId, data: bytes) -> None:
        super().add(snapshot_id, data)
        self._stored(snapshot_id)

    def finish(self, snapshot_id: SnapshotId) -> None:
        super().finish(snapshot_id)
        self._stored(snapshot_id)

    def _stored(self, snapshot_id: SnapshotId) -> None:
        if self._on_stored is not None:
            self._on_stored(snapshot_id, self.snapshots[snapshot_id])


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskConfig:
    """fsync takes uniform [min, max] ms; the node's shell waits for it before sending."""

    fsync_min_ms: float = 0.2
    fsync_max_ms: float = 3.0
    lying_fsync_writes: int = 0  # a crash loses this many acknowledged batches (a bug)


class QuorumStateStore:
    """`quorum-state`: `persist` is the completed fsync; `on_persist(old, new)` lets the
    invariant checker see every durable write (epochs never go back, one vote per epoch)."""

    def __init__(self, on_persist: Callable[[ElectionState | None, ElectionState], None]
                 | None = None) -> None:
        self._state: ElectionState | None = None
        self._on_persist = on_persist
        self.writes = 0
        self.corrupted = False

    def load(self) -> ElectionState | None:
        """The state; StorageError when the file is corrupt (the node refuses to start:
        it may have voted in an epoch it can no longer tell)."""
        if self.corrupted:
            raise StorageError("quorum-state: corrupt quorum-state: the file does not parse")
        return self._state

    def corrupt(self) -> None:
        self.corrupted = True

    def persist(self, state: ElectionState) -> None:
        if self._on_persist is not None:
            self._on_persist(self._state, state)
        self._state = state
        self.writes += 1

    def wipe(self) -> None:
        self._state = None
        self.corrupted = False


class SimDisk:
    def __init__(self, config: DiskConfig, rng: random.Random,
                 on_persist: Callable[[ElectionState | None, ElectionState], None]
                 | None = None,
                 on_snapshot: Callable[[SnapshotId, bytes], None] | None = None) -> None:
        self.config = config
        self._rng = rng
        self._on_persist = on_persist
        self._on_snapshot = on_snapshot
        self.log = SimLog(config.lying_fsync_writes)
        self.quorum_state = QuorumStateStore(on_persist)
        self.snapshots = SimSnapshotStore(on_snapshot)
        self.crashes = 0
        self.torn_writes = 0  # crashes that tore a write, scanned off in recovery
        self.wipes = 0
        self.slowdown = 1.0  # > 1 while the disk is degraded

    def fsync_latency_us(self) -> int:
        ms = self._rng.uniform(self.config.fsync_min_ms, self.config.fsync_max_ms)
        return max(1, int(ms * 1000 * self.slowdown))

    def crash(self, tear: random.Random | None = None) -> None:
        """Power cut: unflushed log writes are gone (the one in progress torn, with
        `tear`); quorum-state keeps its last fsync; whole snapshots stay, a partial
        download is gone."""
        log = self.log
        self.torn_writes += tear is not None and log.end_offset > log.flushed_end_offset
        log.crash(tear)
        self.snapshots.crash()
        self.crashes += 1

    def wipe(self) -> None:
        """The disk is replaced: empty log, no quorum-state, no snapshots."""
        self.log = SimLog(self.config.lying_fsync_writes)
        self.quorum_state.wipe()
        self.snapshots = SimSnapshotStore(self._on_snapshot)
        self.wipes += 1
