"""`CoreBase`: the state every part of the Raft core shares, and the transitions between
the quorum states (each persisting the election state before anything else leaves).

The election (`_election`) and replication (`_replication`) parts are mixins over this
base and `RaftCore` (`_raft_core`) combines them; the base declares, as abstract
methods, the few steps of theirs a transition needs (ask for votes, announce an epoch,
send a Fetch, answer parked fetches), so no module here imports one above it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.control_records import LeaderChange, MetadataTopic
from raft.core._leader_state import LeaderState
from raft.core._quorum_state import (
    CandidateState,
    EpochState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    Role,
    UnattachedState,
    VotedState,
)
from raft.core._topic_id import MetadataTopicIds
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CurrentLeader,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)
from raft.snapshot_store import MemorySnapshotStore, SnapshotStore
from raft.types import Batch, ElectionState, Envelope, RaftLog, SnapshotId

log = logging.getLogger(__name__)

_RESPONSE_FOR = {VoteRequest: VoteResponse, BeginQuorumEpochRequest: BeginQuorumEpochResponse,
                 EndQuorumEpochRequest: EndQuorumEpochResponse, FetchRequest: FetchResponse,
                 FetchSnapshotRequest: FetchSnapshotResponse}
# Errors about the addressing of a request: the response's leader fields mean nothing.
ADDRESSING_ERRORS = frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID, ErrorCode.UNKNOWN_TOPIC_ID,
                               ErrorCode.INCONSISTENT_TOPIC_ID,
                               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


class RaftInvariantError(AssertionError):
    """The core found its own state broken: stop the node loudly."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RaftConfig:
    voters: tuple[int, ...]
    election_timeout_ms: int = 1000  # randomised in [t, 2t)
    fetch_timeout_ms: int = 2000  # quorum.fetch.timeout.ms (check-quorum: 1.5 times this)
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500  # long-poll parking of empty fetches
    # How long a voter's parked fetch may wait for records to carry a new HW with
    # (`Replication._tell_parked_fetches_hw`).
    fetch_hw_news_wait_ms: int = 5
    fetch_max_bytes: int = 1 << 20
    pre_vote: bool = True
    retry_backoff_ms: int = 100  # before re-sending a Fetch that failed
    fetch_snapshot_max_bytes: int = 1 << 20  # per FetchSnapshot answer

    def __post_init__(self) -> None:
        if not self.voters or len(set(self.voters)) != len(self.voters):
            raise ValueError(f"voters must be distinct and non-empty: {self.voters}")
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0:
            raise ValueError("timeouts must be positive")


@dataclass(slots=True)
class Inflight:
    """A request this node sent: its response counts only while `state` is current."""

    dst: int
    state: EpochState
    request: Any
    response_type: type
    deadline_ms: int


