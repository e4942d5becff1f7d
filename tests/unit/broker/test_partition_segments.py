"""broker.kafka.partitions.segments and the segmented PartitionLog: rolls at
segment.bytes and segment.ms, reads, truncation and recovery across segment files named
as Kafka's, and a log written as one file before segments still opens."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.partitions.partition_log import LOG_FILE, PartitionLog, split_batches
from broker.kafka.partitions.segments import (
    NO_TIMESTAMP,
    RollLimits,
    segment_bases,
    segment_for,
    segment_name,
    should_roll,
)
from tests.support.kafka_support import record_batch, two_batch_segments

TWO_BATCHES = two_batch_segments()


def _values(log: PartitionLog) -> list[bytes]:
    """Every batch of the log, read fetch by fetch (one segment per read, as Kafka's)."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        batches = split_batches(log.read(offset, 1 << 20, log.log_end_offset))
        out.extend(batches)
        offset = int.from_bytes(batches[-1][:8], "big") + 1
    return out


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=30, unique=True),
       st.integers(0, 2 * 10**6))
def test_segment_for_is_the_last_base_at_or_below_the_offset(bases: list[int],
                                                             offset: int) -> None:
    """Model: a linear scan for the last base <= offset (the first segment otherwise)."""
    bases.sort()
    expected = max([i for i, base in enumerate(bases) if base <= offset], default=0)
    assert segment_for(bases, offset) == expected


@given(used=st.integers(0, 1000), append=st.integers(1, 1000),
       first=st.one_of(st.just(NO_TIMESTAMP), st.integers(0, 10**6)),
       now=st.integers(0, 2 * 10**6), size_limit=st.integers(14, 2000),
       age_limit=st.integers(1, 10**6), relative=st.integers(0, 2**32))
def test_should_roll_matches_the_size_age_and_offset_rule(used: int, append: int,
                                                          first: int, now: int,
                                                          size_limit: int, age_limit: int,
                                                          relative: int) -> None:
    """Model: a non-empty active segment rolls when the append would pass segment.bytes,
    its first write is segment.ms old or its last offset is past an int32 from the
    segment's base; an empty one never."""
    limits = RollLimits(segment_bytes=size_limit, segment_ms=age_limit)
    expected = used > 0 and (used + append > size_limit
                             or (first >= 0 and now - first >= age_limit)
                             or relative > 2**31 - 1)
    assert should_roll(segment_bytes_used=used, append_bytes=append, first_write_ms=first,
                       now_ms=now, limits=limits, relative_last_offset=relative) == expected


def test_segment_bases_ignore_other_files() -> None:
    names = [segment_name(40), "partition.metadata", segment_name(0),
             "00000000000000000040.producer-snapshot", "7.log"]
    assert segment_bases(names) == [0, 40]


def test_log_rolls_at_segment_bytes_and_reads_across_segments(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, TWO_BATCHES)
    for n in range(5):
        log.append([record_batch([f"v{n}".encode()])], leader_epoch=0)
    assert log.segment_bases == [0, 2, 4]
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [
        segment_name(0), segment_name(2), segment_name(4)]
    assert len(_values(log)) == 5
    assert b"v3" in log.read(3, 1 << 20, upper_offset=5)
    assert log.offset_for_timestamp(0) == (0, 1000, 0)


def test_log_rolls_when_the_active_segment_is_segment_ms_old(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, RollLimits(segment_ms=1))
    log.append([record_batch([b"a"])], leader_epoch=0)
    written = time.time()
    while time.time() - written < 0.002:  # the segment's age passes segment.ms
        pass
    log.append([record_batch([b"b"])], leader_epoch=0)
    assert log.segment_bases == [0, 1]


def test_reopened_log_has_its_segments_and_keeps_appending(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, TWO_BATCHES)
    for n in range(3):
        log.append([record_batch([f"v{n}".encode()])], leader_epoch=n)
    log.close()
    reopened = PartitionLog(tmp_path, TWO_BATCHES)
    assert (reopened.segment_bases, reopened.log_end_offset) == ([0, 2], 3)
    assert reopened.end_offset_for_epoch(1) == (1, 2)
    reopened.append([record_batch([b"v3"])], leader_epoch=3)
    assert reopened.segment_bases == [0, 2]
    assert len(_values(reopened)) == 4


def test_truncation_below_a_segment_deletes_it_and_appends_after(tmp_path: Path) -> None:
    """A follower's truncation to an offset in an older segment: the later segment files
    go, the one holding the new end is cut, and appends continue in it."""
    log = PartitionLog(tmp_path, TWO_BATCHES)
    for n in range(5):
        log.append([record_batch([f"v{n}".encode()])], leader_epoch=0)
    log.truncate_to(1)
    assert (log.segment_bases, log.log_end_offset) == ([0], 1)
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [segment_name(0)]
    log.append([record_batch([b"w1"])], leader_epoch=1)
    assert (log.segment_bases, log.log_end_offset) == ([0], 2)
    assert b"w1" in _values(PartitionLog(tmp_path, TWO_BATCHES))[1]


def test_torn_middle_segment_is_cut_and_later_segments_dropped(tmp_path: Path) -> None:
    """A crash can only tear the active segment; a torn older one (a damaged disk) is cut
    at its last whole batch and the segments after it, which would follow a gap, go."""
    log = PartitionLog(tmp_path, TWO_BATCHES)
    for n in range(5):
        log.append([record_batch([f"v{n}".encode()])], leader_epoch=0)
    log.close()
    middle = tmp_path / segment_name(2)
    os.truncate(middle, middle.stat().st_size - 3)
    reopened = PartitionLog(tmp_path, TWO_BATCHES)
    assert (reopened.segment_bases, reopened.log_end_offset) == ([0, 2], 3)
    assert not (tmp_path / segment_name(4)).exists()


def test_single_file_log_from_before_segments_opens_as_its_first_segment(
        tmp_path: Path) -> None:
    """A log written as one file: the same name as Kafka's first segment, read as is,
    and it rolls once past segment.bytes."""
    old = PartitionLog(tmp_path)
    for n in range(3):
        old.append([record_batch([f"v{n}".encode()])], leader_epoch=0)
    old.close()
    assert [p.name for p in tmp_path.glob("*.log")] == [LOG_FILE]
    log = PartitionLog(tmp_path, TWO_BATCHES)
    assert (log.segment_bases, log.log_end_offset) == ([0], 3)
    log.append([record_batch([b"v3"])], leader_epoch=0)
    assert log.segment_bases == [0, 3]
    assert len(_values(log)) == 4
