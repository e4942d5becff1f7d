"""Safety invariants, checked by the simulator after every event.

Each check raises `InvariantViolation(name, detail)`; `name` is one of `INVARIANTS`.
The checks are incremental (only what changed since the last event is looked at) so a
sweep of thousands of runs stays fast, with a full rescan after crashes and elections.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from raft.types import ElectionState

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

    def on_send(self, src: int, dst: int, message: object) -> None:
        name = type(message).__name__
        if not name.startswith("Vote"):
            return
        if name.startswith("VoteRequest") and (src in self.observers or dst in self.observers):
            self._fail(OBSERVER_NEVER_VOTES, f"{name} from {src} to {dst} involves an "
                                             "observer")
        if (name.startswith("VoteResponse") and src in self.observers
                and _vote_granted(message)):
            self._fail(OBSERVER_NEVER_VOTES, f"observer {src} granted a vote to {dst}")

    def on_truncate(self, node: CheckedNode, offset: int) -> None:
        track = self._track[node.node_id]
        if offset < track.hw and COMMITTED_DATA not in self.skip:
            self._fail(COMMITTED_DATA, f"node {node.node_id} truncated to {offset}, below its "
                                       f"high watermark {track.hw}")
        track.checked_end = min(track.checked_end, offset)
        track.hw_checked = min(track.hw_checked, offset)

    def on_restart(self, node: CheckedNode, *, wiped: bool = False) -> None:
        track = self._track[node.node_id]
        track.checked_end = 0
        track.hw = 0
        track.hw_checked = 0
        track.recovering = track.hw_max > 0
        if wiped:
            track.hw_max = 0
            track.recovering = False

    def on_high_watermark(self, node: CheckedNode, hw: int) -> None:
        track = self._track[node.node_id]
        if track.recovering:
            if hw >= track.hw_max:
                track.recovering = False
        elif hw < track.hw:
            self._fail(HW_MONOTONIC, f"node {node.node_id} high watermark went from "
                                     f"{track.hw} to {hw}")
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
        if durable_end < track.checked_end:
            track.checked_end = durable_end
        if durable_end > track.checked_end:
            self._check_log(node, track.checked_end, durable_end)
            track.checked_end = durable_end
        if core.is_leader and MAJORITY_HOLDS_HW not in self.skip:
            self._check_majority(node, nodes)

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
        from metadata.records import LeaderChange, RecordError, decode

        log = node.log
        _, start = log.end_offset_for_epoch(epoch - 1) if epoch > 0 else (0, 0)
        start = max(start, 0)
        for offset, entry_epoch, record in _entries(log, start, min(start + 1,
                                                                    log.end_offset)):
            if entry_epoch != epoch:
                return
            try:
                change = decode(record)
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
        prev_epoch = log.epoch_at(start - 1) if start > 0 else -1
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
        if hw > log.end_offset:
            self._fail(HW_WITHIN_LOG, f"node {node.node_id} reported high watermark {hw} "
                                      f"past its log end {log.end_offset}")
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
                if commit_epoch < commit_epochs[offset]:
                    commit_epochs[offset] = commit_epoch
            else:
                committed.append((epoch, record))
                commit_epochs.append(commit_epoch)
        track.hw_checked = hw

    def _check_majority(self, leader: CheckedNode, nodes: Iterable[CheckedNode]) -> None:
        hw = leader.core.high_watermark
        if not hw:
            return
        # Log ends, not flushed ends: a truncation above the HW may rewrite a batch that
        # straddles it (the durable end drops until the fsync); a crash that loses acked
        # entries shows up as a log end below the HW on the next check.
        holding = [n.node_id for n in nodes if n.is_voter and n.log.end_offset >= hw]
        if len(holding) < self._majority:
            self._fail(MAJORITY_HOLDS_HW, f"leader {leader.node_id} has high watermark {hw} "
                                          f"but only voters {holding} hold it")

    def _fail(self, invariant: str, detail: str) -> None:
        raise InvariantViolation(invariant, detail)


def _vote_granted(message: object) -> bool:
    granted = getattr(message, "vote_granted", None)
    if granted is None:  # a response with per-partition data
        for topic in getattr(message, "topics", ()) or ():
            for part in getattr(topic, "partitions", ()) or ():
                if getattr(part, "vote_granted", False):
                    return True
        return False
    return bool(granted)


def _entries(log: Any, start: int, end: int) -> Iterable[tuple[int, int, bytes]]:
    """(offset, epoch, record) for offsets in [start, end)."""
    if start >= end:
        return
    for batch in log.read(start, _MAX_BYTES):
        base = batch.base_offset
        if base >= end:
            return
        epoch = batch.epoch
        for i, record in enumerate(batch.records):
            offset = base + i
            if offset < start:
                continue
            if offset >= end:
                return
            yield offset, epoch, record
