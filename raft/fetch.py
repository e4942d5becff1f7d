"""Replication by Fetch (KIP-595): the leader's side (validation against the epoch cache,
diverging epochs, long-poll parking, the high watermark) and the follower's and
observer's side (one Fetch in flight, truncation on divergence, leader discovery).

A follower's Fetch leaves only after everything before its `fetch_offset` is flushed (it
is in the same or a later Ready as those entries), so the leader may count
`fetch_offset` as durable on that follower.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from raft.errors import ErrorCode
from raft.leader_state import LeaderState, ParkedFetch
from raft.messages import CurrentLeader, DivergingEpoch, FetchRequest, FetchResponse
from raft.quorum_state import EpochState, FollowerState, UnattachedState
from raft.types import NO_EPOCH, Batch, Envelope

if TYPE_CHECKING:
    from raft.core import RaftCore

log = logging.getLogger(__name__)


def _respond(core: RaftCore, request: Envelope, message: object) -> None:
    core._outbox.append(Envelope(src=core._node_id, dst=request.src,
                                 correlation_id=request.correlation_id, message=message))


# --- Fetch (leader side) --------------------------------------------------------------


def handle_fetch_request(core: RaftCore, envelope: Envelope, now_ms: int) -> None:
    request: FetchRequest = envelope.message
    error = core._topic_ids.addressing_error(core._log, request.cluster_id,
                                             request.topic_id, request.partition_index)
    if error is not None:
        _respond(core, envelope, FetchResponse(error_code=error, topic_id=request.topic_id))
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
        _respond(core, envelope, FetchResponse(
            topic_id=request.topic_id, high_watermark=core._high_watermark,
            diverging_epoch=diverging,
            current_leader=CurrentLeader(leader_id=core._node_id, leader_epoch=epoch)))
        return
    if request.fetch_offset > core._high_watermark and core._maybe_advance_high_watermark(
            state):
        wake_parked_fetches(core, state)
    progress = state.progress_of(envelope.src)
    hw_news = progress is not None and progress.sent_high_watermark < core._high_watermark
    if request.fetch_offset >= log_end and request.max_wait_ms > 0 and not hw_news:
        # Long poll: answered when data arrives, the HW moves or the wait ends.
        # Never so long that the fetcher's fetch timeout could fire while it waits.
        config = core._config
        wait_ms = min(request.max_wait_ms, config.fetch_max_wait_ms,
                      config.fetch_timeout_ms // 2)
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
    _respond(core, envelope, FetchResponse(error_code=error,
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
    _respond(core, envelope, FetchResponse(
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
        _respond(core, fetch.envelope, FetchResponse(
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            topic_id=fetch.envelope.message.topic_id, current_leader=leader))
    old.parked.clear()


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
        core._on_diverging_fetch_response(response)
    else:
        if response.records:
            _append_fetched(core, state, response.records)
        # The leader validated our fetch offset against its log, so everything we hold
        # matches its log: its high watermark applies up to our log end. Never on a
        # diverging answer: our log still differs from the leader's there.
        core._set_high_watermark(min(response.high_watermark, core._log.end_offset))
    state.next_fetch_ms = now_ms
    maybe_send_fetch(core, now_ms)


def truncate_to_diverging(core: RaftCore, diverging: DivergingEpoch) -> None:
    """Cut the log where it stops agreeing with the leader's (KIP-595 / KIP-320).
    A leader asking to cut below the high watermark is broken: `core._truncate` raises
    rather than follow it and lose committed records."""
    logd = core._log
    offset = logd.start_offset
    if diverging.epoch >= 0 and diverging.end_offset >= 0:
        epoch, end_offset = logd.end_offset_for_epoch(diverging.epoch)
        if epoch != NO_EPOCH:
            offset = max(logd.start_offset, min(diverging.end_offset, end_offset))
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


# --- sending -----------------------------------------------------------------------


def next_fetch_ms(core: RaftCore, state: EpochState) -> int | None:
    if isinstance(state, FollowerState):
        return state.next_fetch_ms if state.fetch_correlation_id is None else None
    if not core._is_voter and core._probe_correlation_id is None:
        return core._probe_at_ms
    return None


def maybe_send_fetch(core: RaftCore, now_ms: int) -> None:
    """Followers keep one Fetch in flight to the leader; an observer that knows no
    leader probes the voters round-robin until one names it (KIP-595 discovery)."""
    state = core._state
    if isinstance(state, FollowerState):
        if state.fetch_correlation_id is None and now_ms >= state.next_fetch_ms:
            state.fetch_correlation_id = _send_fetch(core, state.leader_id, now_ms)
    elif (isinstance(state, UnattachedState) and not core._is_voter
          and core._probe_correlation_id is None and now_ms >= core._probe_at_ms):
        voter = core._voters[core._probe_index % len(core._voters)]
        core._probe_correlation_id = _send_fetch(core, voter, now_ms)


def _send_fetch(core: RaftCore, dst: int | None, now_ms: int) -> int:
    assert dst is not None
    log_end = core._log.end_offset
    last_epoch = core._log.last_epoch  # the epoch of the record before log_end (0: empty)
    topic_id = core._topic_ids.topic_id_for(dst)
    request = core._last_fetch_request
    if (request is None or request.fetch_offset != log_end
            or request.last_fetched_epoch != last_epoch
            or request.current_leader_epoch != core._state.epoch
            or request.topic_id != topic_id):
        # Immutable, so the same request object serves every identical long poll.
        request = core._last_fetch_request = FetchRequest(
            cluster_id=core._cluster_id, replica_id=core._node_id,
            max_wait_ms=core._config.fetch_max_wait_ms,
            max_bytes=core._config.fetch_max_bytes, topic_id=topic_id,
            current_leader_epoch=core._state.epoch, fetch_offset=log_end,
            last_fetched_epoch=last_epoch)
    timeout = core._config.request_timeout_ms + core._config.fetch_max_wait_ms
    return core._send_request(dst, request, now_ms, timeout)
