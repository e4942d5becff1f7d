"""Request and response handlers of `RaftCore` (KIP-595), one function per API.

They take the core and mutate it through its transitions. Every request is first checked
for its cluster id and topic ID (KIP-516) and answered with an error, without any state
change, if either is wrong. Protocol problems become error codes; nothing here raises on
peer input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metadata.uuid import METADATA_TOPIC_ID, Uuid
from raft.errors import ErrorCode
from raft.leader_state import LeaderState, ParkedFetch
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    CurrentLeader,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DivergingEpoch,
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
)
from raft.types import NO_EPOCH, Batch, Envelope

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
    response_type: type
    deadline_ms: int


def respond(core: RaftCore, request: Envelope, message: object) -> None:
    core._outbox.append(Envelope(src=core._node_id, dst=request.src,
                                 correlation_id=request.correlation_id, message=message))


def addressing_error(core: RaftCore, cluster_id: str, topic_id: Uuid,
                     partition_index: int) -> ErrorCode | None:
    """KIP-516: the sentinel or the known metadata topic ID is accepted, nothing else."""
    if cluster_id != core._cluster_id:
        return ErrorCode.INCONSISTENT_CLUSTER_ID
    if partition_index != 0:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if topic_id == METADATA_TOPIC_ID or topic_id == core._metadata_topic_id:
        return None
    log_topic_id = core._log_metadata_topic_id()
    if topic_id == log_topic_id:
        return None
    if core._metadata_topic_id is not None or log_topic_id is not None:
        return ErrorCode.INCONSISTENT_TOPIC_ID
    return ErrorCode.UNKNOWN_TOPIC_ID


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
        granted = core._state.can_grant_vote(request.candidate_id,
                                             _is_log_up_to_date(core, request),
                                             request.pre_vote, now_ms)
        if granted and not request.pre_vote and core._state.voted_id is None:
            core.transition_to_voted(request.candidate_id, now_ms)  # persisted first
    _reply_vote(core, envelope, ErrorCode.NONE, granted=granted)


def _is_log_up_to_date(core: RaftCore, request: VoteRequest) -> bool:
    """Raft §5.4.1: the candidate's (last epoch, end offset) is at least ours."""
    if core._config.planted_bug == "vote_without_log_check":
        return True
    ours = (core._log.last_epoch, core._log.end_offset)
    return (request.last_offset_epoch, request.last_offset) >= ours


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


# --- Fetch (leader side) --------------------------------------------------------------


