"""The replicated log: the epoch cache, an in-memory log for the simulator and the on-disk
log of segment files (format in `raft.segment`).

Both logs implement `raft.types.RaftLog` with the same observable behaviour, including
`flushed_end_offset` (the end of the prefix that is durable *and* still in the log) and
the durability of `truncate_to` (see `_LogBase.truncate_to`).
"""

from __future__ import annotations

import bisect
import errno
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from sortedcontainers import SortedDict

from raft.common.durable import FILE_MODE, fsync_dir, make_private_dir
from raft.segment import (
    SEGMENT_SUFFIX,
    CorruptBatchError,
    StoredBatch,
    checked_header,
    encode_batch,
    iter_batches,
    list_segments,
    new_batch,
    segment_base_offset,
    segment_name,
)
from raft.storage import LOG_START_OFFSET, StorageError, read_log_start, write_log_start
from raft.types import NO_EPOCH, NO_OFFSET, Batch, LogSync

METADATA_PARTITION_DIR = "__cluster_metadata-0"
DEFAULT_SEGMENT_BYTES = 1 << 30  # Kafka's log.segment.bytes
SWAP_SUFFIX = ".swap"  # `<segment name>.swap`: the head of a batch a truncation cut in two


class LogCorruptionError(Exception):
    """A log on disk is damaged somewhere other than a torn tail: never skipped silently."""

    def __init__(self, path: str | os.PathLike[str], position: int, reason: str) -> None:
        super().__init__(f"{os.fspath(path)}: corrupt log at byte offset {position}: {reason}")
        self.path = os.fspath(path)
        self.position = position
        self.reason = reason


class EpochCache:
    """Leader epoch -> offset of its first record (Kafka's LeaderEpochFileCache).

    Epochs and start offsets both strictly increase, so one sorted map answers both
    "where does epoch e start" and "which epoch holds offset o"."""

    def __init__(self, entries: Iterable[tuple[int, int]] = ()) -> None:
        self._starts: SortedDict = SortedDict()
        self._latest = NO_EPOCH  # cached: assign() for the current epoch is the hot path
        for epoch, start_offset in entries:
            self.assign(epoch, start_offset)

    def __len__(self) -> int:
        return len(self._starts)

    def entries(self) -> list[tuple[int, int]]:
        return list(self._starts.items())

    @property
    def latest_epoch(self) -> int:
        return self._latest

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; a no-op for the latest epoch."""
        if epoch == self._latest:
            return
        if self._starts:
            latest, latest_start = self._starts.peekitem(-1)
            if epoch == latest:
                return
            if epoch < latest or start_offset <= latest_start:
                raise ValueError(f"epoch {epoch} at offset {start_offset} does not follow "
                                 f"epoch {latest} at offset {latest_start}")
        if epoch < 0:
            raise ValueError(f"negative epoch {epoch}")
        self._starts[epoch] = start_offset
        self._latest = epoch

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, offset where the next epoch starts or the log end);
        (NO_EPOCH, NO_OFFSET) when `epoch` is below every cached epoch."""
        index = self._starts.bisect_right(epoch)
        if index == 0:
            return NO_EPOCH, NO_OFFSET
        found = int(self._starts.peekitem(index - 1)[0])
        if index == len(self._starts):
            return found, log_end_offset
        return found, int(self._starts.peekitem(index)[1])

    def epoch_at(self, offset: int) -> int:
        """Epoch of the record at `offset`; NO_EPOCH before the first cached epoch."""
        starts = self._starts.values()
        index = bisect.bisect_right(starts, offset)  # values are sorted too
        return NO_EPOCH if index == 0 else int(self._starts.peekitem(index - 1)[0])

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs whose first record is at `end_offset` or later."""
        while self._starts and self._starts.peekitem(-1)[1] >= end_offset:
            self._starts.popitem(-1)
        self._latest = int(self._starts.peekitem(-1)[0]) if self._starts else NO_EPOCH

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget what lies before `start_offset` (after a snapshot); the epoch holding it
        now starts there."""
        holder = self.epoch_at(start_offset)
        while self._starts and self._starts.peekitem(0)[1] < start_offset:
            self._starts.popitem(0)
        if holder != NO_EPOCH:
            self._starts[holder] = start_offset
        self._latest = int(self._starts.peekitem(-1)[0]) if self._starts else NO_EPOCH


def _check_append(batches: Sequence[Batch], end_offset: int, last_epoch: int) -> None:
    expected = end_offset
    for batch in batches:
        if batch.base_offset != expected:
            raise ValueError(f"batch at offset {batch.base_offset} does not start at the "
                             f"log end {expected}")
        if not batch.records:
            raise ValueError(f"empty batch at offset {batch.base_offset}")
        if batch.epoch < last_epoch:
            raise ValueError(f"batch epoch {batch.epoch} is below the log's last epoch "
                             f"{last_epoch}")
        expected, last_epoch = batch.next_offset, batch.epoch


