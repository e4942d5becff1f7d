"""Request and response handlers of `RaftCore` (KIP-595), one function per API.

They take the core and mutate it through its transitions. Every request is first checked
for its cluster id and topic ID (KIP-516) and answered with an error, without any state
change, if either is wrong. Protocol problems become error codes; nothing here raises on
peer input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metadata.uuid import METADATA_TOPIC_ID, Uuid
from raft import fetch
from raft.errors import ErrorCode
from raft.leader_state import LeaderState
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
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
)
from raft.types import Envelope

if TYPE_CHECKING:
    from raft.core import RaftCore

log = logging.getLogger(__name__)

# Errors about the addressing of a request: the response's leader fields mean nothing.
ADDRESSING_ERRORS = frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID, ErrorCode.UNKNOWN_TOPIC_ID,
                               ErrorCode.INCONSISTENT_TOPIC_ID,
                               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
_ELECTION_STATES = (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE, Role.CANDIDATE)


@dataclass(slots=True)
class Inflight:
    """A request this node sent: its response counts only while `state` is current."""

    dst: int
    state: EpochState
    request: Any
    response_type: type
    deadline_ms: int


def respond(core: RaftCore, request: Envelope, message: object) -> None:
    core._outbox.append(Envelope(src=core._node_id, dst=request.src,
                                 correlation_id=request.correlation_id, message=message))


def addressing_error(core: RaftCore, cluster_id: str, topic_id: Uuid,
                     partition_index: int) -> ErrorCode | None:
    """KIP-516 / KIP-595: wrong cluster, partition or topic ID (see raft.topic_id)."""
    return core._topic_ids.addressing_error(core._log, cluster_id, topic_id, partition_index)


# --- Vote -----------------------------------------------------------------------------


def handle_vote_request(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    request: VoteRequest = envelope.message
    error = addressing_error(core, request.cluster_id, request.topic_id,
                             request.partition_index)
    if error is not None:
        respond(core, envelope, VoteResponse(error_code=error, topic_id=request.topic_id))
        return
    if request.candidate_id not in core._voter_set:
        _reply_vote(core, envelope, ErrorCode.INCONSISTENT_VOTER_SET, granted=False)
        return
    if request.candidate_epoch < core._state.epoch:
        _reply_vote(core, envelope, ErrorCode.FENCED_LEADER_EPOCH, granted=False)
        return
    if not request.pre_vote and request.candidate_epoch > core._state.epoch:
        core.transition_to_unattached(request.candidate_epoch, now_ms)
    granted = False
    if core._is_voter and request.candidate_id != core._node_id:
        log_ok = core.is_candidate_log_up_to_date(request.last_offset_epoch,
                                                  request.last_offset)
        granted = core._state.can_grant_vote(request.candidate_id, log_ok,
                                             request.pre_vote, now_ms)
        if granted and not request.pre_vote and core._state.voted_id is None:
            core.transition_to_voted(request.candidate_id, now_ms)  # persisted first
    _reply_vote(core, envelope, ErrorCode.NONE, granted=granted)


def _reply_vote(core: RaftCore, envelope: Envelope, error: ErrorCode, *,
                granted: bool) -> None:
    leader = core._current_leader()
    respond(core, envelope, VoteResponse(
        error_code=error, topic_id=envelope.message.topic_id, leader_id=leader.leader_id,
        leader_epoch=leader.leader_epoch, vote_granted=granted))


def handle_vote_response(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    state = core._state
    if not isinstance(state, ProspectiveState | CandidateState):
        return
    response: VoteResponse = envelope.message
    if response.vote_granted and response.error_code == ErrorCode.NONE:
        state.granted.add(envelope.src)
        core._maybe_win_election(now_ms)
        return
    state.rejected.add(envelope.src)
    if len(state.rejected) <= len(core._voters) - core._majority:
        return
    if isinstance(state, CandidateState):
        # Lost: back off (randomised) before the next attempt, so split votes resolve.
        state.election_deadline_ms = min(state.election_deadline_ms,
                                         now_ms + core._election_backoff())
    elif state.leader_id is not None and state.leader_id != core._node_id:
        # KIP-996: a majority still hears from the leader; go back to fetching from it.
        core.transition_to_follower(state.epoch, state.leader_id, now_ms)


# --- BeginQuorumEpoch / EndQuorumEpoch ------------------------------------------------


def handle_begin_quorum_epoch_request(core: RaftCore, envelope: Envelope,
                                      now_ms: int) -> None:
    request: BeginQuorumEpochRequest = envelope.message
    error = _check_leader_request(core, request.cluster_id, request.topic_id,
                                  request.partition_index, request.leader_id,
                                  request.leader_epoch)
    if error is None:
        state = core._state
        if request.leader_epoch > state.epoch:
            core.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
        elif state.leader_id is None and state.role in _ELECTION_STATES:
            core.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
        elif state.role is Role.PROSPECTIVE and state.leader_id == request.leader_id:
            # The leader we had given up on is alive after all: follow it again.
            core.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
        elif state.leader_id != request.leader_id:
            error = ErrorCode.INVALID_REQUEST  # a second leader in one epoch: refuse it
    _reply_leader_request(core, envelope, BeginQuorumEpochResponse, error)


def handle_end_quorum_epoch_request(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    """KIP-595: the resigning leader names preferred successors, best replicated first;
    the first campaigns at once, the others after a backoff growing with their rank."""
    request: EndQuorumEpochRequest = envelope.message
    error = _check_leader_request(core, request.cluster_id, request.topic_id,
                                  request.partition_index, request.leader_id,
                                  request.leader_epoch)
    if error is None:
        if request.leader_epoch > core._state.epoch:
            core.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
        state = core._state
        if (isinstance(state, FollowerState) and state.leader_id == request.leader_id
                and core._is_voter):
            state.last_fetch_success_ms = None  # the leader is gone: grant pre-votes
            successors = request.preferred_successors
            backoff_max = core._config.election_backoff_max_ms
            if core._node_id in successors:
                rank = successors.index(core._node_id)
                if rank == 0:
                    _reply_leader_request(core, envelope, EndQuorumEpochResponse, None)
                    core.transition_to_candidate(now_ms)
                    return
                delay = rank * max(1, backoff_max // len(successors))
            else:
                delay = backoff_max + core._election_backoff()
            state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + delay)
    _reply_leader_request(core, envelope, EndQuorumEpochResponse, error)


def _check_leader_request(core: RaftCore, cluster_id: str, topic_id: Uuid,
                          partition_index: int, leader_id: int,
                          leader_epoch: int) -> ErrorCode | None:
    error = addressing_error(core, cluster_id, topic_id, partition_index)
    if error is not None:
        return error
    if leader_id not in core._voter_set or leader_id == core._node_id:
        return ErrorCode.INCONSISTENT_VOTER_SET
    if leader_epoch < core._state.epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return None


def _reply_leader_request(core: RaftCore, envelope: Envelope, response_type: Any,
                          error: ErrorCode | None) -> None:
    if error in ADDRESSING_ERRORS:
        respond(core, envelope, response_type(error_code=error,
                                              topic_id=envelope.message.topic_id))
        return
    leader = core._current_leader()
    respond(core, envelope, response_type(
        error_code=error or ErrorCode.NONE, topic_id=envelope.message.topic_id,
        leader_id=leader.leader_id, leader_epoch=leader.leader_epoch))


def handle_begin_quorum_epoch_response(core: RaftCore, envelope: Envelope,
                                       now_ms: int) -> None:
    state = core._state
    if isinstance(state, LeaderState) and envelope.message.error_code == ErrorCode.NONE:
        state.begin_unacknowledged.discard(envelope.src)


def handle_end_quorum_epoch_response(core: RaftCore, envelope: Envelope,
                                     now_ms: int) -> None:
    state = core._state
    if isinstance(state, ResignedState) and envelope.message.error_code == ErrorCode.NONE:
        state.unacknowledged.discard(envelope.src)


def handle_describe_quorum_request(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    request: DescribeQuorumRequest = envelope.message
    error = addressing_error(core, request.cluster_id, request.topic_id,
                             request.partition_index)
    if error is not None:
        respond(core, envelope, DescribeQuorumResponse(error_code=error,
                                                       topic_id=request.topic_id))
        return
    respond(core, envelope, core.describe_quorum(now_ms))


# --- sending ------------------------------------------------------------------------


def request_votes(core: RaftCore, epoch: int, *, pre_vote: bool, now_ms: int) -> None:
    log_end = core._log.end_offset
    last_epoch = core._log.last_epoch
    for voter in core._voters:
        if voter != core._node_id:
            core._send_request(voter, VoteRequest(
                cluster_id=core._cluster_id, topic_id=core._topic_ids.topic_id_for(voter),
                candidate_epoch=epoch,
                candidate_id=core._node_id, last_offset_epoch=last_epoch,
                last_offset=log_end, pre_vote=pre_vote), now_ms)


def _announce_timeout_ms(core: RaftCore) -> int:
    """Begin/EndQuorumEpoch are retried well within the fetch timeout, so a voter that
    missed the news hears it before anyone's patience (or check-quorum) runs out."""
    return max(1, min(core._config.request_timeout_ms, core._config.fetch_timeout_ms // 4))


def send_begin_quorum_epoch(core: RaftCore, state: LeaderState, voter: int,
                            now_ms: int) -> None:
    core._send_request(voter, BeginQuorumEpochRequest(
        cluster_id=core._cluster_id, topic_id=core._topic_ids.topic_id_for(voter),
        leader_id=core._node_id, leader_epoch=state.epoch), now_ms, _announce_timeout_ms(core))


def send_end_quorum_epoch(core: RaftCore, state: ResignedState, voter: int,
                          now_ms: int) -> None:
    core._send_request(voter, EndQuorumEpochRequest(
        cluster_id=core._cluster_id, topic_id=core._topic_ids.topic_id_for(voter),
        leader_id=core._node_id, leader_epoch=state.epoch,
        preferred_successors=state.preferred_successors), now_ms, _announce_timeout_ms(core))


REQUEST_HANDLERS: dict[type, Callable[[RaftCore, Envelope, int], None]] = {
    VoteRequest: handle_vote_request,
    BeginQuorumEpochRequest: handle_begin_quorum_epoch_request,
    EndQuorumEpochRequest: handle_end_quorum_epoch_request,
    FetchRequest: fetch.handle_fetch_request,
    DescribeQuorumRequest: handle_describe_quorum_request,
}
RESPONSE_HANDLERS: dict[type, Callable[[RaftCore, Envelope, int], None]] = {
    VoteResponse: handle_vote_response,
    BeginQuorumEpochResponse: handle_begin_quorum_epoch_response,
    EndQuorumEpochResponse: handle_end_quorum_epoch_response,
    FetchResponse: fetch.handle_fetch_response,
}


def handle_response(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    """Responses count only for the request (correlation id, peer) and state that sent
    them; any newer epoch or leader they name is adopted first."""
    inflight = core._inflight.get(envelope.correlation_id)
    message: Any = envelope.message
    if (inflight is None or inflight.dst != envelope.src
            or type(message) is not inflight.response_type):
        return
    del core._inflight[envelope.correlation_id]
    message = envelope.message
    if (message.error_code == ErrorCode.UNKNOWN_TOPIC_ID
            and inflight.request.topic_id != METADATA_TOPIC_ID):
        # The peer has not applied the MetadataTopic record yet: use the sentinel.
        core._topic_ids.peer_lacks_id(envelope.src)
        if inflight.state is core._state and not isinstance(inflight.request, FetchRequest):
            core._send_request(envelope.src, dataclasses.replace(
                inflight.request, topic_id=METADATA_TOPIC_ID), now_ms)
            return
    if message.error_code not in ADDRESSING_ERRORS and envelope.src in core._voter_set:
        if isinstance(message, FetchResponse):
            leader_id = message.current_leader.leader_id
            epoch = message.current_leader.leader_epoch
        else:
            leader_id, epoch = message.leader_id, message.leader_epoch
        core.maybe_handle_leader_info(epoch, leader_id, now_ms)
    if inflight.state is not core._state:
        if envelope.correlation_id == core._probe_correlation_id:
            core._probe_correlation_id = None
        return
    RESPONSE_HANDLERS[type(message)](core, envelope, now_ms)
