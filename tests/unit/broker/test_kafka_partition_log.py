"""broker.kafka.partitions.partition_log: magic v2 batches stored intact, offsets
assigned, CRC32C."""

from __future__ import annotations

import struct
from gzip import compress as gzip_compress
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.partitions.partition_log import (
    SNAPSHOT_SUFFIX,
    InvalidBatchError,
    PartitionLog,
    snapshot_offsets,
    split_batches,
)
from broker.kafka.partitions.producer_state import (
    Accept,
    BatchHeader,
    BatchMetadata,
    Duplicate,
    ProducerEntry,
    ProducerStates,
    Reject,
    encode_snapshot,
)
from tests.support.kafka_support import record_batch, with_producer


def test_offsets_assigned_from_log_end_when_batches_appended(tmp_path: Path) -> None:
    """Kafka: the leader assigns base offsets; a batch of n records takes n offsets."""
    log = PartitionLog(tmp_path)
    assert log.append([record_batch([b"a", b"b", b"c"])], leader_epoch=3) == (0, 2)
    assert log.append([record_batch([b"d"]), record_batch([b"e", b"f"])], 3) == (3, 5)
    assert log.log_end_offset == 6


def test_stored_batch_keeps_a_valid_crc_when_offset_and_epoch_stamped(tmp_path: Path) -> None:
    """Base offset and partition leader epoch lie outside the CRC32C: the stored batch
    still verifies, so consumers check the producer's checksum end to end."""
    log = PartitionLog(tmp_path)
    log.append([record_batch([b"x"])], leader_epoch=0)
    log.append([record_batch([b"y"])], leader_epoch=7)
    stored = log.read(1, 1 << 20, upper_offset=2)
    base, _, epoch = struct.unpack_from(">qii", stored)
    assert (base, epoch) == (1, 7)
    assert split_batches(stored) == [stored]
    assert b"y" in stored


def test_read_returns_whole_batches_below_upper_offset_when_reading_by_offset(
        tmp_path: Path) -> None:
    """Fetch reads from the batch holding the offset, never past the high watermark."""
    log = PartitionLog(tmp_path)
    for value in (b"v0", b"v1", b"v2"):
        log.append([record_batch([value])], 0)
    assert b"v1" in log.read(1, 1 << 20, upper_offset=3)
    assert b"v0" not in log.read(1, 1 << 20, upper_offset=3)
    assert b"v2" not in log.read(1, 1 << 20, upper_offset=2)
    assert log.read(3, 1 << 20, upper_offset=3) == b""
    one = log.read(0, 1, upper_offset=3)  # max_bytes below one batch: still one batch
    assert b"v0" in one
    assert b"v1" not in one


@pytest.mark.parametrize("damage", ["crc", "magic", "truncated"])
def test_produce_rejected_when_batch_invalid(damage: str) -> None:
    """Produce validates framing, magic 2 and CRC32C before anything is stored."""
    batch = bytearray(record_batch([b"payload"]))
    if damage == "crc":
        batch[-1] ^= 0xFF
    elif damage == "magic":
        batch[16] = 1
    else:
        batch = batch[:-3]
    with pytest.raises(InvalidBatchError) as caught:
        split_batches(bytes(batch))
    assert caught.value.corrupt == (damage != "magic")


def test_torn_tail_truncated_when_log_reopened(tmp_path: Path) -> None:
    """Recovery keeps every whole, CRC-valid batch and drops a torn tail."""
    log = PartitionLog(tmp_path)
    log.append([record_batch([b"kept"])], 0)
    log.append([record_batch([b"torn"])], 0)
    log.close()
    size = log.path.stat().st_size
    with open(log.path, "r+b") as handle:
        handle.truncate(size - 5)
    reopened = PartitionLog(tmp_path)
    assert reopened.log_end_offset == 1
    assert reopened.append([record_batch([b"next"])], 0) == (1, 1)
    assert b"next" in reopened.read(1, 1 << 20, upper_offset=2)


def test_end_offset_for_epoch_when_leader_epochs_change(tmp_path: Path) -> None:
    """OffsetForLeaderEpoch: the end of the largest epoch <= the one asked for."""
    log = PartitionLog(tmp_path)
    log.append([record_batch([b"a", b"b"])], 1)
    log.append([record_batch([b"c"])], 3)
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 3)
    assert log.end_offset_for_epoch(0) == (-1, -1)


def test_crc_helper_matches_kafka_when_checking_known_vector() -> None:
    """CRC32C (Castagnoli) of "123456789" is 0xE3069283, not zlib's CRC32."""
    assert crc32c(b"123456789") == 0xE3069283