def _select_for_read(size_at: Callable[[int], int], count: int, first: int,
                     max_bytes: int) -> int:
    """Index past the last batch to return: one at least, then more while within budget."""
    index, total = first + 1, size_at(first)
    while index < count and total + size_at(index) <= max_bytes:
        total += size_at(index)
        index += 1
    return index


@dataclass(slots=True)
class SegmentSync:
    """`LogSync` of both logs: the fsyncs of a flush taken apart (`begin_flush`), to run
    in another thread while the log takes more appends."""

    end_offset: int  # durable once `run()` returned, unless the log was truncated since
    generation: int  # the log's `_generation` when the sync began
    # The segments written since the last flush, duplicated: a segment the log closes
    # meanwhile (deleted below a new start, or rolled) stays valid to fsync here.
    fds: list[int] = field(default_factory=list)

    def run(self) -> None:
        try:
            for fd in self.fds:
                os.fsync(fd)
        finally:
            for fd in self.fds:
                os.close(fd)
            self.fds = []


class _LogBase:
    """What both logs derive from their own end offset, epoch cache and batch append.

    The log starts at `start_offset`: 0, or the end offset of the snapshot that stands in
    for the records below it (`advance_start`, `reset_to`); `start_epoch` is that
    snapshot's epoch (the epoch of the record before the start), 0 at offset 0."""

    _epochs: EpochCache
    _start_offset = 0
    _start_epoch = 0
    # Truncations and resets so far: the offsets a `LogSync` begun before one of them
    # covered may hold other records now, so it makes nothing durable (`finish_flush`).
    _generation = 0

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def start_epoch(self) -> int:
        return self._start_epoch

    @property
    def end_offset(self) -> int:
        raise NotImplementedError

    @property
    def epoch_cache(self) -> EpochCache:
        return self._epochs

    def append_batches(self, batches: Sequence[Batch]) -> None:
        raise NotImplementedError

    def append(self, epoch: int, records: Sequence[bytes],
               append_time_ms: int | None = None) -> Batch:
        batch = new_batch(self.end_offset, epoch, tuple(records), append_time_ms)
        self.append_batches([batch])
        return batch

    def truncate_to(self, offset: int) -> None:
        """Remove every record at `offset` or above, and the epoch cache entries past it.

        Durable when it returns, as after `flush()`: the truncation and every record
        below `offset` (the head of a batch cut in two included) survive any crash from
        then on, and `flushed_end_offset == end_offset == offset`. A crash part-way through
        never loses a record below `offset` that was durable before the call, since this
        node may have acknowledged it. A no-op when `offset` is at or past the log end."""
        raise NotImplementedError

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        found, end = self._epochs.end_offset_for_epoch(epoch, self.end_offset)
        if self._start_offset and self._start_epoch <= epoch and (
                found == NO_EPOCH or found < self._start_epoch):
            # The snapshot's epoch ends where the log's first cached epoch begins: the
            # log start, or its end when the log holds no record yet.
            return self._start_epoch, self._start_offset
        return found, end

    def _start_epoch_at(self, offset: int) -> int:
        """The epoch a log starting at `offset` (within this one) starts after."""
        if offset == self._start_offset:
            return self._start_epoch
        return self._epochs.epoch_at(offset - 1)

    def _check_new_start(self, offset: int) -> None:
        if not self._start_offset <= offset <= self.end_offset:
            raise ValueError(f"cannot start the log at {offset}: outside "
                             f"[{self._start_offset}, {self.end_offset}]")

    def epoch_at(self, offset: int) -> int:
        if not self.start_offset <= offset < self.end_offset:
            raise ValueError(f"offset {offset} is outside the log "
                             f"[{self.start_offset}, {self.end_offset})")
        return self._epochs.epoch_at(offset)


