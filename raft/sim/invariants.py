"""Safety invariants, checked by the simulator after every event.

- `one-leader-per-epoch`: no two nodes ever lead, or are followed as leader, in one epoch;
- `log-matching`: durable entries with the same offset and epoch hold the same record and
  follow the same epoch (Raft §5.3);
- `committed-data-never-lost`: a record below any node's published high watermark is
  never changed or truncated, and every leader of a later epoch holds it (§5.4);
- `acknowledged-writes-survive`: a node recovers from a crash with every write its disk
  acknowledged (fsync returned) and not truncated since;
- `high-watermark-never-decreases`: per node, also across restarts once recovered;
- `high-watermark-within-log`: no node's high watermark is past its log end;
- `observers-never-vote`: observers are never asked, never grant, never campaign, and no
  LeaderChange record counts them;
- `majority-holds-high-watermark`: a majority of voters durably hold the leader's entry
  just below its high watermark, the same (epoch, checksum): a voter whose log is as long
  but diverges there holds nothing;
- `persisted-epoch-never-decreases`: a node's quorum-state never goes back an epoch;
- `one-vote-per-epoch`: no voter grants two candidates one epoch, judged from every vote
  it ever sent, whatever happened to its disk in between;
- `snapshot-at-log-start`: a node whose log starts above 0 holds the snapshot that ends
  there (KIP-630: it stands in for the records below);
- `snapshot-matches-committed`: every snapshot a node writes or fetches holds exactly
  the committed records below its end offset, the last of its epoch, after raft's own
  records (KIP-853), which carry the kraft.version and the voter set that the committed
  records leave in force at the end offset;
- `snapshot-within-committed`: no snapshot ends above the committed offset (nor does
  any log start there);
- `applied-state-is-committed-prefix`: committed data never changes through
  snapshots: a node's applied state, rebuilt from or loaded with a snapshot, is the
  committed prefix; a loaded snapshot never ends below the node's high watermark, and
  the log never starts above what the node applied;
- `liveness` (checked by the sweep, `raft.sim.sweep`): after the heal, a new record
  commits and every running node converges on the leader's log and high watermark.

In a dynamic run (KIP-853, `dynamic=True`) voters come and go, so:
- `one-leader-per-epoch` and `committed-data-never-lost` hold across configurations
  as they are (by epoch and offset, whatever the voter set);
- `one-vote-per-epoch` is judged per node id from what left the nodes, so a node whose
  disk was wiped (a new replica key) that votes again in an epoch its old key voted in
  is caught;
- `observers-never-vote`: no replica grants a vote asked of another replica key (the
  VoteRequest names the voter's directory id), and no LeaderChange counts a replica
  outside the leader's set;
- `majority-holds-high-watermark`: counted over the leader's voter set in force by
  replica key (a wiped node holds nothing for its old key; a key whose disk was lost
  can no longer vote, so it counts as neither holder nor dissenter), or over the set
  before it while the latest VotersRecord is not committed;
- `one-voter-change-at-a-time`: every VotersRecord a leader appends changes at most
  one voter, comes after the one before it committed, and after a record of the
  leader's own epoch committed;
- `added-voter-caught-up`: a voter added by a leader's VotersRecord is that replica
  key on disk, at most `max_lag` records behind the leader's log end.

An entry is its (offset, epoch, checksum) (`entry_of`). What a node holds, and what is
committed, comes from its disk's ledger (`raft.sim.disk.Ledger`: every write and fsync
the simulated disk was handed), not from what the node's log claims: the committed
history is taken from the reporting node's ledger up to the high watermark it
published, and a node that recovers short of its ledger fails
`acknowledged-writes-survive`.

Each check raises `InvariantViolation(name, detail)`; `name` is one of `INVARIANTS`.
The checks are incremental (only what changed since the last event is looked at) so a
sweep of thousands of runs stays fast, with a full rescan after crashes and elections.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, Protocol

from raft.sim.snapshots import split_raft_records
from raft.snapshot import SnapshotError, parse_snapshot
from raft.types import NO_EPOCH, ElectionState, SnapshotId
from raft.voters import voters_change_of

ONE_LEADER_PER_EPOCH = "one-leader-per-epoch"
LOG_MATCHING = "log-matching"
COMMITTED_DATA = "committed-data-never-lost"
HW_MONOTONIC = "high-watermark-never-decreases"
HW_WITHIN_LOG = "high-watermark-within-log"
OBSERVER_NEVER_VOTES = "observers-never-vote"
MAJORITY_HOLDS_HW = "majority-holds-high-watermark"
EPOCH_MONOTONIC = "persisted-epoch-never-decreases"
ONE_VOTE_PER_EPOCH = "one-vote-per-epoch"
SNAPSHOT_AT_LOG_START = "snapshot-at-log-start"
SNAPSHOT_MATCHES_COMMITTED = "snapshot-matches-committed"
SNAPSHOT_WITHIN_COMMITTED = "snapshot-within-committed"
APPLIED_STATE = "applied-state-is-committed-prefix"
LIVENESS = "liveness"
ONE_VOTER_CHANGE = "one-voter-change-at-a-time"
ADDED_VOTER_CAUGHT_UP = "added-voter-caught-up"
ACKNOWLEDGED_WRITES = "acknowledged-writes-survive"

INVARIANTS = (ONE_LEADER_PER_EPOCH, LOG_MATCHING, COMMITTED_DATA, HW_MONOTONIC, HW_WITHIN_LOG,
              OBSERVER_NEVER_VOTES, MAJORITY_HOLDS_HW, EPOCH_MONOTONIC, ONE_VOTE_PER_EPOCH,
              SNAPSHOT_AT_LOG_START, SNAPSHOT_MATCHES_COMMITTED, SNAPSHOT_WITHIN_COMMITTED,
              APPLIED_STATE, LIVENESS, ONE_VOTER_CHANGE, ADDED_VOTER_CAUGHT_UP,
              ACKNOWLEDGED_WRITES)

Entry = tuple[int, int]  # (epoch, checksum of the record): an entry, with its offset


def entry_of(epoch: int, record: bytes) -> Entry:
    """An entry's identity: its epoch and its record's CRC-32 (records differ by content,
    so equal checksums stand for equal records)."""
    return epoch, zlib.crc32(record)

_VOTER_ONLY_ROLES = frozenset({"candidate", "prospective", "voted", "leader"})
_MAX_BYTES = 1 << 62


class InvariantViolation(Exception):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail
        self.sim_cluster: Any = None  # the run it happened in, for its trace


class CheckedNode(Protocol):
    """What the checker reads of a node; a node may also have `snapshots`, its snapshot
    store (`raft.snapshot_store`), checked when present. Its log is a
    `raft.sim.disk.SimLog`, whose `ledger` the checker reads."""

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
                 skip: Iterable[str] = (), dynamic: bool = False) -> None:
        self.dynamic = dynamic
        self.voters = frozenset(voters)
        # A dynamic run's observers may become voters: who may vote is judged from each
        # replica's own voter set instead (`fail_observer_vote`, `_check_majority`).
        self.observers = frozenset() if dynamic else frozenset(observers)
        self._voter_changes_checked: set[tuple[int, int, int]] = set()
        self.skip = frozenset(skip)
        self.leaders: dict[int, int] = {}  # epoch -> leader id, ever
        self._seen: dict[tuple[int, int], tuple[int, int]] = {}  # -> (checksum, prev epoch)
        self.committed: list[Entry] = []  # offset -> (epoch, checksum)
        self.commit_epochs: list[int] = []  # offset -> earliest epoch known to commit it
        self._track = {n: _NodeTrack() for n in self.voters | frozenset(observers)}
        self._majority = len(self.voters) // 2 + 1
        # Every vote ever cast, from what left the voters (not from their disks, which a
        # crash or a wipe may have reset): (voter, epoch) -> candidate.
        self.votes: dict[tuple[int, int], int] = {}
        # Vote requests in flight: (candidate, voter, correlation id) -> (epoch, pre-vote),
        # to tell which request a VoteResponse answers.
        self._vote_requests: dict[tuple[int, int, int], tuple[int, bool]] = {}
        self._majority_held: tuple[int, int, int] | None = None
        # Snapshots found to hold the committed records: id -> their bytes.
        self._good_snapshots: dict[SnapshotId, bytes] = {}
        self._start_ids: dict[tuple[int, int], SnapshotId] = {}  # (offset, epoch) -> id

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

    def on_snapshot(self, node_id: int, snapshot_id: SnapshotId, data: bytes) -> None:
        """A snapshot became whole in a node's store (written by its state machine, or
        fetched): it must end within the committed history and hold exactly it."""
        end = snapshot_id.end_offset
        committed = self.committed
        if end > len(committed) and SNAPSHOT_WITHIN_COMMITTED not in self.skip:
            self._fail(SNAPSHOT_WITHIN_COMMITTED,
                       f"node {node_id} holds snapshot {_name(snapshot_id)}, ending above the "
                       f"committed offset {len(committed)}")
        if SNAPSHOT_MATCHES_COMMITTED in self.skip or self._good_snapshots.get(
                snapshot_id) == data:
            return
        try:
            _, contents = parse_snapshot(data, snapshot_id.file_name, snapshot_id.epoch)
        except SnapshotError as exc:
            self._fail(SNAPSHOT_MATCHES_COMMITTED,
                       f"node {node_id} holds snapshot {_name(snapshot_id)}: it does not "
                       f"read: {exc.reason}")
        raft_records, records = split_raft_records(contents)
        # Above the committed offset nothing is known: that part is the other check's.
        known = min(end, len(committed))
        where = _first_difference(records[:known] if end > known else records,
                                  snapshot_id.epoch if end == known else None,
                                  committed[:known]) or _raft_records_difference(
            raft_records, records[:known])
        if where is not None:
            self._fail(SNAPSHOT_MATCHES_COMMITTED,
                       f"node {node_id} holds snapshot {_name(snapshot_id)}: {where}")
        self._good_snapshots[snapshot_id] = data

    def on_snapshot_loaded(self, node: CheckedNode, snapshot_id: SnapshotId) -> None:
        """A fetched snapshot replaced the node's log: what its log holds from the
        snapshot's end on is checked again; its high watermark may not go back."""
        track = self._track[node.node_id]
        end = snapshot_id.end_offset
        if end < track.hw and APPLIED_STATE not in self.skip:
            self._fail(APPLIED_STATE, f"node {node.node_id} loaded snapshot "
                                      f"{_name(snapshot_id)} below its high watermark "
                                      f"{track.hw}")
        track.checked_end = min(track.checked_end, end)
        self._majority_held = None  # a voter's durable end may have gone down

    def on_applied_state(self, node: CheckedNode, records: list[bytes], epoch: int,
                         how: str) -> None:
        """A node's state machine now holds `records` (the last of `epoch`), `how` it got
        there (loaded or rebuilt from a snapshot): the committed prefix, exactly."""
        if APPLIED_STATE in self.skip:
            return
        committed = self.committed
        if len(records) > len(committed):
            where: str | None = (f"it ends at {len(records)}, above the committed offset "
                                 f"{len(committed)}")
        else:
            where = _first_difference(records, epoch, committed[:len(records)])
        if where is not None:
            self._fail(APPLIED_STATE, f"node {node.node_id}'s state {how}: {where}")

    def check_applicable(self, node: CheckedNode, applied_end: int,
                         high_watermark: int) -> None:
        """Before the node applies up to `high_watermark`: its log must hold the records
        from what it applied on (a log start above that skipped records unapplied)."""
        start = node.log.start_offset
        if applied_end < min(start, high_watermark) and APPLIED_STATE not in self.skip:
            self._fail(APPLIED_STATE, f"node {node.node_id} applied up to {applied_end} but "
                                      f"its log starts at {start}: records "
                                      f"[{applied_end}, {start}) were never applied")

    def check_snapshot_at_log_start(self, node: CheckedNode) -> None:
        """A log starting above 0 needs the snapshot that ends at its start."""
        log = node.log
        start = log.start_offset
        if start == 0 or SNAPSHOT_AT_LOG_START in self.skip:
            return
        snapshots = getattr(node, "snapshots", None)
        if snapshots is None:
            return
        key = (start, log.start_epoch)
        snapshot_id = self._start_ids.get(key)
        if snapshot_id is None:  # checked after every event: build each id once
            snapshot_id = self._start_ids[key] = SnapshotId(*key)
        if snapshots.size(snapshot_id) is None:
            self._fail(SNAPSHOT_AT_LOG_START,
                       f"node {node.node_id}'s log starts at {log.start_offset} (epoch "
                       f"{log.start_epoch}) but it holds no snapshot {_name(snapshot_id)}"
                       f" (newest: {_name(snapshots.latest())})")

    def on_restart(self, node: CheckedNode, *, wiped: bool = False) -> None:
        if wiped:  # the node starts over: nothing it published before binds it
            self._track[node.node_id] = _NodeTrack()
            self._majority_held = None
            return
        self._check_recovered(node)
        track = self._track[node.node_id]
        track.checked_end = 0
        track.hw = 0
        track.hw_checked = 0
        track.recovering = True

    def _check_recovered(self, node: CheckedNode) -> None:
        """The recovered log holds every write its disk acknowledged (the ledger's)."""
        if ACKNOWLEDGED_WRITES in self.skip:
            return
        log = node.log
        ledger = log.ledger
        if log.end_offset < ledger.durable_end:
            self._fail(ACKNOWLEDGED_WRITES,
                       f"node {node.node_id} recovered a log ending at {log.end_offset}, but "
                       f"its disk acknowledged writes up to {ledger.durable_end}")
        for offset, epoch, record in entries_of(log, 0, ledger.durable_end):
            if not ledger.holds(offset, entry_of(epoch, record)):
                self._fail(ACKNOWLEDGED_WRITES,
                           f"node {node.node_id} recovered epoch {epoch} at offset "
                           f"{offset}, not the entry its disk acknowledged there")

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
        self.check_snapshot_at_log_start(node)
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
        start = max(start, log.start_offset)  # NO_OFFSET when no epoch precedes this one
        for offset, entry_epoch, record in entries_of(log, start, min(start + 1,
                                                                      log.end_offset)):
            if entry_epoch != epoch:
                return
            try:
                change = CONTROL_RECORDS.decode(record)
            except RecordError:
                return
            if isinstance(change, LeaderChange):
                voters = (set(node.core.voter_set.ids) if self.dynamic else self.voters)
                outsiders = set(change.granting_voters) - voters
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
        entries = node.log.ledger.entries
        if len(entries) <= required[-1]:
            self._fail(COMMITTED_DATA, f"leader {node.node_id} of epoch {epoch} ends at "
                                       f"{len(entries)}, without offset {required[-1]} "
                                       f"committed in epoch {self.commit_epochs[required[-1]]}")
        for offset in required:  # None: below a loaded snapshot, checked when stored
            if entries[offset] not in (None, self.committed[offset]):
                self._fail(COMMITTED_DATA, f"leader {node.node_id} of epoch {epoch} has a "
                                           f"different entry at offset {offset}, committed "
                                           f"in epoch {self.commit_epochs[offset]}")

    def _check_log(self, node: CheckedNode, start: int, end: int) -> None:
        log = node.log
        start = max(start, log.start_offset)  # a snapshot stands in for what lies below
        prev_epoch = (NO_EPOCH if start == 0 else log.start_epoch if start == log.start_offset
                      else log.epoch_at(start - 1))
        seen = self._seen
        for offset, epoch, record in entries_of(log, start, end):
            key = (offset, epoch)
            value = (zlib.crc32(record), prev_epoch)
            known = seen.get(key)
            if known is None:
                seen[key] = value
            elif known != value:
                what = "record" if known[0] != value[0] else "preceding epoch"
                self._fail(LOG_MATCHING, f"node {node.node_id} has a different {what} at "
                                         f"offset {offset} epoch {epoch}")
            prev_epoch = epoch

    def _check_committed(self, node: CheckedNode, track: _NodeTrack, hw: int) -> None:
        """Compare the newly committed entries with the history and extend it (also when
        this check is skipped: the snapshot checks compare with the history too)."""
        if hw <= track.hw_checked:
            return
        report = COMMITTED_DATA not in self.skip
        committed = self.committed
        log = node.log
        # The reporter learned this HW in its current epoch, so the entries were committed
        # by the leader of that epoch or an earlier one.
        commit_epoch = node.core.epoch if node.core is not None else 0
        commit_epochs = self.commit_epochs
        entries = log.ledger.entries
        for offset in range(track.hw_checked, min(hw, len(entries))):
            entry = entries[offset]
            if entry is None:  # below a loaded snapshot: the snapshot checks are its
                continue
            if offset < len(committed):
                if report and committed[offset] != entry:
                    self._fail(COMMITTED_DATA,
                               f"node {node.node_id} committed offset {offset} epoch "
                               f"{entry[0]}, but epoch {committed[offset][0]} was committed "
                               f"there")
                commit_epochs[offset] = min(commit_epochs[offset], commit_epoch)
            elif offset == len(committed):
                committed.append(entry)
                commit_epochs.append(commit_epoch)
            else:
                break
        if log.start_offset > len(committed) and SNAPSHOT_WITHIN_COMMITTED not in self.skip:
            # The records in between lie below the log start, in a snapshot.
            self._fail(SNAPSHOT_WITHIN_COMMITTED,
                       f"node {node.node_id} has high watermark {hw} over a log starting "
                       f"at {log.start_offset}, above the committed offset {len(committed)}")
        track.hw_checked = hw

    def fail_observer_vote(self, src: int, dst: int, asked: object, own: object) -> None:
        """A dynamic run's replica granted a vote asked of another replica key."""
        if OBSERVER_NEVER_VOTES not in self.skip:
            self._fail(OBSERVER_NEVER_VOTES, f"node {src} (directory {own}) granted {dst} "
                                             f"a vote asked of directory {asked}")

    def on_voters_appended(self, leader: CheckedNode, offset: int, *, previous: Any,
                           previous_offset: int | None, new: Any, nodes: Any,
                           max_lag: int) -> None:
        """A leader appended the VotersRecord `new` at `offset` (KIP-853's rules)."""
        key = (leader.node_id, offset, leader.core.epoch)
        if key in self._voter_changes_checked:
            return
        self._voter_changes_checked.add(key)
        hw = leader.core.high_watermark
        if ONE_VOTER_CHANGE not in self.skip:
            if previous_offset is not None and previous_offset >= hw:
                self._fail(ONE_VOTER_CHANGE,
                           f"leader {leader.node_id} appended voters {new} at {offset} while "
                           f"the VotersRecord at {previous_offset} was uncommitted (high "
                           f"watermark {hw})")
            if not previous.differs_by_at_most_one(new):
                self._fail(ONE_VOTER_CHANGE, f"leader {leader.node_id} changed voters "
                                             f"{previous} -> {new} at {offset}")
            # Ongaro's single-server change bug (2015): a change before the leader's own
            # epoch has a committed record may meet an older leader's unseen change.
            # (The first leader's copy of the bootstrap voters changes nothing; an epoch
            # that began below the log start has its first record in a snapshot.)
            _, epoch_start = leader.log.end_offset_for_epoch(leader.core.epoch - 1)
            epoch_start = max(epoch_start, 0)  # NO_OFFSET: no epoch before it in the log
            if (new != previous and epoch_start >= leader.log.start_offset
                    and hw <= epoch_start):
                self._fail(ONE_VOTER_CHANGE,
                           f"leader {leader.node_id} of epoch {leader.core.epoch} appended "
                           f"voters {new} at {offset} before a record of its epoch (from "
                           f"{epoch_start}) committed (high watermark {hw})")
        if ADDED_VOTER_CAUGHT_UP in self.skip:
            return
        for added in set(new.keys()) - set(previous.keys()):
            node = nodes.get(added.id)
            if node is None or node.directory_id != added.directory_id:
                self._fail(ADDED_VOTER_CAUGHT_UP, f"leader {leader.node_id} added voter "
                                                  f"{added}, a replica that does not exist")
            held = node.log.flushed_end_offset
            if held < offset - max_lag:
                self._fail(ADDED_VOTER_CAUGHT_UP,
                           f"leader {leader.node_id} added voter {added} at offset {offset} "
                           f"holding only {held} records (more than {max_lag} behind)")

    def _check_majority(self, leader: CheckedNode, nodes: Iterable[CheckedNode]) -> None:
        hw = leader.core.high_watermark
        if not hw:
            return
        if self.dynamic:
            self._check_dynamic_majority(leader, list(nodes), hw)
            return
        # Durable entries only: what a voter holds but has not flushed is lost in a crash,
        # so it cannot count towards the majority that makes a record committed; and by
        # content: a voter whose log is as long but diverges holds nothing of it.
        entry = self._entry_at(leader, hw - 1)
        holding = [n.node_id for n in nodes
                   if n.is_voter and n.log.ledger.holds(hw - 1, entry)]
        if len(holding) < self._majority:
            self._fail(MAJORITY_HOLDS_HW, f"leader {leader.node_id} has high watermark {hw} "
                                          f"but only voters {holding} hold it")

    def _check_dynamic_majority(self, leader: CheckedNode, nodes: list[Any], hw: int) -> None:
        """By replica key, over the set in force or (its record uncommitted) the one
        before: every majority of it must include a holder; a voter key whose disk is gone
        counts as neither holder nor dissenter."""
        history = leader.core.voter_history
        sets = [history.latest]
        latest_offset = history.latest_offset
        if latest_offset is not None and latest_offset >= hw:
            sets.append(history.previous())
        by_id = {n.node_id: n for n in nodes}
        entry = self._entry_at(leader, hw - 1)
        described = []
        for voters in sets:
            holding, lost = [], 0
            for key in voters.keys():
                node = by_id.get(key.id)
                if node is None or (key.directory_id is not None
                                    and node.directory_id != key.directory_id):
                    lost += 1
                elif node.log.ledger.holds(hw - 1, entry):
                    holding.append(key.id)
            # Safe when no majority of the set can form without a holder (a lost key can
            # never vote): the dissenters are fewer than a majority. For an odd set that
            # is holders >= majority; for an even one half suffices, which is what lets a
            # leader commit over a VotersRecord it appended (any majority of the new set
            # meets any of the old, Raft's single-server change) while the next leader,
            # never having received that record, still counts the old, even set.
            dissenting = len(voters.keys()) - len(holding) - lost
            if dissenting < voters.majority and holding:
                return
            described.append(f"{voters}: {holding} (lost {lost})")
        self._fail(MAJORITY_HOLDS_HW, f"leader {leader.node_id} has high watermark {hw} but "
                                      f"only these voters hold it: {'; '.join(described)}")

    def _entry_at(self, leader: CheckedNode, offset: int) -> Entry | None:
        """The leader's entry at `offset`, below its high watermark, so within its log
        (`after_event` fails first otherwise); the committed one below a snapshot it
        loaded."""
        entry: Entry | None = leader.log.ledger.entries[offset]
        if entry is None and offset < len(self.committed):
            return self.committed[offset]
        return entry

    def _fail(self, invariant: str, detail: str) -> NoReturn:
        raise InvariantViolation(invariant, detail)


