"""Retention and the log start of a partition log: broker.kafka.partitions.segments'
retention decision against a simple model, and PartitionLog.advance_log_start /
reset_to on real files."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.partitions.partition_log import PartitionLog, split_batches
from broker.kafka.partitions.segments import (
    NO_TIMESTAMP,
    Retention,
    SegmentStat,
    retention_start,
    segment_name,
)
from tests.support.kafka_support import record_batch, two_batch_segments

TWO_BATCHES = two_batch_segments()


@st.composite
def _segments(draw: st.DrawFn) -> list[SegmentStat]:
    sizes = draw(st.lists(st.integers(0, 100), min_size=1, max_size=8))
    out, base = [], 0
    for size in sizes:
        count = draw(st.integers(0, 5))
        out.append(SegmentStat(base_offset=base, end_offset=base + count, size=size,
                               max_timestamp=draw(st.one_of(st.just(NO_TIMESTAMP),
                                                            st.integers(0, 1000)))))
        base += count
    return out


def _model(segments: list[SegmentStat], log_start: int, high_watermark: int, now: int,
           retention: Retention) -> int:
    """Delete the oldest segment while one rule allows it, one at a time; the last one
    too, unless it is empty."""
    kept = list(segments)
    while kept and kept[0].end_offset <= high_watermark and \
            not (len(kept) == 1 and kept[0].size == 0):
        oldest = kept[0]
        expired = retention.retention_ms >= 0 and oldest.max_timestamp >= 0 and \
            now - oldest.max_timestamp > retention.retention_ms
        rest = sum(s.size for s in kept[1:])
        if not (expired or (retention.retention_bytes >= 0
                            and rest >= retention.retention_bytes)):
            break
        kept.pop(0)
        log_start = max(log_start, oldest.end_offset)
    return log_start


@given(_segments(), st.integers(0, 50), st.integers(0, 2000), st.integers(-1, 1000),
       st.integers(-1, 400), st.integers(0, 10))
def test_retention_start_matches_deleting_the_oldest_segment_one_at_a_time(
        segments: list[SegmentStat], high_watermark: int, now: int, retention_ms: int,
        retention_bytes: int, start_in_first: int) -> None:
    log_start = min(start_in_first, segments[0].end_offset)
    retention = Retention(retention_ms=retention_ms, retention_bytes=retention_bytes)
    found = retention_start(segments, log_start=log_start, high_watermark=high_watermark,
                            now_ms=now, retention=retention)
    assert found == _model(segments, log_start, high_watermark, now, retention)
    assert found >= log_start
    assert found <= max(log_start, segments[-1].end_offset)
    assert found <= max(log_start, high_watermark)


def _log(tmp_path: Path, batches: int) -> PartitionLog:
    log = PartitionLog(tmp_path, TWO_BATCHES)
    for n in range(batches):
        log.append([record_batch([f"v{n}".encode()], base_timestamp=1000 * n)], 0)
    return log


def test_advance_log_start_deletes_whole_segments_below_it(tmp_path: Path) -> None:
    log = _log(tmp_path, 5)  # segments at 0, 2, 4
    assert log.advance_log_start(3)
    assert (log.log_start_offset, log.segment_bases) == (3, [2, 4])
    assert not (tmp_path / segment_name(0)).exists()
    assert not log.advance_log_start(2)  # never back
    assert log.offset_for_timestamp(0) == (3, 3000, 0)  # not offset 2, below the start
    assert b"v4" in log.read(4, 1 << 20, upper_offset=5)
    assert log.advance_log_start(99)  # never past the log end, never the active segment
    assert (log.log_start_offset, log.segment_bases) == (5, [4])


def test_reopened_log_starts_at_its_checkpointed_start_inside_the_first_segment(
        tmp_path: Path) -> None:
    log = _log(tmp_path, 5)
    log.advance_log_start(3)
    log.close()
    assert PartitionLog(tmp_path, TWO_BATCHES, log_start=3).log_start_offset == 3
    assert PartitionLog(tmp_path, TWO_BATCHES).log_start_offset == 2  # its first segment
    # a start outside the log is another log's (a recreated topic of the same name)
    assert PartitionLog(tmp_path, TWO_BATCHES, log_start=9).log_start_offset == 2


def test_retention_of_the_log_stats_empties_a_wholly_expired_log(tmp_path: Path) -> None:
    log = _log(tmp_path, 5)
    stats = log.segment_stats()
    assert [(s.base_offset, s.end_offset, s.max_timestamp) for s in stats] == [
        (0, 2, 1000), (2, 4, 3000), (4, 5, 4000)]
    expired = Retention(retention_ms=1)
    # the active segment's record is not committed yet: it stays
    assert retention_start(stats, log_start=0, high_watermark=4, now_ms=10_000,
                           retention=expired) == 4
    # every record committed and expired: the log start reaches the log end (Kafka rolls
    # and deletes the active segment too), which empties a marked partition
    assert retention_start(stats, log_start=0, high_watermark=5, now_ms=10_000,
                           retention=expired) == 5
    assert retention_start(stats, log_start=0, high_watermark=5, now_ms=4_500,
                           retention=Retention(retention_ms=1000)) == 4
    assert log.advance_log_start(5)
    assert (log.log_start_offset, log.log_end_offset, log.segment_bases) == (5, 5, [4])
    log.append([record_batch([b"v5"], base_timestamp=5000)], 0)
    assert b"v5" in log.read(5, 1 << 20, upper_offset=6)


def test_follower_reset_starts_an_empty_log_at_the_leader_start(tmp_path: Path) -> None:
    log = _log(tmp_path, 3)
    log.reset_to(10)
    assert (log.log_start_offset, log.log_end_offset, log.segment_bases) == (10, 10, [10])
    log.append_replicated(split_batches(_renumbered(10)))
    reopened = PartitionLog(tmp_path, TWO_BATCHES)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (10, 11)
    assert sorted(p.name for p in tmp_path.glob("*.log")) == [segment_name(10)]


def _renumbered(base: int) -> bytes:
    batch = bytearray(record_batch([b"x"]))
    batch[:8] = base.to_bytes(8, "big")
    return bytes(batch)


def test_list_offsets_by_timestamp_never_answers_below_the_log_start(tmp_path: Path) -> None:
    """DeleteRecords to the middle of a batch: the records below the start stay in the
    segment file, but a search by timestamp skips them."""
    log = PartitionLog(tmp_path)
    log.append([record_batch([b"a", b"b", b"c"], timestamps=[100, 200, 300])], 0)
    log.append([record_batch([b"d"], base_timestamp=400)], 0)
    log.advance_log_start(2)
    assert log.offset_for_timestamp(0) == (2, 300, 0)
    assert log.offset_for_timestamp(350) == (3, 400, 0)
    assert log.offset_for_timestamp(401) is None
