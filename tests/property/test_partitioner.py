"""Properties of linear hashing (broker/kafka/ordered/partitioner.py): the key movements that
make ordered delivery across a resize cheap to enforce.

Bounds asserted exactly, with N the initial count, u the undeleted count and c the
count before a shrink (marked partitions are [u, c)):
- a marked partition P3 blocks exactly one undeleted partition, the one its keys now
  map to, through at most level(P3) + 1 split steps, level(P) = floor(log2(P // N)):
  O(log n) hops for n partitions;
- an undeleted partition waits on at most 2^j - 1 marked ones, j the number of
  doubling levels [u, c) touches: at most one when the shrink stays within one level
  (every shrink by one). A shrink across many levels can make one partition wait on
  every marked one (N = 1, 8 -> 1: partition 0 waits on 1..7).
- a record without a key goes to a partition below u, never a marked one, and any run
  of consecutive records is spread evenly: no partition gets two more than another.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from broker.kafka.ordered.partitioner import (
    deletion_blockers,
    landing_partition,
    level,
    partition_for,
    split_source,
    unkeyed_partition,
)

initials = st.integers(min_value=1, max_value=8)
extra = st.integers(min_value=0, max_value=60)
keys = st.lists(st.binary(max_size=12), min_size=1, max_size=40, unique=True)


@given(keys, initials, extra)
def test_partition_is_always_an_undeleted_one(batch: list[bytes], initial: int,
                                              more: int) -> None:
    for key in batch:
        assert 0 <= partition_for(key, initial, initial + more) < initial + more


@given(keys, initials, extra)
def test_growing_by_one_moves_keys_only_from_the_split_source(batch: list[bytes],
                                                              initial: int, more: int) -> None:
    before, after = initial + more, initial + more + 1
    source = split_source(before, initial)
    for key in batch:
        old, new = partition_for(key, initial, before), partition_for(key, initial, after)
        if old != new:  # no key moves between old partitions
            assert (old, new) == (source, before)


@given(keys, initials, st.integers(min_value=1, max_value=60))
def test_shrinking_by_one_moves_only_the_removed_keys_to_their_split_source(
        batch: list[bytes], initial: int, more: int) -> None:
    before, after = initial + more, initial + more - 1
    removed = before - 1
    for key in batch:
        old, new = partition_for(key, initial, before), partition_for(key, initial, after)
        if old != new:
            assert old == removed
            assert new == split_source(removed, initial)
        else:
            assert old != removed


@given(keys, initials, extra, extra)
def test_keys_of_a_marked_partition_land_where_the_chain_says(
        batch: list[bytes], initial: int, more: int, removed: int) -> None:
    undeleted = initial + more
    count = undeleted + removed
    for key in batch:
        old = partition_for(key, initial, count)
        assert partition_for(key, initial, undeleted) == \
            landing_partition(old, initial, undeleted)


@st.composite
def shrinks(draw: st.DrawFn) -> tuple[int, int, int]:
    """(N, u, c): a topic of c partitions shrunk to u, N <= u < c."""
    initial = draw(initials)
    undeleted = initial + draw(st.integers(min_value=0, max_value=40))
    count = undeleted + draw(st.integers(min_value=1, max_value=70))
    return initial, undeleted, count


@given(shrinks())
def test_a_marked_partition_blocks_exactly_one_partition_in_log_hops(
        shrink: tuple[int, int, int]) -> None:
    initial, undeleted, count = shrink
    marked = range(undeleted, count)
    for p3 in marked:
        blocked = [p1 for p1 in range(undeleted)
                   if p3 in deletion_blockers(p1, marked, initial, undeleted)]
        assert len(blocked) == 1
        hops, partition = 0, p3
        while partition >= undeleted:
            partition, hops = split_source(partition, initial), hops + 1
        assert partition == blocked[0]
        assert hops <= level(p3, initial) + 1


@given(shrinks())
def test_a_partition_waits_on_at_most_two_to_the_levels_touched_minus_one(
        shrink: tuple[int, int, int]) -> None:
    initial, undeleted, count = shrink
    marked = range(undeleted, count)
    levels = level(count - 1, initial) - level(undeleted, initial) + 1
    for p1 in range(undeleted):
        assert len(deletion_blockers(p1, marked, initial, undeleted)) <= 2 ** levels - 1


@given(initials, extra)
def test_a_shrink_by_one_blocks_one_partition_on_one(initial: int, more: int) -> None:
    undeleted = initial + more
    waits = [deletion_blockers(p1, [undeleted], initial, undeleted)
             for p1 in range(undeleted)]
    assert sorted(len(w) for w in waits) == [0] * (undeleted - 1) + [1]


def test_a_shrink_across_levels_can_block_one_partition_on_every_marked_one() -> None:
    assert deletion_blockers(0, range(1, 8), 1, 1) == [1, 2, 3, 4, 5, 6, 7]


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=64),
       st.integers(min_value=0, max_value=64))
def test_an_unkeyed_record_stays_in_the_domain_and_off_marked_partitions(
        sequence: int, undeleted: int, marked_count: int) -> None:
    marked = range(undeleted, undeleted + marked_count)  # a shrink marks [u, c)
    partition = unkeyed_partition(sequence, undeleted, marked)
    assert 0 <= partition < undeleted
    assert partition not in marked


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=400),
       st.integers(min_value=1, max_value=64))
def test_unkeyed_records_spread_evenly(first: int, records: int, undeleted: int) -> None:
    counts = Counter(unkeyed_partition(n, undeleted, ()) for n in range(first, first + records))
    per_partition = [counts[p] for p in range(undeleted)]
    assert max(per_partition) - min(per_partition) <= 1
    assert sum(per_partition) == records
