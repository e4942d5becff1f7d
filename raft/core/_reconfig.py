"""The dynamic quorum's leader side (KIP-853): AddRaftVoter, RemoveRaftVoter and
UpdateRaftVoter. A mixin of `RaftCore` over `CoreBase`.

The rules, as Kafka's AddVoterHandler / RemoveVoterHandler / UpdateVoterHandler:

- only a leader of a `kraft.version` 1 quorum changes voters (NOT_LEADER_OR_FOLLOWER,
  UNSUPPORTED_VERSION otherwise);
- one change at a time: while the latest VotersRecord is not committed, another is
  refused (REQUEST_TIMED_OUT), so every two voter sets in force one after the other
  differ by one voter, and any majority of one meets any majority of the next;
- the leader must have committed a record of its own epoch first (REQUEST_TIMED_OUT),
  so no VotersRecord of an older leader can still be pending unseen;
- a voter is added only when it is an observer with that exact replica key, caught up:
  it fetched within the fetch timeout and its fetch offset lies at most
  `add_voter_max_lag_records` behind the leader's log end (REQUEST_TIMED_OUT
  otherwise); its id must not be a voter already (DUPLICATE_VOTER): a replica whose disk
  was wiped is removed by its old key before its new key is added;
- a voter to remove or update must be in the set with that directory id
  (VOTER_NOT_FOUND); the last voter is never removed (INVALID_REQUEST);
- the new set is in force from the moment its VotersRecord is appended (majorities and
  elections count over it), and the request is answered once it commits (or
  REQUEST_TIMED_OUT after `reconfig_timeout_ms`; the record may still commit);
- a leader removed from the set leads on, not counting itself, until its removal
  commits, then resigns (`_tick_leader`).

A change the rules refuse never reaches the log; a VotersRecord that would break them
anyway is a broken core: `_append_voters` raises `RaftInvariantError`.
"""

from __future__ import annotations

from raft.common.errors import ErrorCode
from raft.common.uuid import ZERO_UUID, Uuid
from raft.control_records import KRaftVersionRecord
from raft.core._base import CoreBase, RaftInvariantError
from raft.core._leader_state import LeaderState, PendingVoterChange, ReplicaProgress
from raft.messages import (
    AddRaftVoterRequest,
    RemoveRaftVoterRequest,
    UpdateKRaftVersionRequest,
    UpdateRaftVoterRequest,
    VoterChangeResponse,
)
from raft.types import Envelope
from raft.voters import ReplicaKey, Voter, VoterSet


