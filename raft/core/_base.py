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
from raft.control_records import Endpoint, KRaftVersionRecord, LeaderChange, MetadataTopic
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
    UpdateRaftVoterRequest,
    VoterChangeResponse,
    VoteRequest,
    VoteResponse,
)
from raft.snapshot import SnapshotError, parse_snapshot
from raft.snapshot_store import MemorySnapshotStore, SnapshotStore
from raft.types import Batch, ElectionState, Envelope, RaftLog, SnapshotId
from raft.voters import VoterHistory, VoterSet

log = logging.getLogger(__name__)

_RESPONSE_FOR = {VoteRequest: VoteResponse, BeginQuorumEpochRequest: BeginQuorumEpochResponse,
                 EndQuorumEpochRequest: EndQuorumEpochResponse, FetchRequest: FetchResponse,
                 FetchSnapshotRequest: FetchSnapshotResponse,
                 UpdateRaftVoterRequest: VoterChangeResponse}
# Errors about the addressing of a request: the response's leader fields mean nothing.
# INVALID_VOTER_KEY (KIP-853): the replica answering is not the one asked (formatted anew).
ADDRESSING_ERRORS = frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID, ErrorCode.UNKNOWN_TOPIC_ID,
                               ErrorCode.INCONSISTENT_TOPIC_ID,
                               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               ErrorCode.INVALID_VOTER_KEY})


