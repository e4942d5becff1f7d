"""The simulated partition log: records as (leader epoch, value) at consecutive offsets
from 0, with the epoch lookup the rules ask of a real log (`PartitionLog`)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

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
        """(largest epoch <= `epoch` in the log, where it ends), or (-1, -1)."""
        index = bisect.bisect_right(self.epoch_starts, (epoch, 1 << 62)) - 1
        if index < 0:
            return -1, -1
        found = self.epoch_starts[index][0]
        if index + 1 < len(self.epoch_starts):
            return found, self.epoch_starts[index + 1][1]
        return found, len(self.entries)

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
