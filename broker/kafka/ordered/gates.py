"""The ordered consumer's decisions, without I/O: which records of a partition it may
deliver while the group has not yet consumed what must come before them.

- Creation gate: a partition P1 >= the initial count that this group has not consumed
  from yet (no committed position, or the committed one is the earliest offset) holds
  every record until the group's position of the partition its keys came from (P3) is
  past the last offset P3 got in the leader epoch recorded for P3 in P1's after-creation
  map. After that epoch, producers partitioned by the new count, so P3 holds no more keys
  that now go to P1.
- Deletion gate: for every partition P3 marked for deletion whose keys now map to P1,
  P1's records after the last offset of the epoch recorded for P1 in P3's
  before-deletion map wait until the group's position of P3 reaches P3's log end (P3
  gets no new records once marked, so that is all of them).
- Position reports: a member tells the coordinator its position of a partition another
  member waits on only when that can unblock someone, and has no position of a partition
  whose creation gate is still closed, to report or to open its own gates with: a
  partition added by a later growth waits on that one (its split source), whose start
  says nothing until the keys it took were consumed where they were before. So chains
  of growths wait transitively (2 -> 4 -> 8: 6 waits on 2, which waits on 0).
- Committed positions: a partition removed after a shrink may be added again by a later
  growth, under the same index with a new, empty log; the group's committed offset of
  the removed one says nothing of it (it would skip the new log's first records and its
  creation gate). A position is committed with the life of its partition it belongs to
  (`incarnation`: the topic ID and the after-creation map, whose epochs only grow) and
  counts only for that life.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.kafka.ordered.partitioner import split_source

NO_POSITION = -1  # the group's position of a partition no member has reported


def incarnation(topic_id: object, after_creation: Mapping[int, int]) -> str:
    """Which life of a partition index a committed position belongs to (the commit's
    metadata): the topic's ID and the epochs its after-creation map recorded."""
    epochs = ",".join(f"{p}:{e}" for p, e in sorted(after_creation.items()))
    return f"{topic_id}/{epochs}"


def committed_position(committed: tuple[int, str] | None, current: str) -> int | None:
    """The committed offset, if it was committed by the partition's `current` life."""
    if committed is None or committed[1] != current:
        return None
    return committed[0]


def needs_creation_gate(partition: int, initial: int, start: int | None,
                        earliest: int) -> bool:
    """Whether `partition` waits for its split source: an added partition the group
    starts reading at the beginning (committed position absent or the earliest offset)."""
    return partition >= initial and (start is None or start <= earliest)


def creation_source(partition: int, initial: int, prior: Iterable[int]) -> int:
    """The partition whose keys `partition` took when it was added: down its chain of
    split sources to the first partition that existed before (the keys of its
    after-creation map). Several partitions added at once can chain through each other."""
    existed = set(prior)
    while partition >= initial and partition not in existed:
        partition = split_source(partition, initial)
    return partition


@dataclass(frozen=True, slots=True)
class CreationGate:
    source: int  # P3
    source_epoch_end: int  # first offset of P3 after the recorded epoch

    def is_open(self, group_position: int) -> bool:
        return group_position != NO_POSITION and group_position >= self.source_epoch_end


@dataclass(frozen=True, slots=True)
class DeletionGate:
    blocker: int  # P3, marked for deletion
    upper_offset: int  # P1's last offset in the epoch recorded for it by P3's marking
    blocker_log_end: int  # P3's log end offset

    def is_open(self, group_position: int) -> bool:
        return group_position != NO_POSITION and group_position >= self.blocker_log_end


@dataclass(frozen=True, slots=True)
class PartitionGates:
    creation: CreationGate | None = None
    deletions: tuple[DeletionGate, ...] = ()

    def watched(self) -> set[int]:
        """The partitions whose group position these gates wait on."""
        out = {g.blocker for g in self.deletions}
        if self.creation is not None:
            out.add(self.creation.source)
        return out


def delivery_limit(gates: PartitionGates, positions: Mapping[int, int]) -> int | None:
    """The first offset that may not be delivered yet (None: no limit), given the group's
    positions of the watched partitions (absent: no member has reported one)."""
    if gates.creation is not None and \
            not gates.creation.is_open(positions.get(gates.creation.source, NO_POSITION)):
        return 0
    limits = [g.upper_offset + 1 for g in gates.deletions
              if not g.is_open(positions.get(g.blocker, NO_POSITION))]
    return min(limits) if limits else None


def known_positions(own: Mapping[int, tuple[int, PartitionGates]],
                    reported: Mapping[int, int]) -> dict[int, int]:
    """The group's positions the gates may go by: those other members reported, and this
    member's own (`own`: partition -> (position, gates)) of each partition whose creation
    gate is open by these positions, chains included."""
    known = {p: position for p, position in reported.items() if p not in own}
    waiting = dict(own)
    while True:
        opened = {p: position for p, (position, gates) in waiting.items()
                  if gates.creation is None or gates.creation.is_open(
                      known.get(gates.creation.source, NO_POSITION))}
        if not opened:
            return known
        known.update(opened)
        for p in opened:
            del waiting[p]


def deliverable(offset: int, limit: int | None) -> bool:
    return limit is None or offset < limit


def epoch_end_gate(end_offset: int) -> int:
    """OffsetForLeaderEpoch answers the first offset after an epoch: the KIP's threshold
    is the last offset in it, one less (-1 when the epoch holds nothing)."""
    return end_offset - 1


@dataclass(slots=True)
class ReportState:
    """What this member last told the coordinator about one partition's position."""
    position: int = NO_POSITION
    epoch: int = -1
    reported: bool = False


def should_report(last: ReportState, *, position: int, high_watermark: int,
                  epoch_before_position: int) -> bool:
    """Include a watched partition's position in the next ConsumerGroupPosition request:
    never reported since this member started, or it moved and caught up with the high
    watermark of the last Fetch, or the largest leader epoch before it grew."""
    if not last.reported:
        return True
    if position > last.position and position == high_watermark:
        return True
    return epoch_before_position > last.epoch
