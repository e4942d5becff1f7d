"""`broker.kafka.partitions.batch_walk.whole_batches`: the batches a broker keeps when it
opens a segment, which the replay and the chaos checker read by the same rule."""

from __future__ import annotations

import pytest

from broker.kafka.partitions.batch_walk import whole_batches
from tests.support.kafka_support import record_batch

FIRST, SECOND = record_batch([b"a", b"b"]), record_batch([b"c"])
SPANS = [(0, len(FIRST)), (len(FIRST), len(FIRST) + len(SECOND))]


def test_every_whole_batch_is_walked_in_order() -> None:
    assert list(whole_batches(FIRST + SECOND)) == SPANS


@pytest.mark.parametrize("cut", [1, 20, 61, len(SECOND) - 1])
def test_a_torn_tail_ends_the_walk(cut: int) -> None:
    assert list(whole_batches(FIRST + SECOND + SECOND[:cut])) == SPANS


def test_a_corrupt_batch_ends_the_walk_and_hides_what_follows() -> None:
    flipped = bytearray(SECOND)
    flipped[-1] ^= 0xFF  # a record byte: the CRC32C no longer holds
    assert list(whole_batches(FIRST + bytes(flipped) + SECOND)) == SPANS[:1]


def test_another_magic_or_a_short_length_ends_the_walk() -> None:
    other_magic = bytearray(SECOND)
    other_magic[16] = 1
    short = bytearray(SECOND)
    short[8:12] = (10).to_bytes(4, "big")
    for bad in (other_magic, short):
        assert list(whole_batches(FIRST + bytes(bad))) == SPANS[:1]
