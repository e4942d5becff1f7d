"""The simulated partition log: records at consecutive offsets from 0, in batches (each
one producer's, with the header `producer_state` reads), with the epoch lookup the rules
ask of a real log (`PartitionLog`) and the log's producer state, which a leader checks
produces against. As the real log's, the state follows every batch stored (`apply`, no
checks, whoever wrote it) and is rebuilt from the batches left after a truncation.
DeleteRecords moves the log start up (`delete_records`); the records below stay in
memory, for the invariants, but are no longer served."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.dataplane.divergence import end_offset_for_epoch
from broker.kafka.partitions.producer_state import BatchHeader, ProducerStates


class Record(NamedTuple):
    leader_epoch: int
    value: int  # unique to the record a producer made (a retry sends the same)
    producer_id: int  # -1: a non-idempotent producer's
    producer_epoch: int
    sequence: int  # -1: a non-idempotent producer's


Batch = tuple[BatchHeader, tuple[Record, ...]]


@dataclass(slots=True)
class SimLog:
    entries: list[Record] = field(default_factory=list)
    # (epoch, first offset) for each epoch in the log, in order
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)
    batch_starts: list[int] = field(default_factory=list)  # each batch's first offset
    headers: list[BatchHeader] = field(default_factory=list)  # each batch's header
    producers: ProducerStates = field(default_factory=ProducerStates)
    start: int = 0  # the log start offset (DeleteRecords)

    @property
    def log_end_offset(self) -> int:
        return len(self.entries)

    @property
    def log_start_offset(self) -> int:
        return self.start

    @property
    def last_epoch(self) -> int:
        return self.epoch_starts[-1][0] if self.epoch_starts else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return end_offset_for_epoch(self.epoch_starts, len(self.entries), epoch)

    def append(self, header: BatchHeader, records: tuple[Record, ...]) -> tuple[int, int]:
        """Store one batch (all of one leader epoch); its first and last offsets."""
        epoch = records[0].leader_epoch
        assert epoch >= self.last_epoch, "epochs never go back in a log"
        assert all(r.leader_epoch == epoch for r in records), "a batch has one leader epoch"
        assert header.last_offset_delta == len(records) - 1
        first = len(self.entries)
        if epoch != self.last_epoch:
            self.epoch_starts.append((epoch, first))
        self.entries.extend(records)
        self.batch_starts.append(first)
        self.headers.append(header)
        self.producers.apply(header, first)
        return first, len(self.entries) - 1

    def batches_from(self, offset: int, max_records: int) -> list[Batch]:
        """Whole batches from `offset` (a batch's first offset, or the log end) on, at
        least one, then while they fit in `max_records` (a fetch's answer)."""
        index = bisect.bisect_left(self.batch_starts, offset)
        assert offset == len(self.entries) or self.batch_starts[index] == offset, \
            f"a fetch from {offset}, inside a batch"
        batches: list[Batch] = []
        taken = 0
        for first, header in zip(self.batch_starts[index:], self.headers[index:], strict=True):
            size = header.last_offset_delta + 1
            if batches and taken + size > max_records:
                break
            batches.append((header, tuple(self.entries[first:first + size])))
            taken += size
        return batches

    def truncate_to(self, offset: int) -> int:
        """Drop every batch holding an offset at or above `offset`, as the real log does,
        and rebuild the producer state from the batches left; how many records went."""
        index = bisect.bisect_right(self.batch_starts, offset)
        if index and self.batch_starts[index - 1] + \
                self.headers[index - 1].last_offset_delta >= offset:
            index -= 1  # the batch holding `offset` goes too
        new_end = self.batch_starts[index] if index < len(self.batch_starts) \
            else len(self.entries)
        dropped = len(self.entries) - new_end
        if dropped <= 0:
            return 0
        del self.entries[new_end:], self.batch_starts[index:], self.headers[index:]
        while self.epoch_starts and self.epoch_starts[-1][1] >= len(self.entries):
            self.epoch_starts.pop()
        self.producers = self.rebuilt_producers()
        return dropped

    def delete_records(self, offset: int) -> None:
        """DeleteRecords up to `offset` (the caller keeps it at or below the high
        watermark): the log start moves there, never back."""
        self.start = max(self.start, min(offset, len(self.entries)))

    def rebuilt_producers(self) -> ProducerStates:
        """The producer state of the batches stored, as a log being opened rebuilds it."""
        states = ProducerStates()
        for first, header in zip(self.batch_starts, self.headers, strict=True):
            states.apply(header, first)
        return states
