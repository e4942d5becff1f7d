"""The replicated log: the epoch cache, an in-memory log for the simulator and the on-disk
log of segment files (format in `raft.segment`).

Both logs implement `raft.types.RaftLog` with the same observable behaviour, including
`flushed_end_offset`: the end of the prefix that is durable *and* still in the log. A
truncation that cuts a batch in two rewrites that batch, so its base offset becomes the
durable end until the next flush.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Sequence

from sortedcontainers import SortedDict

from raft.types import NO_EPOCH, NO_OFFSET, Batch

METADATA_PARTITION_DIR = "__cluster_metadata-0"
DEFAULT_SEGMENT_BYTES = 1 << 30  # Kafka's log.segment.bytes


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
        for epoch, start_offset in entries:
            self.assign(epoch, start_offset)

    def __len__(self) -> int:
        return len(self._starts)

    def entries(self) -> list[tuple[int, int]]:
        return list(self._starts.items())

    @property
    def latest_epoch(self) -> int:
        return int(self._starts.peekitem(-1)[0]) if self._starts else NO_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; a no-op for the latest epoch."""
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

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget what lies before `start_offset` (after a snapshot); the epoch holding it
        now starts there."""
        holder = self.epoch_at(start_offset)
        while self._starts and self._starts.peekitem(0)[1] < start_offset:
            self._starts.popitem(0)
        if holder != NO_EPOCH:
            self._starts[holder] = start_offset


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


def _select_for_read(sizes: Sequence[int], first: int, max_bytes: int) -> int:
    """Index past the last batch to return: one at least, then more while within budget."""
    index, total = first + 1, sizes[first]
    while index < len(sizes) and total + sizes[index] <= max_bytes:
        total += sizes[index]
        index += 1
    return index


class MemoryLog:
    """`RaftLog` in memory, modelling a disk: writes are volatile until `flush()`, and
    `crash()` brings back the last flushed state (unflushed appends and truncations are
    undone). Used by the simulator and as the model for the disk log's property test."""

    def __init__(self) -> None:
        self._batches: list[Batch] = []
        self._bases: list[int] = []
        self._durable: list[Batch] = []
        self._shared = 0  # leading batches identical in _batches and _durable
        self._epochs = EpochCache()
        self.flush_count = 0

    @property
    def start_offset(self) -> int:
        return 0

    @property
    def end_offset(self) -> int:
        return self._batches[-1].next_offset if self._batches else self.start_offset

    @property
    def flushed_end_offset(self) -> int:
        return self._batches[self._shared - 1].next_offset if self._shared else self.start_offset

    @property
    def last_epoch(self) -> int:
        return self._batches[-1].epoch if self._batches else 0

    @property
    def epoch_cache(self) -> EpochCache:
        return self._epochs

    def append(self, epoch: int, records: Sequence[bytes]) -> Batch:
        batch = Batch(base_offset=self.end_offset, epoch=epoch, records=tuple(records))
        self.append_batches([batch])
        return batch

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
        sizes = _LazySizes(self._batches)
        return self._batches[first:_select_for_read(sizes, first, max_bytes)]

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
            head = Batch(base_offset=cut.base_offset, epoch=cut.epoch,
                         records=cut.records[:offset - cut.base_offset])
            self.append_batches([head])

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._epochs.end_offset_for_epoch(epoch, self.end_offset)

    def epoch_at(self, offset: int) -> int:
        if not self.start_offset <= offset < self.end_offset:
            raise ValueError(f"offset {offset} is outside the log "
                             f"[{self.start_offset}, {self.end_offset})")
        return self._epochs.epoch_at(offset)

    def flush(self) -> None:
        self._durable[self._shared:] = self._batches[self._shared:]
        self._shared = len(self._batches)
        self.flush_count += 1

    def crash(self) -> None:
        """Lose everything not flushed, as a power cut would."""
        self._batches = list(self._durable)
        self._bases = [b.base_offset for b in self._batches]
        self._shared = len(self._batches)
        self._epochs = EpochCache((b.epoch, b.base_offset) for b in self._batches)


class _LazySizes(Sequence[int]):
    """Batch sizes computed only for the batches a read looks at."""

    def __init__(self, batches: Sequence[Batch]) -> None:
        self._batches = batches

    def __len__(self) -> int:
        return len(self._batches)

    def __getitem__(self, index):  # type: ignore[no-untyped-def, override]
        return self._batches[index].size_bytes
