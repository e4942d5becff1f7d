"""A PartitionLog's `.index` and `.timeindex` files (broker.kafka.partitions.index_files)
on real files: one pair per segment, equal to the index of the segment's batches through
appends, rolls, truncation, retention, reset and compaction's swap; Fetch's reads (any
offset, size and upper bound) and ListOffsets by timestamp through them agree with a
walk over every batch and record; each kind of
damage found at start-up is rewritten with one WARNING naming the file, and the log
reads back identical."""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from crc32c import crc32c

from broker.kafka.partitions.cleaner import CompactionSettings
from broker.kafka.partitions.compaction import cleanable_segments, install_all, prepare
from broker.kafka.partitions.index_files import offset_index_path, time_index_path
from broker.kafka.partitions.partition_log import PartitionLog, split_batches
from broker.kafka.partitions.segments import RollLimits, segment_bases
from raft.common.kafka.record_batch import encode_batch
from tests.support.kafka_support import record_batch

LIMITS = RollLimits(segment_bytes=1500, index_interval_bytes=150)
INDEX_WARNING = "rebuilding a partition log's"


def _timestamp(offset: int) -> int:
    """Mostly rising, with every fifth record older than the ones before it."""
    return 10_000 + 10 * offset - (300 if offset % 5 == 4 else 0)


def _fill(log: PartitionLog, batches: int) -> None:
    for number in range(batches):
        first = log.log_end_offset
        count = 1 + number % 3
        log.append([record_batch([b"value-%d" % (first + i) for i in range(count)],
                                 timestamps=[_timestamp(first + i) for i in range(count)])],
                   leader_epoch=1)


