"""broker.kafka.partitions.segment_index against a scan of a model segment: for any run
of appends and truncations, a lookup through the index then a scan from the position it
gives finds the batch a scan from the segment's start finds (by offset, by timestamp,
and the last one ending by a position); the files as appended equal the files written
whole, decode to the entries and pass the damage checks; a truncated segment's index is
a prefix of its index."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.partitions.segment_index import (
    SegmentIndex,
    build,
    decode_offset_index,
    decode_time_index,
    offset_index_damage,
    offset_index_problem,
    time_index_damage,
    time_index_problem,
)
from broker.kafka.partitions.segments import NO_TIMESTAMP

BASE = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexedBatch:
    last_offset: int
    position: int
    size: int
    max_timestamp: int


@dataclass(slots=True)
class ModelSegment:
    batches: list[IndexedBatch]
    offset_file: bytes = b""
    time_file: bytes = b""

    @property
    def end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else BASE

    @property
    def size(self) -> int:
        return self.batches[-1].position + self.batches[-1].size if self.batches else 0


def scan_for_offset(batches: list[IndexedBatch], position: int, offset: int) -> int | None:
    """The position of the first batch at or after `position` holding an offset >= `offset`."""
    starts = [batch.position for batch in batches]
    assert position == 0 or position in starts  # an entry points at a batch's start
    return next((batch.position for batch in batches
                 if batch.position >= position and batch.last_offset >= offset), None)


def scan_for_time(batches: list[IndexedBatch], position: int, timestamp: int) -> int | None:
    return next((batch.position for batch in batches
                 if batch.position >= position and batch.max_timestamp >= timestamp), None)


def last_end_within(batches: list[IndexedBatch], position: int, limit: int) -> int:
    """Where the last batch from `position` ending by `limit` ends (`position` if none)."""
    ends = [batch.position + batch.size for batch in batches
            if batch.position >= position and batch.position + batch.size <= limit]
    return max(ends, default=position)


APPEND = st.tuples(st.just("append"), st.lists(
    st.tuples(st.integers(1, 5), st.integers(70, 1500),
              st.one_of(st.just(NO_TIMESTAMP), st.integers(0, 5000))),
    min_size=1, max_size=8))
TRUNCATE = st.tuples(st.just("truncate"), st.integers(0, 400))


@given(st.lists(st.one_of(APPEND, TRUNCATE), min_size=1, max_size=25),
       st.integers(100, 3000), st.lists(st.integers(-10, 5010), min_size=1, max_size=15))
def test_lookup_then_scan_equals_a_scan_from_the_start(
        operations: list[tuple[str, object]], interval: int, timestamps: list[int]) -> None:
    segment = ModelSegment(batches=[])
    index = SegmentIndex(base_offset=BASE, interval_bytes=interval)
    for kind, argument in operations:
        if kind == "append":
            assert isinstance(argument, list)
            for count, size, max_timestamp in argument:
                batch = IndexedBatch(last_offset=segment.end_offset + count - 1,
                                     position=segment.size, size=size,
                                     max_timestamp=max_timestamp)
                segment.batches.append(batch)
                offset_entry, time_entry = index.add(
                    last_offset=batch.last_offset, position=batch.position, size=batch.size,
                    max_timestamp=batch.max_timestamp)
                segment.offset_file += offset_entry
                segment.time_file += time_entry
        else:
            assert isinstance(argument, int)
            cut = BASE + argument
            segment.batches = [b for b in segment.batches if b.last_offset < cut]
            truncated = build(BASE, segment.batches, interval)
            assert truncated.offsets == index.offsets[:len(truncated.offsets)]
            assert truncated.timestamps == index.timestamps[:len(truncated.timestamps)]
            index = truncated
            segment.offset_file = segment.offset_file[:len(index.offset_index_bytes())]
            segment.time_file = segment.time_file[:len(index.time_index_bytes())]
        assert segment.offset_file == index.offset_index_bytes()
        assert segment.time_file == index.time_index_bytes()
    end, size = segment.end_offset, segment.size
    offset_entries = decode_offset_index(segment.offset_file, BASE)
    time_entries = decode_time_index(segment.time_file, BASE)
    assert offset_entries == list(zip(index.offsets, index.positions, strict=True))
    assert time_entries == list(zip(index.timestamps, index.time_offsets, strict=True))
    assert offset_index_damage(offset_entries, base_offset=BASE, end_offset=end,
                               size=size) is None
    assert time_index_damage(time_entries, base_offset=BASE, end_offset=end) is None
    assert offset_index_problem(segment.offset_file, index, end_offset=end, size=size) is None
    assert time_index_problem(segment.time_file, index, end_offset=end) is None
    assert index == build(BASE, segment.batches, interval)
    for offset in range(BASE, end + 2):
        assert scan_for_offset(segment.batches, index.position_for(offset), offset) == \
            scan_for_offset(segment.batches, 0, offset)
    for limit in range(0, size + 1, 37):
        start = index.entry_at_or_below(limit)
        assert last_end_within(segment.batches, start, limit) == \
            last_end_within(segment.batches, 0, limit)
    for timestamp in timestamps:
        start = index.time_scan_start(timestamp)
        assert scan_for_time(segment.batches, index.position_for(start), timestamp) == \
            scan_for_time(segment.batches, 0, timestamp)


def _index_of(sizes: list[int], interval: int = 100) -> tuple[SegmentIndex, int, int]:
    batches, position = [], 0
    for number, size in enumerate(sizes):
        batches.append(IndexedBatch(last_offset=BASE + number, position=position, size=size,
                                    max_timestamp=number * 10))
        position += size
    return build(BASE, batches, interval), BASE + len(sizes), position


def test_each_damage_kind_is_named() -> None:
    index, end, size = _index_of([150] * 10)
    good = index.offset_index_bytes()
    assert len(index.offsets) >= 3
    assert offset_index_problem(None, index, end_offset=end, size=size) == "missing"
    assert offset_index_problem(good[:-3], index, end_offset=end, size=size) == \
        f"size {len(good) - 3} is not a multiple of 8"
    assert offset_index_problem(good[:-8], index, end_offset=end, size=size) == \
        "1 entries missing"
    swapped = good[8:16] + good[:8] + good[16:]
    assert offset_index_problem(swapped, index, end_offset=end, size=size) == \
        "entries out of order"
    assert offset_index_problem(good, index, end_offset=end, size=1000) == \
        "an entry past the segment's end"
    times = index.time_index_bytes()
    assert time_index_problem(times[:-1], index, end_offset=end) == \
        f"size {len(times) - 1} is not a multiple of 12"
    assert time_index_problem(times[12:24] + times[:12] + times[24:], index,
                              end_offset=end) == "entries out of order"
    assert time_index_problem(times, index, end_offset=end - 5) == \
        "an entry past the segment's end"
    other, _, _ = _index_of([150, 160] * 5)
    assert offset_index_problem(other.offset_index_bytes(), index, end_offset=end,
                                size=size) == "entries disagree with the segment"
