"""The simulated partition log: records as (leader epoch, value) at consecutive offsets
from 0, with the epoch lookup the rules ask of a real log (`PartitionLog`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.dataplane.divergence import end_offset_for_epoch

Entry = tuple[int, int]  # (leader epoch, value)


@dataclass(slots=True)
class SimLog:
    entries: list[Entry] = field(default_factory=list)
    # (epoch, first offset) for each epoch in the log, in order
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)

    @property
    def log_end_offset(self) -> int:
        return len(self.entries)

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def last_epoch(self) -> int:
        return self.epoch_starts[-1][0] if self.epoch_starts else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return end_offset_for_epoch(self.epoch_starts, len(self.entries), epoch)

    def append(self, entries: list[Entry]) -> None:
        for epoch, value in entries:
            assert epoch >= self.last_epoch, "epochs never go back in a log"
            if epoch != self.last_epoch:
                self.epoch_starts.append((epoch, len(self.entries)))
            self.entries.append((epoch, value))

    def truncate_to(self, offset: int) -> int:
        """Drop every record at or above `offset`; how many were dropped."""
        dropped = max(0, len(self.entries) - offset)
        del self.entries[offset:]
        while self.epoch_starts and self.epoch_starts[-1][1] >= len(self.entries):
            self.epoch_starts.pop()
        return dropped
