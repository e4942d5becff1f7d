"""Log compaction's pure parts (broker.kafka.partitions.cleaner, batch_rewrite), which
topics are compacted and which keep retention, and the cleaned-segment swap's recovery
(segment_swap) on real files."""

from __future__ import annotations

import gzip
import logging
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch

from broker.kafka.partitions.batch_rewrite import (
    DELETE_HORIZON_FLAG,
    batch_records,
    cleaner_batch,
    recompressed,
    rewrite,
)
from broker.kafka.partitions.cleaner import (
    BatchPlan,
    CleanerBatch,
    CompactionSettings,
    KeyedRecord,
    clean,
    cleanable_end,
    throttle_delay,
)
from broker.kafka.partitions.compaction import topic_compaction
from broker.kafka.partitions.partition_log import PartitionLog, split_batches
from broker.kafka.partitions.producer_state import read_header
from broker.kafka.partitions.retention import topic_retention
from broker.kafka.partitions.segment_swap import (
    cleaned_path,
    promote,
    recover_swaps,
    swap_path,
    write_cleaned,
)
from broker.kafka.partitions.segments import (
    NO_TIMESTAMP,
    LogDefaults,
    Retention,
    SegmentStat,
    segment_name,
)
from metadata import records as rec
from metadata.delta import replay
from metadata.image import TopicImage
from raft.common.kafka.record_batch import encode_batch
from tests.support.kafka_support import TOPIC_ID, with_producer

RATIO_HALF = CompactionSettings(min_cleanable_dirty_ratio=0.5)


def _segment(base: int, end: int, size: int, newest: int, first: int = 0) -> SegmentStat:
    return SegmentStat(base_offset=base, end_offset=end, size=size, max_timestamp=newest,
                       first_timestamp=first)


SEGMENTS = [_segment(0, 10, 100, 50), _segment(10, 20, 100, 60),
            _segment(20, 30, 100, 70), _segment(30, 35, 10, 80)]  # the last: active


@pytest.mark.parametrize(("first_dirty", "expected"), [
    (0, 30),  # all dirty
    (10, 30),  # two thirds dirty
    (20, None),  # one third dirty: below 0.5
    (30, None),  # nothing dirty
])
def test_a_log_is_cleanable_when_its_dirty_ratio_reaches_the_minimum(
        first_dirty: int, expected: int | None) -> None:
    assert cleanable_end(SEGMENTS, first_dirty=first_dirty, high_watermark=35, now_ms=1000,
                         settings=RATIO_HALF) == expected


def test_the_active_segment_and_segments_above_the_high_watermark_are_never_cleaned() -> None:
    assert cleanable_end(SEGMENTS, first_dirty=0, high_watermark=25, now_ms=1000,
                         settings=RATIO_HALF) == 20
    assert cleanable_end(SEGMENTS[-1:], first_dirty=0, high_watermark=35, now_ms=1000,
                         settings=RATIO_HALF) is None


def test_segments_newer_than_the_minimum_compaction_lag_are_not_cleaned() -> None:
    lagged = CompactionSettings(min_cleanable_dirty_ratio=0.5, min_compaction_lag_ms=945)
    assert cleanable_end(SEGMENTS, first_dirty=0, high_watermark=35, now_ms=1000,
                         settings=lagged) == 10  # segment 10..20 holds a record at 60


def test_a_dirty_record_older_than_the_maximum_lag_makes_the_log_cleanable() -> None:
    segments = [_segment(0, 10, 100, 50, first=5), _segment(10, 20, 10, 60, first=55),
                _segment(20, 25, 10, 70)]
    strict = CompactionSettings(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=500)
    assert cleanable_end(segments, first_dirty=10, high_watermark=25, now_ms=500,
                         settings=strict) is None
    assert cleanable_end(segments, first_dirty=10, high_watermark=25, now_ms=556,
                         settings=strict) == 20


def test_a_passed_delete_horizon_makes_a_log_without_dirty_records_cleanable() -> None:
    assert cleanable_end(SEGMENTS, first_dirty=30, high_watermark=35, now_ms=1000,
                         settings=RATIO_HALF, delete_horizon_ms=1001) is None
    assert cleanable_end(SEGMENTS, first_dirty=30, high_watermark=35, now_ms=1000,
                         settings=RATIO_HALF, delete_horizon_ms=1000) == 30


