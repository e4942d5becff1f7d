"""The leader's side of a partition's replication: its followers' progress, the high
watermark it gives, the ISR changes it proposes (pure: the shell passes in the time and
the broker's image of the partition, which may lag the controller's)."""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, field
from typing import Protocol

from metadata.image import PartitionImage
from raft.common.errors import ErrorCode

# refused because this leader decided on an older state: the image will show the newer
WAIT_FOR_IMAGE_CODES = frozenset({ErrorCode.INVALID_UPDATE_VERSION,
                                  ErrorCode.FENCED_LEADER_EPOCH,
                                  ErrorCode.NOT_LEADER_OR_FOLLOWER})


class AlterOutcome(enum.Enum):
    """What the controller's answer to a proposed ISR meant (see `LeaderProgress.answered`)."""

    UNCHANGED = "unchanged"  # the ISR already was so: nothing written
    CHANGED = "changed"  # written: it counts until the image shows it
    WAIT_FOR_IMAGE = "wait"  # refused on an older state: the image will show the newer
    REFUSED = "refused"  # nothing written: decide again from the image
    STALE = "stale"  # the image moved on meanwhile: the answer is about an old state


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingIsr:
    """An ISR this leader proposed with AlterPartition, based on the image's partition
    state at (`leader_epoch`, `partition_epoch`); forgotten once that state changes."""

    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    resend_at: float = math.inf  # inf: in flight, or waiting for the image

    def is_based_on(self, partition: PartitionImage) -> bool:
        return (self.leader_epoch, self.partition_epoch) == (partition.leader_epoch,
                                                              partition.partition_epoch)


