"""Kafka's per-segment indexes of a partition log (pure: layout, building, lookups, checks).

Next to each segment `<base>.log` lie `<base>.index` and `<base>.timeindex`, laid out as
Kafka's, big-endian: the offset index holds 8-byte entries (offset - base: int32, the
byte position of a batch in the segment: int32), the time index 12-byte entries
(timestamp: int64, offset - base: int32). As Kafka's `LogSegment.append`, before a batch
is written, when more than `index.interval.bytes` were written since the last entry (so
never for a segment's first batch), the offset index gets (the batch's last offset, its
position) and the time index gets (the largest timestamp so far, the last offset of the
first batch that reached it) when that timestamp is larger than its last entry's.
Entries therefore strictly increase in offset (and the time index's in timestamp), and
an index is a function of its segment's batches: the index of a prefix of them is a
prefix of the index, so a truncation only cuts the files.

Lookups: the floor entry of an offset is a position at or before the batch holding it,
from which a scan reaches that batch; the first time entry whose timestamp is >= T is
where the first record with a timestamp >= T lies at the latest, and every record up to
the entry before it is older than T, so a scan for T starts at that entry's offset.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from broker.kafka.partitions.segments import INDEX_INTERVAL_BYTES, NO_TIMESTAMP

OFFSET_INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


class IndexDamage(ValueError):
    """An index file that cannot describe its segment (the message says why)."""


@dataclass(slots=True, kw_only=True)
class SegmentIndex:
    """Both indexes of the segment starting at `base_offset`, as entries with absolute
    offsets, and what the next entry depends on."""
    base_offset: int
    interval_bytes: int = INDEX_INTERVAL_BYTES
    offsets: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    time_offsets: list[int] = field(default_factory=list)
    bytes_since_entry: int = 0
    max_timestamp: int = NO_TIMESTAMP  # of every batch added
    offset_of_max_timestamp: int = -1

    def add(self, *, last_offset: int, position: int, size: int,
            max_timestamp: int) -> tuple[bytes, bytes]:
        """Account for one batch appended at `position`; the bytes its entries add to the
        offset index and the time index files (often none)."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, last_offset
        offset_entry = time_entry = b""
        if self.bytes_since_entry > self.interval_bytes:
            self.offsets.append(last_offset)
            self.positions.append(position)
            offset_entry = OFFSET_ENTRY.pack(last_offset - self.base_offset, position)
            last_time = self.timestamps[-1] if self.timestamps else NO_TIMESTAMP
            if self.max_timestamp > last_time:
                self.timestamps.append(self.max_timestamp)
                self.time_offsets.append(self.offset_of_max_timestamp)
                time_entry = TIME_ENTRY.pack(self.max_timestamp,
                                             self.offset_of_max_timestamp - self.base_offset)
            self.bytes_since_entry = 0
        self.bytes_since_entry += size
        return offset_entry, time_entry

    def offset_index_bytes(self) -> bytes:
        return b"".join(OFFSET_ENTRY.pack(offset - self.base_offset, position)
                        for offset, position in zip(self.offsets, self.positions,
                                                    strict=True))

    def time_index_bytes(self) -> bytes:
        return b"".join(TIME_ENTRY.pack(timestamp, offset - self.base_offset)
                        for timestamp, offset in zip(self.timestamps, self.time_offsets,
                                                     strict=True))

    def position_for(self, offset: int) -> int:
        """The floor entry's position for `offset` (0 below every entry): the batch
        holding `offset` starts there or after."""
        at = bisect.bisect_right(self.offsets, offset)
        return self.positions[at - 1] if at else 0

    def entry_at_or_below(self, position: int) -> int:
        """The largest entry position at or below `position` (0 when none): where a
        batch starts, from which a scan finds the last batch ending by `position`."""
        at = bisect.bisect_right(self.positions, position)
        return self.positions[at - 1] if at else 0

    def time_scan_start(self, timestamp: int) -> int:
        """The offset from which a scan finds the first record whose timestamp is >=
        `timestamp`: the offset of the entry before the first entry reaching it (every
        record up to that offset is older), the base offset when there is none."""
        at = bisect.bisect_left(self.timestamps, timestamp)
        return self.time_offsets[at - 1] if at else self.base_offset