def _batch(base: int, *records: tuple[bytes | None, bool], producer: int = -1,
           horizon: int = NO_TIMESTAMP) -> CleanerBatch:
    return CleanerBatch(base_offset=base, last_offset=base + len(records) - 1,
                        producer_id=producer, delete_horizon_ms=horizon,
                        records=tuple(KeyedRecord(base + n, key, 0, tomb)
                                      for n, (key, tomb) in enumerate(records)))


def test_the_latest_record_of_each_key_survives_and_tombstones_get_a_horizon() -> None:
    plans = clean([_batch(0, (b"a", False), (b"b", False)), _batch(2, (b"a", True)),
                   _batch(3, (None, False), (b"b", False))],
                  now_ms=100, delete_retention_ms=50, producer_last_offsets={})
    assert [(p.dropped, p.offsets, p.delete_horizon_ms) for p in plans] == [
        (True, (), NO_TIMESTAMP), (False, (2,), 150), (False, (3, 4), NO_TIMESTAMP)]


def test_a_tombstone_goes_at_its_horizon_and_not_before() -> None:
    batches = [_batch(0, (b"a", True), horizon=150)]
    before = clean(batches, now_ms=149, delete_retention_ms=50, producer_last_offsets={})
    at = clean(batches, now_ms=150, delete_retention_ms=50, producer_last_offsets={})
    assert before[0].offsets == (0,)
    assert not before[0].changes(batches[0])
    assert at[0].dropped


def test_a_producers_last_batch_is_kept_empty_when_its_records_are_superseded() -> None:
    plans = clean([_batch(0, (b"a", False), producer=7), _batch(1, (b"a", False), producer=7),
                   _batch(2, (b"a", False))],
                  now_ms=0, delete_retention_ms=0, producer_last_offsets={7: 1})
    assert [(p.dropped, p.offsets) for p in plans] == [(True, ()), (False, ()), (False, (2,))]


def test_an_undecodable_batch_is_kept_whole() -> None:
    opaque = CleanerBatch(base_offset=0, last_offset=3, producer_id=-1, records=None)
    (plan,) = clean([opaque], now_ms=0, delete_retention_ms=0, producer_last_offsets={})
    assert not plan.dropped
    assert not plan.changes(opaque)


def test_the_throttle_pauses_only_past_the_rate() -> None:
    assert throttle_delay(1000, 0.5, 1000.0) == pytest.approx(0.5)
    assert throttle_delay(1000, 2.0, 1000.0) == 0.0


def _stored(records: list[tuple[bytes | None, bytes | None]], timestamps: list[int],
            base_offset: int = 40) -> bytes:
    data = bytearray(encode_batch(records, timestamps=timestamps))
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def test_a_rewritten_batch_keeps_its_offsets_producer_and_timestamps() -> None:
    batch = with_producer(_stored([(b"a", b"1"), (b"b", None), (b"c", b"3")], [10, 20, 30]),
                          producer_id=9, base_sequence=4)
    decoded = cleaner_batch(batch)
    assert [(r.offset, r.key, r.tombstone) for r in decoded.records or ()] == [
        (40, b"a", False), (41, b"b", True), (42, b"c", False)]
    out = rewrite(batch, BatchPlan(base_offset=40, dropped=False, offsets=(41, 42),
                                   delete_horizon_ms=5000))
    read = DefaultRecordBatch(out)
    assert read.validate_crc()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in read] == [
        (41, b"b", None, 20), (42, b"c", b"3", 30)]
    header = read_header(out)
    assert (header.producer_id, header.base_sequence, header.last_offset_delta,
            header.max_timestamp) == (9, 4, 2, 30)
    assert header.attributes & DELETE_HORIZON_FLAG
    assert cleaner_batch(out).delete_horizon_ms == 5000
    assert split_batches(out) == [out]  # the framing and CRC the log checks


def test_an_emptied_batch_keeps_its_header_for_the_producer_state() -> None:
    batch = with_producer(_stored([(b"a", b"1")], [10]), producer_id=3, base_sequence=8)
    out = rewrite(batch, BatchPlan(base_offset=40, dropped=False, offsets=(),
                                   delete_horizon_ms=NO_TIMESTAMP))
    assert list(DefaultRecordBatch(out)) == []
    assert read_header(out) == read_header(batch)
    assert split_batches(out) == [out]


