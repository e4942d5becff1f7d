"""Linear hashing of record keys over a topic whose partition count grows and shrinks.

N is the topic's initial partition count, u its undeleted count (N <= u). With L the
largest integer such that N*2^L <= u and S = u - N*2^L, a key with hash h goes to
h mod N*2^L, or to h mod N*2^(L+1) when the former is below S. Partitions then split
one at a time: growing u to u+1 moves keys only from `split_source(u)` into u, and
shrinking u to u-1 moves keys of u-1 only back into `split_source(u-1)`.

A record without a key has no order to keep: it goes round-robin over the same domain,
the partitions 0..u-1 (Kafka's sticky partitioner, with batches of one record). Every
partition marked for deletion is at or above u, so none of them ever gets one.
"""

from __future__ import annotations

from collections.abc import Iterable

_MASK32 = 0xFFFFFFFF
_SEED, _M, _R = 0x9747B28C, 0x5BD1E995, 24


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (`Utils.murmur2`) as an unsigned 32-bit value."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length - length % 4
    if length % 4 >= 3:
        h ^= data[tail + 2] << 16
    if length % 4 >= 2:
        h ^= data[tail + 1] << 8
    if length % 4 >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h


def to_positive(value: int) -> int:
    """Kafka's `Utils.toPositive`: the hash with its sign bit cleared."""
    return value & 0x7FFFFFFF


def _check_counts(initial: int, undeleted: int) -> None:
    if initial < 1 or undeleted < initial:
        raise ValueError(f"need 1 <= initial ({initial}) <= undeleted ({undeleted})")


def partition_for_hash(h: int, initial: int, undeleted: int) -> int:
    _check_counts(initial, undeleted)
    low = initial  # N*2^L, the largest such value <= undeleted
    while low * 2 <= undeleted:
        low *= 2
    split_below = undeleted - low  # S: partitions below this have already split
    partition = h % low
    return h % (low * 2) if partition < split_below else partition


def partition_for(key: bytes, initial: int, undeleted: int) -> int:
    """The partition of `key` when the topic has `undeleted` partitions (of `initial`)."""
    return partition_for_hash(to_positive(murmur2(key)), initial, undeleted)


def unkeyed_partition(sequence: int, undeleted: int, marked: Iterable[int]) -> int:
    """The partition of the producer's `sequence`-th record without a key: round-robin
    over 0..undeleted-1. A marked partition below the undeleted count would be a broken
    image (a shrink marks only the partitions above its count): refused."""
    if undeleted < 1:
        raise ValueError(f"need an undeleted count >= 1, got {undeleted}")
    inside = sorted(p for p in marked if p < undeleted)
    if inside:
        raise ValueError(f"partitions {inside} are marked below the undeleted count "
                         f"{undeleted}")
    return sequence % undeleted


def level(partition: int, initial: int) -> int:
    """The l with N*2^l <= partition < N*2^(l+1), for a partition >= N."""
    if partition < initial:
        raise ValueError(f"partition {partition} is one of the initial {initial}")
    return (partition // initial).bit_length() - 1


def split_source(partition: int, initial: int) -> int:
    """The partition that `partition` (>= N) was split from: P - N*2^l."""
    return partition - (initial << level(partition, initial))


def landing_partition(partition: int, initial: int, undeleted: int) -> int:
    """Where the keys of `partition` go when the topic has `undeleted` partitions: down its
    chain of split sources to the first one still undeleted."""
    _check_counts(initial, undeleted)
    while partition >= undeleted:
        partition = split_source(partition, initial)
    return partition


def deletion_blockers(p1: int, marked: Iterable[int], initial: int, undeleted: int
                      ) -> list[int]:
    """The partitions marked for deletion whose keys went to `p1` at some shrink: a
    consumer must not pass p1's records written after that shrink until the group has
    drained them.

    A marked P3's keys moved down its chain of split sources, one shrink at a time, to
    the first partition still undeleted; every partition on the way (P3's split source,
    and so on) may have received them while it was undeleted, even one marked by a later
    shrink itself (8 → 5 moves 7's keys to 3; 5 → 3 marks 3, whose records written
    under 5 still follow 7's). So P1 waits on every marked P3 whose chain passes P1."""
    blockers = []
    for p3 in set(marked):
        if p3 <= p1 or p3 < undeleted:
            continue
        partition = p3
        while partition >= undeleted and partition > p1:
            partition = split_source(partition, initial)
        if partition == p1:
            blockers.append(p3)
    return sorted(blockers)