class CoreBase:
    def __init__(self, *, node_id: int, config: RaftConfig, log: RaftLog,
                 election: ElectionState | None, cluster_id: str, rng: random.Random,
                 now_ms: int, snapshots: SnapshotStore | None = None) -> None:
        self._node_id = node_id
        self._config = config
        self._log = log
        # Snapshots this node serves (leader) or fetches (follower); the one at the log
        # start, if the log starts above 0, stands in for the records below it.
        self._snapshots: SnapshotStore = snapshots or MemorySnapshotStore()
        self._loaded_snapshot: SnapshotId | None = None  # for the next Ready
        self._cluster_id = cluster_id
        self._rng = rng
        self._voters = tuple(config.voters)
        self._voter_set = frozenset(config.voters)
        self._is_voter = node_id in self._voter_set
        self._majority = len(self._voters) // 2 + 1
        self._outbox: list[Envelope] = []
        # The leader's fetch answers: `Ready.early_messages` (see raft/types.py).
        self._early_outbox: list[Envelope] = []
        self._pending_election: ElectionState | None = None
        self._persisted: tuple[int, int | None, int | None] | None = None
        self._pending_entries: list[Batch] = []
        self._pending_truncate: int | None = None
        self._high_watermark = log.start_offset  # a snapshot holds only committed records
        self._hw_dirty = False
        self._leader_high_watermark: int | None = None  # as last heard from a leader
        self._leader_hw_dirty = False
        self._next_correlation_id = 1
        self._inflight: dict[int, Inflight] = {}
        self._last_fetch_request: FetchRequest | None = None
        self._topic_ids = MetadataTopicIds(cluster_id)
        if log.start_offset:
            self._check_snapshot_at_log_start()
            self._topic_ids.on_snapshot(self._snapshots, SnapshotId(log.start_offset,
                                                                    log.start_epoch))
        self._probe_index = 0  # observers: which voter to ask for the leader next
        self._probe_correlation_id: int | None = None
        self._probe_at_ms = now_ms
        self._last_now_ms = now_ms  # the time of the last input (for `advance`)
        self._state: EpochState = self._initial_state(election, now_ms)
        if election is not None:
            self._persisted = (election.epoch, election.leader_id, election.voted_id)
        self._persist_election()
        if isinstance(self._state, FollowerState | UnattachedState):
            self._maybe_send_fetch(now_ms)

    def _initial_state(self, election: ElectionState | None, now_ms: int) -> EpochState:
        if election is None:
            return self._new_unattached(0, now_ms)
        epoch, leader_id, voted_id = election.epoch, election.leader_id, election.voted_id
        if leader_id == self._node_id and self._is_voter:
            # A leader cannot resume its epoch after a restart (Kafka does the same).
            return ResignedState(epoch=epoch, leader_id=leader_id, voted_id=voted_id,
                                 election_deadline_ms=now_ms + self._election_timeout())
        if leader_id is not None and leader_id != self._node_id:
            return self._new_follower(epoch, leader_id, voted_id, now_ms)
        if voted_id is not None and self._is_voter:
            return VotedState(epoch=epoch, voted_id=voted_id,
                              election_deadline_ms=now_ms + self._election_timeout())
        return self._new_unattached(epoch, now_ms)

    def _check_snapshot_at_log_start(self) -> None:
        start = SnapshotId(self._log.start_offset, self._log.start_epoch)
        if self._snapshots.size(start) is None:
            raise RaftInvariantError(f"the log starts at {start.end_offset} but there is no "
                                     f"snapshot {start.file_name} to stand in for the "
                                     "records below")

    # --- read-only properties -------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def role(self) -> Role:
        return self._state.role

    @property
    def leader_id(self) -> int | None:
        leader = self._state.leader_id
        if leader == self._node_id and self._state.role is not Role.LEADER:
            return None  # resigned (or campaigning after resigning): it leads no more
        return leader

    @property
    def voted_id(self) -> int | None:
        return self._state.voted_id

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def leader_high_watermark(self) -> int | None:
        """The leader's high watermark as this node last heard it (its own when it leads);
        None before it heard any. Unlike `high_watermark`, not capped at this log's end."""
        return self._leader_high_watermark

    @property
    def is_leader(self) -> bool:
        return self._state.role is Role.LEADER

    @property
    def is_voter(self) -> bool:
        return self._is_voter

    @property
    def snapshots(self) -> SnapshotStore:
        return self._snapshots

    @property
    def metadata_topic_id(self) -> Uuid | None:
        return self._topic_ids.committed

    @property
    def log(self) -> RaftLog:
        return self._log

    @property
    def config(self) -> RaftConfig:
        return self._config

    @property
    def has_ready(self) -> bool:
        return bool(self._outbox or self._early_outbox or self._pending_entries
                    or self._hw_dirty
                    or self._leader_hw_dirty
                    or self._pending_election is not None or self._pending_truncate is not None
                    or self._loaded_snapshot is not None)

    # --- transitions ----------------------------------------------------------------

    def transition_to_unattached(self, epoch: int, now_ms: int) -> None:
        """A newer epoch with no known leader. A node that was already waiting to
        campaign keeps its election deadline (Raft §5.2: only a granted vote or a live
        leader resets it), so a candidate that cannot win cannot silence the others by
        bumping epochs over and over."""
        state = self._new_unattached(epoch, now_ms)
        old = self._state
        if (state.election_deadline_ms is not None
                and isinstance(old, UnattachedState | VotedState | ProspectiveState
                               | CandidateState)
                and old.election_deadline_ms is not None):
            state.election_deadline_ms = old.election_deadline_ms
        self._set_state(state, now_ms)

    def transition_to_voted(self, candidate_id: int, now_ms: int) -> None:
        self._set_state(VotedState(epoch=self._state.epoch, voted_id=candidate_id,
                                   election_deadline_ms=now_ms + self._election_timeout()),
                        now_ms)

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        if leader_id == self._node_id or leader_id not in self._voter_set:
            raise RaftInvariantError(f"node {self._node_id} cannot follow {leader_id}")
        voted = self._state.voted_id if epoch == self._state.epoch else None
        self._set_state(self._new_follower(epoch, leader_id, voted, now_ms), now_ms)
        self._maybe_send_fetch(now_ms)

    def transition_to_prospective(self, now_ms: int) -> None:
        """KIP-996: ask for pre-votes in epoch + 1 before disrupting anyone."""
        old = self._state
        state = ProspectiveState(epoch=old.epoch, leader_id=old.leader_id,
                                 voted_id=old.voted_id,
                                 election_deadline_ms=now_ms + self._election_timeout())
        state.granted.add(self._node_id)
        self._set_state(state, now_ms)
        self._request_votes(state.epoch + 1, pre_vote=True, now_ms=now_ms)
        self._maybe_win_election(now_ms)

    def transition_to_candidate(self, now_ms: int) -> None:
        state = CandidateState(epoch=self._state.epoch + 1, voted_id=self._node_id,
                               election_deadline_ms=now_ms + self._election_timeout())
        state.granted.add(self._node_id)
        self._set_state(state, now_ms)
        self._request_votes(state.epoch, pre_vote=False, now_ms=now_ms)
        self._maybe_win_election(now_ms)

    def transition_to_leader(self, now_ms: int) -> None:
        old = self._state
        if not isinstance(old, CandidateState):
            raise RaftInvariantError(f"only a candidate becomes leader, not {old.role}")
        epoch = old.epoch
        state = LeaderState(epoch=epoch, leader_id=self._node_id, voted_id=self._node_id,
                            node_id=self._node_id, voters=self._voters,
                            epoch_start_offset=self._log.end_offset, became_leader_ms=now_ms,
                            granting_voters=tuple(sorted(old.granted)))
        self._set_state(state, now_ms)
        records = [LeaderChange(leader_id=self._node_id, voters=self._voters,
                                granting_voters=state.granting_voters).encode()]
        if self._log.end_offset == 0:  # KIP-516: the first leader names the metadata topic
            topic_id = Uuid.random(self._rng)
            records.append(MetadataTopic(topic_id=topic_id).encode())
        self._append_as_leader(state, records)
        log.info("became leader", extra={"node": self._node_id, "epoch": epoch})
        for voter in sorted(state.begin_unacknowledged):
            self._send_begin_quorum_epoch(state, voter, now_ms)

    def transition_to_resigned(self, now_ms: int) -> None:
        old = self._state
        if not isinstance(old, LeaderState):
            raise RaftInvariantError(f"only a leader resigns, not {old.role}")
        successors = old.successors_by_progress()
        state = ResignedState(epoch=old.epoch, leader_id=self._node_id,
                              voted_id=old.voted_id, preferred_successors=successors,
                              election_deadline_ms=now_ms + self._election_timeout(),
                              unacknowledged=set(successors))
        self._set_state(state, now_ms)
        for voter in successors:
            self._send_end_quorum_epoch(state, voter, now_ms)

    def _set_state(self, state: EpochState, now_ms: int) -> None:
        old = self._state
        if state.epoch < old.epoch:
            raise RaftInvariantError(f"epoch would go back from {old.epoch} to {state.epoch}")
        if isinstance(old, LeaderState):
            self._fail_parked_fetches(old, state)
        self._state = state
        self._probe_correlation_id = None
        self._probe_at_ms = now_ms
        self._last_now_ms = now_ms  # the time of the last input (for `advance`)
        self._persist_election()

    def _persist_election(self) -> None:
        state = self._state
        key = (state.epoch, state.leader_id, state.voted_id)
        if key != self._persisted:
            if self._persisted is not None and key[0] == self._persisted[0]:
                _, old_leader, old_voted = self._persisted
                if old_voted is not None and key[2] != old_voted:
                    raise RaftInvariantError(f"second vote in epoch {key[0]}: "
                                             f"{old_voted} then {key[2]}")
                if old_leader is not None and key[1] not in (None, old_leader):
                    raise RaftInvariantError(f"second leader in epoch {key[0]}")
            self._persisted = key
            self._pending_election = self._election_state(*key)

    def _election_state(self, epoch: int, leader_id: int | None,
                        voted_id: int | None) -> ElectionState:
        """What `quorum-state` must hold before anything else leaves this node."""
        return ElectionState(epoch=epoch, leader_id=leader_id, voted_id=voted_id,
                             voters=self._voters)

    def _new_unattached(self, epoch: int, now_ms: int) -> UnattachedState:
        deadline = now_ms + self._election_timeout() if self._is_voter else None
        return UnattachedState(epoch=epoch, election_deadline_ms=deadline)

    def _new_follower(self, epoch: int, leader_id: int, voted_id: int | None,
                      now_ms: int) -> FollowerState:
        timeout = self._config.fetch_timeout_ms
        return FollowerState(epoch=epoch, leader_id=leader_id, voted_id=voted_id,
                             fetch_timeout_ms=timeout, fetch_deadline_ms=now_ms + timeout,
                             next_fetch_ms=now_ms, leader_heard_ms=now_ms)

    def _quick_retry_timeout_ms(self) -> int:
        """For requests retried well within the fetch timeout: Begin/EndQuorumEpoch, so a
        voter that missed the news hears it before anyone's patience (or check-quorum)
        runs out; FetchSnapshot, so a lost chunk is asked again before the follower gives
        up on a live leader."""
        return max(1, min(self._config.request_timeout_ms, self._config.fetch_timeout_ms // 4))

    def _election_timeout(self) -> int:
        timeout = self._config.election_timeout_ms
        return timeout + self._rng.randrange(timeout)

    def _successor_rank(self, leader_id: int | None) -> int:
        """This voter's turn, by id among the voters other than `leader_id`, to stand when
        that leader is gone (0 for an observer)."""
        others = sorted(v for v in self._voters if v != leader_id)
        return others.index(self._node_id) if self._node_id in others else 0

    def _fetch_deadline_ms(self, state: FollowerState, now_ms: int) -> int:
        """No answer from the leader by then: stand (a voter) or look for it (an observer).
        The voters' deadlines are a turn apart by id: they last heard the leader at about
        the same moment, and standing together they would split the vote."""
        return (now_ms + state.fetch_timeout_ms
                + self._successor_rank(state.leader_id) * self._turn_step_ms())

    def _turn_step_ms(self) -> int:
        """How long a voter lets another that stood first try before standing itself:
        a few round trips, far below an election timeout."""
        return max(1, self._config.election_timeout_ms // 10)

    def _election_backoff(self) -> int:
        return self._rng.randrange(self._config.election_backoff_max_ms + 1)

    def _start_election(self, now_ms: int) -> None:
        if self._config.pre_vote:
            self.transition_to_prospective(now_ms)
        else:
            self.transition_to_candidate(now_ms)

    def _maybe_win_election(self, now_ms: int) -> None:
        state = self._state
        if isinstance(state, ProspectiveState | CandidateState) and (
                len(state.granted) >= self._majority):
            if isinstance(state, ProspectiveState):
                self.transition_to_candidate(now_ms)
            else:
                self.transition_to_leader(now_ms)

    def maybe_handle_leader_info(self, epoch: int, leader_id: int, now_ms: int) -> None:
        """Any message naming a newer epoch (or the leader of ours, when we know none)
        moves this node there; the new epoch is persisted before anything else leaves."""
        state = self._state
        leader = (leader_id if leader_id in self._voter_set and leader_id != self._node_id
                  else None)
        if epoch > state.epoch:
            if leader is not None:
                self.transition_to_follower(epoch, leader, now_ms)
            else:
                self.transition_to_unattached(epoch, now_ms)
        elif (epoch == state.epoch and leader is not None and state.leader_id is None
              and state.role in (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE,
                                 Role.CANDIDATE)):
            self.transition_to_follower(epoch, leader, now_ms)

    # --- steps of the election and replication parts a transition needs ---------------

    def _request_votes(self, epoch: int, *, pre_vote: bool, now_ms: int) -> None:
        raise NotImplementedError

    def _send_begin_quorum_epoch(self, state: LeaderState, voter: int, now_ms: int) -> None:
        raise NotImplementedError

    def _send_end_quorum_epoch(self, state: ResignedState, voter: int, now_ms: int) -> None:
        raise NotImplementedError

    def _maybe_send_fetch(self, now_ms: int) -> None:
        raise NotImplementedError

    def _fail_parked_fetches(self, old: LeaderState, new: EpochState) -> None:
        raise NotImplementedError

    # --- shared helpers ---------------------------------------------------------------

    def _respond(self, request: Envelope, message: object) -> None:
        self._outbox.append(Envelope(src=self._node_id, dst=request.src,
                                     correlation_id=request.correlation_id, message=message))

    def _respond_early(self, request: Envelope, message: object) -> None:
        """A leader's answer that depends on nothing unflushed: it may leave before the
        log flush (`Ready.early_messages`)."""
        self._early_outbox.append(Envelope(src=self._node_id, dst=request.src,
                                           correlation_id=request.correlation_id,
                                           message=message))

    def _addressing_error(self, cluster_id: str, topic_id: Uuid,
                          partition_index: int) -> ErrorCode | None:
        """KIP-516 / KIP-595: wrong cluster, partition or topic ID (see `_topic_id`). A
        leader's log is never cut in its epoch, so the ID it holds is the one that will
        commit."""
        return self._topic_ids.addressing_error(
            self._log, cluster_id, topic_id, partition_index,
            log_is_final=isinstance(self._state, LeaderState))

    # --- outgoing requests ----------------------------------------------------------

    def _send_request(self, dst: int, message: object, now_ms: int,
                      timeout_ms: int | None = None) -> int:
        cid = self._next_correlation_id
        self._next_correlation_id += 1
        self._inflight[cid] = Inflight(
            dst=dst, state=self._state, request=message,
            response_type=_RESPONSE_FOR[type(message)],
            deadline_ms=now_ms + (timeout_ms or self._config.request_timeout_ms))
        self._outbox.append(Envelope(src=self._node_id, dst=dst, correlation_id=cid,
                                     message=message))
        return cid

    # --- replication bookkeeping ----------------------------------------------------

    def _append_as_leader(self, state: LeaderState, records: list[bytes]) -> Batch:
        batch = self._log.append(state.epoch, records)
        self._topic_ids.on_append(batch.base_offset)
        self._pending_entries.append(batch)
        return batch

    def _append_as_follower(self, batches: Sequence[Batch]) -> None:
        self._topic_ids.on_append(batches[0].base_offset)
        self._log.append_batches(batches)
        self._pending_entries.extend(batches)

    def _truncate(self, offset: int) -> None:
        self._check_truncation(offset)
        self._log.truncate_to(offset)
        self._pending_entries = [b for b in self._pending_entries if b.base_offset < offset]
        if self._pending_truncate is None or offset < self._pending_truncate:
            self._pending_truncate = offset
        self._topic_ids.on_truncate()

    def _check_truncation(self, offset: int) -> None:
        """Committed records are never removed: a leader asking for that is broken, and
        following it would lose data. Stop instead (the shell stops the node)."""
        if offset < self._high_watermark:
            raise RaftInvariantError(f"truncation to {offset} below the high watermark "
                                     f"{self._high_watermark}")

    def _set_high_watermark(self, offset: int) -> None:
        if offset > self._high_watermark:
            self._high_watermark = offset
            self._hw_dirty = True
            self._topic_ids.on_high_watermark(self._log, offset)
        if self._state.role is Role.LEADER:
            self._hear_leader_high_watermark(offset)

    def _hear_leader_high_watermark(self, offset: int) -> None:
        if self._leader_high_watermark is None or offset > self._leader_high_watermark:
            self._leader_high_watermark = offset
            self._leader_hw_dirty = True

    def _current_leader(self) -> CurrentLeader:
        leader = self.leader_id
        return CurrentLeader(leader_id=-1 if leader is None else leader,
                             leader_epoch=self._state.epoch)