def _name(snapshot_id: SnapshotId | None) -> str:
    """A snapshot as `end offset-epoch`."""
    if snapshot_id is None:
        return "none"
    return f"{snapshot_id.end_offset}-{snapshot_id.epoch}"


def _first_difference(records: Sequence[bytes], epoch: int | None,
                      committed: Sequence[Entry]) -> str | None:
    """How `records`, the last of `epoch` (None: not checked), differ from the committed
    entries they should equal (a prefix of the committed history); None when they do
    not."""
    for offset, (mine, (_, theirs)) in enumerate(zip(records, committed, strict=False)):
        if zlib.crc32(mine) != theirs:
            return f"record at offset {offset} differs from the committed one"
    if len(records) != len(committed):
        return f"{len(records)} records where {len(committed)} are committed"
    if epoch is not None and committed and committed[-1][0] != epoch:
        return f"epoch {epoch}, but the last record was committed in epoch {committed[-1][0]}"
    return None


def _raft_records_difference(raft_records: Sequence[bytes],
                             records: Sequence[bytes]) -> str | None:
    """How raft's records at a snapshot's front differ from the kraft.version and voter
    set that the (committed) `records` leave in force at their end; None when they
    agree (or the records set neither: the bootstrap's are in force)."""
    carried = {type(change): change for change in map(voters_change_of, raft_records)}
    in_force: dict[type, Any] = {}
    for record in records:
        change = voters_change_of(record)
        if change is not None:
            in_force[type(change)] = change
    for kind, change in in_force.items():
        if carried.get(kind) != change:
            return (f"it carries {carried.get(kind)} where the committed records leave "
                    f"{change} in force")
    return None


def _vote_granted(message: object) -> bool:
    granted = getattr(message, "vote_granted", None)
    if granted is None:  # a response with per-partition data
        for topic in getattr(message, "topics", ()):
            for part in getattr(topic, "partitions", ()):
                if getattr(part, "vote_granted", False):
                    return True
        return False
    return bool(granted)


def entries_of(log: Any, start: int, end: int) -> Iterable[tuple[int, int, bytes]]:
    """(offset, epoch, record) for offsets in [start, end) that the log holds (none below
    its start: a snapshot holds those)."""
    start = max(start, log.start_offset)
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