def test_a_gzip_batch_is_rewritten_gzipped() -> None:
    plain = bytearray(_stored([(b"a", b"1"), (b"a", b"2")], [10, 11]))
    body = gzip.compress(bytes(plain[61:]))
    data = plain[:61] + body
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, 1)  # gzip
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    decoded = cleaner_batch(bytes(data))
    assert [r.offset for r in decoded.records or ()] == [40, 41]
    out = rewrite(bytes(data), BatchPlan(base_offset=40, dropped=False, offsets=(41,),
                                         delete_horizon_ms=NO_TIMESTAMP))
    assert read_header(out).attributes & 0x07 == 1
    assert [(r.offset, r.value) for r in DefaultRecordBatch(out)] == [(41, b"2")]


@pytest.mark.parametrize("codec", [2, 3, 4])  # snappy, lz4, zstd
def test_a_batch_of_every_codec_is_cleaned_in_its_codec(codec: int) -> None:
    data = recompressed(_stored([(b"a", b"1"), (b"a", b"2")], [10, 11]), codec)
    assert read_header(data).attributes & 0x07 == codec
    out = rewrite(data, BatchPlan(base_offset=40, dropped=False, offsets=(41,),
                                  delete_horizon_ms=NO_TIMESTAMP))
    assert read_header(out).attributes & 0x07 == codec
    assert batch_records(out) == [(41, b"a", b"2")]


def test_a_batch_whose_body_does_not_decode_is_kept_whole() -> None:
    data = bytearray(_stored([(b"a", b"1")], [10]))
    struct.pack_into(">h", data, 21, 2)  # says snappy; the body is not
    assert cleaner_batch(bytes(data)).records is None


def test_recovery_finishes_a_swap_and_discards_a_cleaned_copy_with_one_warning_each(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for base in (0, 10, 20):
        (tmp_path / segment_name(base)).write_bytes(b"old")
    write_cleaned(tmp_path, 0, b"new")
    promote(tmp_path, 0)
    write_cleaned(tmp_path, 10, b"cut")
    swap_path(tmp_path, 30).write_bytes(b"of a deleted segment")
    with caplog.at_level(logging.WARNING):
        recover_swaps(tmp_path)
    assert (tmp_path / segment_name(0)).read_bytes() == b"new"
    assert (tmp_path / segment_name(10)).read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        segment_name(0), segment_name(10), segment_name(20)]
    warned = sorted(r.__dict__["path"] for r in caplog.records)
    assert warned == sorted(str(p) for p in (swap_path(tmp_path, 0),
                                             cleaned_path(tmp_path, 10),
                                             swap_path(tmp_path, 30)))


def test_opening_a_log_recovers_its_cleaner_files(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path)
    log.append([_stored([(b"a", b"1")], [10])], 0)
    log.close()
    write_cleaned(tmp_path, 0, b"")
    reopened = PartitionLog(tmp_path)
    try:
        assert reopened.log_end_offset == 1
        assert not cleaned_path(tmp_path, 0).exists()
    finally:
        reopened.close()


def _topic(**configs: str) -> TopicImage:
    image = replay(enumerate([rec.Topic(name="t", topic_id=TOPIC_ID), *(
        rec.TopicConfig(topic_id=TOPIC_ID, key=key.replace("_", "."), value=value)
        for key, value in configs.items())]))
    topic = image.topic(TOPIC_ID)
    assert topic is not None
    return topic


def test_the_cleanup_policy_decides_between_retention_and_compaction() -> None:
    delete, compact = _topic(), _topic(cleanup_policy="compact", retention_ms="5")
    both = _topic(cleanup_policy="compact,delete", min_cleanable_dirty_ratio="0.25",
                  delete_retention_ms="7", retention_ms="5")
    assert topic_compaction(delete) is None
    assert topic_retention(compact, LogDefaults()) is None
    assert topic_compaction(compact) == CompactionSettings()
    assert topic_retention(both, LogDefaults()) == Retention(retention_ms=5)
    assert topic_compaction(both) == CompactionSettings(min_cleanable_dirty_ratio=0.25,
                                                        delete_retention_ms=7)
