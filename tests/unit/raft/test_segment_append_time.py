"""Batches carry the leader's append time (raft/segment.py): timed and untimed headers,
logs written before the change, the CRC over the time, torn tails, and the core stamping
the leader's clock while followers keep it."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import msgpack
import pytest

from raft.log import DiskLog, scan_segment
from raft.segment import (
    HEADER_BYTES,
    TIMED_HEADER_BYTES,
    CorruptBatchError,
    encode_batch,
    iter_batches,
    segment_name,
    valid_prefix_length,
)
from raft.types import Batch
from tests.support.core_harness import Cluster

APPEND_TIME_MS = 1_700_000_000_123


def old_format_batch(base_offset: int, epoch: int, records: tuple[bytes, ...]) -> bytes:
    """A batch exactly as the code before timed batches wrote it (24-byte header)."""
    payload = msgpack.packb(list(records), use_bin_type=True)
    unchecked = struct.pack(">qiii", base_offset, epoch, len(records), len(payload))
    crc = zlib.crc32(payload, zlib.crc32(unchecked))
    return unchecked + struct.pack(">I", crc) + payload


def test_a_timed_batch_reads_back_with_its_time_when_encoded() -> None:
    batch = Batch(base_offset=7, epoch=3, records=(b"a", b"bc"), append_time_ms=APPEND_TIME_MS)
    data = encode_batch(batch)
    [stored] = iter_batches(data)
    assert stored.batch == batch
    payload = msgpack.packb([b"a", b"bc"], use_bin_type=True)
    assert stored.size == len(data) == TIMED_HEADER_BYTES + len(payload)


def test_an_untimed_batch_is_written_byte_for_byte_as_before_when_its_time_is_unknown() -> None:
    """A batch from an old log keeps its bytes (and CRC) when a new node copies it."""
    batch = Batch(base_offset=7, epoch=3, records=(b"a", b"bc"))
    assert encode_batch(batch) == old_format_batch(7, 3, (b"a", b"bc"))


def test_an_old_segment_reads_with_unknown_times_when_mixed_with_timed_batches() -> None:
    old = old_format_batch(0, 1, (b"x",)) + old_format_batch(1, 1, (b"y", b"z"))
    new = encode_batch(Batch(base_offset=3, epoch=2, records=(b"w",),
                             append_time_ms=APPEND_TIME_MS))
    batches = [s.batch for s in iter_batches(old + new)]
    assert [(b.base_offset, b.append_time_ms) for b in batches] == \
        [(0, None), (1, None), (3, APPEND_TIME_MS)]


def test_a_flipped_bit_in_the_time_fails_the_crc_when_read() -> None:
    data = bytearray(encode_batch(Batch(base_offset=0, epoch=1, records=(b"x",),
                                        append_time_ms=APPEND_TIME_MS)))
    time_at = HEADER_BYTES - 4  # the time sits where an untimed header keeps its CRC
    data[time_at + 7] ^= 0x01
    with pytest.raises(CorruptBatchError, match="CRC mismatch"):
        list(iter_batches(bytes(data)))


@pytest.mark.parametrize("cut", [HEADER_BYTES + 2, TIMED_HEADER_BYTES - 1,
                                 TIMED_HEADER_BYTES + 1])
def test_a_timed_batch_torn_in_its_header_or_payload_is_a_torn_tail_when_last(cut: int) -> None:
    first = old_format_batch(0, 1, (b"x",))
    second = encode_batch(Batch(base_offset=1, epoch=1, records=(b"yy",),
                                append_time_ms=APPEND_TIME_MS))
    data = first + second[:cut]
    assert [s.batch.base_offset for s in iter_batches(data)] == [0]
    assert valid_prefix_length(data) == len(first)
    scan = scan_segment(data, "seg", expected_offset=0, is_last=True)
    assert scan.valid_bytes == len(first)
    assert scan.torn_reason is not None


def test_a_log_written_before_times_opens_and_appends_timed_batches_when_reopened(
        tmp_path: Path) -> None:
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    (directory / segment_name(0)).write_bytes(old_format_batch(0, 1, (b"a", b"b")))
    log = DiskLog(directory)
    assert log.end_offset == 2
    log.append(2, [b"c"], APPEND_TIME_MS)
    log.flush()
    log.close()
    reopened = DiskLog(directory)
    times = [(b.base_offset, b.append_time_ms) for b in reopened.read(0, 1 << 20)]
    reopened.close()
    assert times == [(0, None), (2, APPEND_TIME_MS)]


def test_a_batch_cut_keeps_its_epoch_and_time_when_records_are_taken() -> None:
    batch = Batch(base_offset=10, epoch=4, records=(b"a", b"b", b"c"),
                  append_time_ms=APPEND_TIME_MS)
    assert batch.records_between(11, 13) == Batch(base_offset=11, epoch=4, records=(b"b", b"c"),
                                                  append_time_ms=APPEND_TIME_MS)


def test_followers_keep_the_leaders_append_time_when_they_fetch_later() -> None:
    """The leader stamps its own clock on the batches it creates (its LeaderChange and
    each proposal); followers fetch them later and store the leader's time, not theirs."""
    cluster = Cluster((1, 2, 3))
    leader = cluster.elect()
    proposed_at = cluster.now_ms + 3
    result = leader.propose([b"x"], proposed_at)
    assert result is not None
    _, offset = result
    cluster.flush(leader.node_id)
    cluster.run(300)
    assert cluster.now_ms > proposed_at
    firsts = set()
    for core in cluster.cores.values():
        batches = core.log.read(0, 1 << 20)
        stamped = {b.base_offset: b.append_time_ms for b in batches}
        assert stamped[offset] == proposed_at, core.node_id
        firsts.add(batches[0].append_time_ms)  # the LeaderChange, stamped when elected
    [elected_at] = firsts
    assert elected_at is not None
    assert 0 < elected_at < proposed_at
