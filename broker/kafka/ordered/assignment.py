"""The ordered group leader's assignment (pure): partitions not marked for deletion and
marked ones are dealt round-robin separately, so every member gets its share of the
partitions that still receive records. The client's group leader (`tools.client.group`)
and the data-plane simulator's group (`broker.dataplane.sim`) both assign with it."""

from __future__ import annotations

from collections.abc import Iterable


def assign(members: Iterable[str], partitions: Iterable[int], marked: Iterable[int]
           ) -> dict[str, list[int]]:
    """member -> partitions: the unmarked ones round-robin over the members (sorted by
    id), then the marked ones, continuing the rotation where the first left off."""
    order = sorted(set(members))
    out: dict[str, list[int]] = {m: [] for m in order}
    if not order:
        return out
    marked_set = set(marked)
    unmarked = sorted(set(partitions) - marked_set)
    turn = 0
    for partition in unmarked + sorted(marked_set):
        out[order[turn % len(order)]].append(partition)
        turn += 1
    return out
