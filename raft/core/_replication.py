"""Replication by Fetch (KIP-595): the leader's side (validation against the epoch cache,
diverging epochs, long-poll parking, the high watermark) and the follower's and
observer's side (one Fetch in flight, truncation on divergence, leader discovery). A
mixin of `RaftCore` over `CoreBase`.

A follower's Fetch leaves only after everything before its `fetch_offset` is flushed (it
is in the same or a later Ready as those entries), so the leader may count
`fetch_offset` as durable on that follower. The leader's answers go before its own flush
(`Ready.early_messages`): it counts itself only up to `flushed_end_offset`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from raft.common.errors import ErrorCode
from raft.core._base import CoreBase, RaftInvariantError
from raft.core._leader_state import LeaderState, ParkedFetch
from raft.core._quorum_state import EpochState, FollowerState, UnattachedState
from raft.messages import (
    CurrentLeader,
    DivergingEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from raft.snapshot import SnapshotError
from raft.types import NO_EPOCH, Batch, Envelope, SnapshotId

log = logging.getLogger(__name__)


class Replication(CoreBase):
    # --- Fetch (leader side) --------------------------------------------------------------

    def handle_fetch_request(self, envelope: Envelope, now_ms: int) -> None:
        request: FetchRequest = envelope.message
        error = self._addressing_error(request.cluster_id, request.topic_id,
                                       request.partition_index)
        if error is not None:
            self._respond(envelope, FetchResponse(error_code=error, topic_id=request.topic_id))
            return
        epoch = self._state.epoch
        if request.current_leader_epoch > epoch:
            if envelope.src not in self._voter_set:
                self._reply_fetch_error(envelope, ErrorCode.UNKNOWN_LEADER_EPOCH)
                return
            self.maybe_handle_leader_info(request.current_leader_epoch, -1, now_ms)
        elif request.current_leader_epoch < epoch:
            self._reply_fetch_error(envelope, ErrorCode.FENCED_LEADER_EPOCH)
            return
        state = self._state
        if not isinstance(state, LeaderState):
            self._reply_fetch_error(envelope, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        if request.fetch_offset < 0 or request.last_fetched_epoch < 0:
            self._reply_fetch_error(envelope, ErrorCode.INVALID_REQUEST)
            return
        snapshot_id = self._snapshot_to_fetch(request.fetch_offset, request.last_fetched_epoch)
        if snapshot_id is not None:
            state.note_snapshot_fetch(envelope.src, now_ms, request.replica_directory_id)
            self._respond_early(envelope, FetchResponse(
                topic_id=request.topic_id, high_watermark=self._high_watermark,
                log_start_offset=self._log.start_offset, snapshot_id=snapshot_id,
                current_leader=CurrentLeader(leader_id=self._node_id, leader_epoch=epoch)))
            return
        diverging = self._diverging_epoch(request.fetch_offset, request.last_fetched_epoch)
        log_end = self._log.end_offset
        if envelope.src >= 0:
            state.update_replica(envelope.src, None if diverging else request.fetch_offset,
                                 now_ms, log_end, request.replica_directory_id)
        if diverging is not None:
            self._respond_early(envelope, FetchResponse(
                topic_id=request.topic_id, high_watermark=self._high_watermark,
                diverging_epoch=diverging,
                current_leader=CurrentLeader(leader_id=self._node_id, leader_epoch=epoch)))
            return
        if request.fetch_offset > self._high_watermark and self._maybe_advance_high_watermark(
                state):
            self._tell_parked_fetches_hw(state, now_ms)
        if request.fetch_offset >= log_end and request.max_wait_ms > 0:
            self._park_fetch(state, envelope, now_ms)
        else:
            self._answer_fetch(state, envelope)

    def _park_fetch(self, state: LeaderState, envelope: Envelope, now_ms: int) -> None:
        """Long poll: answered when data arrives, the HW moves (see
        `_tell_parked_fetches_hw`) or the wait ends. Never so long that the fetcher's
        fetch timeout could fire while it waits."""
        request: FetchRequest = envelope.message
        progress = state.progress_of(envelope.src)
        hw_news = progress is not None and progress.sent_high_watermark < self._high_watermark
        if hw_news and envelope.src not in self._voter_set:
            self._answer_fetch(state, envelope)
            return
        config = self._config
        wait_ms = min(request.max_wait_ms, config.fetch_max_wait_ms,
                      config.fetch_timeout_ms // 2)
        if hw_news:
            wait_ms = min(wait_ms, config.fetch_hw_news_wait_ms)
        state.parked[envelope.src] = ParkedFetch(envelope, now_ms + wait_ms)

    def _snapshot_to_fetch(self, fetch_offset: int, last_fetched_epoch: int) -> SnapshotId | None:
        """KIP-630: a fetcher whose position lies below this log's start, or that cannot be
        checked against it (an older epoch than the start's), fetches the newest snapshot
        first."""
        logd = self._log
        start = logd.start_offset
        if start == 0 or not (fetch_offset < start or last_fetched_epoch < logd.start_epoch
                              or (fetch_offset == start
                                  and last_fetched_epoch != logd.start_epoch)):
            return None
        latest = self._snapshots.latest()
        if latest is None or latest.end_offset < start:
            raise RaftInvariantError(f"the log starts at {start} but the newest snapshot "
                                     f"is {latest}: nothing stands in for the records below")
        return latest

    def _diverging_epoch(self, fetch_offset: int,
                         last_fetched_epoch: int) -> DivergingEpoch | None:
        """KIP-595 Fetch validation against the epoch cache. (0, 0) is always valid."""
        if fetch_offset == 0 and last_fetched_epoch == 0:
            return None
        epoch, end_offset = self._log.end_offset_for_epoch(last_fetched_epoch)
        if epoch == NO_EPOCH:
            return DivergingEpoch(epoch=0, end_offset=0)  # nothing in common: start over
        if epoch != last_fetched_epoch or fetch_offset > end_offset:
            return DivergingEpoch(epoch=epoch, end_offset=end_offset)
        return None

    def _reply_fetch_error(self, envelope: Envelope, error: ErrorCode) -> None:
        self._respond(envelope, FetchResponse(error_code=error,
                                              topic_id=envelope.message.topic_id,
                                              current_leader=self._current_leader()))

    def _answer_fetch(self, state: LeaderState, envelope: Envelope) -> None:
        request: FetchRequest = envelope.message
        batches: list[Batch] = []
        if request.fetch_offset < self._log.end_offset:
            max_bytes = min(request.max_bytes, self._config.fetch_max_bytes)
            batches = self._log.read(request.fetch_offset, max_bytes)
        progress = state.progress_of(envelope.src)
        if progress is not None:
            progress.sent_high_watermark = self._high_watermark
        self._respond_early(envelope, FetchResponse(
            topic_id=request.topic_id, high_watermark=self._high_watermark,
            current_leader=CurrentLeader(leader_id=self._node_id, leader_epoch=state.epoch),
            records=tuple(batches)))

    def _wake_parked_fetches(self, state: LeaderState) -> None:
        if state.parked:
            parked = list(state.parked.values())
            state.parked.clear()
            for fetch in parked:
                self._answer_fetch(state, fetch.envelope)

    def _tell_parked_fetches_hw(self, state: LeaderState, now_ms: int) -> None:
        """The HW moved, with no new records. Observers (brokers publish what they hold
        below it) hear it at once. A voter hears it with the next records if they come
        within `fetch_hw_news_wait_ms`, else then: answered at once, a voter whose own
        fetch moved the HW would fetch again just after, one more round per commit one
        by one, and its parked fetch would not be waiting when the next proposal comes."""
        if not state.parked:
            return
        deadline_ms = now_ms + self._config.fetch_hw_news_wait_ms
        for fetcher, parked in list(state.parked.items()):
            if fetcher not in self._voter_set:
                del state.parked[fetcher]
                self._answer_fetch(state, parked.envelope)
            elif parked.deadline_ms > deadline_ms:
                parked.deadline_ms = deadline_ms

    def _fail_parked_fetches(self, old: LeaderState, new: EpochState) -> None:
        """A leader stepping down tells its parked fetchers at once."""
        leader = CurrentLeader(leader_id=-1 if new.leader_id in (None, self._node_id)
                               else new.leader_id, leader_epoch=new.epoch)
        for fetch in old.parked.values():
            self._respond(fetch.envelope, FetchResponse(
                error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                topic_id=fetch.envelope.message.topic_id, current_leader=leader))
        old.parked.clear()

    # --- FetchSnapshot (leader side) ------------------------------------------------------

    def handle_fetch_snapshot_request(self, envelope: Envelope, now_ms: int) -> None:
        request: FetchSnapshotRequest = envelope.message
        state = self._state
        error = self._fetch_snapshot_error(request)
        size = self._snapshots.size(request.snapshot_id) if error is None else None
        if error is None and size is None:
            error = ErrorCode.SNAPSHOT_NOT_FOUND
        elif size is not None and not 0 <= request.position <= size:
            error = ErrorCode.POSITION_OUT_OF_RANGE
        if error is not None:
            self._respond(envelope, FetchSnapshotResponse(
                error_code=error, topic_id=request.topic_id,
                current_leader=self._current_leader()))
            return
        assert isinstance(state, LeaderState)  # both checked just above
        assert size is not None
        state.note_snapshot_fetch(envelope.src, now_ms, request.replica_directory_id)
        max_bytes = max(1, min(request.max_bytes, self._config.fetch_snapshot_max_bytes))
        self._respond(envelope, FetchSnapshotResponse(
            topic_id=request.topic_id, snapshot_id=request.snapshot_id,
            current_leader=self._current_leader(), size=size, position=request.position,
            unaligned_records=self._snapshots.read(request.snapshot_id, request.position,
                                                   max_bytes)))

    def _fetch_snapshot_error(self, request: FetchSnapshotRequest) -> ErrorCode | None:
        """Why this node cannot serve `request` at all (the snapshot aside)."""
        error = self._addressing_error(request.cluster_id, request.topic_id,
                                       request.partition_index)
        if error is not None:
            return error
        if request.current_leader_epoch > self._state.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if request.current_leader_epoch < self._state.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if not isinstance(self._state, LeaderState):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    # --- Fetch (follower side) ------------------------------------------------------------

    def handle_fetch_response(self, envelope: Envelope, now_ms: int) -> None:
        state = self._state
        response: FetchResponse = envelope.message
        if isinstance(state, UnattachedState):
            if envelope.correlation_id == self._probe_correlation_id:
                # This voter knew no leader: ask the next one after a short backoff.
                self._probe_answered(now_ms, self._config.retry_backoff_ms)
            return
        if not isinstance(state, FollowerState):
            return
        if envelope.correlation_id == self._probe_correlation_id:
            # An observer's check of its leader: this voter names no newer one (a newer
            # one would have moved this node on already). Ask the next one later.
            self._probe_answered(now_ms, self._leader_check_interval_ms())
            return
        if state.fetch_correlation_id != envelope.correlation_id:
            return
        state.fetch_correlation_id = None
        if response.error_code != ErrorCode.NONE:
            state.next_fetch_ms = now_ms + self._config.retry_backoff_ms
            return
        state.last_fetch_success_ms = state.leader_heard_ms = now_ms
        state.leader_unreachable = False
        state.fetch_deadline_ms = self._fetch_deadline_ms(state, now_ms)
        self._hear_leader_high_watermark(response.high_watermark)
        if response.snapshot_id is not None:
            state.snapshot_fetch = response.snapshot_id
            self._snapshots.download(response.snapshot_id)
        elif response.diverging_epoch is not None:
            self._on_diverging_fetch_response(response)
        else:
            if response.records:
                self._append_fetched(state, response.records)
            # The leader validated our fetch offset against its log, so everything we hold
            # matches its log: its high watermark applies up to our log end. Never on a
            # diverging answer: our log still differs from the leader's there.
            self._set_high_watermark(min(response.high_watermark, self._log.end_offset))
        state.next_fetch_ms = now_ms
        self._maybe_send_fetch(now_ms)

    # --- FetchSnapshot (follower side) ----------------------------------------------------

    def handle_fetch_snapshot_response(self, envelope: Envelope, now_ms: int) -> None:
        state = self._state
        response: FetchSnapshotResponse = envelope.message
        if not isinstance(state, FollowerState) or (
                state.fetch_correlation_id != envelope.correlation_id):
            return
        state.fetch_correlation_id = None
        state.next_fetch_ms = now_ms
        snapshot_id = state.snapshot_fetch
        if response.error_code in (ErrorCode.SNAPSHOT_NOT_FOUND,
                                   ErrorCode.POSITION_OUT_OF_RANGE):
            state.snapshot_fetch = None  # the next Fetch names the leader's newest one
        elif response.error_code != ErrorCode.NONE:
            state.next_fetch_ms = now_ms + self._config.retry_backoff_ms  # resume then
        elif snapshot_id is not None:
            state.last_fetch_success_ms = state.leader_heard_ms = now_ms
            state.leader_unreachable = False
            state.fetch_deadline_ms = self._fetch_deadline_ms(state, now_ms)
            self._take_snapshot_chunk(state, snapshot_id, response)
        self._maybe_send_fetch(now_ms)

    def _take_snapshot_chunk(self, state: FollowerState, snapshot_id: SnapshotId,
                             response: FetchSnapshotResponse) -> None:
        store = self._snapshots
        held = store.download(snapshot_id)
        data = response.unaligned_records
        if (response.snapshot_id != snapshot_id or response.position != held
                or held + len(data) > response.size or not (data or held == response.size)):
            log.warning("ignoring a snapshot chunk that does not continue the download",
                        extra={"node": self._node_id, "snapshot": str(snapshot_id),
                               "position": response.position, "held": held})
            return
        store.write(snapshot_id, held, data)
        if held + len(data) < response.size:
            return
        state.snapshot_fetch = None
        try:
            records = store.finish(snapshot_id)
        except SnapshotError as exc:
            log.warning("fetched snapshot is not valid, fetching again",
                        extra={"node": self._node_id, "error": str(exc)})
            return
        self._load_snapshot(snapshot_id, records)

    def _load_snapshot(self, snapshot_id: SnapshotId, records: tuple[bytes, ...]) -> None:
        """The fetched snapshot (its `records`, as `finish` checked them) replaces the
        whole log (Kafka truncates to the latest snapshot too); the state machine reloads
        from it (`Ready.loaded_snapshot`)."""
        if snapshot_id.end_offset < self._high_watermark:
            raise RaftInvariantError(f"loading snapshot {snapshot_id} below the high "
                                     f"watermark {self._high_watermark}")
        self._log.reset_to(snapshot_id.end_offset, snapshot_id.epoch)
        # KIP-853: the snapshot carries the voter set in force at its end.
        self._history.reset_to(snapshot_id.end_offset, records)
        self._apply_voter_set()
        self._pending_entries = []
        self._pending_truncate = None
        self._loaded_snapshot = snapshot_id
        self._loaded_snapshot_records = records
        self._topic_ids.on_snapshot(self._snapshots, snapshot_id)
        self._snapshots.delete_before(snapshot_id.end_offset)
        self._set_high_watermark(snapshot_id.end_offset)

    def _truncate_to_diverging(self, diverging: DivergingEpoch) -> None:
        """Cut the log where it stops agreeing with the leader's (KIP-595 / KIP-320).
        A leader asking to cut below the high watermark is broken: `self._truncate` raises
        rather than follow it and lose committed records."""
        logd = self._log
        offset = logd.start_offset
        if diverging.epoch >= 0 and diverging.end_offset >= 0:
            epoch, end_offset = logd.end_offset_for_epoch(diverging.epoch)
            if epoch != NO_EPOCH:
                offset = max(logd.start_offset, min(diverging.end_offset, end_offset))
        if offset < logd.end_offset:
            self._truncate(offset)

    def _append_fetched(self, state: FollowerState, records: tuple[Batch, ...]) -> None:
        logd = self._log
        end = logd.end_offset
        batches: list[Batch] = []
        expected, last_epoch = end, logd.last_epoch
        for batch in records:
            if batch.next_offset <= end:
                continue  # already held (the leader sends whole batches)
            if batch.base_offset < end:
                batch = batch.records_between(end, batch.next_offset)
            if (batch.base_offset != expected or not batch.records
                    or not last_epoch <= batch.epoch <= state.epoch):
                log.warning("ignoring a fetched batch that does not continue the log",
                            extra={"node": self._node_id, "offset": batch.base_offset})
                return
            batches.append(batch)
            expected, last_epoch = batch.next_offset, batch.epoch
        if batches:
            self._append_as_follower(batches)

    # --- sending -----------------------------------------------------------------------

    def _next_fetch_ms(self, state: EpochState) -> int | None:
        if isinstance(state, FollowerState):
            fetch_at = state.next_fetch_ms if state.fetch_correlation_id is None else None
            check_at = self._leader_check_at(state)
            if check_at is None or (fetch_at is not None and fetch_at <= check_at):
                return fetch_at
            return check_at
        if not self._is_voter and self._probe_correlation_id is None:
            return self._probe_at_ms
        return None

    def _maybe_send_fetch(self, now_ms: int) -> None:
        """Followers keep one Fetch in flight to the leader; an observer that knows no
        leader probes the voters round-robin until one names it (KIP-595 discovery), and
        one that doubts its leader asks the other voters, still fetching from it."""
        state = self._state
        if isinstance(state, FollowerState):
            if state.fetch_correlation_id is None and now_ms >= state.next_fetch_ms:
                state.fetch_correlation_id = self._send_fetch(state.leader_id, now_ms)
            check_at = self._leader_check_at(state)
            if check_at is not None and now_ms >= check_at:
                voter = self._next_probe_voter(skip=state.leader_id)
                if voter is not None:
                    self._probe_correlation_id = self._send_fetch(
                        voter, now_ms, probe=True, timeout_ms=self._quick_retry_timeout_ms())
        elif (isinstance(state, UnattachedState) and not self._is_voter
              and self._probe_correlation_id is None and now_ms >= self._probe_at_ms):
            # A voter that leads parks the probe up to the long-poll wait; one that is
            # paused never answers: ask the next one soon after.
            voter = self._next_probe_voter(skip=None)
            if voter is None:
                return
            self._probe_correlation_id = self._send_fetch(
                voter, now_ms, probe=True,
                timeout_ms=self._config.fetch_max_wait_ms + self._leader_check_interval_ms())

    def _leader_check_at(self, state: FollowerState) -> int | None:
        """When an observer asks another voter who leads while it follows `state`
        (None: never). A live leader answers a parked Fetch within the long-poll wait,
        so a leader silent for longer, by a margin, is likely paused, cut off or gone:
        the observer then asks the other voters round-robin, one probe in flight and one
        every `_leader_check_interval_ms`, and moves to a newer leader as soon as one is
        named, keeping its Fetch in flight should the old leader answer. After the shell
        lost (or could not open) its connection to the leader it asks at once. Voters
        never ask: their fetch timeout and pre-vote decide (`_raft_core`)."""
        if (self._is_voter or self._probe_correlation_id is not None
                or len(self._voters) < 2):
            return None
        if state.leader_unreachable:
            return self._probe_at_ms
        silent_until = (state.leader_heard_ms + self._config.fetch_max_wait_ms
                        + self._leader_check_interval_ms())
        return max(silent_until, self._probe_at_ms)

    def _leader_check_interval_ms(self) -> int:
        """The margin past the long-poll wait, and the pacing of an observer's checks."""
        return max(self._config.retry_backoff_ms, self._config.fetch_max_wait_ms // 2)

    def _next_probe_voter(self, skip: int | None) -> int | None:
        """Whom to ask who leads next, round-robin; None when there is nobody but this
        node to ask."""
        targets = probe_targets(self._node_id, self._voters, self._last_known_voters,
                                self._config.voters)
        voters = [v for v in targets if v != skip] or list(targets)
        return voters[self._probe_index % len(voters)] if voters else None

    def _probe_answered(self, now_ms: int, backoff_ms: int) -> None:
        """The voter probed named no newer leader (or never answered): the next one,
        after `backoff_ms`."""
        self._probe_correlation_id = None
        self._probe_index += 1
        self._probe_at_ms = now_ms + backoff_ms

    def _send_fetch(self, dst: int | None, now_ms: int, *, probe: bool = False,
                    timeout_ms: int | None = None) -> int:
        """A Fetch to `dst`; a probe (asking a voter who leads) is always a plain Fetch."""
        assert dst is not None
        state = self._state
        if (isinstance(state, FollowerState) and state.snapshot_fetch is not None
                and not probe):
            return self._send_request(dst, FetchSnapshotRequest(
                cluster_id=self._cluster_id, replica_id=self._node_id,
                max_bytes=self._config.fetch_snapshot_max_bytes,
                topic_id=self._topic_ids.topic_id_for(dst), current_leader_epoch=state.epoch,
                snapshot_id=state.snapshot_fetch,
                position=self._snapshots.download(state.snapshot_fetch),
                replica_directory_id=self._directory_id), now_ms,
                self._quick_retry_timeout_ms())
        log_end = self._log.end_offset
        last_epoch = self._log.last_epoch  # the epoch of the record before log_end (0: empty)
        topic_id = self._topic_ids.topic_id_for(dst)
        request = self._last_fetch_request
        if (request is None or request.fetch_offset != log_end
                or request.last_fetched_epoch != last_epoch
                or request.current_leader_epoch != self._state.epoch
                or request.topic_id != topic_id):
            # Immutable, so the same request object serves every identical long poll.
            request = self._last_fetch_request = FetchRequest(
                cluster_id=self._cluster_id, replica_id=self._node_id,
                max_wait_ms=self._config.fetch_max_wait_ms,
                max_bytes=self._config.fetch_max_bytes, topic_id=topic_id,
                current_leader_epoch=self._state.epoch, fetch_offset=log_end,
                last_fetched_epoch=last_epoch, replica_directory_id=self._directory_id)
        timeout = timeout_ms or self._config.request_timeout_ms + self._config.fetch_max_wait_ms
        return self._send_request(dst, request, now_ms, timeout)

    # --- the high watermark ---------------------------------------------------------

    def _on_diverging_fetch_response(self, response: FetchResponse) -> None:
        """The leader's log differs from ours before our fetch offset: truncate; the
        high watermark stays as it is (see `fetch.handle_fetch_response`)."""
        assert response.diverging_epoch is not None
        self._truncate_to_diverging(response.diverging_epoch)

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


def probe_targets(node_id: int, voters: Sequence[int], last_known: Sequence[int],
                  bootstrap: Sequence[int]) -> tuple[int, ...]:
    """The replicas an observer asks who leads: the voters in force, else the last ones
    it knew (a cut of its log or a loaded snapshot may have taken them away), then the
    bootstrap servers (`controller.quorum.bootstrap.servers`), never itself: a replica
    formatted anew without voters knows only those, and the bootstrap list may name it
    or voters long removed."""
    ordered = dict.fromkeys((*(voters or last_known), *bootstrap))
    ordered.pop(node_id, None)
    return tuple(ordered)