class MemoryLog(_LogBase):
    """`RaftLog` in memory, modelling a disk: appends are volatile until `flush()`, and
    `crash()` brings back the last durable state (truncations are durable: see
    `truncate_to`). Used by the simulator and as the model for the disk log's tests."""

    def __init__(self) -> None:
        self._batches: list[Batch] = []
        self._bases: list[int] = []
        self._durable: list[Batch] = []
        self._shared = 0  # leading batches identical in _batches and _durable
        self._epochs = EpochCache()
        self.flush_count = 0

    @property
    def end_offset(self) -> int:
        return self._batches[-1].next_offset if self._batches else self.start_offset

    @property
    def flushed_end_offset(self) -> int:
        return self._batches[self._shared - 1].next_offset if self._shared else self.start_offset

    @property
    def last_epoch(self) -> int:
        return self._batches[-1].epoch if self._batches else self._start_epoch

    def append_batches(self, batches: Sequence[Batch]) -> None:
        _check_append(batches, self.end_offset, self.last_epoch)
        for batch in batches:
            self._epochs.assign(batch.epoch, batch.base_offset)
            self._batches.append(batch)
            self._bases.append(batch.base_offset)

    def read(self, start_offset: int, max_bytes: int) -> list[Batch]:
        if start_offset < self.start_offset:
            raise ValueError(f"offset {start_offset} is before the log start {self.start_offset}")
        if start_offset >= self.end_offset:
            return []
        first = bisect.bisect_right(self._bases, start_offset) - 1
        end = _select_for_read(lambda i: self._batches[i].size_bytes, len(self._batches),
                               first, max_bytes)
        return self._batches[first:end]

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise ValueError(f"cannot truncate to {offset}, before the log start")
        index = bisect.bisect_right(self._bases, offset) - 1
        cut = self._batches[index]
        del self._batches[index:]
        del self._bases[index:]
        self._shared = min(self._shared, index)
        self._epochs.truncate_from_end(offset)
        if cut.base_offset < offset:  # keep the head of the batch that was cut in two
            head = cut.records_between(cut.base_offset, offset)
            self.append_batches([head])
        # Durable at once, as DiskLog's truncation is: a crash now keeps exactly this log.
        self._durable = list(self._batches)
        self._shared = len(self._batches)
        self._generation += 1

    def advance_start(self, offset: int) -> None:
        """Start the log at `offset` (a snapshot's end offset), durably, dropping the
        batches wholly below it."""
        self._check_new_start(offset)
        self._start_offset, self._start_epoch = offset, self._start_epoch_at(offset)
        gone = 0
        while gone < len(self._batches) and self._batches[gone].next_offset <= offset:
            gone += 1
        del self._batches[:gone]
        del self._bases[:gone]
        del self._durable[:min(gone, len(self._durable))]
        self._shared = max(0, self._shared - gone)
        if self._batches:
            self._epochs.truncate_from_start(offset)
        else:  # the start is the end: no epoch holds a record (the snapshot's: start_epoch)
            self._epochs = EpochCache()

    def reset_to(self, offset: int, epoch: int) -> None:
        """Drop the whole log, durably: it restarts empty at `offset`, after `epoch` (a
        snapshot this node loaded in place of its log)."""
        self._batches, self._bases, self._durable, self._shared = [], [], [], 0
        self._start_offset, self._start_epoch = offset, epoch
        self._epochs = EpochCache()
        self._generation += 1

    def flush(self) -> None:
        self._durable[self._shared:] = self._batches[self._shared:]
        self._shared = len(self._batches)
        self.flush_count += 1

    def begin_flush(self) -> SegmentSync:
        return SegmentSync(self.end_offset, self._generation)

    def finish_flush(self, sync: LogSync) -> None:
        if sync.generation != self._generation:
            return
        count = bisect.bisect_left(self._bases, sync.end_offset)  # batches below its end
        if count > self._shared:
            self._durable[self._shared:] = self._batches[self._shared:count]
            self._shared = count
            self.flush_count += 1

    def crash(self) -> None:
        """Lose everything not flushed, as a power cut would."""
        self._batches = list(self._durable)
        self._bases = [b.base_offset for b in self._batches]
        self._shared = len(self._batches)
        self._epochs = EpochCache((b.epoch, b.base_offset) for b in self._batches)
        self._epochs.truncate_from_start(self._start_offset)


# ---------------------------------------------------------------------------------------
# Segment scanning: pure functions over a segment's bytes, shared with `kraft dump-log`.


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentScan:
    """What a segment holds: its whole batches, and where a torn tail begins (if any)."""

    batches: tuple[StoredBatch, ...]
    valid_bytes: int  # bytes taken by the whole batches
    torn_reason: str | None = None  # set when bytes after `valid_bytes` are a torn tail


def _is_valid_batch_at(data: bytes, position: int) -> bool:
    try:
        header = checked_header(data, position, "<scan>")
    except CorruptBatchError:
        return False
    return header is not None and header[2] > 0  # a batch holds a record at least


def has_valid_batch_after(data: bytes, position: int) -> bool:
    """Whether a whole, CRC-correct batch starts anywhere after `position`: if so, the
    damage at `position` is not a torn tail but a hole in the middle of the log."""
    return any(_is_valid_batch_at(data, p) for p in range(position + 1, len(data)))


