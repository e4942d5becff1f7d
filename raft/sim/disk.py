"""The simulated disk of one node: its metadata log (a `MemoryLog`, volatile until
flushed), its `quorum-state` file, durable only once the simulated fsync completes, and
its snapshots (`SimSnapshotStore`: whole snapshots are durable once written, as
`raft.snapshot.write_snapshot` makes them; a download in progress is not).

A crash keeps exactly what was flushed and the whole snapshots; `wipe()` models a node
that lost its whole disk, snapshots included. The log remembers every tail it cut
(`RemovedTail`), for the sweep's divergence counts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from raft.log import MemoryLog
from raft.snapshot_store import MemorySnapshotStore
from raft.types import ElectionState, SnapshotId


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


class SimLog(MemoryLog):
    """`MemoryLog` that notes every non-empty tail it truncates, before cutting it (the
    core's `Ready` only says where the log now ends, not what was there)."""

    def __init__(self) -> None:
        super().__init__()
        self.removed: list[RemovedTail] = []  # drained by the cluster after each event
        # (offset, epoch, record) the last `reset_to` dropped, drained by the cluster:
        # which of them were a diverging tail only the committed history tells.
        self.replaced: list[tuple[int, int, bytes]] = []

    def truncate_to(self, offset: int) -> None:
        end = self.end_offset
        if self.start_offset <= offset < end:
            self.removed.append(RemovedTail(offset, end, self.epoch_at(offset),
                                            self.last_epoch))
        super().truncate_to(offset)

    def reset_to(self, offset: int, epoch: int) -> None:
        """A snapshot replaces the log: note every record dropped."""
        start = self.start_offset
        self.replaced = []
        for batch in self.read(start, 1 << 62):
            for index, record in enumerate(batch.records):
                if batch.base_offset + index >= start:
                    self.replaced.append((batch.base_offset + index, batch.epoch, record))
        super().reset_to(offset, epoch)


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


class QuorumStateStore:
    """`quorum-state`: `persist` is the completed fsync; `on_persist(old, new)` lets the
    invariant checker see every durable write (epochs never go back, one vote per epoch)."""

    def __init__(self, on_persist: Callable[[ElectionState | None, ElectionState], None]
                 | None = None) -> None:
        self._state: ElectionState | None = None
        self._on_persist = on_persist
        self.writes = 0

    def load(self) -> ElectionState | None:
        return self._state

    def persist(self, state: ElectionState) -> None:
        if self._on_persist is not None:
            self._on_persist(self._state, state)
        self._state = state
        self.writes += 1

    def wipe(self) -> None:
        self._state = None


class SimDisk:
    def __init__(self, config: DiskConfig, rng: random.Random,
                 on_persist: Callable[[ElectionState | None, ElectionState], None]
                 | None = None,
                 on_snapshot: Callable[[SnapshotId, bytes], None] | None = None) -> None:
        self.config = config
        self._rng = rng
        self._on_persist = on_persist
        self._on_snapshot = on_snapshot
        self.log = SimLog()
        self.quorum_state = QuorumStateStore(on_persist)
        self.snapshots = SimSnapshotStore(on_snapshot)
        self.crashes = 0
        self.wipes = 0
        self.slowdown = 1.0  # > 1 while the disk is degraded

    def fsync_latency_us(self) -> int:
        ms = self._rng.uniform(self.config.fsync_min_ms, self.config.fsync_max_ms)
        return max(1, int(ms * 1000 * self.slowdown))

    def crash(self) -> None:
        """Power cut: unflushed log writes are gone; quorum-state keeps its last fsync;
        whole snapshots stay, a partial download is gone."""
        self.log.crash()
        self.snapshots.crash()
        self.crashes += 1

    def wipe(self) -> None:
        """The disk is replaced: empty log, no quorum-state, no snapshots."""
        self.log = SimLog()
        self.quorum_state.wipe()
        self.snapshots = SimSnapshotStore(self._on_snapshot)
        self.wipes += 1