class RaftInvariantError(AssertionError):
    """The core found its own state broken: stop the node loudly."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RaftConfig:
    # Its defaults are a node's too: the raft keys left out of a node's file take them
    # (tools/config/keys.py, RAFT_DEFAULTS).
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
    # KIP-853: the voters of a `kraft.version` 1 cluster before its log names any (the
    # bootstrap checkpoint `kraft format --standalone/--initial-controllers` writes);
    # None: kraft.version 0, the static `voters` above (which every node also uses to
    # find the leader, as `controller.quorum.bootstrap.servers`).
    bootstrap_voters: VoterSet | None = None
    # AddRaftVoter: a new voter must have fetched within the fetch timeout and be at
    # most this many records behind the leader's log end.
    add_voter_max_lag_records: int = 100
    reconfig_timeout_ms: int = 30_000  # a voter change not committed by then: timed out

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
                 now_ms: int, snapshots: SnapshotStore | None = None,
                 directory_id: Uuid | None = None, first_correlation_id: int = 1,
                 listeners: tuple[Endpoint, ...] = ()) -> None:
        self._node_id = node_id
        self._directory_id = directory_id  # KIP-853: this replica's key is both
        # KIP-853: the endpoints this replica serves on now; a voter whose entry names
        # others (it restarted with new listeners) has it updated (`_reconfig`).
        self._listeners = listeners
        self._update_voter_at_ms = now_ms  # a follower's next UpdateRaftVoter, if needed
        self._config = config
        self._log = log
        # Snapshots this node serves (leader) or fetches (follower); the one at the log
        # start, if the log starts above 0, stands in for the records below it.
        self._snapshots: SnapshotStore = snapshots or MemorySnapshotStore()
        self._loaded_snapshot: SnapshotId | None = None  # for the next Ready
        self._loaded_snapshot_records: tuple[bytes, ...] = ()  # its records, until advanced
        self._cluster_id = cluster_id
        self._rng = rng
        # The voter set in force (KIP-853: the log's latest VotersRecord, committed or
        # not; kraft.version 0: the static one). `_apply_voter_set` derives the rest.
        if config.bootstrap_voters is not None:
            self._history = VoterHistory(config.bootstrap_voters, kraft_version=1)
        else:
            self._history = VoterHistory(VoterSet.from_ids(config.voters))
        self._voters: tuple[int, ...] = ()
        self._voter_set: frozenset[int] = frozenset()
        self._is_voter = False
        self._majority = 1
        self._voter_keys: VoterSet = self._history.latest
        # The ids of the last non-empty voter set in force: whom an observer asks who
        # leads should a cut of its log take every voter record away again.
        self._last_known_voters: tuple[int, ...] = ()
        self._outbox: list[Envelope] = []
        # The leader's fetch answers: `Ready.early_messages` (see raft/types.py).
        self._early_outbox: list[Envelope] = []
        self._pending_election: ElectionState | None = None
        self._persisted: tuple[int, int | None, int | None, Uuid | None] | None = None
        self._pending_entries: list[Batch] = []
        self._pending_truncate: int | None = None
        self._high_watermark = log.start_offset  # a snapshot holds only committed records
        self._hw_dirty = False
        self._leader_high_watermark: int | None = None  # as last heard from a leader
        self._leader_hw_dirty = False
        # A restarted node's shell passes one its last incarnation did not use: replies
        # to that incarnation's requests may still arrive (`_handle_response` matches
        # them by correlation id and peer only).
        self._next_correlation_id = first_correlation_id
        self._inflight: dict[int, Inflight] = {}
        self._last_fetch_request: FetchRequest | None = None
        self._topic_ids = MetadataTopicIds(cluster_id)
        if log.start_offset:
            self._check_snapshot_at_log_start()
            self._topic_ids.on_snapshot(self._snapshots, SnapshotId(log.start_offset,
                                                                    log.start_epoch))
            self._history.reset_to(log.start_offset, self._snapshot_records(
                SnapshotId(log.start_offset, log.start_epoch)))
        self._scan_voters(log.start_offset)
        self._apply_voter_set()
        self._probe_index = 0  # observers: which voter to ask for the leader next
        self._probe_correlation_id: int | None = None
        self._probe_at_ms = now_ms
        self._last_now_ms = now_ms  # the time of the last input (for `advance`)
        self._state: EpochState = self._initial_state(election, now_ms)
        if election is not None:
            self._persisted = (election.epoch, election.leader_id, election.voted_id,
                               election.voted_directory_id
                               if election.voted_id is not None else None)
        self._persist_election()
        if isinstance(self._state, FollowerState | UnattachedState):
            self._maybe_send_fetch(now_ms)

    def _initial_state(self, election: ElectionState | None, now_ms: int) -> EpochState:
        if election is None:
            return self._new_unattached(0, now_ms)
        epoch, leader_id, voted_id = election.epoch, election.leader_id, election.voted_id
        voted_dir = election.voted_directory_id
        if leader_id == self._node_id and self._may_stand():
            # A leader cannot resume its epoch after a restart (Kafka does the same).
            return ResignedState(epoch=epoch, leader_id=leader_id, voted_id=voted_id,
                                 voted_directory_id=voted_dir,
                                 election_deadline_ms=now_ms + self._election_timeout())
        if leader_id is not None and leader_id != self._node_id:
            follower = self._new_follower(epoch, leader_id, voted_id, now_ms)
            follower.voted_directory_id = voted_dir if voted_id is not None else None
            return follower
        if voted_id is not None and self._may_stand():
            return VotedState(epoch=epoch, voted_id=voted_id, voted_directory_id=voted_dir,
                              election_deadline_ms=now_ms + self._election_timeout())
        state = self._new_unattached(epoch, now_ms)
        if voted_id is not None:
            # A voter removed since (KIP-853), its leadership or vote persisted: the
            # vote of this epoch stands, should it be added back before the next one.
            state.voted_id, state.voted_directory_id = voted_id, voted_dir
        return state

    # --- the voter set in force (KIP-853) ---------------------------------------------

    def _snapshot_records(self, snapshot_id: SnapshotId) -> list[bytes]:
        """The records of a snapshot this node holds (raft's voter records among them);
        none when it cannot be read whole (`_check_snapshot_at_log_start` says why)."""
        size = self._snapshots.size(snapshot_id)
        if size is None:
            return []
        try:
            _, records = parse_snapshot(self._snapshots.read(snapshot_id, 0, size),
                                        snapshot_id.file_name, snapshot_id.epoch)
        except SnapshotError:
            return []
        return list(records)

    def _scan_voters(self, start: int) -> None:
        """Look for voter records in the log from `start` to its end."""
        offset = start
        while offset < self._log.end_offset:
            batches = self._log.read(offset, 1 << 20)
            if not batches:
                return
            for batch in batches:
                first = max(offset, batch.base_offset) - batch.base_offset
                self._history.on_records(batch.base_offset + first, batch.records[first:])
                offset = batch.next_offset

    def _apply_voter_set(self) -> None:
        """Derive everything that depends on the voter set in force; a leader's replica
        progress follows it (`LeaderState.set_voters`)."""
        voters = self._history.latest
        self._voter_keys = voters
        self._voters = voters.ids
        if voters.ids:
            self._last_known_voters = voters.ids
        self._voter_set = voters.id_set
        self._majority = voters.majority
        self._is_voter = voters.is_voter(self._node_id, self._directory_id)
        state = getattr(self, "_state", None)
        if isinstance(state, LeaderState):
            state.set_voters(voters)

    def _may_stand(self) -> bool:
        """Whether this replica stands for election when its timer fires: a voter of the
        set in force, or one that the latest VotersRecord removes while that record is
        not known to be committed. Until it commits the new set's majority may need
        this replica to lead it (it may hold the only copy of that record), so it
        stands without counting its own vote (`_maybe_win_election` counts the set in
        force only), as Raft's thesis (4.2.2) has it; a leader so elected resigns once
        its removal commits (`_removal_committed`)."""
        if self._is_voter:
            return True
        history = self._history
        latest = history.latest_offset
        return (latest is not None and latest >= self._high_watermark
                and history.previous().is_voter(self._node_id, self._directory_id))

    @property
    def dynamic_quorum(self) -> bool:
        """kraft.version 1: the voters are the log's (KIP-853)."""
        return self._history.kraft_version >= 1

    @property
    def voter_set(self) -> VoterSet:
        return self._voter_keys

    def snapshot_control_records(self, end_offset: int) -> list[bytes]:
        """Raft's records for a snapshot ending at `end_offset` (KIP-853: every snapshot
        carries kraft.version and, from 1 on, the voter set in force there; loading it
        restores them). None for a static quorum's. ValueError when `end_offset` lies
        below this node's log start (`VoterHistory.set_at`): a snapshot writer reads them
        with its image, before the log start can move past it."""
        history = self._history
        if history.version_at(end_offset) < 1:
            return []
        return [KRaftVersionRecord(kraft_version=history.version_at(end_offset)).encode(),
                history.set_at(end_offset).to_record().encode()]

    @property
    def voter_history(self) -> VoterHistory:
        """The voter sets of this node's log (read only: the simulator checks them)."""
        return self._history

    @property
    def directory_id(self) -> Uuid | None:
        return self._directory_id

    @property
    def kraft_version(self) -> int:
        return self._history.kraft_version

    def _on_log_records(self, base_offset: int, records: Sequence[bytes]) -> None:
        if self._history.on_records(base_offset, records):
            self._apply_voter_set()

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
    def loaded_snapshot_records(self) -> tuple[bytes, ...]:
        """The records of `Ready.loaded_snapshot` (as the fetch checked them), until that
        Ready is advanced: the state machine loads from them without reading the file
        again."""
        return self._loaded_snapshot_records

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

    def transition_to_voted(self, candidate_id: int, now_ms: int,
                            candidate_directory_id: Uuid | None = None) -> None:
        self._set_state(VotedState(epoch=self._state.epoch, voted_id=candidate_id,
                                   voted_directory_id=candidate_directory_id,
                                   election_deadline_ms=now_ms + self._election_timeout()),
                        now_ms)

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        # KIP-853: a leader removed from the voter set leads on until its removal
        # commits, so a dynamic quorum's followers may follow a leader outside their set.
        if leader_id == self._node_id or leader_id < 0 or (
                not self.dynamic_quorum and leader_id not in self._voter_set):
            raise RaftInvariantError(f"node {self._node_id} cannot follow {leader_id}")
        same = epoch == self._state.epoch
        voted = self._state.voted_id if same else None
        follower = self._new_follower(epoch, leader_id, voted, now_ms)
        follower.voted_directory_id = self._state.voted_directory_id if same else None
        self._set_state(follower, now_ms)
        self._maybe_send_fetch(now_ms)

    def transition_to_prospective(self, now_ms: int) -> None:
        """KIP-996: ask for pre-votes in epoch + 1 before disrupting anyone."""
        old = self._state
        state = ProspectiveState(epoch=old.epoch, leader_id=old.leader_id,
                                 voted_id=old.voted_id, voted_directory_id=old.voted_directory_id,
                                 election_deadline_ms=now_ms + self._election_timeout())
        state.granted.add(self._node_id)
        self._set_state(state, now_ms)
        self._request_votes(state.epoch + 1, pre_vote=True, now_ms=now_ms)
        self._maybe_win_election(now_ms)

    def transition_to_candidate(self, now_ms: int) -> None:
        state = CandidateState(epoch=self._state.epoch + 1, voted_id=self._node_id,
                               voted_directory_id=self._directory_id,
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
                            voted_directory_id=self._directory_id,
                            node_id=self._node_id, voters=self._voters,
                            epoch_start_offset=self._log.end_offset, became_leader_ms=now_ms,
                            granting_voters=tuple(sorted(old.granted & self._voter_set)),
                            begin_quorum_due_ms=now_ms + self._config.fetch_timeout_ms // 2)
        state.set_voters(self._voter_keys)
        self._set_state(state, now_ms)
        records = [LeaderChange(leader_id=self._node_id, voters=self._voters,
                                granting_voters=state.granting_voters).encode()]
        if self._log.end_offset == 0:  # KIP-516: the first leader names the metadata topic
            topic_id = Uuid.random(self._rng)
            records.append(MetadataTopic(topic_id=topic_id).encode())
        if self.dynamic_quorum and self._history.latest_offset is None \
                and self._history.base_offset == 0 and self._log.start_offset == 0:
            # KIP-853: the voters came from the bootstrap checkpoint, not the log: the
            # first leader writes them (and kraft.version) so every replica learns them.
            records.append(KRaftVersionRecord(kraft_version=1).encode())
            records.append(self._voter_keys.to_record().encode())
        self._append_as_leader(state, records, now_ms)
        log.info("became leader", extra={"node": self._node_id, "epoch": epoch})
        for voter in sorted(state.begin_unacknowledged):
            self._send_begin_quorum_epoch(state, voter, now_ms)

    def transition_to_resigned(self, now_ms: int) -> None:
        old = self._state
        if not isinstance(old, LeaderState):
            raise RaftInvariantError(f"only a leader resigns, not {old.role}")
        successors = old.successors_by_progress()
        state = ResignedState(epoch=old.epoch, leader_id=self._node_id,
                              voted_id=old.voted_id, voted_directory_id=old.voted_directory_id,
                              preferred_successors=successors,
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
            if old.pending_change is not None:  # KIP-853: the client asks the next leader
                self._respond(old.pending_change.envelope, VoterChangeResponse(
                    error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    topic_id=old.pending_change.envelope.message.topic_id,
                    error_message="leadership changed before the voter change committed"))
                old.pending_change = None
        self._state = state
        if self._probe_correlation_id is not None:
            # the probe is spent (often its own answer moved this node): the next one asks
            # the next replica, or two that name each other's dead leader are asked for ever
            self._probe_index += 1
        self._probe_correlation_id = None
        self._probe_at_ms = now_ms
        self._last_now_ms = now_ms  # the time of the last input (for `advance`)
        self._persist_election()

    def _persist_election(self) -> None:
        state = self._state
        voted_dir = state.voted_directory_id if state.voted_id is not None else None
        key = (state.epoch, state.leader_id, state.voted_id, voted_dir)
        if key != self._persisted:
            if self._persisted is not None and key[0] == self._persisted[0]:
                _, old_leader, old_voted, old_dir = self._persisted
                if old_voted is not None and (key[2], key[3]) != (old_voted, old_dir):
                    raise RaftInvariantError(f"second vote in epoch {key[0]}: "
                                             f"{old_voted} then {key[2]}")
                if old_leader is not None and key[1] not in (None, old_leader):
                    raise RaftInvariantError(f"second leader in epoch {key[0]}")
            self._persisted = key
            self._pending_election = self._election_state(*key)

    def _election_state(self, epoch: int, leader_id: int | None, voted_id: int | None,
                        voted_directory_id: Uuid | None = None) -> ElectionState:
        """What `quorum-state` must hold before anything else leaves this node: the
        vote as a replica key (KIP-853). The voter ids are recorded only for a static
        quorum (the shell checks them against the configuration)."""
        return ElectionState(epoch=epoch, leader_id=leader_id, voted_id=voted_id,
                             voters=() if self.dynamic_quorum else self._voters,
                             voted_directory_id=voted_directory_id)

    def _new_unattached(self, epoch: int, now_ms: int) -> UnattachedState:
        deadline = now_ms + self._election_timeout() if self._may_stand() else None
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
        # Majorities are counted over the voter set in force now (KIP-853: it may have
        # changed since the votes were asked for), and only one that may stand wins.
        if isinstance(state, ProspectiveState | CandidateState) and self._may_stand() and (
                len(state.granted & self._voter_set) >= self._majority):
            if isinstance(state, ProspectiveState):
                self.transition_to_candidate(now_ms)
            else:
                self.transition_to_leader(now_ms)

    def maybe_handle_leader_info(self, epoch: int, leader_id: int, now_ms: int) -> None:
        """Any message naming a newer epoch (or the leader of ours, when we know none)
        moves this node there; the new epoch is persisted before anything else leaves."""
        state = self._state
        known = leader_id in self._voter_set or (self.dynamic_quorum and leader_id >= 0)
        leader = leader_id if known and leader_id != self._node_id else None
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

    def _wake_parked_fetches(self, state: LeaderState) -> None:
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

    def _append_as_leader(self, state: LeaderState, records: list[bytes], now_ms: int) -> Batch:
        """The leader's batch, stamped with its clock (`now_ms`, wall-clock time in
        production) as its append time; followers keep the stamp (`_append_fetched`)."""
        batch = self._log.append(state.epoch, records, now_ms)
        self._topic_ids.on_append(batch.base_offset)
        self._pending_entries.append(batch)
        self._on_log_records(batch.base_offset, batch.records)
        return batch

    def _append_as_follower(self, batches: Sequence[Batch]) -> None:
        self._topic_ids.on_append(batches[0].base_offset)
        self._log.append_batches(batches)
        self._pending_entries.extend(batches)
        for batch in batches:
            self._on_log_records(batch.base_offset, batch.records)

    def _truncate(self, offset: int) -> None:
        self._check_truncation(offset)
        self._log.truncate_to(offset)
        self._pending_entries = [b for b in self._pending_entries if b.base_offset < offset]
        if self._pending_truncate is None or offset < self._pending_truncate:
            self._pending_truncate = offset
        self._topic_ids.on_truncate()
        if self._history.truncate_to(offset):  # back to the voter set before the cut
            self._apply_voter_set()

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

