"""Deliberate data-plane bugs (`kraft sim --data-plane --planted-bug NAME`), each breaking
one rule of `broker.dataplane`, so the simulator proves its checks find that kind of bug
by themselves. They replace a rule here, in the simulator; the production rules have no
switches for them.

- `dp_hw_from_diverging_answer`: a follower takes the leader's high watermark from an
  answer that says its log diverged, before truncating: it then vouches for records the
  leader never had.
- `dp_ack_before_isr`: the leader acknowledges an acks=all write once it is in its own
  log, without waiting for the high watermark (the ISR).
- `dp_isr_shrink_before_commit`: the leader's high watermark follows the ISR it has only
  proposed (not the maximal ISR): a removal counts before the controller accepted it.
- `dp_truncate_below_hw`: a diverged follower truncates to where the answered epoch
  starts in its own log, cutting records it already counted as committed.
- `dp_consumer_reads_log_end`: a leader serves consumers up to its log end, not its high
  watermark (what a follower's Fetch may read).
- `dp_truncate_to_leader_end`: a diverged follower truncates to the leader's end of the
  answered epoch alone (the broker's rule before KIP-279's): when its own copy of that
  epoch ended earlier, it never converges.
- `dp_producer_state_not_rebuilt`: a broker that restarts or becomes leader starts with
  an empty producer state, not the one its log's batches give: an idempotent producer's
  retry of a batch the log already holds is taken for a new producer's first batch
  (KIP-360 accepts an unknown producer at any sequence) and stored twice.
- `dp_stale_leader_accepts_writes`: a broker judges its leadership by the epoch of the
  acks=all writes it still waits on, not by its image: after the metadata it applied
  moved leadership away (or bumped the leader epoch) it keeps appending produces in that
  epoch while its log still ends in it, and acknowledges its waiting writes once its high
  watermark passes them. That high watermark is by then a follower's: the new leader's,
  taken from its fetch answers after truncating the stale epoch's unreplicated records
  and fetching the new leader's at the same offsets; so the acknowledgement vouches for
  records it no longer holds (`acked-is-committed`). The real rule (`acks.leadership_lost`)
  stops vouching as soon as the image shows another leader, or another epoch without
  the records.

KIP-253's four schedules (docs/kip-253.md, "Schedules"), each undoing one fix in the
simulator's use of the rule:
- `dp_count_and_stamp_two_images` (a): a produce's count and mark are checked by the
  image of its arrival, its leader epoch stamped by the one read under the partition
  lock: a growth applied in between stores a record routed by the old count in its
  source's new epoch, after the new partition's creation gate.
- `dp_lagging_leader_answers_gate` (b): the group members' gate queries
  (OffsetForLeaderEpoch, ListOffsets) carry no leader epoch, so a leader that has not
  applied the resize answers them, then takes records of the old count, which the
  member reading that partition has not delivered when another member's gate opens by
  its reported position. The fix has two parts, and both are undone: the epoch fences
  the queries, and a leader refuses a count other than its image's, ahead included
  (here it takes the controller's count unchecked until it applies it). With the
  first part alone undone the sweep did not find the schedule: the lagging leader
  refuses the members that hold the resize, each refusal is a rebalance, and the
  gates built again are above the old-count records taken by then.
- `dp_gated_source_reports_position` (c): a member counts (and reports) its position of
  every partition it owns, even one whose own creation gate is closed (`known_positions`
  skipped): after two growths with nothing in the middle partition, the last one opens
  before the first's records were delivered.
- `dp_deletion_gate_uses_high_watermark` (d): ListOffsets LATEST of a marked partition
  answers its high watermark, not its committed log end: a record still on its way to a
  follower is left behind the deletion gate.
- `dp_member_fetch_unfenced`: a member's Fetch carries no leader epoch (the ordered
  client's before the metadata-freeze fault found this): a member whose metadata is an
  older layout with the same undeleted count (3 before a growth to 7, against 3 after
  the shrink back) is served, and delivers from a partition without the newer layout's
  deletion gate, before the marked partition's records of the same key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from broker.dataplane.acks import ACKED
from broker.dataplane.progress import LeaderProgress, ReplicaLog
from broker.dataplane.sim.log import SimLog
from broker.kafka.partitions.producer_state import ProducerStates
from metadata.image import PartitionImage
from raft.common.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class Plant:
    """What a planted bug replaces (nothing: the real rules)."""

    progress: Callable[[ReplicaLog, int], LeaderProgress] | None = None
    # (broker id, replica, pending, partition state) -> a verdict in place of the rule's
    verdict: Callable[[int, Any, Any, PartitionImage | None],
                      tuple[ErrorCode, str] | None] = \
        lambda broker_id, replica, pending, current: None
    hw_from_diverging_answer: bool = False
    truncation: Callable[[tuple[int, int], SimLog], int] | None = None
    consumer_upper: Callable[[Any], int] | None = None  # (replica) -> where a read stops
    # the producer state a broker starts with when it restarts or becomes leader (None:
    # the one its log's batches give)
    producer_state: Callable[[SimLog], ProducerStates] | None = None
    # the partition state a broker judges its leadership in an epoch by (None: its image's)
    leadership: Callable[[int, Any, PartitionImage | None, int],
                         PartitionImage | None] | None = None
    count_and_stamp_two_images: bool = False  # (a)
    lagging_leader_unfenced: bool = False  # (b)
    gated_positions_known: bool = False  # (c)
    marked_end_is_high_watermark: bool = False  # (d)
    member_fetch_unfenced: bool = False


class _ProposedIsrProgress(LeaderProgress):
    __slots__ = ()

    def maximal_isr(self, partition: PartitionImage) -> tuple[int, ...]:
        pending = self.pending_isr
        if pending is not None and pending.is_based_on(partition):
            return pending.isr
        return partition.isr


def _ack_on_append(broker_id: int, replica: Any, pending: Any,
                   current: PartitionImage | None) -> tuple[ErrorCode, str] | None:
    in_log = pending.offset < replica.log.log_end_offset
    return ACKED if in_log and current is not None and current.leader == broker_id \
        else None


def _to_epoch_start(diverging: tuple[int, int], log: SimLog) -> int:
    epoch, _ = diverging
    starts = [offset for e, offset in log.epoch_starts if e <= epoch]
    return starts[-1] if starts else 0


def _to_leader_end(diverging: tuple[int, int], log: SimLog) -> int:
    return max(0, min(diverging[1], log.log_end_offset))


def _leads_while_waiting(broker_id: int, replica: Any, current: PartitionImage | None,
                         epoch: int) -> PartitionImage | None:
    """`dp_stale_leader_accepts_writes`: the broker leads `epoch` while it waits on writes
    it took in it, whatever its image says."""
    if current is None or not any(p.leader_epoch == epoch for p in replica.pending):
        return current
    return replace(current, leader=broker_id, leader_epoch=epoch)


PLANTS: dict[str, Plant] = {
    "dp_hw_from_diverging_answer": Plant(hw_from_diverging_answer=True),
    "dp_ack_before_isr": Plant(verdict=_ack_on_append),
    "dp_isr_shrink_before_commit": Plant(
        progress=lambda log, now: _ProposedIsrProgress(log=log, opened_at=now)),
    "dp_truncate_below_hw": Plant(truncation=_to_epoch_start),
    "dp_consumer_reads_log_end": Plant(
        consumer_upper=lambda replica: replica.log.log_end_offset),
    "dp_truncate_to_leader_end": Plant(truncation=_to_leader_end),
    "dp_producer_state_not_rebuilt": Plant(producer_state=lambda log: ProducerStates()),
    "dp_stale_leader_accepts_writes": Plant(leadership=_leads_while_waiting),
    "dp_count_and_stamp_two_images": Plant(count_and_stamp_two_images=True),
    "dp_lagging_leader_answers_gate": Plant(lagging_leader_unfenced=True),
    "dp_gated_source_reports_position": Plant(gated_positions_known=True),
    "dp_deletion_gate_uses_high_watermark": Plant(marked_end_is_high_watermark=True),
    "dp_member_fetch_unfenced": Plant(member_fetch_unfenced=True),
}
PLANTED_BUGS = tuple(PLANTS)
# KIP-253's schedules: found by the ordered workload, in more seeds than the others
ORDERED_BUGS = ("dp_count_and_stamp_two_images", "dp_lagging_leader_answers_gate",
                "dp_gated_source_reports_position", "dp_deletion_gate_uses_high_watermark",
                "dp_member_fetch_unfenced")