class Reconfiguration(CoreBase):
    def handle_add_raft_voter_request(self, envelope: Envelope, now_ms: int) -> None:
        request: AddRaftVoterRequest = envelope.message
        state = self._reconfig_leader(envelope, request.cluster_id, request.topic_id,
                                      request.partition_index)
        if state is None:
            return
        key = ReplicaKey(request.voter_id, request.voter_directory_id)
        if request.voter_id < 0 or request.voter_directory_id == ZERO_UUID:
            self._reply_change(envelope, ErrorCode.INVALID_REQUEST,
                               "a voter needs a node id and a directory id")
            return
        voters = self._history.latest
        if request.voter_id in voters.id_set:
            self._reply_change(envelope, ErrorCode.DUPLICATE_VOTER,
                               f"node {request.voter_id} is a voter already "
                               f"({voters.voter(request.voter_id)})")
            return
        progress = state.observer_progress.get(request.voter_id)
        if not self._is_caught_up(progress, key, now_ms):
            self._reply_change(envelope, ErrorCode.REQUEST_TIMED_OUT,
                               f"replica {key} is not a caught-up observer of this leader")
            return
        self._append_voters(state, voters.added(Voter(key, tuple(request.listeners))),
                            envelope, request.timeout_ms, now_ms)

    def handle_remove_raft_voter_request(self, envelope: Envelope, now_ms: int) -> None:
        request: RemoveRaftVoterRequest = envelope.message
        state = self._reconfig_leader(envelope, request.cluster_id, request.topic_id,
                                      request.partition_index)
        if state is None:
            return
        voters = self._history.latest
        voter = self._named_voter(envelope, voters, request.voter_id,
                                  request.voter_directory_id)
        if voter is None:
            return
        if len(voters) == 1:
            self._reply_change(envelope, ErrorCode.INVALID_REQUEST,
                               "the last voter cannot be removed")
            return
        self._append_voters(state, voters.removed(request.voter_id), envelope,
                            self._config.reconfig_timeout_ms, now_ms)

    def handle_update_kraft_version_request(self, envelope: Envelope, now_ms: int) -> None:
        """kraft.version 0 -> 1: the static voters, each with the directory id the leader
        heard in its recent Fetches (its own for itself) and the endpoints the request
        names, become the log's first VotersRecord, after a KRaftVersionRecord(1)."""
        request: UpdateKRaftVersionRequest = envelope.message
        error = self._addressing_error(request.cluster_id, request.topic_id,
                                       request.partition_index)
        state = self._state
        if error is not None or not isinstance(state, LeaderState):
            self._reply_change(envelope, error or ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
            return
        if request.kraft_version == self.kraft_version:
            self._reply_change(envelope, ErrorCode.NONE, None)  # already there
            return
        if request.kraft_version != 1 or self.kraft_version != 0:
            self._reply_change(envelope, ErrorCode.INVALID_UPDATE_VERSION,
                               f"kraft.version {self.kraft_version} cannot become "
                               f"{request.kraft_version} (only 0 -> 1)")
            return
        reason = self._change_blocked(state)
        if reason is not None:
            self._reply_change(envelope, ErrorCode.REQUEST_TIMED_OUT, reason)
            return
        endpoints = {n.node_id: n.listeners for n in request.nodes}
        voters = []
        for voter_id in self._voters:
            directory = (self._directory_id if voter_id == self._node_id
                         else self._heard_directory(state, voter_id, now_ms))
            if directory is None or not endpoints.get(voter_id):
                self._reply_change(
                    envelope, ErrorCode.REQUEST_TIMED_OUT if directory is None
                    else ErrorCode.INVALID_REQUEST,
                    f"voter {voter_id}: " + ("no directory id heard from it recently"
                                             if directory is None else "no endpoint given"))
                return
            voters.append(Voter(ReplicaKey(voter_id, directory), tuple(endpoints[voter_id])))
        keyed = VoterSet(voters)
        if keyed.ids != self._history.latest.ids:
            raise RaftInvariantError(f"kraft.version upgrade changes the voters: "
                                     f"{self._history.latest} -> {keyed}")
        batch = self._append_as_leader(state, [KRaftVersionRecord(kraft_version=1).encode(),
                                               keyed.to_record().encode()], now_ms)
        state.pending_change = PendingVoterChange(
            envelope=envelope, offset=batch.last_offset,
            deadline_ms=now_ms + self._config.reconfig_timeout_ms)
        self._wake_parked_fetches(state)

    def _heard_directory(self, state: LeaderState, voter_id: int,
                         now_ms: int) -> Uuid | None:
        progress = state.voter_progress.get(voter_id)
        if (progress is None or progress.directory_id is None or progress.last_fetch_ms < 0
                or now_ms - progress.last_fetch_ms > self._config.fetch_timeout_ms):
            return None
        return progress.directory_id

    def handle_update_raft_voter_request(self, envelope: Envelope, now_ms: int) -> None:
        request: UpdateRaftVoterRequest = envelope.message
        if request.current_leader_epoch < self._state.epoch:
            self._reply_change(envelope, ErrorCode.FENCED_LEADER_EPOCH, None)
            return
        state = self._reconfig_leader(envelope, request.cluster_id, request.topic_id,
                                      request.partition_index)
        if state is None:
            return
        voters = self._history.latest
        voter = self._named_voter(envelope, voters, request.voter_id,
                                  request.voter_directory_id)
        if voter is None:
            return
        updated = Voter(voter.key, tuple(request.listeners))
        if updated == voter:
            self._reply_change(envelope, ErrorCode.NONE, None)
            return
        self._append_voters(state, voters.replaced(updated), envelope,
                            self._config.reconfig_timeout_ms, now_ms)

    # --- this replica's own endpoints ------------------------------------------------

    def _own_updated_entry(self) -> Voter | None:
        """This voter's entry with its current listeners, when the set in force names
        other endpoints for it (None: nothing to update)."""
        if not self._listeners or not self.dynamic_quorum or not self._is_voter:
            return None
        voter = self._voter_keys.voter(self._node_id)
        if voter is None or voter.endpoints == self._listeners:
            return None
        return Voter(voter.key, self._listeners)

    def _maybe_update_own_endpoints(self, leader_id: int, now_ms: int) -> None:
        """A follower that has just heard its leader (`leader_id`) asks it to update its
        entry, as Kafka's voters do after a restart with new listeners; again a fetch
        timeout later while the set it fetches still names the old ones (the answer
        itself is not needed: the VotersRecord reaches this follower)."""
        if self._own_updated_entry() is None or now_ms < self._update_voter_at_ms:
            return
        assert self._directory_id is not None  # a voter of a dynamic quorum has one
        self._update_voter_at_ms = now_ms + self._config.fetch_timeout_ms
        self._send_request(leader_id, UpdateRaftVoterRequest(
            cluster_id=self._cluster_id, topic_id=self._topic_ids.topic_id_for(leader_id),
            current_leader_epoch=self._state.epoch, voter_id=self._node_id,
            voter_directory_id=self._directory_id, listeners=self._listeners), now_ms)

    def _maybe_update_own_entry_as_leader(self, state: LeaderState, now_ms: int) -> None:
        """A leader whose own entry names old endpoints updates it itself, under the
        same rules as a request (one uncommitted change at a time)."""
        updated = self._own_updated_entry()
        if updated is None or self._change_blocked(state) is not None:
            return
        new = self._history.latest.replaced(updated)
        self._check_voter_change(state, new)
        self._append_as_leader(state, [new.to_record().encode()], now_ms)
        self._wake_parked_fetches(state)

    # --- the rules -------------------------------------------------------------------

    def _reconfig_leader(self, envelope: Envelope, cluster_id: str, topic_id: object,
                         partition_index: int) -> LeaderState | None:
        """The leader state if this node may change the voters now; else answered."""
        error = self._addressing_error(cluster_id, topic_id, partition_index)  # type: ignore[arg-type]
        if error is not None:
            self._reply_change(envelope, error, None)
            return None
        state = self._state
        if not isinstance(state, LeaderState):
            self._reply_change(envelope, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                               f"node {self._node_id} is not the leader")
            return None
        if not self.dynamic_quorum:
            self._reply_change(envelope, ErrorCode.UNSUPPORTED_VERSION,
                               "kraft.version 0: the voters are static "
                               "(controller.quorum.voters)")
            return None
        reason = self._change_blocked(state)
        if reason is not None:
            self._reply_change(envelope, ErrorCode.REQUEST_TIMED_OUT, reason)
            return None
        return state

    def _named_voter(self, envelope: Envelope, voters: VoterSet, voter_id: int,
                     directory_id: Uuid) -> Voter | None:
        """The voter a remove or update names (its id and directory id both match); else
        answered VOTER_NOT_FOUND."""
        voter = voters.voter(voter_id)
        if voter is None or voter.key.directory_id != directory_id:
            self._reply_change(envelope, ErrorCode.VOTER_NOT_FOUND,
                               f"{voter_id}@{directory_id} is not one of the voters {voters}")
            return None
        return voter

    def _change_blocked(self, state: LeaderState) -> str | None:
        """Why no voter change may start now (None: one may)."""
        if state.pending_change is not None:
            return "a voter change is in progress"
        latest = self._history.latest_offset
        if latest is not None and latest >= self._high_watermark:
            return f"the VotersRecord at offset {latest} is not committed yet"
        if self._high_watermark <= state.epoch_start_offset:
            return "the leader has not committed a record of its epoch yet"
        return None

    def _is_caught_up(self, progress: ReplicaProgress | None, key: ReplicaKey,
                      now_ms: int) -> bool:
        if progress is None or progress.directory_id != key.directory_id:
            return False
        return (progress.last_fetch_ms >= 0
                and now_ms - progress.last_fetch_ms <= self._config.fetch_timeout_ms
                and self._log.end_offset - progress.end_offset
                <= self._config.add_voter_max_lag_records)

    def _check_voter_change(self, state: LeaderState, new: VoterSet) -> None:
        """The safety net under the rules above: never two uncommitted changes, never
        more than one voter at once."""
        latest = self._history.latest_offset
        if latest is not None and latest >= self._high_watermark:
            raise RaftInvariantError(f"a second voter change while the VotersRecord at "
                                     f"{latest} is uncommitted")
        if not self._history.latest.differs_by_at_most_one(new):
            raise RaftInvariantError(f"voter change {self._history.latest} -> {new} "
                                     "changes more than one voter")

    def _append_voters(self, state: LeaderState, new: VoterSet, envelope: Envelope,
                       timeout_ms: int, now_ms: int) -> None:
        self._check_voter_change(state, new)
        batch = self._append_as_leader(state, [new.to_record().encode()], now_ms)
        state.pending_change = PendingVoterChange(
            envelope=envelope, offset=batch.base_offset,
            deadline_ms=now_ms + max(1, min(timeout_ms, self._config.reconfig_timeout_ms)))
        self._wake_parked_fetches(state)

    def _reply_change(self, envelope: Envelope, error: ErrorCode,
                      message: str | None) -> None:
        self._respond(envelope, VoterChangeResponse(error_code=error,
                                                    topic_id=envelope.message.topic_id,
                                                    error_message=message))

    def _tick_voter_change(self, state: LeaderState, now_ms: int) -> bool:
        """Answer the pending change once committed or timed out; resign once this
        leader's own removal committed. True if it resigned."""
        pending = state.pending_change
        if pending is not None:
            if self._high_watermark > pending.offset:
                state.pending_change = None
                self._reply_change(pending.envelope, ErrorCode.NONE, None)
            elif now_ms >= pending.deadline_ms:
                state.pending_change = None
                self._reply_change(pending.envelope, ErrorCode.REQUEST_TIMED_OUT,
                                   "the VotersRecord did not commit in time")
        if self._removal_committed():
            self.transition_to_resigned(now_ms)
            return True
        return False

    def _removal_committed(self) -> bool:
        latest = self._history.latest_offset
        return (not self._is_voter and latest is not None
                and self._high_watermark > latest)

    def _voter_change_deadline_ms(self, state: LeaderState) -> int | None:
        pending = state.pending_change
        if self._removal_committed():
            return 0
        if pending is None:
            return None
        return 0 if self._high_watermark > pending.offset else pending.deadline_ms
