"""`RaftCore`: the KIP-595 quorum as a pure, synchronous, deterministic state machine.

Inputs are `step(envelope)`, `tick(now_ms)`, `propose(records)` and `resign()`; the output
is a `Ready` (see `raft.types` for the durability contract), acknowledged by `advance()`.
The core appends to and truncates its log directly; the shell flushes before sending.
No I/O, no clock, no global randomness: the same inputs and seed give the same outputs.

This module holds the public API, the dispatch of messages to the election and
replication parts, and the timers.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

from raft.common.errors import ErrorCode
from raft.common.uuid import METADATA_TOPIC_ID
from raft.core._base import ADDRESSING_ERRORS
from raft.core._election import Election
from raft.core._leader_state import LeaderState
from raft.core._quorum_state import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
    VotedState,
)
from raft.core._reconfig import Reconfiguration
from raft.core._replication import Replication
from raft.messages import (
    AddRaftVoterRequest,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    NodeEndpoints,
    RemoveRaftVoterRequest,
    UpdateKRaftVersionRequest,
    UpdateRaftVoterRequest,
    VoteRequest,
    VoteResponse,
)
from raft.types import Envelope, Ready, SnapshotId

log = logging.getLogger(__name__)

_EMPTY_READY = Ready()
_NEVER = 1 << 62  # next_deadline_ms when no timer is armed
_RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse,
                   FetchResponse, FetchSnapshotResponse)


class RaftCore(Election, Replication, Reconfiguration):
    # --- API ------------------------------------------------------------------------

    def step(self, envelope: Envelope, now_ms: int) -> None:
        """A request or response from a peer. Never raises on peer input."""
        if envelope.dst != self._node_id:
            return
        self._last_now_ms = now_ms
        deadline = self._state.timer_deadline_ms()
        if deadline is not None and now_ms >= deadline:
            # A timer that expired before this message arrived (the shell was busy or
            # paused) fires first: e.g. a candidate whose election timed out must not
            # win it with votes that were queued behind the timeout.
            self.tick(now_ms)
        handler = _REQUEST_HANDLERS.get(type(envelope.message))
        if handler is not None:
            handler(self, envelope, now_ms)
        elif isinstance(envelope.message, _RESPONSE_TYPES):
            self._handle_response(envelope, now_ms)

    def tick(self, now_ms: int) -> None:
        self._last_now_ms = now_ms
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
            self._maybe_send_fetch(now_ms)

    def propose(self, records: Sequence[bytes], now_ms: int) -> tuple[int, int] | None:
        """Append records as the leader: (epoch, offset of the last one); None otherwise."""
        self._last_now_ms = now_ms
        state = self._state
        if not isinstance(state, LeaderState):
            return None
        if not records:
            raise ValueError("propose needs at least one record")
        batch = self._log.append(state.epoch, records, now_ms)
        self._pending_entries.append(batch)
        self._on_log_records(batch.base_offset, batch.records)
        self._wake_parked_fetches(state)
        return state.epoch, batch.last_offset

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown: a leader hands over with EndQuorumEpoch (KIP-595)."""
        if isinstance(self._state, LeaderState):
            self.transition_to_resigned(now_ms)

    def ready(self) -> Ready:
        if not self.has_ready:
            return _EMPTY_READY
        early = self._early_outbox
        messages = tuple(early + self._outbox) if early else tuple(self._outbox)
        return Ready(election=self._pending_election, truncate_to=self._pending_truncate,
                     entries=tuple(self._pending_entries), messages=messages,
                     # nothing before quorum-state's fsync
                     early=len(early) if self._pending_election is None else 0,
                     high_watermark=self._high_watermark if self._hw_dirty else None,
                     loaded_snapshot=self._loaded_snapshot,
                     leader_high_watermark=(self._leader_high_watermark
                                            if self._leader_hw_dirty else None))

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
            sent = ready.messages
            early = self._early_outbox
            if early:  # they lead `messages` (`ready()`), whatever `ready.early` says
                count = 0
                while count < min(len(early), len(sent)) and sent[count] is early[count]:
                    count += 1
                del early[:count]
                sent = sent[count:]
            self._outbox = _unsent(self._outbox, sent)
        if ready.high_watermark is not None and ready.high_watermark == self._high_watermark:
            self._hw_dirty = False
        if ready.leader_high_watermark is not None and \
                ready.leader_high_watermark == self._leader_high_watermark:
            self._leader_hw_dirty = False
        if ready.loaded_snapshot is not None and ready.loaded_snapshot == self._loaded_snapshot:
            self._loaded_snapshot = None
            self._loaded_snapshot_records = ()
        state = self._state
        if (ready.needs_flush and isinstance(state, LeaderState)
                and self._maybe_advance_high_watermark(state)):
            self._tell_parked_fetches_hw(state, self._last_now_ms)

    def advance_log_start(self, snapshot_id: SnapshotId) -> bool:
        """Start the log at a snapshot this node holds of its committed records (written
        by the state machine, or fetched), deleting what lies below and the snapshots
        older than it. False, and nothing done, when the snapshot is not held, ends above
        the high watermark or the log end, or not above the log start."""
        logd = self._log
        if (self._snapshots.size(snapshot_id) is None
                or not logd.start_offset < snapshot_id.end_offset
                <= min(self._high_watermark, logd.end_offset)
                or logd.epoch_at(snapshot_id.end_offset - 1) != snapshot_id.epoch):
            return False
        logd.advance_start(snapshot_id.end_offset)
        self._snapshots.delete_before(snapshot_id.end_offset)
        self._topic_ids.on_truncate()
        self._history.forget_below(snapshot_id.end_offset)
        return True

    def peer_disconnected(self, node_id: int, now_ms: int) -> None:
        """The shell's connection to `node_id` closed. Answers come back on the
        connection a request left on, so nothing in flight to that node will be
        answered: those requests fail now and are retried (a Fetch at once, on the next
        connection) rather than after their timeout. An observer whose leader it was
        asks the other voters who leads (see `_leader_check_at`)."""
        if node_id == self._node_id:
            return
        self._expire_requests(now_ms, dst=node_id)
        state = self._state
        if (not self._is_voter and isinstance(state, FollowerState)
                and state.leader_id == node_id):
            state.leader_unreachable = True
        self.tick(now_ms)

    def peer_unreachable(self, node_id: int, now_ms: int) -> None:
        """A connection to `node_id` was refused: no process listens there (it crashed
        or stopped). A paused or cut-off node refuses nothing (its connections hang), so
        its followers still wait for their fetch timeout.

        A voter following `node_id` asks for pre-votes (KIP-996) at once instead of
        after the fetch timeout: the voters that still hear from a live leader refuse
        them, so a mistaken report costs one pre-vote round and never an epoch. Without
        pre-vote the report is ignored for that reason. Each refused reconnect (the
        shell retries with a backoff) starts a new round if the last one was refused by
        someone, so the followers that noticed the crash a moment later than this one
        grant it next time. An observer following `node_id` asks the other voters who
        leads at once (see `_leader_check_at`)."""
        if node_id == self._node_id or node_id not in self._voter_set:
            return
        state = self._state
        if isinstance(state, UnattachedState) and self._probe_correlation_id is not None:
            probe = self._inflight.get(self._probe_correlation_id)
            if probe is not None and probe.dst == node_id:  # ask the next voter now
                del self._inflight[self._probe_correlation_id]
                self._probe_answered(now_ms, 0)
        elif state.leader_id == node_id and not self._is_voter:
            if isinstance(state, FollowerState):
                state.leader_unreachable = True
        elif state.leader_id == node_id and self._config.pre_vote:
            if isinstance(state, FollowerState):
                self._take_turn_after_crash(state, node_id, now_ms)
            elif isinstance(state, ProspectiveState) and state.rejected:
                self.transition_to_prospective(now_ms)
        self.tick(now_ms)

    def _take_turn_after_crash(self, state: FollowerState, leader_id: int,
                               now_ms: int) -> None:
        """The followers of a crashed leader hear its port refuse within a millisecond of
        each other: were they all to ask for pre-votes at once, they would grant each
        other's, both stand as candidates in the same epoch and split the vote (then a
        backoff of up to `election_backoff_max_ms`, seen in the simulator). So they take
        turns by id, as the successors named by EndQuorumEpoch do: the first asks at once,
        the next a few round trips later unless a vote for the first has reached it by
        then. Each grants pre-votes from now on, its leader being gone."""
        state.last_fetch_success_ms = None
        rank = self._successor_rank(leader_id)
        if rank == 0:
            log.info("leader unreachable, asking for pre-votes",
                     extra={"node": self._node_id, "epoch": state.epoch,
                            "leader": leader_id})
            self.transition_to_prospective(now_ms)
            return
        turn_ms = now_ms + rank * self._turn_step_ms()
        state.fetch_deadline_ms = min(state.fetch_deadline_ms, turn_ms)

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
            best = min(best, self._leader_deadline_ms(state))
        elif isinstance(state, FollowerState | UnattachedState):
            fetch_at = self._next_fetch_ms(state)
            if fetch_at is not None and fetch_at < best:
                best = fetch_at
        return best

    def _leader_deadline_ms(self, state: LeaderState) -> int:
        """The leader's own timers: check-quorum, parked fetches, re-announcing itself,
        a voter change's."""
        deadlines = [state.begin_quorum_due_ms,
                     *(parked.deadline_ms for parked in state.parked.values())]
        check = state.check_quorum_deadline_ms(self._config.fetch_timeout_ms)
        change = self._voter_change_deadline_ms(state)
        deadlines += [d for d in (check, change) if d is not None]
        return min(deadlines)

    def describe_quorum(self, now_ms: int) -> DescribeQuorumResponse:
        state = self._state
        if not isinstance(state, LeaderState):
            leader = self._current_leader()
            return DescribeQuorumResponse(error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                          topic_id=self._topic_ids.request_topic_id,
                                          leader_id=leader.leader_id,
                                          leader_epoch=leader.leader_epoch)
        voters, observers = state.replica_states(self._log.end_offset, now_ms)
        nodes = tuple(NodeEndpoints(node_id=v.key.id, listeners=v.endpoints)
                      for v in self._voter_keys if v.endpoints) if self.dynamic_quorum else ()
        return DescribeQuorumResponse(topic_id=self._topic_ids.request_topic_id,
                                      leader_id=self._node_id, leader_epoch=state.epoch,
                                      high_watermark=self._high_watermark,
                                      current_voters=voters, observers=observers,
                                      nodes=nodes, kraft_version=self.kraft_version)

    def handle_describe_quorum_request(self, envelope: Envelope, now_ms: int) -> None:
        request: DescribeQuorumRequest = envelope.message
        error = self._addressing_error(request.cluster_id, request.topic_id,
                                       request.partition_index)
        if error is not None:
            self._respond(envelope, DescribeQuorumResponse(error_code=error,
                                                           topic_id=request.topic_id))
            return
        self._respond(envelope, self.describe_quorum(now_ms))

    # --- timers ---------------------------------------------------------------------

    def _handle_timer(self, now_ms: int) -> None:
        state = self._state
        if not self._may_stand():
            if isinstance(state, UnattachedState | VotedState | ProspectiveState
                          | CandidateState | ResignedState):
                # KIP-853: a voter whose removal committed (as far as it knows: see
                # `_may_stand`) stops campaigning and looks for the leader as an
                # observer does (keeping this epoch's vote).
                self._set_state(UnattachedState(epoch=state.epoch, voted_id=state.voted_id,
                                                voted_directory_id=state.voted_directory_id),
                                now_ms)
                self._maybe_send_fetch(now_ms)
            elif isinstance(state, FollowerState) and len(self._voters) > 1:
                # An observer's leader check (`_leader_check_at`) has been asking the
                # other voters for a newer leader since well before this timeout, without
                # giving up on the old one: better than starting over unattached, where a
                # voter naming the old leader again sends it back there.
                state.fetch_deadline_ms = now_ms + state.fetch_timeout_ms
            elif isinstance(state, FollowerState):
                # An observer that lost its leader looks for the current one again,
                # keeping the vote it may have cast in this epoch as a voter (a removed
                # voter of a quorum now down to one): a vote is never taken back.
                self._set_state(UnattachedState(epoch=state.epoch, voted_id=state.voted_id,
                                                voted_directory_id=state.voted_directory_id),
                                now_ms)
                self._maybe_send_fetch(now_ms)
        elif (isinstance(state, ProspectiveState) and state.leader_id is not None
              and state.leader_id != self._node_id):
            # KIP-996: no pre-vote majority in time; try the known leader once more
            # (as a follower that has not heard from it, so it grants pre-votes).
            self.transition_to_follower(state.epoch, state.leader_id, now_ms)
        elif not isinstance(state, LeaderState):
            self._start_election(now_ms)

    def _expire_requests(self, now_ms: int, dst: int | None = None) -> None:
        """Requests whose deadline passed, or every request to `dst`, get no answer."""
        expired = [cid for cid, i in self._inflight.items()
                   if i.deadline_ms <= now_ms or i.dst == dst]
        state = self._state
        for cid in expired:
            inflight = self._inflight.pop(cid)
            if inflight.state is not state:
                continue
            if self._probe_correlation_id == cid:
                self._probe_answered(now_ms, 0)
            elif isinstance(state, FollowerState):
                if state.fetch_correlation_id == cid:
                    state.fetch_correlation_id = None
                    state.next_fetch_ms = now_ms
            elif isinstance(state, LeaderState) and inflight.dst in state.begin_unacknowledged:
                self._send_begin_quorum_epoch(state, inflight.dst, now_ms)
            elif isinstance(state, ResignedState) and inflight.dst in state.unacknowledged:
                self._send_end_quorum_epoch(state, inflight.dst, now_ms)

    def _tick_leader(self, state: LeaderState, now_ms: int) -> None:
        if self._tick_voter_change(state, now_ms):
            return  # resigned: its own removal committed (KIP-853)
        self._maybe_update_own_entry_as_leader(state, now_ms)
        check = state.check_quorum_deadline_ms(self._config.fetch_timeout_ms)
        if check is not None and now_ms >= check:
            log.info("check-quorum failed, resigning",
                     extra={"node": self._node_id, "epoch": state.epoch})
            self.transition_to_resigned(now_ms)
            return
        if now_ms >= state.begin_quorum_due_ms:
            self._announce_to_silent_voters(state, now_ms)
        if state.parked:
            for fetcher, parked in list(state.parked.items()):
                if now_ms >= parked.deadline_ms:
                    del state.parked[fetcher]
                    self._answer_fetch(state, parked.envelope)

    def _announce_to_silent_voters(self, state: LeaderState, now_ms: int) -> None:
        """As Kafka's leader, every half fetch timeout: BeginQuorumEpoch again to each
        voter that has not fetched for that long. A voter stuck in a later epoch it lost
        (its pre-votes refused, this leader's answers ignored as older) answers
        FENCED_LEADER_EPOCH with its epoch, and this leader steps into that epoch; without
        it neither ever learns of the other."""
        interval = self._config.fetch_timeout_ms // 2
        asked = {i.dst for i in self._inflight.values()
                 if isinstance(i.request, BeginQuorumEpochRequest) and i.state is state}
        for voter in state.silent_voters(now_ms, interval):
            if voter not in asked:
                self._send_begin_quorum_epoch(state, voter, now_ms)
        state.begin_quorum_due_ms = now_ms + interval

    # --- responses ------------------------------------------------------------------

    def _handle_response(self, envelope: Envelope, now_ms: int) -> None:
        """Responses count only for the request (correlation id, peer) and state that sent
        them; any newer epoch or leader they name is adopted first."""
        inflight = self._inflight.get(envelope.correlation_id)
        if (inflight is None or inflight.dst != envelope.src
                or type(envelope.message) is not inflight.response_type):
            return
        message: Any = envelope.message
        addressed = message.error_code not in ADDRESSING_ERRORS
        leader_id, epoch = _leader_named_by(message)
        if addressed and epoch < self._state.epoch:
            # As KafkaRaftClient: it answers a question of an older epoch, or one of an
            # earlier incarnation of this node that used the same correlation id; the
            # request stays in flight for its own answer (a probe asks the next voter).
            if envelope.correlation_id == self._probe_correlation_id:
                del self._inflight[envelope.correlation_id]
                self._probe_answered(now_ms, self._config.retry_backoff_ms)
            return
        del self._inflight[envelope.correlation_id]
        if (message.error_code == ErrorCode.UNKNOWN_TOPIC_ID
                and inflight.request.topic_id != METADATA_TOPIC_ID):
            # The peer has not applied the MetadataTopic record yet: use the sentinel.
            self._topic_ids.peer_lacks_id(envelope.src)
            if inflight.state is self._state and not isinstance(inflight.request, FetchRequest):
                self._send_request(envelope.src, dataclasses.replace(
                    inflight.request, topic_id=METADATA_TOPIC_ID), now_ms)
                return
        if addressed and (envelope.src in self._voter_set or self.dynamic_quorum):
            self.maybe_handle_leader_info(epoch, leader_id, now_ms)
        if inflight.state is not self._state:
            if envelope.correlation_id == self._probe_correlation_id:
                self._probe_correlation_id = None
            return
        _RESPONSE_HANDLERS[type(message)](self, envelope, now_ms)
        state = self._state
        if (isinstance(state, FollowerState) and envelope.src == state.leader_id
                and isinstance(message, FetchResponse) and message.error_code == ErrorCode.NONE):
            self._maybe_update_own_endpoints(envelope.src, now_ms)


