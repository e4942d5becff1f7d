"""Elections (KIP-595 Vote, BeginQuorumEpoch, EndQuorumEpoch; KIP-996 pre-vote): the
voter's answers, the candidate's counting, and the announcements of a new leader and of
a resignation. A mixin of `RaftCore` over `CoreBase`.

Every request is first checked for its cluster id and topic ID (KIP-516) and answered
with an error, without any state change, if either is wrong. Protocol problems become
error codes; nothing here raises on peer input.

KIP-853: requests name the replica key they are meant for (`voter_directory_id`); a
replica with another directory id (formatted anew since) answers INVALID_VOTER_KEY and
changes nothing, so a wiped voter never votes again in an epoch it voted in. A vote is
granted to, and recorded as, the candidate's replica key. In a dynamic quorum a voter
grants votes to a candidate outside its own voter set (it may not have replicated the
VotersRecord that added it yet), and a replica answers for its key whatever its own
latest voter set says; the candidate counts only its own set's voters.
"""

from __future__ import annotations

from typing import Any

from raft.common.errors import ErrorCode
from raft.common.uuid import ZERO_UUID, Uuid
from raft.core._base import ADDRESSING_ERRORS, CoreBase
from raft.core._leader_state import LeaderState
from raft.core._quorum_state import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    Role,
)
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    VoteRequest,
    VoteResponse,
)
from raft.types import Envelope

_ELECTION_STATES = (Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE, Role.CANDIDATE)


