"""`RaftCore`: the KIP-595 quorum as a pure, synchronous, deterministic state machine.

Inputs are `step(envelope)`, `tick(now_ms)`, `propose(records)` and `resign()`; the output
is a `Ready` (see `raft.types` for the durability contract), acknowledged by `advance()`.
The core appends to and truncates its log directly; the shell flushes before sending.
No I/O, no clock, no global randomness: the same inputs and seed give the same outputs.

Handlers live in `raft.handlers` (Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum)
and `raft.fetch` (replication); the states in `raft.quorum_state` and `raft.leader_state`;
topic-ID bookkeeping in `raft.topic_id`. This module holds the API, the transitions
between states (persisting the election state first), timers and the log bookkeeping.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

from metadata.records import LeaderChange, MetadataTopic
from metadata.uuid import Uuid
from raft import fetch, handlers
from raft.errors import ErrorCode
from raft.handlers import Inflight
from raft.leader_state import LeaderState
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CurrentLeader,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from raft.quorum_state import (
    CandidateState,
    EpochState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    Role,
    UnattachedState,
    VotedState,
)
from raft.topic_id import MetadataTopicIds
from raft.types import Batch, ElectionState, Envelope, RaftLog, Ready

log = logging.getLogger(__name__)

__all__ = ["RaftConfig", "RaftCore", "RaftInvariantError", "Role"]

_EMPTY_READY = Ready()
_NEVER = 1 << 62  # next_deadline_ms when no timer is armed
_RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse,
                   FetchResponse)
_RESPONSE_FOR = {VoteRequest: VoteResponse, BeginQuorumEpochRequest: BeginQuorumEpochResponse,
                 EndQuorumEpochRequest: EndQuorumEpochResponse, FetchRequest: FetchResponse}


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
    fetch_max_bytes: int = 1 << 20
    pre_vote: bool = True
    retry_backoff_ms: int = 100  # before re-sending a Fetch that failed

    def __post_init__(self) -> None:
        if not self.voters or len(set(self.voters)) != len(self.voters):
            raise ValueError(f"voters must be distinct and non-empty: {self.voters}")
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0:
            raise ValueError("timeouts must be positive")


class RaftCore:
    def __init__(self, *, node_id: int, config: RaftConfig, log: RaftLog,
                 election: ElectionState | None, cluster_id: str, rng: random.Random,
                 now_ms: int) -> None:
        self._node_id = node_id
        self._config = config
        self._log = log
        self._cluster_id = cluster_id
        self._rng = rng
        self._voters = tuple(config.voters)
        self._voter_set = frozenset(config.voters)
        self._is_voter = node_id in self._voter_set
        self._majority = len(self._voters) // 2 + 1
        self._outbox: list[Envelope] = []
        self._pending_election: ElectionState | None = None
        self._persisted: tuple[int, int | None, int | None] | None = None
        self._pending_entries: list[Batch] = []
        self._pending_truncate: int | None = None
        self._high_watermark = 0
        self._hw_dirty = False
        self._next_correlation_id = 1
        self._inflight: dict[int, Inflight] = {}
        self._last_fetch_request: FetchRequest | None = None
        self._topic_ids = MetadataTopicIds(cluster_id)
        self._probe_index = 0  # observers: which voter to ask for the leader next
        self._probe_correlation_id: int | None = None
        self._probe_at_ms = now_ms
        self._state: EpochState = self._initial_state(election, now_ms)
        if election is not None:
            self._persisted = (election.epoch, election.leader_id, election.voted_id)
        self._persist_election()
        if isinstance(self._state, FollowerState | UnattachedState):
            fetch.maybe_send_fetch(self, now_ms)

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
    def is_leader(self) -> bool:
        return self._state.role is Role.LEADER

    @property
    def is_voter(self) -> bool:
        return self._is_voter

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
        return bool(self._outbox or self._pending_entries or self._hw_dirty
                    or self._pending_election is not None or self._pending_truncate is not None)

    # --- API ------------------------------------------------------------------------

    def step(self, envelope: Envelope, now_ms: int) -> None:
        """A request or response from a peer. Never raises on peer input."""
        if envelope.dst != self._node_id:
            return
        deadline = self._state.timer_deadline_ms()
        if deadline is not None and now_ms >= deadline:
            # A timer that expired before this message arrived (the shell was busy or
            # paused) fires first: e.g. a candidate whose election timed out must not
            # win it with votes that were queued behind the timeout.
            self.tick(now_ms)
        handler = handlers.REQUEST_HANDLERS.get(type(envelope.message))
        if handler is not None:
            handler(self, envelope, now_ms)
        elif isinstance(envelope.message, _RESPONSE_TYPES):
            handlers.handle_response(self, envelope, now_ms)

    def tick(self, now_ms: int) -> None:
        state = self._state
        if self._inflight:
            self._expire_requests(now_ms)
            state = self._state
        deadline = state.timer_deadline_ms()
        if deadline is not None and now_ms >= deadline:
            self._handle_timer(now_ms)
            state = self._state
        if isinstance(state, LeaderState):
            self._tick_leader(state, now_ms)
        elif isinstance(state, FollowerState | UnattachedState):
            fetch.maybe_send_fetch(self, now_ms)

    def propose(self, records: Sequence[bytes], now_ms: int) -> tuple[int, int] | None:
        """Append records as the leader: (epoch, offset of the last one); None otherwise."""
        state = self._state
        if not isinstance(state, LeaderState):
            return None
        if not records:
            raise ValueError("propose needs at least one record")
        batch = self._log.append(state.epoch, records)
        self._pending_entries.append(batch)
        fetch.wake_parked_fetches(self, state)
        return state.epoch, batch.last_offset

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown: a leader hands over with EndQuorumEpoch (KIP-595)."""
        if isinstance(self._state, LeaderState):
            self.transition_to_resigned(now_ms)

    def ready(self) -> Ready:
        if not self.has_ready:
            return _EMPTY_READY
        return Ready(election=self._pending_election, truncate_to=self._pending_truncate,
                     entries=tuple(self._pending_entries), messages=tuple(self._outbox),
                     high_watermark=self._high_watermark if self._hw_dirty else None)

    def advance(self, ready: Ready) -> None:
        """Everything in `ready` is durable (and its messages sent)."""
        if ready.election is not None and ready.election is self._pending_election:
            self._pending_election = None
        if ready.truncate_to is not None and ready.truncate_to == self._pending_truncate:
            self._pending_truncate = None
        if ready.entries:
            done = {id(batch) for batch in ready.entries}
            self._pending_entries = [b for b in self._pending_entries if id(b) not in done]
        if ready.messages:
            count = len(ready.messages)
            if self._outbox[:1] and self._outbox[0] is ready.messages[0]:
                del self._outbox[:count]
            else:
                sent = {id(m) for m in ready.messages}
                self._outbox = [m for m in self._outbox if id(m) not in sent]
        if ready.high_watermark is not None and ready.high_watermark == self._high_watermark:
            self._hw_dirty = False
        state = self._state
        if (ready.needs_flush and isinstance(state, LeaderState)
                and self._maybe_advance_high_watermark(state)):
            fetch.wake_parked_fetches(self, state)

    def next_deadline_ms(self) -> int:
        """When `tick()` next has work; 0 when `ready()` already holds something."""
        if self.has_ready:
            return 0
        state = self._state
        best = state.timer_deadline_ms()
        if best is None:
            best = _NEVER
        for inflight in self._inflight.values():
            if inflight.deadline_ms < best:
                best = inflight.deadline_ms
        if isinstance(state, LeaderState):
            check = state.check_quorum_deadline_ms(self._config.fetch_timeout_ms)
            if check is not None and check < best:
                best = check
            for parked in state.parked.values():
                if parked.deadline_ms < best:
                    best = parked.deadline_ms
        elif isinstance(state, FollowerState | UnattachedState):
            fetch_at = fetch.next_fetch_ms(self, state)
            if fetch_at is not None and fetch_at < best:
                best = fetch_at
        return best

    def describe_quorum(self, now_ms: int) -> DescribeQuorumResponse:
        state = self._state
        if not isinstance(state, LeaderState):
            leader = self._current_leader()
            return DescribeQuorumResponse(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                          topic_id=self._topic_ids.request_topic_id,
                                          leader_id=leader.leader_id,
                                          leader_epoch=leader.leader_epoch)
        voters, observers = state.replica_states(self._log.end_offset, now_ms)
        return DescribeQuorumResponse(topic_id=self._topic_ids.request_topic_id,
                                      leader_id=self._node_id, leader_epoch=state.epoch,
                                      high_watermark=self._high_watermark,
                                      current_voters=voters, observers=observers)

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
        fetch.maybe_send_fetch(self, now_ms)

    def transition_to_prospective(self, now_ms: int) -> None:
        """KIP-996: ask for pre-votes in epoch + 1 before disrupting anyone."""
        old = self._state
        state = ProspectiveState(epoch=old.epoch, leader_id=old.leader_id,
                                 voted_id=old.voted_id,
                                 election_deadline_ms=now_ms + self._election_timeout())
        state.granted.add(self._node_id)
        self._set_state(state, now_ms)
        handlers.request_votes(self, state.epoch + 1, pre_vote=True, now_ms=now_ms)
        self._maybe_win_election(now_ms)

    def transition_to_candidate(self, now_ms: int) -> None:
        state = CandidateState(epoch=self._state.epoch + 1, voted_id=self._node_id,
                               election_deadline_ms=now_ms + self._election_timeout())
        state.granted.add(self._node_id)
        self._set_state(state, now_ms)
        handlers.request_votes(self, state.epoch, pre_vote=False, now_ms=now_ms)
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
            handlers.send_begin_quorum_epoch(self, state, voter, now_ms)

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
            handlers.send_end_quorum_epoch(self, state, voter, now_ms)

    def _set_state(self, state: EpochState, now_ms: int) -> None:
        old = self._state
        if state.epoch < old.epoch:
            raise RaftInvariantError(f"epoch would go back from {old.epoch} to {state.epoch}")
        if isinstance(old, LeaderState):
            fetch.fail_parked_fetches(self, old, state)
        self._state = state
        self._probe_correlation_id = None
        self._probe_at_ms = now_ms
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
                             next_fetch_ms=now_ms)

    def _election_timeout(self) -> int:
        timeout = self._config.election_timeout_ms
        return timeout + self._rng.randrange(timeout)

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

    # --- timers ---------------------------------------------------------------------

    def _handle_timer(self, now_ms: int) -> None:
        state = self._state
        if not self._is_voter:
            if isinstance(state, FollowerState):
                # An observer that lost its leader looks for the current one again.
                self._set_state(UnattachedState(epoch=state.epoch), now_ms)
                fetch.maybe_send_fetch(self, now_ms)
        elif (isinstance(state, ProspectiveState) and state.leader_id is not None
              and state.leader_id != self._node_id):
            # KIP-996: no pre-vote majority in time; try the known leader once more
            # (as a follower that has not heard from it, so it grants pre-votes).
            self.transition_to_follower(state.epoch, state.leader_id, now_ms)
        elif not isinstance(state, LeaderState):
            self._start_election(now_ms)

    def _expire_requests(self, now_ms: int) -> None:
        expired = [cid for cid, i in self._inflight.items() if i.deadline_ms <= now_ms]
        state = self._state
        for cid in expired:
            inflight = self._inflight.pop(cid)
            if inflight.state is not state:
                continue
            if isinstance(state, FollowerState):
                if state.fetch_correlation_id == cid:
                    state.fetch_correlation_id = None
                    state.next_fetch_ms = now_ms
            elif isinstance(state, UnattachedState):
                if self._probe_correlation_id == cid:
                    self._probe_correlation_id = None
                    self._probe_index += 1
                    self._probe_at_ms = now_ms
            elif isinstance(state, LeaderState) and inflight.dst in state.begin_unacknowledged:
                handlers.send_begin_quorum_epoch(self, state, inflight.dst, now_ms)
            elif isinstance(state, ResignedState) and inflight.dst in state.unacknowledged:
                handlers.send_end_quorum_epoch(self, state, inflight.dst, now_ms)

    def _tick_leader(self, state: LeaderState, now_ms: int) -> None:
        check = state.check_quorum_deadline_ms(self._config.fetch_timeout_ms)
        if check is not None and now_ms >= check:
            log.info("check-quorum failed, resigning",
                     extra={"node": self._node_id, "epoch": state.epoch})
            self.transition_to_resigned(now_ms)
            return
        if state.parked:
            for fetcher, parked in list(state.parked.items()):
                if now_ms >= parked.deadline_ms:
                    del state.parked[fetcher]
                    fetch.answer_fetch(self, state, parked.envelope)

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

    def _on_diverging_fetch_response(self, response: FetchResponse) -> None:
        """The leader's log differs from ours before our fetch offset: truncate; the
        high watermark stays as it is (see `fetch.handle_fetch_response`)."""
        assert response.diverging_epoch is not None
        fetch.truncate_to_diverging(self, response.diverging_epoch)

    def is_candidate_log_up_to_date(self, last_offset_epoch: int, last_offset: int) -> bool:
        """Raft §5.4.1: the candidate's (last epoch, end offset) is at least ours."""
        return (last_offset_epoch, last_offset) >= (self._log.last_epoch,
                                                     self._log.end_offset)

    def _replicated_end_offset(self, state: LeaderState) -> int:
        """The largest offset durable on a majority of voters (this one included)."""
        return state.majority_end_offset(self._log.flushed_end_offset)

    def _may_commit_by_counting(self, state: LeaderState, offset: int) -> bool:
        """Raft §5.4.2: only an offset in the leader's own epoch commits by counting."""
        return offset > state.epoch_start_offset

    def _maybe_advance_high_watermark(self, state: LeaderState) -> bool:
        candidate = min(self._replicated_end_offset(state), self._log.end_offset)
        if candidate <= self._high_watermark or not self._may_commit_by_counting(
                state, candidate):
            return False
        self._set_high_watermark(candidate)
        return True

    def _set_high_watermark(self, offset: int) -> None:
        if offset > self._high_watermark:
            self._high_watermark = offset
            self._hw_dirty = True
            self._topic_ids.on_high_watermark(self._log, offset)

    def _current_leader(self) -> CurrentLeader:
        leader = self.leader_id
        return CurrentLeader(leader_id=-1 if leader is None else leader,
                             leader_epoch=self._state.epoch)

