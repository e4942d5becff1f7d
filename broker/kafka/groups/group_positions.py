"""Positions a consumer group's members exchange through its coordinator (pure).

Ordered delivery across a resize: a member may start on a partition only once the
group has consumed far enough in another partition, which some other member owns.
ConsumerGroupPosition (`raft.common.kafka.ordered_schemas`) is how they tell each other:

- a member *asks* for the group's position of a partition (need_position true): it is
  registered as interested, and answered with the position last reported (-1: none);
- every answer also lists each partition some member is interested in (need_position
  true), so that the member owning it *reports* its position in its next request
  (need_position false, position >= 0).

The state is soft and belongs to one generation: a new generation may have moved a
partition to another member, whose position is the only one that counts from then on,
so positions and interest start over. Within a generation a partition's position only
grows (the largest report is kept: reports may arrive out of order).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

NO_POSITION = -1
PartitionKey = tuple[Hashable, int]  # (topic ID, partition)


@dataclass(frozen=True, slots=True)
class PositionEntry:
    """One partition of an answer: need_position false -> `position` is the group's;
    true -> the owner should report its position next time."""

    key: PartitionKey
    need_position: bool
    position: int = NO_POSITION


@dataclass(slots=True, kw_only=True)
class GroupPositions:
    generation: int = -1
    positions: dict[PartitionKey, int] = field(default_factory=dict)
    interested: dict[PartitionKey, set[str]] = field(default_factory=dict)

    def exchange(self, *, generation: int, member_id: str,
                 reports: Iterable[tuple[PartitionKey, int]],
                 asks: Iterable[PartitionKey]) -> list[PositionEntry]:
        """Apply a member's request (its checks done by the caller) and answer it: the
        asked positions in the order asked, then every partition someone waits on."""
        if generation != self.generation:
            self.generation = generation
            self.positions.clear()
            self.interested.clear()
        for key, position in reports:
            if position >= 0 and position > self.positions.get(key, NO_POSITION):
                self.positions[key] = position
        asked = list(dict.fromkeys(asks))
        for key in asked:
            self.interested.setdefault(key, set()).add(member_id)
        answer = [PositionEntry(key, False, self.positions.get(key, NO_POSITION))
                  for key in asked]
        answer += [PositionEntry(key, True) for key in self.interested]
        return answer