class Election(CoreBase):
    def is_candidate_log_up_to_date(self, last_offset_epoch: int, last_offset: int) -> bool:
        """Raft §5.4.1: the candidate's (last epoch, end offset) is at least ours."""
        return (last_offset_epoch, last_offset) >= (self._log.last_epoch,
                                                     self._log.end_offset)

    # --- Vote -----------------------------------------------------------------------------

    def handle_vote_request(self, envelope: Envelope, now_ms: int) -> None:
        request: VoteRequest = envelope.message
        error = self._addressing_error(request.cluster_id, request.topic_id,
                                       request.partition_index)
        if error is not None:
            self._respond(envelope, VoteResponse(error_code=error, topic_id=request.topic_id))
            return
        if (request.last_offset < 0 or request.last_offset_epoch < 0
                or request.last_offset_epoch > request.candidate_epoch):
            # as Kafka's: no log ends before offset 0 or holds an epoch above the one
            # its candidate stands in; refused before the request moves any epoch
            self._reply_vote(envelope, ErrorCode.INVALID_REQUEST, granted=False)
            return
        if not self._is_addressed_key(request.voter_directory_id):
            self._reply_vote(envelope, ErrorCode.INVALID_VOTER_KEY, granted=False)
            return
        if request.candidate_id not in self._voter_set and not self.dynamic_quorum:
            self._reply_vote(envelope, ErrorCode.INCONSISTENT_VOTER_SET, granted=False)
            return
        if request.candidate_epoch < self._state.epoch:
            self._reply_vote(envelope, ErrorCode.FENCED_LEADER_EPOCH, granted=False)
            return
        if not request.pre_vote and request.candidate_epoch > self._state.epoch:
            self.transition_to_unattached(request.candidate_epoch, now_ms)
        granted = False
        # A dynamic quorum's replica answers for the key the request names (checked
        # above) even where its own latest VotersRecord, perhaps uncommitted and never
        # to commit, leaves it out or has not added it yet: as in Raft (§4.1 of Ongaro's
        # thesis), the candidate's voter set decides whose votes count, and a replica
        # that refused would leave a candidate whose set holds it short of a majority.
        if (self._is_voter or self.dynamic_quorum) and request.candidate_id != self._node_id:
            log_ok = self.is_candidate_log_up_to_date(request.last_offset_epoch,
                                                      request.last_offset)
            granted = self._state.can_grant_vote(request.candidate_id, log_ok,
                                                 request.pre_vote, now_ms)
            if (granted and not request.pre_vote and self._state.voted_id is not None
                    and not self._state.voted_for(request.candidate_id,
                                                  request.candidate_directory_id)):
                granted = False  # the vote of this epoch went to another replica key
            if granted and not request.pre_vote and self._state.voted_id is None:
                self.transition_to_voted(request.candidate_id, now_ms,  # persisted first
                                         request.candidate_directory_id)
            elif granted and isinstance(self._state, FollowerState):
                # Give the prospective we just backed time to win before standing
                # ourselves: two at once would grant each other and split the vote.
                state = self._state
                state.fetch_deadline_ms = max(state.fetch_deadline_ms,
                                              now_ms + self._turn_step_ms())
        self._reply_vote(envelope, ErrorCode.NONE, granted=granted)

    def _reply_vote(self, envelope: Envelope, error: ErrorCode, *,
                    granted: bool) -> None:
        leader = self._current_leader()
        self._respond(envelope, VoteResponse(
            error_code=error, topic_id=envelope.message.topic_id, leader_id=leader.leader_id,
            leader_epoch=leader.leader_epoch, vote_granted=granted))

    def handle_vote_response(self, envelope: Envelope, now_ms: int) -> None:
        state = self._state
        if not isinstance(state, ProspectiveState | CandidateState):
            return
        response: VoteResponse = envelope.message
        if (response.vote_granted and response.error_code == ErrorCode.NONE
                and envelope.src in self._voter_set):
            state.granted.add(envelope.src)
            self._maybe_win_election(now_ms)
            return
        state.rejected.add(envelope.src)
        if len(state.rejected) <= len(self._voters) - self._majority:
            return
        if isinstance(state, CandidateState):
            # Lost: back off (randomised) before the next attempt, so split votes resolve.
            state.election_deadline_ms = min(state.election_deadline_ms,
                                             now_ms + self._election_backoff())
        elif state.leader_id is not None and state.leader_id != self._node_id:
            # KIP-996: a majority still hears from the leader; go back to fetching from it.
            self.transition_to_follower(state.epoch, state.leader_id, now_ms)

    # --- BeginQuorumEpoch / EndQuorumEpoch ------------------------------------------------

    def handle_begin_quorum_epoch_request(self, envelope: Envelope,
                                          now_ms: int) -> None:
        request: BeginQuorumEpochRequest = envelope.message
        error = self._check_leader_request(request.cluster_id, request.topic_id,
                                      request.partition_index, request.leader_id,
                                      request.leader_epoch)
        if error is None and not self._is_addressed_key(request.voter_directory_id):
            error = ErrorCode.INVALID_VOTER_KEY
        if error is None:
            state = self._state
            if request.leader_epoch > state.epoch:
                self.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
            elif state.leader_id is None and state.role in _ELECTION_STATES:
                self.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
            elif state.role is Role.PROSPECTIVE and state.leader_id == request.leader_id:
                # The leader we had given up on is alive after all: follow it again.
                self.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
            elif state.leader_id != request.leader_id:
                error = ErrorCode.INVALID_REQUEST  # a second leader in one epoch: refuse it
        self._reply_leader_request(envelope, BeginQuorumEpochResponse, error)

    def handle_end_quorum_epoch_request(self, envelope: Envelope, now_ms: int) -> None:
        """KIP-595: the resigning leader names preferred successors, best replicated first;
        the first campaigns at once, the others after a backoff growing with their rank."""
        request: EndQuorumEpochRequest = envelope.message
        error = self._check_leader_request(request.cluster_id, request.topic_id,
                                      request.partition_index, request.leader_id,
                                      request.leader_epoch)
        if error is None:
            if request.leader_epoch > self._state.epoch:
                self.transition_to_follower(request.leader_epoch, request.leader_id, now_ms)
            state = self._state
            if (isinstance(state, FollowerState) and state.leader_id == request.leader_id
                    and self._is_voter):
                state.last_fetch_success_ms = None  # the leader is gone: grant pre-votes
                successors = request.preferred_successors
                backoff_max = self._config.election_backoff_max_ms
                if self._node_id in successors and self._is_addressed_key(
                        _directory_at(request, successors.index(self._node_id))):
                    rank = successors.index(self._node_id)
                    if rank == 0:
                        self._reply_leader_request(envelope, EndQuorumEpochResponse, None)
                        self.transition_to_candidate(now_ms)
                        return
                    delay = rank * max(1, backoff_max // len(successors))
                else:
                    delay = backoff_max + self._election_backoff()
                state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + delay)
        self._reply_leader_request(envelope, EndQuorumEpochResponse, error)

    def _check_leader_request(self, cluster_id: str, topic_id: Uuid,
                              partition_index: int, leader_id: int,
                              leader_epoch: int) -> ErrorCode | None:
        error = self._addressing_error(cluster_id, topic_id, partition_index)
        if error is not None:
            return error
        if leader_id == self._node_id or (leader_id not in self._voter_set
                                          and not self.dynamic_quorum):
            return ErrorCode.INCONSISTENT_VOTER_SET
        if leader_epoch < self._state.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return None

    def _reply_leader_request(self, envelope: Envelope, response_type: Any,
                              error: ErrorCode | None) -> None:
        if error in ADDRESSING_ERRORS:
            self._respond(envelope, response_type(error_code=error,
                                                  topic_id=envelope.message.topic_id))
            return
        leader = self._current_leader()
        self._respond(envelope, response_type(
            error_code=error or ErrorCode.NONE, topic_id=envelope.message.topic_id,
            leader_id=leader.leader_id, leader_epoch=leader.leader_epoch))

    def handle_begin_quorum_epoch_response(self, envelope: Envelope,
                                           now_ms: int) -> None:
        state = self._state
        if isinstance(state, LeaderState) and envelope.message.error_code == ErrorCode.NONE:
            state.begin_unacknowledged.discard(envelope.src)

    def handle_end_quorum_epoch_response(self, envelope: Envelope,
                                         now_ms: int) -> None:
        state = self._state
        if isinstance(state, ResignedState) and envelope.message.error_code == ErrorCode.NONE:
            state.unacknowledged.discard(envelope.src)

    def _is_addressed_key(self, directory_id: Uuid | None) -> bool:
        """A request meant for this replica's key (KIP-853): no directory id named (a
        static quorum's peer), or this replica's own."""
        return (directory_id is None or self._directory_id is None
                or directory_id == ZERO_UUID or directory_id == self._directory_id)

    # --- sending ------------------------------------------------------------------------

    def _request_votes(self, epoch: int, *, pre_vote: bool, now_ms: int) -> None:
        log_end = self._log.end_offset
        last_epoch = self._log.last_epoch
        for voter in self._voters:
            if voter != self._node_id:
                self._send_request(voter, VoteRequest(
                    cluster_id=self._cluster_id, topic_id=self._topic_ids.topic_id_for(voter),
                    candidate_epoch=epoch,
                    candidate_id=self._node_id, last_offset_epoch=last_epoch,
                    last_offset=log_end, pre_vote=pre_vote,
                    candidate_directory_id=self._directory_id,
                    voter_directory_id=self._voter_keys.directory_of(voter)), now_ms)

    def _send_begin_quorum_epoch(self, state: LeaderState, voter: int,
                                now_ms: int) -> None:
        self._send_request(voter, BeginQuorumEpochRequest(
            cluster_id=self._cluster_id, topic_id=self._topic_ids.topic_id_for(voter),
            leader_id=self._node_id, leader_epoch=state.epoch,
            voter_directory_id=self._voter_keys.directory_of(voter)), now_ms,
            self._quick_retry_timeout_ms())

    def _send_end_quorum_epoch(self, state: ResignedState, voter: int,
                              now_ms: int) -> None:
        keys = self._voter_keys
        self._send_request(voter, EndQuorumEpochRequest(
            cluster_id=self._cluster_id, topic_id=self._topic_ids.topic_id_for(voter),
            leader_id=self._node_id, leader_epoch=state.epoch,
            preferred_successors=state.preferred_successors,
            preferred_directory_ids=tuple(keys.directory_of(v) or ZERO_UUID
                                          for v in state.preferred_successors)), now_ms,
            self._quick_retry_timeout_ms())


def _directory_at(request: EndQuorumEpochRequest, rank: int) -> Uuid | None:
    ids = request.preferred_directory_ids
    return ids[rank] if rank < len(ids) else None