def _leader_named_by(message: Any) -> tuple[int, int]:
    """(leader id, epoch) a response names."""
    if isinstance(message, FetchResponse | FetchSnapshotResponse):
        return message.current_leader.leader_id, message.current_leader.leader_epoch
    return message.leader_id, message.leader_epoch


def _unsent(outbox: list[Envelope], sent: tuple[Envelope, ...]) -> list[Envelope]:
    """`outbox` without the envelopes in `sent` (usually its first ones)."""
    count = len(sent)
    if not count:
        return outbox
    if count <= len(outbox) and outbox[0] is sent[0] and outbox[count - 1] is sent[-1]:
        return outbox[count:]
    done = {id(m) for m in sent}
    return [m for m in outbox if id(m) not in done]


_Handler = Callable[[RaftCore, Envelope, int], None]
_REQUEST_HANDLERS: dict[type, _Handler] = {
    VoteRequest: RaftCore.handle_vote_request,
    BeginQuorumEpochRequest: RaftCore.handle_begin_quorum_epoch_request,
    EndQuorumEpochRequest: RaftCore.handle_end_quorum_epoch_request,
    FetchRequest: RaftCore.handle_fetch_request,
    FetchSnapshotRequest: RaftCore.handle_fetch_snapshot_request,
    DescribeQuorumRequest: RaftCore.handle_describe_quorum_request,
    AddRaftVoterRequest: RaftCore.handle_add_raft_voter_request,
    RemoveRaftVoterRequest: RaftCore.handle_remove_raft_voter_request,
    UpdateRaftVoterRequest: RaftCore.handle_update_raft_voter_request,
    UpdateKRaftVersionRequest: RaftCore.handle_update_kraft_version_request,
}
_RESPONSE_HANDLERS: dict[type, _Handler] = {
    VoteResponse: RaftCore.handle_vote_response,
    BeginQuorumEpochResponse: RaftCore.handle_begin_quorum_epoch_response,
    EndQuorumEpochResponse: RaftCore.handle_end_quorum_epoch_response,
    FetchResponse: RaftCore.handle_fetch_response,
    FetchSnapshotResponse: RaftCore.handle_fetch_snapshot_response,
}