class ReplicaLog(Protocol):
    """What the rules read of a replica's log."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...


@dataclass(slots=True, kw_only=True, eq=False)
class LeaderProgress:
    """A partition replica's high watermark and, on the leader, its followers' progress
    and the ISR changes that progress calls for (pure: time is passed in).

    The high watermark is the smallest log end among the *maximal* ISR (KIP-497, as
    Kafka's Partition does): the image's ISR plus the replicas this leader has proposed
    to add. A replica leaves the high watermark only once the controller's shrunk ISR is
    in the image, so every acknowledged record is on every replica the controller may
    elect; an addition counts at once, which only holds the high watermark back."""

    log: ReplicaLog
    high_watermark: int = 0
    follower_offsets: dict[int, int] = field(default_factory=dict)
    follower_fetch_times: dict[int, float] = field(default_factory=dict)
    # the leader's log end when each follower last fetched (for the caught-up time)
    follower_fetch_log_ends: dict[int, int] = field(default_factory=dict)
    follower_caught_up_times: dict[int, float] = field(default_factory=dict)
    # each follower's log start, from its fetches (DeleteRecords' low watermark)
    follower_log_starts: dict[int, int] = field(default_factory=dict)
    pending_isr: PendingIsr | None = None
    leader_epoch: int = -1  # the leader epoch the follower state above belongs to
    leader_since: float = 0.0
    opened_at: float = 0.0

    def __post_init__(self) -> None:
        self.leader_since = self.opened_at

    def notify(self) -> None:
        """The high watermark moved (the shell wakes what waits on it)."""

    def record_follower_fetch(self, replica_id: int, offset: int, now: float) -> None:
        """A follower's fetch offset: everything below it is on that replica. It is caught
        up (Kafka's lastCaughtUpTime) when it fetches from the log end, or from where the
        log ended at its previous fetch (then it was caught up at that fetch's time)."""
        log_end = self.log.log_end_offset
        if offset >= log_end:
            self.follower_caught_up_times[replica_id] = now
        elif offset >= self.follower_fetch_log_ends.get(replica_id, log_end + 1):
            self.follower_caught_up_times[replica_id] = self.follower_fetch_times[replica_id]
        self.follower_offsets[replica_id] = offset
        self.follower_fetch_times[replica_id] = now
        self.follower_fetch_log_ends[replica_id] = log_end

    def observe_partition(self, partition: PartitionImage, now: float) -> None:
        """The image's state of this partition: a new leader epoch gives every follower
        a full lag time again; a pending ISR based on an older state is forgotten (the
        image now shows the controller's decision, or a change that overrides it)."""
        if partition.leader_epoch != self.leader_epoch:
            self.leader_epoch = partition.leader_epoch
            self.leader_since = now
            for progress in (self.follower_offsets, self.follower_fetch_times,
                             self.follower_fetch_log_ends, self.follower_caught_up_times,
                             self.follower_log_starts):
                progress.clear()
        if self.pending_isr is not None and not self.pending_isr.is_based_on(partition):
            self.pending_isr = None

    def maximal_isr(self, partition: PartitionImage) -> tuple[int, ...]:
        """The image's ISR plus the replicas a pending AlterPartition adds."""
        pending = self.pending_isr
        if pending is None or not pending.is_based_on(partition):
            return partition.isr
        return partition.isr + tuple(r for r in pending.isr if r not in partition.isr)

    def low_watermark(self, partition: PartitionImage, broker_id: int) -> int:
        """The smallest log start among this leader and the followers of the maximal
        ISR (-1 for a follower not heard from since the leader epoch began)."""
        return min([self.log.log_start_offset] + [
            self.follower_log_starts.get(replica, -1)
            for replica in self.maximal_isr(partition) if replica != broker_id])

    def caught_up_time(self, replica_id: int) -> float:
        return self.follower_caught_up_times.get(replica_id, self.leader_since)

    def is_expansion_candidate(self, partition: PartitionImage, replica_id: int) -> bool:
        """A replica outside the ISR whose fetch offset reached the high watermark."""
        return (replica_id in partition.replicas and replica_id not in partition.isr
                and self.follower_offsets.get(replica_id, -1) >= self.high_watermark)

    def is_out_of_sync(self, replica_id: int, now: float, lag_time_max_s: float) -> bool:
        """Kafka's rule: behind the log end and not caught up for the lag time (an idle
        follower holding everything stays in sync)."""
        return (self.follower_offsets.get(replica_id, -1) < self.log.log_end_offset
                and now - self.caught_up_time(replica_id) > lag_time_max_s)

    def isr_proposal(self, partition: PartitionImage, leader_id: int, now: float, *,
                     lag_time_max_s: float, eligible: frozenset[int]
                     ) -> tuple[int, ...] | None:
        """The ISR this leader should propose, or None (no change, or one in flight).
        Out: followers out of sync. In: `eligible` (unfenced) replicas that reached the
        high watermark with a fetch within the lag time (alive: a stopped replica that
        once got there is not added back)."""
        if self.pending_isr is not None and self.pending_isr.is_based_on(partition):
            return None
        kept = tuple(r for r in partition.isr
                     if r == leader_id or not self.is_out_of_sync(r, now, lag_time_max_s))
        added = tuple(
            r for r in partition.replicas
            if r in eligible and self.is_expansion_candidate(partition, r)
            and now - self.follower_fetch_times.get(r, -math.inf) <= lag_time_max_s)
        proposal = kept + added
        if leader_id not in proposal or set(proposal) == set(partition.isr):
            return None
        return proposal

    def maybe_advance_high_watermark(self, partition: PartitionImage, leader_id: int) -> bool:
        """Move the high watermark to the smallest log end among the maximal ISR. Only
        progress recorded in the partition's current leader epoch counts: what followers
        fetched while this broker led an earlier epoch may since have been truncated."""
        current = self.leader_epoch == partition.leader_epoch
        offsets = [self.log.log_end_offset]
        for replica in self.maximal_isr(partition):
            if replica != leader_id:
                offsets.append(self.follower_offsets.get(replica, 0) if current else 0)
        candidate = min(offsets)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            self.notify()
            return True
        return False

    def next_proposal(self, partition: PartitionImage, leader_id: int, now: float, *,
                      lag_time_max_s: float, eligible: frozenset[int]
                      ) -> tuple[int, ...] | None:
        """The ISR to send the controller now, marked pending, or None. A pending ISR
        whose outcome is unknown is sent again unchanged once due, never dropped: the
        controller may have committed it, and then its additions must keep counting until
        the image shows them."""
        pending = self.pending_isr
        if pending is not None and pending.is_based_on(partition):
            if now < pending.resend_at:
                return None
            self.pending_isr = dataclasses.replace(pending, resend_at=math.inf)
            return pending.isr
        proposal = self.isr_proposal(partition, leader_id, now,
                                     lag_time_max_s=lag_time_max_s, eligible=eligible)
        if proposal is not None:
            self.pending_isr = PendingIsr(isr=proposal, leader_epoch=partition.leader_epoch,
                                          partition_epoch=partition.partition_epoch)
        return proposal

    def unanswered(self, partition: PartitionImage, now: float) -> None:
        """The proposal's outcome is unknown: send the same ISR again next round."""
        pending = self.pending_isr
        if pending is not None and pending.is_based_on(partition):
            self.pending_isr = dataclasses.replace(pending, resend_at=now)

    def answered(self, partition: PartitionImage, error_code: int, partition_epoch: int,
                 now: float, image_wait_s: float) -> AlterOutcome:
        """The controller's answer to the ISR proposed on `partition`'s state."""
        pending = self.pending_isr
        if pending is None or not pending.is_based_on(partition):
            return AlterOutcome.STALE
        if error_code == ErrorCode.NONE and partition_epoch == partition.partition_epoch:
            self.pending_isr = None
            return AlterOutcome.UNCHANGED
        if error_code == ErrorCode.NONE or error_code in WAIT_FOR_IMAGE_CODES:
            self.pending_isr = dataclasses.replace(pending, resend_at=now + image_wait_s)
            return AlterOutcome.CHANGED if error_code == ErrorCode.NONE \
                else AlterOutcome.WAIT_FOR_IMAGE
        self.pending_isr = None
        return AlterOutcome.REFUSED