def _batches(log: PartitionLog) -> list[bytes]:
    """Every batch from the log start, read fetch by fetch (one segment a read)."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        batches = split_batches(log.read(offset, 1 << 20, log.log_end_offset))
        out.extend(batches)
        offset = int.from_bytes(batches[-1][:8], "big") + \
            struct.unpack_from(">i", batches[-1], 23)[0] + 1
    return out


def _index_files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())
            if path.suffix in (".index", ".timeindex")}


def _index_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [getattr(record, "path", "") for record in caplog.records
            if record.getMessage().startswith(INDEX_WARNING)]


def _reopened(log: PartitionLog, caplog: pytest.LogCaptureFixture) -> PartitionLog:
    """`log` closed and opened again; asserts its index files needed no rewrite."""
    log.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        reopened = PartitionLog(log.directory, LIMITS)
    assert _index_warnings(caplog) == []
    return reopened


def _expected_files(log: PartitionLog) -> set[str]:
    return {f"{base:020d}{suffix}" for base in log.segment_bases
            for suffix in (".index", ".timeindex")}


def test_each_segment_gets_both_index_files_kept_through_its_changes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        log = PartitionLog(tmp_path, LIMITS)
    assert _index_warnings(caplog) == []  # a new log's empty files are not damage
    _fill(log, 60)
    assert len(log.segment_bases) >= 4
    assert set(_index_files(tmp_path)) == _expected_files(log)
    assert all(_index_files(tmp_path)[f"{base:020d}.index"]
               for base in log.segment_bases[:-1])  # several entries a segment
    log = _reopened(log, caplog)
    middle = log.segment_bases[2] + 2
    log.truncate_to(middle)
    assert set(_index_files(tmp_path)) == _expected_files(log)
    log = _reopened(log, caplog)
    _fill(log, 10)
    log.advance_log_start(log.segment_bases[2])
    assert set(_index_files(tmp_path)) == _expected_files(log)
    log = _reopened(log, caplog)
    log.reset_to(log.log_end_offset + 5)
    assert set(_index_files(tmp_path)) == _expected_files(log)
    _fill(log, 20)
    _reopened(log, caplog).close()


def test_reads_and_offsets_for_times_agree_with_a_scan_of_every_record(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = PartitionLog(tmp_path, LIMITS)
    _fill(log, 60)
    log.advance_log_start(log.segment_bases[1] + 1)  # inside a segment (DeleteRecords)
    for current in (log, _reopened(log, caplog)):
        start, end = current.log_start_offset, current.log_end_offset
        for offset in range(start, end):
            first = split_batches(current.read(offset, 1, end))[0]
            base = int.from_bytes(first[:8], "big")
            assert base <= offset <= base + struct.unpack_from(">i", first, 23)[0]
        for wanted in range(_timestamp(start) - 20, _timestamp(end) + 20, 7):
            expected = next(((offset, _timestamp(offset)) for offset in range(start, end)
                             if _timestamp(offset) >= wanted), None)
            found = current.offset_for_timestamp(wanted)
            assert (found[:2] if found else None) == expected, wanted
    log.close()


def _model_read(tmp_path: Path, offset: int, max_bytes: int, upper: int) -> bytes:
    """PartitionLog.read by a walk over every batch of every segment file: whole batches
    from the first holding an offset >= `offset`, in its segment, below `upper`, within
    `max_bytes` (at least one)."""
    stored = [(base, batch) for base in segment_bases(os.listdir(tmp_path))
              for batch in split_batches((tmp_path / f"{base:020d}.log").read_bytes())]

    def last(batch: bytes) -> int:
        return int.from_bytes(batch[:8], "big") + struct.unpack_from(">i", batch, 23)[0]
    chosen = [(base, batch) for base, batch in stored if last(batch) >= offset]
    if not chosen or last(chosen[0][1]) >= upper:
        return b""
    out = chosen[0][1]
    for base, batch in chosen[1:]:
        if base != chosen[0][0] or last(batch) >= upper or len(out) + len(batch) > max_bytes:
            break
        out += batch
    return out


def test_reads_of_any_size_and_bound_agree_with_a_walk_over_every_batch(
        tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, LIMITS)
    _fill(log, 60)
    end = log.log_end_offset
    for offset in range(0, end, 3):
        for max_bytes in (1, 100, 333, 700, 1 << 20):
            for upper in (offset + 1, offset + 4, end - 7, end):
                assert log.read(offset, max_bytes, upper) == \
                    _model_read(tmp_path, offset, max_bytes, upper), (offset, max_bytes, upper)
    log.close()


def _keyed_batch(first: int, keys: int) -> bytes:
    return encode_batch([(b"k%d" % ((first + i) % keys), b"v%d" % (first + i))
                         for i in range(3)], timestamps=[_timestamp(first + i) for i in range(3)])


def test_a_cleaned_segment_gets_the_index_of_its_kept_batches(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = PartitionLog(tmp_path, LIMITS)
    for _ in range(40):
        log.append([_keyed_batch(log.log_end_offset, keys=4)], leader_epoch=1)
    before = _index_files(tmp_path)
    settings = CompactionSettings(min_cleanable_dirty_ratio=0.0)
    cleanable = cleanable_segments(log, high_watermark=log.log_end_offset, now_ms=10**12,
                                   settings=settings)
    assert cleanable is not None
    end, segments = cleanable
    cleaning = prepare(tmp_path, segments, now_ms=10**12,
                       delete_retention_ms=settings.delete_retention_ms,
                       producer_last_offsets=log.producer_last_offsets(), pace=lambda _: None)
    assert install_all(log, cleaning, end) > 0
    assert _index_files(tmp_path) != before
    kept = _batches(log)
    reopened = _reopened(log, caplog)
    assert _batches(reopened) == kept
    reopened.close()


def _swap_first_entries(data: bytes, size: int) -> bytes:
    return data[size:2 * size] + data[:size] + data[2 * size:]


def _past_the_end(data: bytes, size: int) -> bytes:
    return data + (struct.pack(">ii", 10**6, 10**7) if size == 8
                   else struct.pack(">qi", 10**12, 10**6))


DAMAGE: dict[str, Callable[[bytes, int], bytes | None]] = {
    "missing": lambda data, size: None,
    "a bad size": lambda data, size: data + b"\x00\x01\x02",
    "cut at an entry": lambda data, size: data[:-size],
    "entries out of order": _swap_first_entries,
    "an entry past the segment's end": _past_the_end,
}


@pytest.mark.parametrize("kind", DAMAGE)
@pytest.mark.parametrize("index", ["offset", "time"])
def test_damaged_index_is_rebuilt_once_with_a_warning_and_the_log_reads_the_same(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, index: str) -> None:
    log = PartitionLog(tmp_path, LIMITS)
    _fill(log, 40)
    base = log.segment_bases[1]
    path = (offset_index_path if index == "offset" else time_index_path)(tmp_path, base)
    good = path.read_bytes()
    assert len(good) >= 2 * (8 if index == "offset" else 12)
    records, answers = _batches(log), [log.offset_for_timestamp(t)
                                       for t in range(10_000, 10_800, 13)]
    log.close()
    damaged = DAMAGE[kind](good, 8 if index == "offset" else 12)
    if damaged is None:
        path.unlink()
    else:
        path.write_bytes(damaged)
    with caplog.at_level(logging.WARNING):
        reopened = PartitionLog(tmp_path, LIMITS)
    assert _index_warnings(caplog) == [str(path)]
    assert path.read_bytes() == good
    assert _batches(reopened) == records
    assert [reopened.offset_for_timestamp(t) for t in range(10_000, 10_800, 13)] == answers
    _reopened(reopened, caplog).close()


def test_a_batch_past_an_int32_of_offsets_from_the_segment_base_rolls_the_segment(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The indexes hold offsets as int32 past the base: a batch whose last offset would
    go past that starts a new segment (a batch's own span always fits an int32)."""
    log = PartitionLog(tmp_path, RollLimits(index_interval_bytes=0))
    log.append([record_batch([b"first"])], leader_epoch=1)
    wide = bytearray(record_batch([b"wide"]))
    struct.pack_into(">i", wide, 23, 2**31 - 1)  # lastOffsetDelta; one record
    struct.pack_into(">I", wide, 17, crc32c(bytes(wide[21:])))
    log.append([bytes(wide)], leader_epoch=1)
    log.append([record_batch([b"after"])], leader_epoch=1)
    assert log.segment_bases == [0, 1, 2**31 + 1]  # "after" is an int32 past 1 too
    assert log.log_end_offset == 2**31 + 2
    records = _batches(log)
    assert len(records) == 3
    log.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        reopened = PartitionLog(tmp_path, RollLimits(index_interval_bytes=0))
    assert _index_warnings(caplog) == []
    assert _batches(reopened) == records
    reopened.close()


def test_index_files_left_without_their_segment_are_removed(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path, LIMITS)
    _fill(log, 20)
    log.close()
    orphan = 10**9
    offset_index_path(tmp_path, orphan).write_bytes(b"")
    time_index_path(tmp_path, orphan).write_bytes(b"")
    PartitionLog(tmp_path, LIMITS).close()
    assert set(_index_files(tmp_path)) == {
        f"{base:020d}{suffix}" for base in segment_bases(os.listdir(tmp_path))
        for suffix in (".index", ".timeindex")}
