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

Multi-step operations take the real code's steps (`raft.sim.disk_steps.DiskSteps`), so
an armed crash strikes between any two: a snapshot written or downloaded (renamed into
place, durable once the directory is fsynced), old snapshots deleted, the log start
moved (`SimLog.advance_start`: the log-start file first, then the segments below), the
tail truncated (`SimLog.truncate_to`) and the log reset to a snapshot
(`SimLog.reset_to`). The
log is cut into segments (`SEGMENT_BATCHES` batches each); a segment's name, like any
name created or renamed, is lost by a crash until the directory is fsynced
(`SimDirectory`), with the records in it. Recovery then does what `DiskLog._recover`
does: the start comes from the log-start file, records below it dropped.

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
from raft.segment import encode_batch, segment_name
from raft.sim.disk_steps import DiskSteps, SimDirectory
from raft.sim.invariants import Entry, entry_of
from raft.snapshot_store import MemorySnapshotStore
from raft.storage import LOG_START_OFFSET, StorageError
from raft.types import Batch, ElectionState, SnapshotId

_ALL = 1 << 62  # read everything
SEGMENT_BATCHES = 4  # a segment rolls after this many batches (the real log: bytes)
LOG_START_MOVE = "log-start move"
SNAPSHOT_WRITE = "snapshot write"
SNAPSHOT_DOWNLOAD = "snapshot download"
SNAPSHOT_DELETION = "snapshot deletion"
LOG_TRUNCATION = "log truncation"
LOG_RESET = "log reset"


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
    the log. A truncation or a reset takes back the promises above its offset as it
    starts: a crash part-way may leave more of the old log."""

    __slots__ = ("entries", "durable_end")

    def __init__(self) -> None:
        self.entries: list[Entry | None] = []
        self.durable_end = 0

    def write(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if batch.base_offset > len(self.entries):
                raise AssertionError(f"a write at {batch.base_offset} past the ledger's end "
                                     f"{len(self.entries)}: the ledger lost track of the log")
            del self.entries[batch.base_offset:]
            self.entries.extend(entry_of(batch.epoch, record) for record in batch.records)

    def recovered(self, batches: Sequence[Batch]) -> None:
        """Recovery found `batches` on disk past what the ledger still promised (the old
        tail a truncation had taken back, back after a crash before the cut was durable):
        there again, so later writes land at their offsets, but promised only by the
        node's next fsync, as the truncation left them."""
        self.write(batches)

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

    def __init__(self, lose_on_crash: int = 0, *, directory: SimDirectory | None = None,
                 steps: DiskSteps | None = None, flush_syncs_dir: bool = True,
                 cut_keeps_segment: bool = True) -> None:
        super().__init__()
        self.ledger = Ledger()
        self._cutting = False  # inside truncate_to: its re-append of a batch's head
        self.lose_on_crash = lose_on_crash
        self.directory = directory or SimDirectory()
        self.steps = steps or DiskSteps()
        self.flush_syncs_dir = flush_syncs_dir  # False only for a planted bug
        self.cut_keeps_segment = cut_keeps_segment  # False only for a planted bug
        self._crash_cut: int | None = None  # a truncation under way: see `_take_cut_steps`
        self._crash_empties = False  # a reset under way: see `reset_to`
        self.segments = [0]  # base offsets of the segment files, oldest first
        self._active_batches = 0  # in the last segment
        self.log_start_file = (0, 0)  # what the durable log-start-offset file says
        self.removed: list[RemovedTail] = []  # drained by the cluster after each event
        # (offset, epoch, record) the last `reset_to` dropped, drained by the cluster:
        # which of them were a diverging tail only the committed history tells.
        self.replaced: list[tuple[int, int, bytes]] = []

    def append_batches(self, batches: Sequence[Batch]) -> None:
        super().append_batches(batches)
        if not self._cutting:
            self.ledger.write(batches)
            for batch in batches:
                self._place(batch.base_offset)

    def _place(self, base_offset: int) -> None:
        """A full last segment rolls: the batch starts a new file, whose name is durable
        only once the directory is fsynced (`flush`)."""
        if self._active_batches >= SEGMENT_BATCHES:
            self.segments.append(base_offset)
            self.directory.add(segment_name(base_offset))
            self._active_batches = 0
        self._active_batches += 1

    def truncate_to(self, offset: int) -> None:
        end = self.end_offset
        if not self.start_offset <= offset < end:
            super().truncate_to(offset)  # a no-op, or refused below the log start
            return
        self.ledger.truncate(offset)  # the disk was told: nothing above it is promised
        renames_head = self._take_cut_steps(offset)
        self.removed.append(RemovedTail(offset, end, self.epoch_at(offset), self.last_epoch))
        self._cutting = True
        try:
            super().truncate_to(offset)
        finally:
            self._cutting = False
        self._crash_cut = None
        self._drop_segments_from(offset)
        if renames_head:  # the cut is durable: recovery adopts the swap if these never run
            self.steps.take(LOG_TRUNCATION, "renaming the swap file to a segment")
            self.steps.take(LOG_TRUNCATION, "fsyncing the directory after the rename")

    def _take_cut_steps(self, offset: int) -> bool:
        """The steps of `DiskLog.truncate_to` up to the one that makes the cut durable;
        True when a rename of the swap file follows. The segments after the cut one are
        unlinked, last first: a crash before the directory fsync brings them back (the
        old log). After it, until the cut segment is shortened and fsynced (or replaced
        by the swap, the directory fsynced), a crash leaves the log ending with the cut
        segment (`_crash_cut`): a cut inside a batch saved the batch's head to a swap
        file first, which recovery (`DiskLog._finish_cut`) adopts only at the log end."""
        take = self.steps.take
        base = self.read(offset, 0)[0].base_offset  # of the batch holding `offset`
        kept = max(b for b in self.segments if b <= base)
        later = [b for b in self.segments if b > kept]
        for _ in later:
            take(LOG_TRUNCATION, "unlinking a segment after the cut")
        if kept < offset and not self.cut_keeps_segment:  # a planted bug
            take(LOG_TRUNCATION, "unlinking the cut segment to rewrite it")
            take(LOG_TRUNCATION, "fsyncing the directory before the cut")
            self._unlinked(later)
            self._crash_cut = kept  # the records kept below the cut are only in memory
            take(LOG_TRUNCATION, "writing the records kept to a new segment")
            take(LOG_TRUNCATION, "fsyncing the new segment")
            take(LOG_TRUNCATION, "fsyncing the directory after the rewrite")
            return False
        renames_head = kept < base < offset
        if base < offset:
            take(LOG_TRUNCATION, "writing the head of the cut batch to a swap file")
            take(LOG_TRUNCATION, "fsyncing the swap file")
        if later or renames_head:
            take(LOG_TRUNCATION, "fsyncing the directory before the cut")
            self._unlinked(later)
        if base < offset and not renames_head:
            take(LOG_TRUNCATION, "replacing the cut segment by the swap file")
            take(LOG_TRUNCATION, "fsyncing the directory after the replace")
        else:
            take(LOG_TRUNCATION, "shortening the cut segment")
            take(LOG_TRUNCATION, "fsyncing the cut segment")
        return renames_head

    def _unlinked(self, later: list[int]) -> None:
        """The directory fsync after the segments `later` were unlinked: they stay gone."""
        for base in later:
            self.directory.remove(segment_name(base))
        self.directory.sync()
        if later:
            self._crash_cut = later[0]

    def _settle_cut(self, cut: int) -> None:
        """What recovery makes of a truncation a crash interrupted: the log ends at `cut`
        at most (see `_take_cut_steps`)."""
        if cut < self.end_offset:
            self._cutting = True
            try:
                MemoryLog.truncate_to(self, max(cut, self.start_offset))
            finally:
                self._cutting = False
        self.segments = [b for b in self.segments if b < cut] or [cut]
        self._recount_active()

    def _drop_segments_from(self, offset: int) -> None:
        """Forget the segment files starting above `offset` (unlinked, the directory
        synced, as `DiskLog.truncate_to` does)."""
        while len(self.segments) > 1 and self.segments[-1] > offset:
            self.directory.remove(segment_name(self.segments.pop()))
        self.directory.sync()
        self._recount_active()

    def _recount_active(self) -> None:
        last = self.segments[-1]
        self._active_batches = sum(1 for batch in self.read(max(last, self.start_offset), _ALL)
                                   if batch.base_offset >= last)

    def reset_to(self, offset: int, epoch: int) -> None:
        """A snapshot replaces the log: note every record dropped. The steps of
        `DiskLog.reset_to`: every segment unlinked, newest first, then the directory
        fsynced (a crash from then on leaves the log empty at the start the log-start
        file names, `_crash_empties`), then that file written, then the new segment."""
        start = self.start_offset
        self.replaced = []
        for batch in self.read(start, _ALL):
            for index, record in enumerate(batch.records):
                if batch.base_offset + index >= start:
                    self.replaced.append((batch.base_offset + index, batch.epoch, record))
        self.ledger.reset(offset)  # the snapshot, durable already, stands in for the log
        take = self.steps.take
        for _ in self.segments:
            take(LOG_RESET, "unlinking a segment")
        take(LOG_RESET, "fsyncing the directory after the unlinks")
        for base in self.segments:
            self.directory.remove(segment_name(base))
        self.directory.sync()
        self._crash_empties = True
        self._write_log_start(LOG_RESET, offset, epoch)
        self._crash_empties = False
        super().reset_to(offset, epoch)
        self.segments, self._active_batches = [offset], 0
        take(LOG_RESET, "creating the new segment")
        self.directory.add(segment_name(offset))
        take(LOG_RESET, "fsyncing the directory after the creation")
        self.directory.sync()

    def _write_log_start(self, operation: str, offset: int, epoch: int) -> None:
        """`raft.storage.write_log_start`: temp file, fsync, rename, directory fsync."""
        take = self.steps.take
        take(operation, "writing the log-start temp file")
        take(operation, "fsyncing the log-start temp file")
        take(operation, "renaming it to log-start-offset")
        self.directory.add(LOG_START_OFFSET)
        take(operation, "fsyncing the directory after the rename")
        self.directory.sync()
        self.log_start_file = (offset, epoch)

    def advance_start(self, offset: int) -> None:
        """The steps of `DiskLog.advance_start`: the log-start file written atomically
        (`raft.storage.write_log_start`), then the segments wholly below deleted, then
        the directory fsynced. A crash between two of them is settled by `crash`."""
        self._check_new_start(offset)
        self._write_log_start(LOG_START_MOVE, offset, self._start_epoch_at(offset))
        take = self.steps.take
        take(LOG_START_MOVE, "deleting the segments below the start")
        super().advance_start(offset)
        self.ledger.trim(offset)
        self._drop_segments_below(offset)
        take(LOG_START_MOVE, "fsyncing the directory after the deletions")
        self.directory.sync()

    def flush(self) -> None:
        super().flush()
        self.ledger.synced()
        if self.flush_syncs_dir:  # as `DiskLog.flush`: a segment it created is durable
            self.directory.sync()

    def crash(self, tear: random.Random | None = None, lost: set[str] | None = None) -> None:
        """Lose what was not flushed; with `tear`, the first unflushed batch was being
        written: recover through the segment scan (see the module docstring). `lost`:
        the names the crash lost in the directory (by default, those of the log's
        own `directory` not synced)."""
        torn = self.read(self.flushed_end_offset, _ALL) if tear is not None else []
        super().crash()
        self.ledger.crash()
        cut, self._crash_cut = self._crash_cut, None
        if cut is not None:
            self._settle_cut(cut)
        if self._crash_empties:  # a reset unlinked every segment: recovery starts anew
            self._crash_empties = False
            MemoryLog.reset_to(self, *self.log_start_file)
            self.segments, self._active_batches = [self.log_start_file[0]], 0
        if self.lose_on_crash:
            self._lose_acknowledged(self.lose_on_crash)
        if tear is not None and torn:
            self._recover(torn[0], tear)
        self._lose_entries(self.directory.crash() if lost is None else lost)
        self._start_from_file()
        if len(self.ledger.entries) < self.end_offset:
            self.ledger.recovered(self.read(len(self.ledger.entries), _ALL))

    def _lose_entries(self, lost: set[str]) -> None:
        """Segment files whose names the crash lost are gone, with what they held (the
        ledger still says what was acknowledged)."""
        gone = [base for base in self.segments if segment_name(base) in lost]
        if not gone:
            return
        cut = max(gone[0], self.start_offset)
        self.segments = [base for base in self.segments if base < gone[0]] or [cut]
        if cut < self.end_offset:
            self._cutting = True
            try:
                MemoryLog.truncate_to(self, cut)
            finally:
                self._cutting = False
        self._recount_active()

    def _start_from_file(self) -> None:
        """Recovery reads the start from the log-start file (`DiskLog._recover`): a crash
        after it was written and before the segments below went leaves them, which
        recovery deletes (`DiskLog._below_start`)."""
        offset, epoch = self.log_start_file
        if offset == self.start_offset:
            return
        if offset <= self.end_offset:
            MemoryLog.advance_start(self, offset)
            self.ledger.trim(offset)
        else:  # every record left lies below the start: the log restarts empty there
            MemoryLog.reset_to(self, offset, epoch)
            self.ledger.reset(offset)
        self._drop_segments_below(offset)

    def _drop_segments_below(self, offset: int) -> None:
        """Forget the segments wholly below `offset` (the next one starts at or below)."""
        while len(self.segments) > 1 and self.segments[1] <= offset:
            self.segments.pop(0)

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
    """`MemorySnapshotStore` that takes the real store's steps (`DiskSteps`): a snapshot
    written (`raft.snapshot.write_snapshot`: temp file, fsync, rename, directory fsync),
    a download finished (`DiskSnapshotStore.finish`: fsync, rename, directory fsync),
    old snapshots deleted (unlinks, directory fsync). A snapshot's name is durable once
    its directory is fsynced; a crash before that loses it (`crash`). Tells
    `on_stored(snapshot_id, data)` of every snapshot that becomes durable, so the
    invariant checker sees each one."""

    def __init__(self, on_stored: Callable[[SnapshotId, bytes], None] | None = None, *,
                 directory: SimDirectory | None = None,
                 steps: DiskSteps | None = None) -> None:
        super().__init__()
        self._on_stored = on_stored
        self.directory = directory or SimDirectory()
        self.steps = steps or DiskSteps()

    def add(self, snapshot_id: SnapshotId, data: bytes) -> None:
        take = self.steps.take
        take(SNAPSHOT_WRITE, "writing the temp file")
        take(SNAPSHOT_WRITE, "fsyncing the temp file")
        take(SNAPSHOT_WRITE, "renaming it")
        super().add(snapshot_id, data)
        self._renamed(SNAPSHOT_WRITE, snapshot_id)

    def finish(self, snapshot_id: SnapshotId) -> tuple[bytes, ...]:
        records = super().finish(snapshot_id)  # checked whole first, as the real store does
        self.directory.add(snapshot_id.file_name)  # not renamed yet: lost by a crash
        take = self.steps.take
        take(SNAPSHOT_DOWNLOAD, "fsyncing the download")
        take(SNAPSHOT_DOWNLOAD, "renaming it")
        self._renamed(SNAPSHOT_DOWNLOAD, snapshot_id)
        return records

    def _renamed(self, operation: str, snapshot_id: SnapshotId) -> None:
        self.directory.add(snapshot_id.file_name)
        self.steps.take(operation, "fsyncing the directory")
        self.directory.sync()
        self._stored(snapshot_id)

    def delete_before(self, end_offset: int) -> list[SnapshotId]:
        if not any(s.end_offset < end_offset for s in self.snapshots):
            return []
        self.steps.take(SNAPSHOT_DELETION, "unlinking the snapshots below")
        gone = super().delete_before(end_offset)
        self.steps.take(SNAPSHOT_DELETION, "fsyncing the directory")
        self.directory.sync()
        return gone

    def lose(self, names: set[str]) -> None:
        """A crash lost these names: the snapshots under them are gone."""
        for snapshot_id in [s for s in self.snapshots if s.file_name in names]:
            del self.snapshots[snapshot_id]

    def _stored(self, snapshot_id: SnapshotId) -> None:
        if self._on_stored is not None:
            self._on_stored(snapshot_id, self.snapshots[snapshot_id])


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskConfig:
    """fsync takes uniform [min, max] ms; the node's shell waits for it before sending."""

    fsync_min_ms: float = 0.2
    fsync_max_ms: float = 3.0
    lying_fsync_writes: int = 0  # a crash loses this many acknowledged batches (a bug)
    flush_syncs_dir: bool = True  # False: a planted bug (`raft.sim.planted`)
    cut_keeps_segment: bool = True  # False: a planted bug (`raft.sim.planted`)


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
        self.directory = SimDirectory()  # the metadata partition's
        self.steps = DiskSteps()
        self.log = self._new_log()
        self.quorum_state = QuorumStateStore(on_persist)
        self.snapshots = self._new_snapshot_store()
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
        lost = self.directory.crash()
        log.crash(tear, lost)
        self.snapshots.crash()
        self.snapshots.lose(lost)
        self.crashes += 1

    def start_at_newer_snapshot(self) -> None:
        """At a start, as `tools.server.build.build_node` does: a snapshot past the log end
        (fetched, then a crash before or during the log's reset to it) restarts the log
        there."""
        latest = self.snapshots.latest()
        if latest is not None and latest.end_offset > self.log.end_offset:
            self.log.reset_to(latest.end_offset, latest.epoch)

    def wipe(self) -> None:
        """The disk is replaced: empty log, no quorum-state, no snapshots."""
        self.directory.sync()  # nothing of the old disk is pending on the new one
        self.steps.disarm()
        self.log = self._new_log()
        self.quorum_state.wipe()
        self.snapshots = self._new_snapshot_store()
        self.wipes += 1

    def _new_log(self) -> SimLog:
        return SimLog(self.config.lying_fsync_writes, directory=self.directory,
                      steps=self.steps, flush_syncs_dir=self.config.flush_syncs_dir,
                      cut_keeps_segment=self.config.cut_keeps_segment)

    def _new_snapshot_store(self) -> SimSnapshotStore:
        return SimSnapshotStore(self._on_snapshot, directory=self.directory, steps=self.steps)
