"""One small class per quorum state (Kafka's `QuorumState` family, KIP-595 + KIP-996).

Each state knows its epoch, the leader and vote it holds for that epoch, its own timers,
and whether it may grant a vote. `RaftCore` owns the transitions between them and
persists the election state before anything that depends on it leaves the node. The
leader's state lives in `_leader_state`.

Vote rules (`can_grant_vote`), for a candidate whose log is at least as up to date:
- a real vote is granted at most once per epoch: only by a state that has neither voted
  nor learnt a leader in this epoch, or again to the same candidate;
- a pre-vote (KIP-996) changes nothing and is granted unless this node is a leader, or a
  follower that fetched from its leader within the fetch timeout.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar

from raft.common.uuid import Uuid
from raft.types import SnapshotId


class Role(enum.StrEnum):
    UNATTACHED = "unattached"
    VOTED = "voted"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(slots=True, kw_only=True)
class EpochState:
    """What every state has: the epoch and the election it persists for that epoch."""

    role: ClassVar[Role]
    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None
    # KIP-853: the vote is for a replica key (id and directory id), not a bare id.
    voted_directory_id: Uuid | None = None

    def can_grant_vote(self, candidate_id: int, is_log_ok: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        raise NotImplementedError

    def voted_for(self, candidate_id: int, candidate_directory_id: Uuid | None) -> bool:
        """Whether this state's vote is for exactly that replica key."""
        return (self.voted_id == candidate_id
                and self.voted_directory_id == candidate_directory_id)

    def timer_deadline_ms(self) -> int | None:
        """When this state's own timer (election or fetch timeout) fires."""
        return None


@dataclass(slots=True, kw_only=True)
class UnattachedState(EpochState):
    """No leader known and no vote cast in this epoch. Observers never time out here: they
    probe voters with Fetch until one names the leader."""

    role: ClassVar[Role] = Role.UNATTACHED
    election_deadline_ms: int | None = None  # None for observers

    def can_grant_vote(self, candidate_id: int, is_log_ok: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        return is_log_ok

    def timer_deadline_ms(self) -> int | None:
        return self.election_deadline_ms


@dataclass(slots=True, kw_only=True)
class VotedState(EpochState):
    role: ClassVar[Role] = Role.VOTED
    election_deadline_ms: int

    def can_grant_vote(self, candidate_id: int, is_log_ok: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        if pre_vote:
            return is_log_ok
        return candidate_id == self.voted_id  # idempotent: the same vote again

    def timer_deadline_ms(self) -> int | None:
        return self.election_deadline_ms


@dataclass(slots=True, kw_only=True)
class ProspectiveState(EpochState):
    """KIP-996: asks the voters for pre-votes in the next epoch before bumping its own.
    Keeps the leader and vote of the state it came from (nothing is persisted)."""

    role: ClassVar[Role] = Role.PROSPECTIVE
    election_deadline_ms: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    def can_grant_vote(self, candidate_id: int, is_log_ok: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        if pre_vote:
            return is_log_ok
        if self.voted_id is not None:
            return candidate_id == self.voted_id
        return self.leader_id is None and is_log_ok

    def timer_deadline_ms(self) -> int | None:
        return self.election_deadline_ms


@dataclass(slots=True, kw_only=True)
class CandidateState(EpochState):
    """Voted for itself in a new epoch; collects votes until it wins, loses or times out."""

    role: ClassVar[Role] = Role.CANDIDATE
    election_deadline_ms: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)

    def can_grant_vote(self, candidate_id: int, is_log_ok: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        return pre_vote and is_log_ok

    def timer_deadline_ms(self) -> int | None:
        return self.election_deadline_ms


@dataclass(slots=True, kw_only=True)
class FollowerState(EpochState):
    """Knows the leader of this epoch and fetches from it (voters and observers alike)."""

    role: ClassVar[Role] = Role.FOLLOWER
    fetch_timeout_ms: int
    fetch_deadline_ms: int  # no successful fetch by then: election (voter) / rediscovery
    last_fetch_success_ms: int | None = None
    fetch_correlation_id: int | None = None  # the one Fetch in flight
    next_fetch_ms: int = 0  # when to send the next Fetch if none is in flight
    leader_heard_ms: int = 0  # the leader's last answer to a Fetch (or this state's start)
    snapshot_fetch: SnapshotId | None = None  # fetching this snapshot (FetchSnapshot)
    # Observers: the shell lost or could not open its connection to the leader since the
    # last answer from it, so they ask the other voters who leads (see `_replication`).
    leader_unreachable: bool = False

    def can_grant_vote(self, candidate_id: int, is_log_ok: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        if not pre_vote:
            return False
        # KIP-996: a follower that hears from its leader protects it from disruption.
        recent = (self.last_fetch_success_ms is not None
                  and now_ms - self.last_fetch_success_ms < self.fetch_timeout_ms)
        return is_log_ok and not recent

    def timer_deadline_ms(self) -> int | None:
        return self.fetch_deadline_ms


@dataclass(slots=True, kw_only=True)
class ResignedState(EpochState):
    """A leader that stepped down (gracefully, by check-quorum, or found on restart) in its
    epoch: it appends nothing more and waits for someone else to win the next epoch."""

    role: ClassVar[Role] = Role.RESIGNED
    election_deadline_ms: int
    preferred_successors: tuple[int, ...] = ()
    unacknowledged: set[int] = field(default_factory=set)  # EndQuorumEpoch not yet acked

    def can_grant_vote(self, candidate_id: int, is_log_ok: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        return pre_vote and is_log_ok

    def timer_deadline_ms(self) -> int | None:
        return self.election_deadline_ms