def test_truncate_drops_batches_from_offset_when_follower_diverged(tmp_path: Path) -> None:
    """A diverged follower keeps only offsets below the leader's end of the common
    epoch, durably (a reopened log agrees)."""
    log = PartitionLog(tmp_path)
    log.append([record_batch([b"a", b"b"])], 1)
    log.append([record_batch([b"c"])], 2)
    log.truncate_to(2)
    assert (log.log_end_offset, log.last_epoch) == (2, 1)
    assert log.append([record_batch([b"d"])], 3) == (2, 2)
    log.close()
    reopened = PartitionLog(tmp_path)
    assert reopened.log_end_offset == 3
    assert b"c" not in reopened.read(0, 1 << 20, upper_offset=3)
    assert b"d" in reopened.read(2, 1 << 20, upper_offset=3)


@settings(max_examples=30, deadline=None)
@given(epochs=st.lists(st.integers(0, 6), min_size=1, max_size=12).map(sorted),
       asked=st.integers(-1, 8))
def test_epoch_cache_agrees_with_a_naive_scan_when_epochs_vary(
        epochs: list[int], asked: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    """OffsetForLeaderEpoch from the epoch cache equals a scan over every batch: the
    largest epoch <= asked, ending where the next epoch starts (or at the log end)."""
    log = PartitionLog(tmp_path_factory.mktemp("epochs"))
    for epoch in epochs:
        log.append([record_batch([b"r"])], epoch)
    log.close()
    known = [(offset, epoch) for offset, epoch in enumerate(epochs) if epoch <= asked]
    if not known:
        expected = (-1, -1)
    else:
        best = max(epoch for _, epoch in known)
        later = [offset for offset, epoch in enumerate(epochs) if epoch > best]
        expected = (best, later[0] if later else len(epochs))
    assert log.end_offset_for_epoch(asked) == expected


# --- producer state: kept by the log, rebuilt on open, cut with the log -------------------

def idem(value: bytes, pid: int, seq: int, epoch: int = 0, count: int = 1) -> bytes:
    return with_producer(record_batch([value] * count), pid, seq, epoch)


def header_of(pid: int, seq: int, epoch: int = 0, count: int = 1) -> BatchHeader:
    return BatchHeader(pid, epoch, seq, count - 1)


def test_producer_state_rebuilt_by_scan_when_log_reopened_without_snapshot(
        tmp_path: Path) -> None:
    """A log opened after a crash (no snapshot written) rebuilds its producers from its
    batches: the retry of a stored batch is still a duplicate."""
    log = PartitionLog(tmp_path)
    log.append([idem(b"a", 5, 0, count=2)], 0)
    log.append([idem(b"b", 5, 2)], 0)
    log._file.close()  # a crash: close() would have written a snapshot
    assert snapshot_offsets(tmp_path) == []
    reopened = PartitionLog(tmp_path)
    assert reopened.producers == log.producers
    assert reopened.producers.check([header_of(5, 0, count=2)], 3) == Duplicate(0, 1)
    refused = reopened.producers.check([header_of(5, 4)], 3)
    assert isinstance(refused, Reject)


def test_snapshot_plus_tail_scan_equals_a_full_scan_when_log_reopened(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path)
    for seq in range(4):
        log.append([idem(b"x", 1, seq), idem(b"y", 2, seq)], 0)
    log.write_producer_snapshot()
    assert snapshot_offsets(tmp_path) == [8]
    for seq in range(4, 7):
        log.append([idem(b"x", 1, seq)], 1)
    log._file.close()
    with_snapshot = PartitionLog(tmp_path)
    for path in tmp_path.glob(f"*{SNAPSHOT_SUFFIX}"):
        path.unlink()
    full_scan = PartitionLog(tmp_path)
    assert with_snapshot.producers == full_scan.producers == log.producers
    entry = full_scan.producers.entry(1)
    assert entry is not None
    assert entry.last_seq == 6


def test_snapshot_is_used_when_its_state_differs_from_a_scan(tmp_path: Path) -> None:
    """The snapshot, not a rescan, is what a reopened log starts from below its offset
    (planted: a snapshot claiming another epoch for producer 1)."""
    log = PartitionLog(tmp_path)
    log.append([idem(b"x", 1, 0)], 0)
    log.close()
    planted = ProducerStates({1: ProducerEntry(1, 9, (BatchMetadata(0, 0, 0, 0),))}, 1)
    (tmp_path / f"{1:020d}{SNAPSHOT_SUFFIX}").write_bytes(encode_snapshot(planted))
    assert PartitionLog(tmp_path).producers.entry(1) == ProducerEntry(
        1, 9, (BatchMetadata(0, 0, 0, 0),))


def test_damaged_snapshot_ignored_and_state_rebuilt_by_scan_when_reopened(
        tmp_path: Path) -> None:
    log = PartitionLog(tmp_path)
    log.append([idem(b"x", 1, 0, count=3)], 0)
    log.close()
    (snapshot,) = tmp_path.glob(f"*{SNAPSHOT_SUFFIX}")
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    reopened = PartitionLog(tmp_path)
    assert reopened.producers == log.producers


def test_truncation_rewinds_producer_state_and_deletes_later_snapshots(
        tmp_path: Path) -> None:
    """A diverged follower cuts its log: the producer state is that of the kept batches
    (a batch it lost is no duplicate any more; the next sequence follows the kept
    ones), and no snapshot above the new end survives to be loaded later."""
    log = PartitionLog(tmp_path)
    log.append([idem(b"a", 3, 0)], 1)
    log.write_producer_snapshot()  # at 1
    log.append([idem(b"b", 3, 1)], 1)
    log.append([idem(b"c", 3, 2)], 2)
    log.write_producer_snapshot()  # at 3
    log.truncate_to(2)
    assert snapshot_offsets(tmp_path) == [1]
    # seq 2 is gone: its retry is stored anew (no duplicate), seq 3 would be a gap
    assert log.producers.check([header_of(3, 2)], 2) == Accept()
    assert isinstance(log.producers.check([header_of(3, 3)], 2), Reject)
    assert log.producers.check([header_of(3, 1)], 2) == Duplicate(1, 1)
    log.truncate_to(1)
    assert log.producers.check([header_of(3, 1)], 1) == Accept()
    log.close()
    assert PartitionLog(tmp_path).producers == log.producers


def test_follower_builds_the_leader_producer_state_when_replicating(tmp_path: Path) -> None:
    (tmp_path / "leader").mkdir()
    (tmp_path / "follower").mkdir()
    leader = PartitionLog(tmp_path / "leader")
    follower = PartitionLog(tmp_path / "follower")
    leader.append([idem(b"a", 8, 0, count=2)], 4)
    leader.append([idem(b"b", 8, 2), idem(b"c", 9, 0, epoch=2)], 4)
    follower.append_replicated(split_batches(leader.read(0, 1 << 20, upper_offset=4)))
    assert follower.producers == leader.producers
    assert follower.producers.check([header_of(8, 2)], 4) == Duplicate(2, 2)


def test_list_offsets_by_timestamp_is_per_record_when_a_batch_spans_times(
        tmp_path: Path) -> None:
    """Kafka: the first offset whose record timestamp is >= the target, with that
    record's timestamp (not the batch's first offset); None when no record has one."""
    log = PartitionLog(tmp_path)
    log.append([record_batch([b"a", b"b", b"c"], timestamps=[100, 300, 200])], 0)
    log.append([record_batch([b"d", b"e"], timestamps=[250, 400])], 5)
    assert log.offset_for_timestamp(0) == (0, 100, 0)
    assert log.offset_for_timestamp(150) == (1, 300, 0)
    assert log.offset_for_timestamp(300) == (1, 300, 0)
    assert log.offset_for_timestamp(301) == (4, 400, 5)
    assert log.offset_for_timestamp(401) is None
    assert log.max_timestamp() == (4, 400, 5)


def test_max_timestamp_is_the_first_record_holding_it_when_tied(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path)
    assert log.max_timestamp() is None
    log.append([record_batch([b"a", b"b"], timestamps=[5, 9])], 0)
    log.append([record_batch([b"c"], timestamps=[9])], 0)
    assert log.max_timestamp() == (1, 9, 0)
    log.append([record_batch([b"d"], timestamps=[12])], 1)
    assert log.max_timestamp() == (3, 12, 1)
    log.truncate_to(3)
    assert log.max_timestamp() == (1, 9, 0)


def test_gzip_batch_timestamps_read_per_record(tmp_path: Path) -> None:
    plain = bytearray(record_batch([b"a", b"b"], timestamps=[10, 20]))
    body = gzip_compress(bytes(plain[61:]))
    data = bytearray(plain[:61]) + body
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">h", data, 21, 1)  # gzip
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    log = PartitionLog(tmp_path)
    log.append(split_batches(bytes(data)), 0)
    assert log.offset_for_timestamp(15) == (1, 20, 0)


def test_no_snapshot_lands_in_a_recreated_topic_directory_when_old_log_closes(
        tmp_path: Path) -> None:
    """A deleted topic's directory is renamed away and a recreated topic of the same
    name gets a fresh one at the same path: closing the old log must not write its
    producer state there (the new topic would take the old producers' batches for
    duplicates)."""
    directory = tmp_path / "A-0"
    directory.mkdir()
    old = PartitionLog(directory)
    old.append([idem(b"old", 4, 0, count=3)], 0)
    directory.rename(tmp_path / "staged")
    directory.mkdir()
    new = PartitionLog(directory)
    new.append([record_batch([b"n1", b"n2", b"n3"])], 0)
    old.close()
    assert snapshot_offsets(directory) == []
    new.close()
    assert PartitionLog(directory).producers.entry(4) is None