def scan_segment(data: bytes, path: str | os.PathLike[str], *, expected_offset: int,
                 is_last: bool) -> SegmentScan:
    """Check one segment: CRCs, offsets continuing from `expected_offset`, epochs never
    going back. Damage is a torn tail only at the end of the last segment with nothing
    valid after it; anything else raises LogCorruptionError naming file and byte offset."""
    batches: list[StoredBatch] = []
    valid_bytes = 0
    torn_reason: str | None = None
    last_epoch = NO_EPOCH
    try:
        for stored in iter_batches(data, os.fspath(path)):
            batch = stored.batch
            if batch.base_offset != expected_offset:
                raise LogCorruptionError(path, stored.position,
                                         f"batch base offset {batch.base_offset}, expected "
                                         f"{expected_offset} (gap or out of order)")
            if not batch.records:
                raise LogCorruptionError(path, stored.position, "empty batch")
            if batch.epoch < last_epoch:
                raise LogCorruptionError(path, stored.position,
                                         f"epoch {batch.epoch} after epoch {last_epoch}")
            batches.append(stored)
            valid_bytes = stored.position + stored.size
            expected_offset, last_epoch = batch.next_offset, batch.epoch
    except CorruptBatchError as exc:
        torn_reason = exc.reason
    if valid_bytes < len(data):
        torn_reason = torn_reason or f"incomplete batch ({len(data) - valid_bytes} bytes)"
        if not is_last or has_valid_batch_after(data, valid_bytes):
            raise LogCorruptionError(path, valid_bytes, torn_reason)
    return SegmentScan(batches=tuple(batches), valid_bytes=valid_bytes, torn_reason=torn_reason)


def scan_log_dir(directory: Path) -> Iterator[tuple[Path, SegmentScan]]:
    """Every segment of a partition directory, in order, checked as recovery would
    (read-only: nothing is repaired). A `.swap` file that a crash left behind is no
    segment and is not listed; opening the log settles it (`DiskLog._finish_cut`)."""
    segments = list_segments(directory)
    expected: int | None = None
    for index, path in enumerate(segments):
        base = segment_base_offset(path)
        if expected is not None and base != expected:
            raise LogCorruptionError(path, 0, f"segment starts at offset {base}, "
                                     f"expected {expected} (gap or out of order)")
        scan = scan_segment(path.read_bytes(), path, expected_offset=base,
                            is_last=index == len(segments) - 1)
        expected = scan.batches[-1].batch.next_offset if scan.batches else base
        yield path, scan


# ---------------------------------------------------------------------------------------
# The disk log.


@dataclass(slots=True)
class _Segment:
    base_offset: int
    path: Path
    fd: int
    size: int


class _Entry(NamedTuple):
    """Where one batch lives; kept for every batch so reads are one pread per segment."""

    segment: _Segment
    position: int
    size: int
    record_bytes: int  # Batch.size_bytes, the unit of read's max_bytes
    epoch: int
    next_offset: int


def _write_all(fd: int, data: bytes, position: int) -> None:
    written = os.pwrite(fd, data, position)
    if written < len(data):  # short writes are rare: only then pay for the loop
        view = memoryview(data)[written:]
        while view:
            written = os.pwrite(fd, view, position + len(data) - len(view))
            view = view[written:]


def _swap_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset) + SWAP_SUFFIX)


def list_swaps(directory: Path) -> list[Path]:
    """Swap files in a partition directory: never segments, whatever their content."""
    suffix = SEGMENT_SUFFIX + SWAP_SUFFIX
    return sorted(p for p in directory.glob(f"*{suffix}") if p.name[:-len(suffix)].isdigit())


def _swap_base_offset(path: Path) -> int:
    return int(path.name[:-len(SEGMENT_SUFFIX + SWAP_SUFFIX)])


def _clean_scan(path: Path, base_offset: int) -> SegmentScan | None:
    """`path` scanned as a segment starting at `base_offset`; None unless it holds whole,
    valid batches only (a swap with a torn tail was never synced, so never relied on)."""
    try:
        scan = scan_segment(path.read_bytes(), path, expected_offset=base_offset, is_last=True)
    except LogCorruptionError:
        return None
    return scan if scan.torn_reason is None and scan.batches else None


