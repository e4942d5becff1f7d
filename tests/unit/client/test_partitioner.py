"""Kafka's murmur2 vectors (its UtilsTest) and linear hashing by hand."""

from __future__ import annotations

import pytest

from broker.kafka.ordered.partitioner import (
    deletion_blockers,
    murmur2,
    partition_for_hash,
    split_source,
    unkeyed_partition,
)
from tools.client.sequences import sequence_record

KAFKA_VECTORS = {
    b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected & 0xFFFFFFFF


def test_linear_hashing_splits_the_lowest_unsplit_partition() -> None:
    # N=2, u=3: L=0 (2 <= 3), S=1: hashes 0 mod 2 split between 0 and 2
    assert [partition_for_hash(h, 2, 3) for h in range(8)] == [0, 1, 2, 1, 0, 1, 2, 1]
    assert [partition_for_hash(h, 2, 2) for h in range(4)] == [0, 1, 0, 1]
    assert [partition_for_hash(h, 2, 4) for h in range(4)] == [0, 1, 2, 3]


def test_split_sources() -> None:
    assert [split_source(p, 2) for p in range(2, 9)] == [0, 1, 0, 1, 2, 3, 0]
    with pytest.raises(ValueError, match="one of the initial"):
        split_source(1, 2)


def test_deletion_blockers_follow_the_chain() -> None:
    # N=2, shrunk 8 -> 3: 3 -> 1; 4 -> 0; 5 -> 1; 6 -> 2; 7 -> 3 -> 1
    marked = range(3, 8)
    assert deletion_blockers(0, marked, 2, 3) == [4]
    assert deletion_blockers(1, marked, 2, 3) == [3, 5, 7]
    assert deletion_blockers(2, marked, 2, 3) == [6]


def test_counts_are_checked() -> None:
    with pytest.raises(ValueError, match="need 1 <= initial"):
        partition_for_hash(1, 3, 2)


def test_a_partition_marked_later_still_waits_on_those_marked_before_it() -> None:
    # 8 → 5 moved 7's keys to 3; 5 → 3 marks 3 and 4: 3's records written under 5 still
    # follow 7's, and 1 (where both now land) waits on 3 and on 7
    marked = [3, 4, 5, 6, 7]
    assert deletion_blockers(3, marked, 2, 3) == [7]
    assert deletion_blockers(1, marked, 2, 3) == [3, 5, 7]
    assert deletion_blockers(4, marked, 2, 3) == []


def test_unkeyed_records_go_round_robin_over_the_undeleted_partitions() -> None:
    # shrunk 8 -> 5: 5, 6 and 7 are marked and never get one
    assert [unkeyed_partition(n, 5, [5, 6, 7]) for n in range(7)] == [0, 1, 2, 3, 4, 0, 1]


def test_a_marked_partition_below_the_undeleted_count_is_refused() -> None:
    with pytest.raises(ValueError, match=r"partitions \[3\] are marked below"):
        unkeyed_partition(0, 5, [3, 6])
    with pytest.raises(ValueError, match="undeleted count >= 1"):
        unkeyed_partition(0, 0, [])


def test_sequence_records_mix_keyed_and_unkeyed_slots() -> None:
    records = [sequence_record(n, keys=2, unkeyed=1, prefix="p0-") for n in range(7)]
    assert records == [(b"p0-0", b"0"), (b"p0-1", b"0"), (None, b"unkeyed-p0-0"),
                       (b"p0-0", b"1"), (b"p0-1", b"1"), (None, b"unkeyed-p0-1"),
                       (b"p0-0", b"2")]
    assert [sequence_record(n, keys=2, unkeyed=0, prefix="k")[1] for n in range(4)] == \
        [b"0", b"0", b"1", b"1"]
