"""Safety invariants, checked by the simulator after every event.

- `one-leader-per-epoch`: no two nodes ever lead, or are followed as leader, in one epoch;
- `log-matching`: durable entries with the same offset and epoch hold the same record and
  follow the same epoch (Raft §5.3);
- `committed-data-never-lost`: a record below any node's published high watermark is
  never changed or truncated, and every leader of a later epoch holds it (§5.4);
- `high-watermark-never-decreases`: per node, also across restarts once recovered;
- `high-watermark-within-log`: no node's high watermark is past its log end;
- `observers-never-vote`: observers are never asked, never grant, never campaign, and no
  LeaderChange record counts them;
- `majority-holds-high-watermark`: a majority of voters hold the leader's high watermark
  on disk (flushed log ends only);
- `persisted-epoch-never-decreases`: a node's quorum-state never goes back an epoch;
- `one-vote-per-epoch`: no voter grants two candidates one epoch, judged from every vote
  it ever sent, whatever happened to its disk in between;
- `liveness` (checked by the sweep, `raft.sim.sweep`): after the heal, a new record
  commits and every running node converges on the leader's log and high watermark.

Each check raises `InvariantViolation(name, detail)`; `name` is one of `INVARIANTS`.
The checks are incremental (only what changed since the last event is looked at) so a
sweep of thousands of runs stays fast, with a full rescan after crashes and elections.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from raft.types import NO_EPOCH, ElectionState

ONE_LEADER_PER_EPOCH = "one-leader-per-epoch"
LOG_MATCHING = "log-matching"
COMMITTED_DATA = "committed-data-never-lost"
HW_MONOTONIC = "high-watermark-never-decreases"
HW_WITHIN_LOG = "high-watermark-within-log"
OBSERVER_NEVER_VOTES = "observers-never-vote"
MAJORITY_HOLDS_HW = "majority-holds-high-watermark"
EPOCH_MONOTONIC = "persisted-epoch-never-decreases"
ONE_VOTE_PER_EPOCH = "one-vote-per-epoch"
LIVENESS = "liveness"

INVARIANTS = (ONE_LEADER_PER_EPOCH, LOG_MATCHING, COMMITTED_DATA, HW_MONOTONIC, HW_WITHIN_LOG,
              OBSERVER_NEVER_VOTES, MAJORITY_HOLDS_HW, EPOCH_MONOTONIC, ONE_VOTE_PER_EPOCH,
              LIVENESS)

_VOTER_ONLY_ROLES = frozenset({"candidate", "prospective", "voted", "leader"})
_MAX_BYTES = 1 << 62


class InvariantViolation(Exception):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail
        self.sim_cluster: Any = None  # the run it happened in, for its trace


class CheckedNode(Protocol):
    node_id: int
    is_voter: bool
    core: Any  # RaftCore, or None while the node is down

    @property
    def log(self) -> Any: ...


class _NodeTrack:
    __slots__ = ("checked_end", "hw", "hw_max", "recovering", "hw_checked")

    def __init__(self) -> None:
        self.checked_end = 0  # log-matching checked below this offset
        self.hw = 0  # last HW reported in this incarnation
        self.hw_max = 0  # largest HW ever reported, across restarts
        self.recovering = False  # restarted and not yet back at hw_max
        self.hw_checked = 0  # committed-data compared below this offset


class Checker:
    def __init__(self, voters: Iterable[int], observers: Iterable[int], *,
                 skip: Iterable[str] = ()) -> None:
        self.voters = frozenset(voters)
        self.observers = frozenset(observers)
        self.skip = frozenset(skip)
        self.leaders: dict[int, int] = {}  # epoch -> leader id, ever
        self._seen: dict[tuple[int, int], tuple[bytes, int]] = {}  # (offset, epoch) -> rec
        self.committed: list[tuple[int, bytes]] = []  # offset -> (epoch, record)
        self.commit_epochs: list[int] = []  # offset -> earliest epoch known to commit it
        self._track = {n: _NodeTrack() for n in self.voters | self.observers}
        self._majority = len(self.voters) // 2 + 1
        # Every vote ever cast, from what left the voters (not from their disks, which a
        # crash or a wipe may have reset): (voter, epoch) -> candidate.
        self.votes: dict[tuple[int, int], int] = {}
        # Vote requests in flight: (candidate, voter, correlation id) -> (epoch, pre-vote),
        # to tell which request a VoteResponse answers.
        self._vote_requests: dict[tuple[int, int, int], tuple[int, bool]] = {}
        self._majority_held: tuple[int, int, int] | None = None

    # ---- hooks called by the cluster -------------------------------------------------

    def on_persist(self, node_id: int, old: ElectionState | None, new: ElectionState) -> None:
        if old is None:
            return
        if new.epoch < old.epoch:
            self._fail(EPOCH_MONOTONIC, f"node {node_id} persisted epoch {new.epoch} "
                                        f"after epoch {old.epoch}")
        if (new.epoch == old.epoch and old.voted_id is not None
                and new.voted_id is not None and new.voted_id != old.voted_id):
            self._fail(ONE_VOTE_PER_EPOCH, f"node {node_id} voted for {old.voted_id} and "
                                           f"then {new.voted_id} in epoch {new.epoch}")

    def on_send(self, src: int, dst: int, message: object, *,
                correlation_id: int = 0) -> None:
        name = type(message).__name__
        if not name.startswith("Vote"):
            return
        if name.startswith("VoteRequest"):
            if src in self.observers or dst in self.observers:
                self._fail(OBSERVER_NEVER_VOTES, f"{name} from {src} to {dst} involves an "
                                                 "observer")
            self._on_vote_request(src, dst, message, correlation_id)
        elif name.startswith("VoteResponse") and _vote_granted(message):
            if src in self.observers:
                self._fail(OBSERVER_NEVER_VOTES, f"observer {src} granted a vote to {dst}")
            request = self._vote_requests.get((dst, src, correlation_id))
            epoch = getattr(message, "leader_epoch", None)
            if request is not None and not request[1] and request[0] == epoch:
                self._record_vote(src, request[0], dst)

    def _on_vote_request(self, candidate: int, voter: int, request: Any,
                         correlation_id: int) -> None:
        epoch = request.candidate_epoch
        pre_vote = bool(getattr(request, "pre_vote", False))
        self._vote_requests[(candidate, voter, correlation_id)] = (epoch, pre_vote)
        if not pre_vote:  # a candidate asks only once it has voted for itself
            self._record_vote(candidate, epoch, candidate)

    def _record_vote(self, voter: int, epoch: int, candidate: int) -> None:
        if ONE_VOTE_PER_EPOCH in self.skip:
            return
        earlier = self.votes.setdefault((voter, epoch), candidate)
        if earlier != candidate:
            self._fail(ONE_VOTE_PER_EPOCH, f"voter {voter} voted for {earlier} and then for "
                                           f"{candidate} in epoch {epoch}")

    def on_truncate(self, node: CheckedNode, offset: int) -> None:
        track = self._track[node.node_id]
        if offset < track.hw and COMMITTED_DATA not in self.skip:
            self._fail(COMMITTED_DATA, f"node {node.node_id} truncated to {offset}, below its "
                                       f"high watermark {track.hw}")
        track.checked_end = min(track.checked_end, offset)
        track.hw_checked = min(track.hw_checked, offset)
        self._majority_held = None  # a voter's durable end went down

    def on_restart(self, node: CheckedNode, *, wiped: bool = False) -> None:
        if wiped:  # the node starts over: nothing it published before binds it
            self._track[node.node_id] = _NodeTrack()
            self._majority_held = None
            return
        track = self._track[node.node_id]
        track.checked_end = 0
        track.hw = 0
        track.hw_checked = 0
        track.recovering = True

    def on_high_watermark(self, node: CheckedNode, hw: int) -> None:
        track = self._track[node.node_id]
        if track.recovering:
            track.recovering = hw < track.hw_max
        elif hw < track.hw:
            self._fail(HW_MONOTONIC, f"node {node.node_id} high watermark went from "
                                     f"{track.hw} to {hw}")
        if hw > node.log.end_offset:
            self._fail(HW_WITHIN_LOG, f"node {node.node_id} reported high watermark {hw} "
                                      f"past its log end {node.log.end_offset}")
        track.hw = hw
        track.hw_max = max(track.hw_max, hw)
        self._check_committed(node, track, hw)

    def after_event(self, node: CheckedNode, nodes: Iterable[CheckedNode]) -> None:
        """Checks after `node` handled an event (every node's state is consulted only
        where a check spans nodes)."""
        core = node.core
        if core is None:
            return
        self._check_roles(node, core)
        log = node.log
        hw = core.high_watermark
        if hw is not None and hw > log.end_offset:
            self._fail(HW_WITHIN_LOG, f"node {node.node_id} high watermark {hw} is past its "
                                      f"log end {log.end_offset}")
        track = self._track[node.node_id]
        # Log matching covers durable entries: only those can ever leave the node (it
        # sends after its fsync); unflushed ones may vanish in a crash and be rewritten.
        durable_end = log.flushed_end_offset
        if durable_end > track.checked_end:
            self._check_log(node, track.checked_end, durable_end)
        track.checked_end = durable_end  # also when it went down: recheck from there
        if core.is_leader and MAJORITY_HOLDS_HW not in self.skip:
            # Durable ends only go down by a truncation or a wipe (which reset this), so
            # a (leader, epoch, high watermark) found held stays held.
            key = (node.node_id, core.epoch, core.high_watermark)
            if key != self._majority_held:
                self._check_majority(node, nodes)
                self._majority_held = key

    # ---- the checks --------------------------------------------------------------------

    def _check_roles(self, node: CheckedNode, core: Any) -> None:
        epoch = core.epoch
        if core.is_leader:
            known = self.leaders.get(epoch)
            if known is None:
                self.leaders[epoch] = node.node_id
                self._check_leader_change(node, epoch)
                self._check_new_leader(node)
            elif known != node.node_id:
                self._fail(ONE_LEADER_PER_EPOCH, f"nodes {known} and {node.node_id} both "
                                                 f"led epoch {epoch}")
        else:
            leader_id = core.leader_id
            if leader_id is not None:
                known = self.leaders.get(epoch)
                if known is not None and known != leader_id:
                    self._fail(ONE_LEADER_PER_EPOCH,
                               f"node {node.node_id} follows {leader_id} in epoch {epoch}, "
                               f"led by {known}")
        if node.node_id in self.observers and core.role in _VOTER_ONLY_ROLES:
            self._fail(OBSERVER_NEVER_VOTES, f"observer {node.node_id} is {core.role} in "
                                             f"epoch {epoch}")

    def _check_leader_change(self, node: CheckedNode, epoch: int) -> None:
        """The new leader's LeaderChange record names only voters as granting votes."""
        from raft.common.record import RecordError
        from raft.control_records import CONTROL_RECORDS, LeaderChange

        log = node.log
        _, start = log.end_offset_for_epoch(epoch - 1)
        start = max(start, 0)  # NO_OFFSET when no epoch precedes this one
        for offset, entry_epoch, record in _entries(log, start, min(start + 1,
                                                                    log.end_offset)):
            if entry_epoch != epoch:
                return
            try:
                change = CONTROL_RECORDS.decode(record)
            except RecordError:
                return
            if isinstance(change, LeaderChange):
                outsiders = set(change.granting_voters) - self.voters
                if outsiders:
                    self._fail(OBSERVER_NEVER_VOTES,
                               f"leader {node.node_id} of epoch {epoch} counts votes of "
                               f"non-voters {sorted(outsiders)} (offset {offset})")

    def _check_new_leader(self, node: CheckedNode) -> None:
        """Raft's leader completeness (§5.4): an entry committed in epoch c is in the log
        of every leader of an epoch above c. (A leader of an older epoch may still win a
        late election after a newer epoch committed: it is fenced, not complete.)"""
        if COMMITTED_DATA in self.skip:
            return
        epoch = node.core.epoch
        required = [o for o, c in enumerate(self.commit_epochs) if c < epoch]
        if not required:
            return
        log = node.log
        if log.end_offset <= required[-1]:
            self._fail(COMMITTED_DATA, f"leader {node.node_id} of epoch {epoch} ends at "
                                       f"{log.end_offset}, without offset {required[-1]} "
                                       f"committed in epoch {self.commit_epochs[required[-1]]}")
        needed = set(required)
        for offset, entry_epoch, record in _entries(log, 0, required[-1] + 1):
            if offset in needed and self.committed[offset] != (entry_epoch, record):
                self._fail(COMMITTED_DATA, f"leader {node.node_id} of epoch {epoch} has a "
                                           f"different entry at offset {offset}, committed "
                                           f"in epoch {self.commit_epochs[offset]}")

    def _check_log(self, node: CheckedNode, start: int, end: int) -> None:
        log = node.log
        prev_epoch = log.epoch_at(start - 1) if start > 0 else NO_EPOCH
        seen = self._seen
        for offset, epoch, record in _entries(log, start, end):
            key = (offset, epoch)
            value = (record, prev_epoch)
            known = seen.get(key)
            if known is None:
                seen[key] = value
            elif known != value:
                what = "record" if known[0] != record else "preceding epoch"
                self._fail(LOG_MATCHING, f"node {node.node_id} has a different {what} at "
                                         f"offset {offset} epoch {epoch}")
            prev_epoch = epoch

    def _check_committed(self, node: CheckedNode, track: _NodeTrack, hw: int) -> None:
        if hw <= track.hw_checked or COMMITTED_DATA in self.skip:
            return
        committed = self.committed
        log = node.log
        # The reporter learned this HW in its current epoch, so the entries were committed
        # by the leader of that epoch or an earlier one.
        commit_epoch = node.core.epoch if node.core is not None else 0
        commit_epochs = self.commit_epochs
        for offset, epoch, record in _entries(log, track.hw_checked, hw):
            if offset < len(committed):
                if committed[offset] != (epoch, record):
                    self._fail(COMMITTED_DATA,
                               f"node {node.node_id} committed offset {offset} epoch {epoch}"
                               f", but epoch {committed[offset][0]} was committed there")
                commit_epochs[offset] = min(commit_epochs[offset], commit_epoch)
            else:
                committed.append((epoch, record))
                commit_epochs.append(commit_epoch)
        track.hw_checked = hw

    def _check_majority(self, leader: CheckedNode, nodes: Iterable[CheckedNode]) -> None:
        hw = leader.core.high_watermark
        if not hw:
            return
        # Durable log ends only: what a voter holds but has not flushed is lost in a crash,
        # so it cannot count towards the majority that makes a record committed.
        holding = [n.node_id for n in nodes
                   if n.is_voter and n.log.flushed_end_offset >= hw]
        if len(holding) < self._majority:
            self._fail(MAJORITY_HOLDS_HW, f"leader {leader.node_id} has high watermark {hw} "
                                          f"but only voters {holding} hold it")

    def _fail(self, invariant: str, detail: str) -> None:
        raise InvariantViolation(invariant, detail)


def _vote_granted(message: object) -> bool:
    granted = getattr(message, "vote_granted", None)
    if granted is None:  # a response with per-partition data
        for topic in getattr(message, "topics", ()):
            for part in getattr(topic, "partitions", ()):
                if getattr(part, "vote_granted", False):
                    return True
        return False
    return bool(granted)


def _entries(log: Any, start: int, end: int) -> Iterable[tuple[int, int, bytes]]:
    """(offset, epoch, record) for offsets in [start, end)."""
    if start >= end:
        return
    for batch in log.read(start, _MAX_BYTES):
        epoch = batch.epoch
        for i, record in enumerate(batch.records):
            offset = batch.base_offset + i
            if offset < start:
                continue
            if offset >= end:
                return
            yield offset, epoch, record
