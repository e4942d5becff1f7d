"""broker.kafka.partition_log: magic v2 batches stored intact, offsets assigned, CRC32C."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.partition_log import InvalidBatchError, PartitionLog, split_batches
from tests.support.kafka_support import record_batch


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