def handle_fetch_request(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    request: FetchRequest = envelope.message
    error = addressing_error(core, request.cluster_id, request.topic_id,
                             request.partition_index)
    if error is not None:
        respond(core, envelope, FetchResponse(error_code=error, topic_id=request.topic_id))
        return
    epoch = core._state.epoch
    if request.current_leader_epoch > epoch:
        if envelope.src not in core._voter_set:
            _reply_fetch_error(core, envelope, ErrorCode.UNKNOWN_LEADER_EPOCH)
            return
        core.maybe_handle_leader_info(request.current_leader_epoch, -1, now_ms)
    elif request.current_leader_epoch < epoch:
        _reply_fetch_error(core, envelope, ErrorCode.FENCED_LEADER_EPOCH)
        return
    state = core._state
    if not isinstance(state, LeaderState):
        _reply_fetch_error(core, envelope, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return
    if request.fetch_offset < 0 or request.last_fetched_epoch < 0:
        _reply_fetch_error(core, envelope, ErrorCode.INVALID_REQUEST)
        return
    diverging = _diverging_epoch(core, request.fetch_offset, request.last_fetched_epoch)
    log_end = core._log.end_offset
    if envelope.src >= 0:
        state.update_replica(envelope.src, None if diverging else request.fetch_offset,
                             now_ms, log_end)
    if diverging is not None:
        respond(core, envelope, FetchResponse(
            topic_id=request.topic_id, high_watermark=core._high_watermark,
            diverging_epoch=diverging,
            current_leader=CurrentLeader(leader_id=core._node_id, leader_epoch=epoch)))
        return
    if core._maybe_advance_high_watermark(state):
        wake_parked_fetches(core, state)
    progress = state.progress_of(envelope.src)
    hw_news = progress is not None and progress.sent_high_watermark < core._high_watermark
    if request.fetch_offset >= log_end and request.max_wait_ms > 0 and not hw_news:
        # Long poll: answered when data arrives, the HW moves or the wait ends.
        wait_ms = min(request.max_wait_ms, core._config.fetch_max_wait_ms)
        state.parked[envelope.src] = ParkedFetch(envelope, now_ms + wait_ms)
        return
    answer_fetch(core, state, envelope)


def _diverging_epoch(core: RaftCore, fetch_offset: int,
                     last_fetched_epoch: int) -> DivergingEpoch | None:
    """KIP-595 Fetch validation against the epoch cache. (0, 0) is always valid."""
    if fetch_offset == 0 and last_fetched_epoch == 0:
        return None
    epoch, end_offset = core._log.end_offset_for_epoch(last_fetched_epoch)
    if epoch == NO_EPOCH:
        return DivergingEpoch(epoch=0, end_offset=0)  # nothing in common: start over
    if epoch != last_fetched_epoch or fetch_offset > end_offset:
        return DivergingEpoch(epoch=epoch, end_offset=end_offset)
    return None


def _reply_fetch_error(core: RaftCore, envelope: Envelope, error: ErrorCode) -> None:
    respond(core, envelope, FetchResponse(error_code=error,
                                          topic_id=envelope.message.topic_id,
                                          current_leader=core._current_leader()))


def answer_fetch(core: RaftCore, state: LeaderState, envelope: Envelope) -> None:
    request: FetchRequest = envelope.message
    batches: list[Batch] = []
    if request.fetch_offset < core._log.end_offset:
        max_bytes = min(request.max_bytes, core._config.fetch_max_bytes)
        batches = core._log.read(request.fetch_offset, max_bytes)
    progress = state.progress_of(envelope.src)
    if progress is not None:
        progress.sent_high_watermark = core._high_watermark
    respond(core, envelope, FetchResponse(
        topic_id=request.topic_id, high_watermark=core._high_watermark,
        current_leader=CurrentLeader(leader_id=core._node_id, leader_epoch=state.epoch),
        records=tuple(batches)))


def wake_parked_fetches(core: RaftCore, state: LeaderState) -> None:
    if state.parked:
        parked = list(state.parked.values())
        state.parked.clear()
        for fetch in parked:
            answer_fetch(core, state, fetch.envelope)


def fail_parked_fetches(core: RaftCore, old: LeaderState, new: EpochState) -> None:
    """A leader stepping down tells its parked fetchers at once."""
    leader = CurrentLeader(leader_id=-1 if new.leader_id in (None, core._node_id)
                           else new.leader_id, leader_epoch=new.epoch)
    for fetch in old.parked.values():
        respond(core, fetch.envelope, FetchResponse(
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            topic_id=fetch.envelope.message.topic_id, current_leader=leader))
    old.parked.clear()


def handle_describe_quorum_request(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    request: DescribeQuorumRequest = envelope.message
    error = addressing_error(core, request.cluster_id, request.topic_id,
                             request.partition_index)
    if error is not None:
        respond(core, envelope, DescribeQuorumResponse(error_code=error,
                                                       topic_id=request.topic_id))
        return
    respond(core, envelope, core.describe_quorum(now_ms))


# --- Fetch (follower side) ------------------------------------------------------------


def handle_fetch_response(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    state = core._state
    response: FetchResponse = envelope.message
    if isinstance(state, UnattachedState):
        if envelope.correlation_id == core._probe_correlation_id:
            # This voter knew no leader: ask the next one after a short backoff.
            core._probe_correlation_id = None
            core._probe_index += 1
            core._probe_at_ms = now_ms + core._config.retry_backoff_ms
        return
    if not isinstance(state, FollowerState) or (
            state.fetch_correlation_id != envelope.correlation_id):
        return
    state.fetch_correlation_id = None
    if response.error_code != ErrorCode.NONE:
        state.next_fetch_ms = now_ms + core._config.retry_backoff_ms
        return
    state.last_fetch_success_ms = now_ms
    state.fetch_deadline_ms = now_ms + state.fetch_timeout_ms
    if response.diverging_epoch is not None:
        _truncate_to_diverging(core, response.diverging_epoch)
    elif response.records:
        _append_fetched(core, state, response.records)
    core._set_high_watermark(min(response.high_watermark, core._log.end_offset))
    state.next_fetch_ms = now_ms
    core._maybe_send_fetch(now_ms)


def _truncate_to_diverging(core: RaftCore, diverging: DivergingEpoch) -> None:
    """Cut the log where it stops agreeing with the leader's (KIP-595 / KIP-320)."""
    logd = core._log
    offset = logd.start_offset
    if diverging.epoch >= 0 and diverging.end_offset >= 0:
        epoch, end_offset = logd.end_offset_for_epoch(diverging.epoch)
        if epoch != NO_EPOCH:
            offset = max(logd.start_offset, min(diverging.end_offset, end_offset))
    if offset < core._high_watermark:
        # Committed records are never removed: a leader asking for that is broken, and
        # following it would lose data. Refuse loudly and keep the log as it is.
        log.error("leader asked to truncate below the high watermark; refused",
                  extra={"node": core._node_id, "offset": offset,
                         "high_watermark": core._high_watermark})
        return
    if offset < logd.end_offset:
        core._truncate(offset)


def _append_fetched(core: RaftCore, state: FollowerState, records: tuple[Batch, ...]) -> None:
    logd = core._log
    end = logd.end_offset
    batches: list[Batch] = []
    expected, last_epoch = end, logd.last_epoch
    for batch in records:
        if batch.next_offset <= end:
            continue  # already held (the leader sends whole batches)
        if batch.base_offset < end:
            batch = Batch(base_offset=end, epoch=batch.epoch,
                          records=batch.records[end - batch.base_offset:])
        if (batch.base_offset != expected or not batch.records
                or not last_epoch <= batch.epoch <= state.epoch):
            log.warning("ignoring a fetched batch that does not continue the log",
                        extra={"node": core._node_id, "offset": batch.base_offset})
            return
        batches.append(batch)
        expected, last_epoch = batch.next_offset, batch.epoch
    if batches:
        core._append_as_follower(batches)


REQUEST_HANDLERS: dict[type, Callable[[RaftCore, Envelope, int], None]] = {
    VoteRequest: handle_vote_request,
    BeginQuorumEpochRequest: handle_begin_quorum_epoch_request,
    EndQuorumEpochRequest: handle_end_quorum_epoch_request,
    FetchRequest: handle_fetch_request,
    DescribeQuorumRequest: handle_describe_quorum_request,
}
RESPONSE_HANDLERS: dict[type, Callable[[RaftCore, Envelope, int], None]] = {
    VoteResponse: handle_vote_response,
    BeginQuorumEpochResponse: handle_begin_quorum_epoch_response,
    EndQuorumEpochResponse: handle_end_quorum_epoch_response,
    FetchResponse: handle_fetch_response,
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
