"""The leader's state: replica progress, high-watermark math, check-quorum, parked fetches.

High watermark (Raft §5.3-5.4.2, KIP-595): the largest offset held by a majority of
voters, where the leader counts only what it has flushed and each follower counts the
`fetch_offset` of its last valid Fetch (a Fetch leaves a follower only once everything
before that offset is durable there). It is only adopted once that offset lies in the
leader's own epoch (§5.4.2: never commit an older epoch's entries by counting replicas),
and it never goes back. Observers are tracked for DescribeQuorum but never counted.

KIP-853: progress belongs to a replica key. A Fetch from a voter's id with another
directory id (its disk wiped and formatted anew) is an observer's, never the voter's;
the voters are those of the set in force (`set_voters`, called whenever it changes), and
an observer that becomes a voter keeps its progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from raft.common.uuid import Uuid
from raft.core._quorum_state import EpochState, Role
from raft.messages import ReplicaState
from raft.types import Envelope
from raft.voters import VoterSet

CHECK_QUORUM_FACTOR_PERCENT = 150  # of the fetch timeout, as Kafka's check-quorum timer


@dataclass(slots=True)
class ReplicaProgress:
    replica_id: int
    directory_id: Uuid | None = None
    end_offset: int = 0
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    sent_high_watermark: int = 0  # the HW in the last Fetch response sent to it

    def to_replica_state(self) -> ReplicaState:
        return ReplicaState(replica_id=self.replica_id,
                            replica_directory_id=self.directory_id,
                            log_end_offset=self.end_offset,
                            last_fetch_timestamp=self.last_fetch_ms,
                            last_caught_up_timestamp=self.last_caught_up_ms)


@dataclass(slots=True)
class ParkedFetch:
    envelope: Envelope
    deadline_ms: int


@dataclass(slots=True, kw_only=True)
class PendingVoterChange:
    """A voter change (KIP-853) appended at `offset`, answered once that commits."""

    envelope: Envelope
    offset: int
    deadline_ms: int


@dataclass(slots=True, kw_only=True)
class LeaderState(EpochState):
    role: ClassVar[Role] = Role.LEADER
    node_id: int
    voters: tuple[int, ...]
    epoch_start_offset: int
    became_leader_ms: int
    granting_voters: tuple[int, ...] = ()
    voter_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    observer_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)  # by fetcher id
    begin_unacknowledged: set[int] = field(default_factory=set)
    # When the leader next re-announces itself to voters that stopped fetching (KIP-996).
    begin_quorum_due_ms: int = 0
    voter_set: VoterSet | None = None  # with directory ids (None: by id only)
    pending_change: PendingVoterChange | None = None

    def __post_init__(self) -> None:
        for voter in self.voters:
            self.voter_progress[voter] = ReplicaProgress(voter)
        self.begin_unacknowledged = {v for v in self.voters if v != self.node_id}

    def set_voters(self, voters: VoterSet) -> None:
        """The voter set in force changed (KIP-853): voters added keep what was known
        of them as observers (same key), voters removed become observers."""
        old = self.voter_progress
        self.voter_set = voters
        self.voters = voters.ids
        self.voter_progress = {}
        for voter in voters:
            key = voter.key
            progress = old.pop(key.id, None)
            if progress is not None and not voters.is_voter(key.id, progress.directory_id) \
                    and key.id != self.node_id:
                if progress.last_fetch_ms >= 0:
                    self.observer_progress[key.id] = progress  # another directory's
                progress = None
            if progress is None:
                observed = self.observer_progress.get(key.id)
                if observed is not None and voters.is_voter(key.id, observed.directory_id):
                    progress = self.observer_progress.pop(key.id)
            self.voter_progress[key.id] = progress or ReplicaProgress(
                key.id, key.directory_id)
        for replica_id, progress in old.items():
            if replica_id != self.node_id and progress.last_fetch_ms >= 0:
                self.observer_progress[replica_id] = progress
        self.begin_unacknowledged &= set(self.voters)

    def is_voter_key(self, replica_id: int, directory_id: Uuid | None) -> bool:
        if self.voter_set is None:
            return replica_id in self.voter_progress
        return self.voter_set.is_voter(replica_id, directory_id)

    def can_grant_vote(self, candidate_id: int, is_log_ok: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        return False  # a live leader neither votes nor lets a pre-vote disrupt it

    def update_replica(self, replica_id: int, fetch_offset: int | None, now_ms: int,
                       log_end_offset: int, directory_id: Uuid | None = None) -> None:
        """Record a Fetch in this epoch; `fetch_offset` None when it diverged: the
        fetcher knows this epoch, but it is neither replicating nor following yet, so
        it counts neither for the high watermark nor as contact for check-quorum. A
        voter's id with another directory id is an observer (KIP-853)."""
        is_voter = self.is_voter_key(replica_id, directory_id)
        progress = self.voter_progress.get(replica_id) if is_voter else None
        if progress is not None:
            self.begin_unacknowledged.discard(replica_id)
            progress.directory_id = directory_id
        if fetch_offset is None:
            return
        if progress is None:
            progress = self.observer_progress.get(replica_id)
            if progress is None or progress.directory_id != directory_id:
                progress = self.observer_progress[replica_id] = ReplicaProgress(
                    replica_id, directory_id)
        progress.last_fetch_ms = now_ms
        progress.end_offset = fetch_offset
        if fetch_offset >= log_end_offset:
            progress.last_caught_up_ms = now_ms

    def note_snapshot_fetch(self, replica_id: int, now_ms: int,
                            directory_id: Uuid | None = None) -> None:
        """A FetchSnapshot in this epoch: the fetcher follows this leader (contact for
        check-quorum) though its log end is not known yet."""
        progress = self.voter_progress.get(replica_id)
        if progress is not None and self.is_voter_key(replica_id, directory_id):
            self.begin_unacknowledged.discard(replica_id)
            progress.last_fetch_ms = now_ms

    def silent_voters(self, now_ms: int, silence_ms: int) -> list[int]:
        """Other voters with no valid Fetch for `silence_ms`: one that timed out and
        campaigned in a later epoch that it lost learns of this leader only if told, and
        this leader learns of the later epoch only from its answer."""
        return [v for v, p in sorted(self.voter_progress.items())
                if v != self.node_id
                and now_ms - max(p.last_fetch_ms, self.became_leader_ms) >= silence_ms]

    def progress_of(self, replica_id: int) -> ReplicaProgress | None:
        progress = self.voter_progress.get(replica_id)
        return progress if progress is not None else self.observer_progress.get(replica_id)

    def majority_end_offset(self, own_flushed_end: int) -> int:
        """The largest offset held by a majority of voters (the leader's own = flushed)."""
        ends = sorted((own_flushed_end if voter == self.node_id else progress.end_offset
                       for voter, progress in self.voter_progress.items()), reverse=True)
        return ends[len(ends) // 2]

    def check_quorum_deadline_ms(self, fetch_timeout_ms: int) -> int | None:
        """When the leader must resign unless more voters fetch (None: it alone is a
        majority): 1.5 fetch timeouts after the majority's latest valid Fetch, as
        Kafka's check-quorum, so a follower's own fetch timeout fires first. A voter
        that has not fetched yet counts from the start of the epoch."""
        # Other voters needed for a majority (all of a majority when this leader is
        # being removed: KIP-853, it does not count itself).
        needed = len(self.voters) // 2 + 1 - (1 if self.node_id in self.voter_progress else 0)
        if needed == 0:
            return None
        recent = sorted((max(p.last_fetch_ms, self.became_leader_ms)
                         for v, p in self.voter_progress.items() if v != self.node_id),
                        reverse=True)
        return recent[needed - 1] + fetch_timeout_ms * CHECK_QUORUM_FACTOR_PERCENT // 100

    def successors_by_progress(self) -> tuple[int, ...]:
        """Other voters, the most replicated first (ties by id, for determinism)."""
        others = [p for v, p in self.voter_progress.items() if v != self.node_id]
        others.sort(key=lambda p: (-p.end_offset, p.replica_id))
        return tuple(p.replica_id for p in others)

    def replica_states(self, own_end: int, now_ms: int
                       ) -> tuple[tuple[ReplicaState, ...], tuple[ReplicaState, ...]]:
        voters = []
        for voter in self.voters:
            if voter == self.node_id:
                own_dir = None if self.voter_set is None else self.voter_set.directory_of(voter)
                voters.append(ReplicaState(replica_id=voter, replica_directory_id=own_dir,
                                           log_end_offset=own_end,
                                           last_fetch_timestamp=now_ms,
                                           last_caught_up_timestamp=now_ms))
            else:
                voters.append(self.voter_progress[voter].to_replica_state())
        observers = tuple(self.observer_progress[o].to_replica_state()
                          for o in sorted(self.observer_progress))
        return tuple(voters), observers
