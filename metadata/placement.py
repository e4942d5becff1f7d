"""Replica placement: round-robin over the unfenced brokers.

Partition p of a topic gets `replication_factor` consecutive brokers of the sorted list,
starting at `(start + p) mod n`; its first replica is the preferred leader. The start is
drawn from the caller's rng so leaders of many topics spread over the brokers."""

from __future__ import annotations

from collections.abc import Sequence


def place_replicas(brokers: Sequence[int], *, first_partition: int, count: int,
                   replication_factor: int, start: int) -> tuple[tuple[int, ...], ...]:
    """Replicas of partitions first_partition .. first_partition+count-1 (leader first)."""
    n = len(brokers)
    if not 1 <= replication_factor <= n:
        raise ValueError(f"replication factor {replication_factor} with {n} brokers")
    ordered = sorted(brokers)
    return tuple(
        tuple(ordered[(start + p + j) % n] for j in range(replication_factor))
        for p in range(first_partition, first_partition + count))