class DiskLog(_LogBase):
    """`RaftLog` on segment files. append = write (page cache), flush = fsync; recovery on
    open checks every CRC, truncates a torn tail of the last segment and settles a
    truncation that a crash interrupted (`_cut_batch`, `_finish_cut`).

    The batches appended last are also kept in memory (the tail, bounded by
    TAIL_CACHE_BATCHES and TAIL_CACHE_BYTES): a leader reads the tail for every Fetch it
    answers and the node reads it again to publish each commit, and a pread plus a decode
    and CRC check of the batch cost about 7 us each time, most of a read. Older batches
    are read from the segments, their CRC checked, as before."""

    TAIL_CACHE_BATCHES = 4096
    TAIL_CACHE_BYTES = 8 << 20  # records' bytes (Batch.size_bytes)

    def __init__(self, directory: str | os.PathLike[str], *,
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self._segments: list[_Segment] = []
        self._bases: list[int] = []
        self._entries: list[_Entry] = []
        self._epochs = EpochCache()
        self._dirty_fds: set[int] = set()  # segments written since their last fsync
        self._dirty_dir = False  # a name was created or removed since the last fsync
        self._flushed_end = 0
        self._failure: OSError | None = None  # a truncation failed half-way: see _check_usable
        # The batches of the last len(_tail) entries, in order, as appended (`_remember`);
        # emptied by anything else that changes the index (`_index`, `_forget_from`).
        self._tail: list[Batch] = []
        self._tail_bytes = 0
        if not self.directory.is_dir():
            make_private_dir(self.directory, parents=True)
            fsync_dir(self.directory.parent)
        try:
            self._recover()
        except BaseException:
            self.close()
            raise

    @classmethod
    def open_metadata_log(cls, log_dir: str | os.PathLike[str], *,
                          segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> DiskLog:
        """The metadata partition of a node's log directory."""
        return cls(Path(log_dir) / METADATA_PARTITION_DIR, segment_bytes=segment_bytes)

    def _recover(self) -> None:
        try:
            self._start_offset, self._start_epoch = read_log_start(self.directory)
        except StorageError as exc:
            raise LogCorruptionError(self.directory / LOG_START_OFFSET, 0, str(exc)) from None
        scans = list(scan_log_dir(self.directory))
        for index, (path, scan) in enumerate(scans):
            if self._below_start(scans, index):  # left by a crash in advance_start/reset_to
                os.unlink(path)
                self._dirty_dir = True
                continue
            segment = self._open_segment(path, create=False)
            if not self._entries and segment.base_offset > self._start_offset:
                raise LogCorruptionError(path, 0, f"log starts at offset {segment.base_offset}"
                                         f", expected {self.start_offset}")
            for stored in scan.batches:
                if stored.batch.next_offset > self._start_offset:
                    self._index(segment, stored.position, stored.size, stored.batch)
            segment.size = scan.valid_bytes
            if scan.torn_reason is not None:  # torn tail: cut it off, durably
                os.ftruncate(segment.fd, scan.valid_bytes)
                self._dirty_fds.add(segment.fd)
        # Whatever a previous process wrote may still sit in the page cache only, names it
        # created, renamed or removed included.
        if self._segments:
            self._dirty_fds.add(self._segments[-1].fd)
        self._dirty_dir = True
        self.flush()  # before a swap is adopted: the segment it follows must be durable
        self._finish_cut()
        self._epochs.truncate_from_start(self._start_offset)
        if not self._segments:
            self._open_segment(self.directory / segment_name(self._start_offset), create=True)
        self.flush()

    def _below_start(self, scans: list[tuple[Path, SegmentScan]], index: int) -> bool:
        """Whether segment `index` holds records below the log start only (and is not the
        segment the log continues in)."""
        if index + 1 < len(scans):
            return segment_base_offset(scans[index + 1][0]) <= self._start_offset
        batches = scans[index][1].batches
        end = batches[-1].batch.next_offset if batches else segment_base_offset(scans[index][0])
        return end < self._start_offset

    def _finish_cut(self) -> None:
        """Settle a truncation that a crash interrupted (see `_cut_batch`). Its swap file
        holds the head of the batch cut in two and belongs in the log exactly when the log
        now ends where the swap starts: the cut segment was shortened (durably: recovery
        has just synced it). Otherwise the segment still holds the whole batch, or the swap
        is incomplete; it is removed, never read as a segment."""
        end, last_epoch = self.end_offset, self.last_epoch
        for swap in list_swaps(self.directory):
            base = _swap_base_offset(swap)
            scan = _clean_scan(swap, base) if base == end else None
            if scan is not None and scan.batches[0].batch.epoch >= last_epoch:
                self._adopt(swap, scan)
            else:
                os.unlink(swap)
            # Synced before the log changes again: a removed swap that came back after a
            # crash could match the log end by then.
            self._dirty_dir = True

    def _adopt(self, swap: Path, scan: SegmentScan) -> None:
        base = _swap_base_offset(swap)
        if self._segments and self._segments[-1].base_offset == base:
            # The cut segment itself, emptied by a crash that took its unsynced batch: the
            # swap was to replace it anyway.
            empty = self._segments.pop()
            self._dirty_fds.discard(empty.fd)
            os.close(empty.fd)
        path = self.directory / segment_name(base)
        fd = os.open(swap, os.O_RDWR)
        try:
            os.fsync(fd)  # a process that died right after writing it left it unsynced
            os.replace(swap, path)
        except BaseException:
            os.close(fd)
            raise
        segment = _Segment(base, path, fd, scan.valid_bytes)
        self._segments.append(segment)
        for stored in scan.batches:
            self._index(segment, stored.position, stored.size, stored.batch)

    def _open_segment(self, path: Path, *, create: bool) -> _Segment:
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        # `os.open` of this module, not a helper's: the crash tests trace every open here
        segment = _Segment(segment_base_offset(path), path, os.open(path, flags, FILE_MODE), 0)
        self._segments.append(segment)
        if create:
            self._dirty_dir = True
        return segment

    def _index(self, segment: _Segment, position: int, size: int, batch: Batch, *,
               cached: bool = False) -> int:
        """Index `batch`, written at `position` of `segment`; returns its record bytes.
        Unless the caller adds the batch to the tail cache (`cached`, `_append_one`), the
        cache would no longer end at the log end: it is emptied."""
        self._epochs.assign(batch.epoch, batch.base_offset)
        self._bases.append(batch.base_offset)
        record_bytes = sum(map(len, batch.records))
        self._entries.append(_Entry(segment, position, size, record_bytes, batch.epoch,
                                    batch.base_offset + len(batch.records)))
        if not cached and self._tail:
            self._forget_tail()
        return record_bytes

    def _remember(self, batch: Batch, record_bytes: int) -> None:
        """Keep the batch just appended (and indexed) in the tail cache, within bounds:
        past them the older half goes at once, so trimming is rare."""
        tail = self._tail
        tail.append(batch)
        self._tail_bytes += record_bytes
        if len(tail) > self.TAIL_CACHE_BATCHES or self._tail_bytes > self.TAIL_CACHE_BYTES:
            keep = len(tail) // 2
            del tail[:len(tail) - keep]
            self._tail_bytes = sum(e.record_bytes for e in self._entries[len(self._entries)
                                                                         - keep:])

    def _forget_tail(self) -> None:
        self._tail.clear()
        self._tail_bytes = 0

    def _forget_from(self, index: int, end_offset: int) -> None:
        """Drop the index from batch `index` on; the log now ends at `end_offset`."""
        self._forget_tail()
        del self._entries[index:]
        del self._bases[index:]
        self._epochs.truncate_from_end(end_offset)
        self._flushed_end = min(self._flushed_end, end_offset)

    def _check_usable(self) -> None:
        """Refuse to go on after a truncation failed half-way: the files may then hold
        either the old or the new log while the index knows only one of them. Reopening
        the log settles the files (`_finish_cut`)."""
        if self._failure is not None:
            message = (f"{self.directory}: log unusable after a truncation failed "
                       f"({self._failure}); reopen it to recover")
            raise OSError(errno.EIO, message) from self._failure

    def _sync_dir(self) -> None:
        if self._dirty_dir:
            fsync_dir(self.directory)
            self._dirty_dir = False

    def close(self) -> None:
        for segment in self._segments:
            os.close(segment.fd)
        self._segments.clear()

    def __enter__(self) -> DiskLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def end_offset(self) -> int:
        return self._entries[-1].next_offset if self._entries else self.start_offset

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end

    @property
    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else self._start_epoch

    @property
    def size_bytes(self) -> int:
        """Bytes in the segments (records below the log start included)."""
        return sum(segment.size for segment in self._segments)

    @property
    def segment_paths(self) -> list[Path]:
        return [s.path for s in self._segments]

    def append_batches(self, batches: Sequence[Batch]) -> None:
        self._check_usable()
        _check_append(batches, self.end_offset, self.last_epoch)
        for batch in batches:
            self._append_one(batch)

    def _append_one(self, batch: Batch) -> None:
        data = encode_batch(batch)
        active = self._segments[-1]
        if active.size > 0 and active.size + len(data) > self.segment_bytes:
            # The full segment is made durable before the next one exists, so a crash can
            # only ever leave a torn tail in the last segment.
            os.fsync(active.fd)
            self._dirty_fds.discard(active.fd)
            active = self._open_segment(self.directory / segment_name(batch.base_offset),
                                        create=True)
        try:
            _write_all(active.fd, data, active.size)
        except OSError:
            os.ftruncate(active.fd, active.size)  # never leave half a batch behind
            raise
        self._dirty_fds.add(active.fd)
        record_bytes = self._index(active, active.size, len(data), batch, cached=True)
        active.size += len(data)
        self._remember(batch, record_bytes)

    def read(self, start_offset: int, max_bytes: int) -> list[Batch]:
        self._check_usable()
        if start_offset < self.start_offset:
            raise ValueError(f"offset {start_offset} is before the log start {self.start_offset}")
        if start_offset >= self.end_offset:
            return []
        first, end = self._select(start_offset, max_bytes)
        tail_start = len(self._entries) - len(self._tail)
        if first >= tail_start:  # the common case: a fetcher or the publisher near the end
            return self._tail[first - tail_start:end - tail_start]
        return self._read_entries(first, end)

    def _select(self, start_offset: int, max_bytes: int) -> tuple[int, int]:
        """The index range `read` returns (`start_offset` within the log)."""
        first = bisect.bisect_right(self._bases, start_offset) - 1
        entries = self._entries
        return first, _select_for_read(lambda i: entries[i].record_bytes, len(entries),
                                       first, max_bytes)

    def _read_uncached(self, start_offset: int, max_bytes: int) -> list[Batch]:
        """`read` from the segments only, whatever the tail cache holds (for tests)."""
        if not self.start_offset <= start_offset < self.end_offset:
            return []
        return self._read_entries(*self._select(start_offset, max_bytes))

    def _read_entries(self, first: int, end: int) -> list[Batch]:
        """Batches `first` to `end` (exclusive) of the index, read from their segments."""
        chosen = self._entries[first:end]
        out: list[Batch] = []
        index = 0
        while index < len(chosen):  # one pread per run of batches in the same segment
            segment, start = chosen[index].segment, chosen[index].position
            run_end = index
            while run_end < len(chosen) and chosen[run_end].segment is segment:
                run_end += 1
            last = chosen[run_end - 1]
            data = os.pread(segment.fd, last.position + last.size - start, start)
            try:
                out.extend(s.batch for s in iter_batches(data, os.fspath(segment.path)))
            except CorruptBatchError as exc:
                raise LogCorruptionError(segment.path, start + exc.position, exc.reason) from None
            index = run_end
        return out

    def truncate_to(self, offset: int) -> None:
        self._check_usable()
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise ValueError(f"cannot truncate to {offset}, before the log start")
        self._forget_tail()  # rare: the head of a cut batch is read from its segment
        index = bisect.bisect_right(self._bases, offset) - 1
        self._remove_segments_after(self._entries[index].segment)
        if self._bases[index] < offset:
            self._cut_batch(index, offset)
        else:
            self._cut_at_boundary(index, offset)
        # Segments before the cut one were synced when their successor was created.
        self._dirty_fds.clear()
        self._flushed_end = self.end_offset
        self._generation += 1

    def _remove_segments_after(self, keep: _Segment) -> None:
        """Unlink the segments after `keep`, last first. The directory is synced before
        `keep` changes, so a crash never leaves a segment after a shortened one (which
        recovery would rightly call a gap)."""
        while self._segments[-1] is not keep:
            gone = self._segments[-1]
            os.unlink(gone.path)
            self._dirty_dir = True
            self._segments.pop()
            self._dirty_fds.discard(gone.fd)
            os.close(gone.fd)
            self._forget_from(bisect.bisect_left(self._bases, gone.base_offset),
                              gone.base_offset)

    def _cut_at_boundary(self, index: int, offset: int) -> None:
        """Truncate where batch `index` starts: shorten its segment there and sync it."""
        cut = self._entries[index]
        self._sync_dir()  # later segments removed, and this one's name durable
        try:
            os.ftruncate(cut.segment.fd, cut.position)
            os.fsync(cut.segment.fd)
        except OSError as exc:
            self._failure = exc  # the file may be shorter than the index says
            raise
        cut.segment.size = cut.position
        self._forget_from(index, offset)

    def _cut_batch(self, index: int, offset: int) -> None:
        """Truncate inside batch `index`, its head (the records below `offset`) durable at
        every instant. The head goes to a new swap file, synced; then either
        - the batch starts its segment: the swap replaces that segment (one rename), or
        - the segment is shortened to end before the batch and synced, and the swap is
          renamed into the next segment, starting at the batch's base offset.
        Until the segment changes, a crash leaves it whole and recovery drops the swap;
        after, recovery finds the swap (or the segment it became) at the log end and keeps
        it. Only the head is copied: segments are large."""
        cut = self._entries[index]
        whole = self.read(self._bases[index], 0)[0]
        head = whole.records_between(whole.base_offset, offset)
        data = encode_batch(head)
        swap = _swap_path(self.directory, head.base_offset)
        fd = os.open(swap, os.O_RDWR | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)  # a swap a crash left, made by an older version
            _write_all(fd, data, 0)
            os.fsync(fd)
        except OSError as exc:  # e.g. a full disk: the log is left as it was
            os.close(fd)
            self._remove_failed_swap(swap, exc)
            raise
        path = self.directory / segment_name(head.base_offset)
        try:
            if cut.position == 0:
                self._sync_dir()  # later segments stay removed once this one is replaced
                os.replace(swap, path)
            else:
                fsync_dir(self.directory)  # the swap's name must outlive the cut too
                os.ftruncate(cut.segment.fd, cut.position)
                os.fsync(cut.segment.fd)
                os.rename(swap, path)
            fsync_dir(self.directory)
        except OSError as exc:
            os.close(fd)
            self._failure = exc  # old or new log on disk, the index cannot tell which
            raise
        self._dirty_dir = False
        if cut.position == 0:
            replaced = self._segments.pop()
            self._dirty_fds.discard(replaced.fd)
            os.close(replaced.fd)
        else:
            cut.segment.size = cut.position
        self._forget_from(index, offset)
        segment = _Segment(head.base_offset, path, fd, len(data))
        self._segments.append(segment)
        self._index(segment, 0, len(data), head)

    def advance_start(self, offset: int) -> None:
        """Start the log at `offset` (a snapshot's end offset): the start file first, then
        the segments wholly below it are deleted, oldest first. A crash in between leaves
        segments that recovery deletes."""
        self._check_usable()
        self._forget_tail()  # rare: simpler than trimming it to the entries that stay
        self._check_new_start(offset)
        epoch = self._start_epoch_at(offset)
        write_log_start(self.directory, offset, epoch)
        self._start_offset, self._start_epoch = offset, epoch
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            gone = self._segments.pop(0)
            self._dirty_fds.discard(gone.fd)
            os.close(gone.fd)
            os.unlink(gone.path)
            self._dirty_dir = True
        self._sync_dir()
        self._flushed_end = max(self._flushed_end, offset)  # the snapshot is durable
        dropped = bisect.bisect_left([e.next_offset for e in self._entries], offset + 1)
        del self._entries[:dropped]
        del self._bases[:dropped]
        if self._entries:
            self._epochs.truncate_from_start(offset)
        else:  # the start is the end: no epoch holds a record (the snapshot's: start_epoch)
            self._epochs = EpochCache()

    def reset_to(self, offset: int, epoch: int) -> None:
        """Drop the whole log, durably: it restarts empty at `offset`, after `epoch`. The
        segments go first, newest first, and the directory is synced; then the start
        file, then the new empty segment. A crash leaves a prefix of the old log at its
        old start, or the empty log at the new one (the snapshot past its end is loaded
        again at the next start, `tools/server/build.py`). The start file first would let
        a crash leave old records above the new start, after a snapshot they diverge from."""
        self._check_usable()
        self._forget_tail()
        while self._segments:
            gone = self._segments.pop()
            self._dirty_fds.discard(gone.fd)
            os.close(gone.fd)
            os.unlink(gone.path)
        fsync_dir(self.directory)
        write_log_start(self.directory, offset, epoch)
        self._entries, self._bases, self._epochs = [], [], EpochCache()
        self._start_offset, self._start_epoch = offset, epoch
        self._open_segment(self.directory / segment_name(offset), create=True)
        self._dirty_dir = True
        self._sync_dir()
        self._flushed_end = offset
        self._generation += 1

    def _remove_failed_swap(self, swap: Path, error: OSError) -> None:
        """Remove, durably, the swap of a cut that failed before the segment changed: one
        that came back after a crash could match the log end by then."""
        try:
            os.unlink(swap)
            self._dirty_dir = True
            self._sync_dir()
        except OSError:
            self._failure = error

    def flush(self) -> None:
        self._check_usable()
        for fd in sorted(self._dirty_fds):
            os.fsync(fd)
        self._dirty_fds.clear()
        self._sync_dir()
        self._flushed_end = self.end_offset

    def begin_flush(self) -> SegmentSync:
        self._check_usable()
        self._sync_dir()  # rare (a segment was created or removed): not worth a thread
        fds: list[int] = []
        try:
            for fd in sorted(self._dirty_fds):
                fds.append(os.dup(fd))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        self._dirty_fds.clear()
        return SegmentSync(self.end_offset, self._generation, fds)

    def finish_flush(self, sync: LogSync) -> None:
        if sync.generation == self._generation:
            self._flushed_end = max(self._flushed_end, sync.end_offset)