class StoredBatch(Protocol):
    """What the indexes need of one stored batch."""

    @property
    def last_offset(self) -> int: ...

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def max_timestamp(self) -> int: ...


def build(base_offset: int, batches: Iterable[StoredBatch],
          interval_bytes: int = INDEX_INTERVAL_BYTES) -> SegmentIndex:
    """The indexes of a segment holding `batches`, in order."""
    index = SegmentIndex(base_offset=base_offset, interval_bytes=interval_bytes)
    for batch in batches:
        index.add(last_offset=batch.last_offset, position=batch.position, size=batch.size,
                  max_timestamp=batch.max_timestamp)
    return index


def decode_offset_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(offset, position) entries of an offset index file."""
    if len(data) % OFFSET_ENTRY.size:
        raise IndexDamage(f"size {len(data)} is not a multiple of {OFFSET_ENTRY.size}")
    return [(base_offset + relative, position)
            for relative, position in OFFSET_ENTRY.iter_unpack(data)]


def decode_time_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """(timestamp, offset) entries of a time index file."""
    if len(data) % TIME_ENTRY.size:
        raise IndexDamage(f"size {len(data)} is not a multiple of {TIME_ENTRY.size}")
    return [(timestamp, base_offset + relative)
            for timestamp, relative in TIME_ENTRY.iter_unpack(data)]


def offset_index_damage(entries: list[tuple[int, int]], *, base_offset: int,
                        end_offset: int, size: int) -> str | None:
    """Why (offset, position) entries cannot index a segment of offsets [base, end)
    and `size` bytes; None when they can."""
    for (offset, position), (next_offset, next_position) in itertools.pairwise(entries):
        if next_offset <= offset or next_position <= position:
            return "entries out of order"
    if any(not base_offset <= offset < end_offset or not 0 <= position < size
           for offset, position in entries):
        return "an entry past the segment's end"
    return None


def time_index_damage(entries: list[tuple[int, int]], *, base_offset: int,
                      end_offset: int) -> str | None:
    """Why (timestamp, offset) entries cannot index a segment of offsets [base, end);
    None when they can."""
    for (timestamp, offset), (next_timestamp, next_offset) in itertools.pairwise(entries):
        if next_timestamp <= timestamp or next_offset < offset:
            return "entries out of order"
    if any(not base_offset <= offset < end_offset for _, offset in entries):
        return "an entry past the segment's end"
    return None


def offset_index_problem(data: bytes | None, expected: SegmentIndex, *, end_offset: int,
                         size: int) -> str | None:
    """Why an offset index file's bytes (None: no file) are not the index `expected`
    of its segment (offsets [base, end), `size` bytes); None when they are."""
    base = expected.base_offset
    return _file_problem(
        data, lambda raw: decode_offset_index(raw, base),
        lambda entries: offset_index_damage(entries, base_offset=base, end_offset=end_offset,
                                            size=size),
        list(zip(expected.offsets, expected.positions, strict=True)))


def time_index_problem(data: bytes | None, expected: SegmentIndex, *,
                       end_offset: int) -> str | None:
    """Why a time index file's bytes (None: no file) are not the index `expected` of its
    segment (offsets [base, end)); None when they are."""
    base = expected.base_offset
    return _file_problem(
        data, lambda raw: decode_time_index(raw, base),
        lambda entries: time_index_damage(entries, base_offset=base, end_offset=end_offset),
        list(zip(expected.timestamps, expected.time_offsets, strict=True)))


def _file_problem(data: bytes | None, decode: Callable[[bytes], list[tuple[int, int]]],
                  damage: Callable[[list[tuple[int, int]]], str | None],
                  expected: list[tuple[int, int]]) -> str | None:
    if data is None:
        return "missing"
    try:
        entries = decode(data)
    except IndexDamage as exc:
        return str(exc)
    if reason := damage(entries):
        return reason
    if entries == expected:
        return None
    if entries == expected[:len(entries)]:
        return f"{len(expected) - len(entries)} entries missing"
    return "entries disagree with the segment"
