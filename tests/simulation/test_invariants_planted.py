"""Every safety invariant of `raft.sim.invariants` has teeth: each is planted once or more
against the `Checker` directly, fed the hook calls the cluster makes (`on_persist`,
`on_send`, `on_truncate`, `on_restart`, `on_high_watermark`, `after_event`, and for
snapshots `on_snapshot`, `on_snapshot_loaded`, `on_applied_state`, `check_applicable`)
with fake nodes over real `SimLog`s (and `MemorySnapshotStore`s), and must raise that
invariant by name; the near misses beside each plant must not raise. `liveness` is the
sweep's (`raft.sim.sweep`): a toy cluster whose partition never heals is reported as
such.

`make mutation` runs these tests against raft/sim/invariants.py, so they pin the
boundaries (equal epochs, a high watermark at the log end, exactly a majority) as well
as the plants."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from raft.common.uuid import Uuid
from raft.control_records import KRaftVersionRecord, LeaderChange, MetadataTopic
from raft.log import MemoryLog
from raft.messages import FetchRequest, VoteRequest, VoteResponse
from raft.sim.cluster import Cluster, SimConfig
from raft.sim.disk import DiskConfig, SimDisk, SimLog
from raft.sim.invariants import (
    ACKNOWLEDGED_WRITES,
    ADDED_VOTER_CAUGHT_UP,
    APPLIED_STATE,
    COMMITTED_DATA,
    EPOCH_MONOTONIC,
    HW_MONOTONIC,
    HW_WITHIN_LOG,
    INVARIANTS,
    LIVENESS,
    LOG_MATCHING,
    MAJORITY_HOLDS_HW,
    OBSERVER_NEVER_VOTES,
    ONE_LEADER_PER_EPOCH,
    ONE_VOTE_PER_EPOCH,
    ONE_VOTER_CHANGE,
    SNAPSHOT_AT_LOG_START,
    SNAPSHOT_MATCHES_COMMITTED,
    SNAPSHOT_WITHIN_COMMITTED,
    Checker,
    InvariantViolation,
    entries_of,
    entry_of,
)
from raft.sim.sweep import RunSpec, sweep
from raft.snapshot import encode_snapshot
from raft.snapshot_store import MemorySnapshotStore
from raft.types import Batch, ElectionState, SnapshotId
from raft.voters import ReplicaKey, Voter, VoterHistory, VoterSet
from tests.support.checker_fakes import fake_node, log_with, toy_cluster

Skip = Sequence[str]

# ---- fakes: what the cluster hands the checker ------------------------------------------


def rewrite(log: SimLog, offset: int, epoch: int, records: list[bytes]) -> None:
    """Truncate `log` to `offset` and append (and flush) other records there."""
    log.truncate_to(offset)
    log.append(epoch, records)
    log.flush()


def vote_request(candidate: int, epoch: int, *, pre_vote: bool = False) -> VoteRequest:
    return VoteRequest(cluster_id="c", candidate_epoch=epoch, candidate_id=candidate,
                       last_offset_epoch=0, last_offset=0, pre_vote=pre_vote)


def grant(checker: Checker, *, voter: int, candidate: int, epoch: int, cid: int,
          pre_vote: bool = False, answer: object | None = None) -> None:
    """`candidate` asks `voter` (correlation id `cid`) and `voter` answers (a grant for
    that epoch unless `answer` says otherwise)."""
    checker.on_send(candidate, voter, vote_request(candidate, epoch, pre_vote=pre_vote),
                    correlation_id=cid)
    checker.on_send(voter, candidate, answer if answer is not None else VoteResponse(
        leader_epoch=epoch, vote_granted=True), correlation_id=cid)


@dataclass(frozen=True)
class VoteResponsePartitions:
    """A Vote answer carrying its grant per partition (`topics[].partitions[]`), as the
    wire schema nests it; the checker looks for a grant there."""

    leader_epoch: int
    topics: tuple[Any, ...]


@dataclass(frozen=True)
class VoteResponseBare:
    """A Vote answer with neither a grant nor an epoch: no vote."""


def partitioned_answer(epoch: int, *grants: bool) -> VoteResponsePartitions:
    return VoteResponsePartitions(leader_epoch=epoch, topics=(
        SimpleNamespace(partitions=()),
        SimpleNamespace(partitions=tuple(SimpleNamespace(vote_granted=g) for g in grants))))


def leader_change(*granting: int) -> bytes:
    return LeaderChange(leader_id=1, voters=(1, 2, 3), granting_voters=granting).encode()


def raises(invariant: str, action: Callable[[], object]) -> InvariantViolation:
    with pytest.raises(InvariantViolation) as caught:
        action()
    assert caught.value.invariant == invariant, caught.value
    return caught.value


# ---- one plant (or more) per invariant -----------------------------------------------------
# Each plant builds the smallest history that breaks its invariant and nothing else; the
# checker is told to skip `skip`.


def two_leaders_in_one_epoch(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    a, b = fake_node(1, leader=True), fake_node(2, leader=True)
    checker.after_event(a, [a, b])
    checker.after_event(b, [a, b])


def follower_of_another_leader_in_a_led_epoch(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    a, b = fake_node(1, leader=True), fake_node(2, leader_id=3)
    checker.after_event(a, [a, b])
    checker.after_event(b, [a, b])


def different_records_at_one_offset_and_epoch(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    a = fake_node(1, log=log_with((1, [b"x", b"y"])))
    b = fake_node(2, log=log_with((1, [b"w", b"y"])))
    checker.after_event(a, [a, b])
    checker.after_event(b, [a, b])


def same_entry_after_different_epochs(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    a = fake_node(1, log=log_with((1, [b"x"]), (3, [b"y"])))
    b = fake_node(2, log=log_with((2, [b"x"]), (3, [b"y"])))
    checker.after_event(a, [a, b])
    checker.after_event(b, [a, b])


def committed_entry_changed_on_another_node(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.on_high_watermark(fake_node(1, log=log_with((1, [b"x"]))), 1)
    checker.on_high_watermark(fake_node(2, log=log_with((2, [b"y"]))), 1)


def truncation_below_own_high_watermark(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    a = fake_node(1, log=log_with((1, [b"x", b"y"])))
    checker.on_high_watermark(a, 2)
    checker.on_truncate(a, 1)


def new_leader_without_a_committed_entry(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.on_high_watermark(fake_node(1, log=log_with((1, [b"x", b"y"]))), 2)
    b = fake_node(2, epoch=2, leader=True, hw=None, log=log_with((1, [b"x"])))
    checker.after_event(b, [b])


def new_leader_with_another_committed_entry(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.on_high_watermark(fake_node(1, log=log_with((1, [b"x", b"y"]))), 2)
    b = fake_node(2, epoch=2, leader=True, hw=None, log=log_with((1, [b"z", b"y"])))
    checker.after_event(b, [b])


def high_watermark_going_back(skip: Skip = ()) -> None:
    checker = Checker([1], [], skip=skip)
    a = fake_node(1, log=log_with((1, [b"x", b"y"])))
    checker.on_high_watermark(a, 2)
    checker.on_high_watermark(a, 1)


def high_watermark_past_log_end_after_an_event(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    a = fake_node(1, hw=3, log=log_with((1, [b"x", b"y"])))
    checker.after_event(a, [a])


def high_watermark_reported_past_log_end(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.on_high_watermark(fake_node(1, log=log_with((1, [b"x"]))), 2)


def vote_request_to_an_observer(skip: Skip = ()) -> None:
    Checker([1, 2, 3], [4], skip=skip).on_send(1, 4, vote_request(1, 1))


def vote_request_from_an_observer(skip: Skip = ()) -> None:
    Checker([1, 2, 3], [4], skip=skip).on_send(4, 1, vote_request(4, 1))


def vote_granted_by_an_observer(skip: Skip = ()) -> None:
    Checker([1, 2, 3], [4], skip=skip).on_send(
        4, 1, VoteResponse(leader_epoch=1, vote_granted=True))


def vote_granted_per_partition_by_an_observer(skip: Skip = ()) -> None:
    Checker([1, 2, 3], [4], skip=skip).on_send(4, 1, partitioned_answer(1, False, True))


def vote_granted_by_another_directory(skip: Skip = ()) -> None:
    Checker([1, 2, 3], [], skip=skip, dynamic=True).fail_observer_vote(2, 1, Uuid(2), Uuid(22))


def observer_campaigning(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [4], skip=skip)
    observer = fake_node(4, voter=False, role="candidate")
    checker.after_event(observer, [observer])


def leader_change_counting_an_observer(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [4], skip=skip)
    leader = fake_node(1, epoch=3, leader=True, hw=None,
                  log=log_with((1, [b"x"]), (2, [b"y"]), (3, [leader_change(1, 4), b"z"])))
    checker.after_event(leader, [leader])


def high_watermark_held_by_a_minority(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [4], skip=skip)
    full = log_with((1, [b"x", b"y"]))
    leader = fake_node(1, leader=True, hw=2, log=full)
    nodes = [leader, fake_node(2, log=log_with((1, [b"x"]))), fake_node(3),
             fake_node(4, voter=False, log=full)]
    checker.after_event(leader, nodes)


def high_watermark_held_unflushed_only(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    leader = fake_node(1, leader=True, hw=2, log=log_with((1, [b"x", b"y"])))
    nodes = [leader, fake_node(2, log=log_with((1, [b"x", b"y"]), flush=False)),
             fake_node(3, log=log_with((1, [b"x"])))]
    checker.after_event(leader, nodes)


def high_watermark_held_by_diverging_voters(skip: Skip = ()) -> None:
    """Voters 2 and 3 are as long as the leader's high watermark, but their entry below
    it is another epoch's (2) or another record (3): content counts, not length."""
    checker = Checker([1, 2, 3], [], skip=skip)
    leader = fake_node(1, leader=True, epoch=3, hw=2, log=log_with((1, [b"x"]), (3, [b"y"])))
    nodes = [leader, fake_node(2, log=log_with((1, [b"x"]), (2, [b"y"]))),
             fake_node(3, log=log_with((1, [b"x"]), (3, [b"z"])))]
    checker.after_event(leader, nodes)


def crashed_disk(*, lose: int, acknowledged: int = 2) -> SimDisk:
    """A disk that acknowledged `acknowledged` one-record batches, then crashed losing
    the last `lose` of them (a lying fsync)."""
    disk = SimDisk(DiskConfig(lying_fsync_writes=lose), random.Random(1))
    for record in (b"x", b"y", b"z")[:acknowledged]:
        disk.log.append(1, [record])
        disk.log.flush()
    disk.log.append(1, [b"unflushed"])
    disk.crash()
    return disk


def acknowledged_write_lost_in_a_crash(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.on_restart(fake_node(1, log=crashed_disk(lose=1).log))


def acknowledged_write_recovered_as_another(skip: Skip = ()) -> None:
    """The log recovered as long as acknowledged, with a record the disk was never
    handed (written past the ledger, as a corrupted disk would return it)."""
    checker = Checker([1, 2, 3], [], skip=skip)
    disk = crashed_disk(lose=1, acknowledged=1)
    MemoryLog.append_batches(disk.log, [Batch(base_offset=0, epoch=1, records=(b"w",))])
    checker.on_restart(fake_node(1, log=disk.log))


def high_watermark_held_by_a_minority_of_keys(skip: Skip = ()) -> None:
    """Of seven keys: the leader holds, 2 to 5 do not, 6 has no node, 7's disk was
    formatted anew (another directory): two lost, four dissenting, a majority. The set
    {1, 2, 3} appended at the high watermark is uncommitted: both are judged, both fail."""
    checker = Checker([1, 2, 3], [], skip=skip, dynamic=True)
    leader = fake_node(1, leader=True, hw=2, log=log_with((1, [b"x", b"y"])))
    leader.directory_id = Uuid(1)
    leader.core.voter_history = VoterHistory(dynamic_voters(*range(1, 8)), kraft_version=1)
    leader.core.voter_history.sets.append((2, dynamic_voters(1, 2, 3)))
    nodes = [leader]
    for node_id, directory, held in ((2, 2, 1), (3, 3, 0), (4, 4, 0), (5, 5, 0), (7, 77, 2)):
        node = fake_node(node_id, log=log_with((1, [b"x", b"y"][:held])) if held else None)
        node.directory_id = Uuid(directory)
        nodes.append(node)
    checker.after_event(leader, nodes)


def persisted_epoch_going_back(skip: Skip = ()) -> None:
    Checker([1, 2, 3], [], skip=skip).on_persist(1, ElectionState(epoch=3),
                                                 ElectionState(epoch=2))


def persisted_second_vote_in_one_epoch(skip: Skip = ()) -> None:
    Checker([1, 2, 3], [], skip=skip).on_persist(1, ElectionState(epoch=3, voted_id=1),
                                                 ElectionState(epoch=3, voted_id=2))


def two_votes_sent_in_one_epoch(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    grant(checker, voter=2, candidate=1, epoch=3, cid=5)
    grant(checker, voter=2, candidate=3, epoch=3, cid=5)


def candidate_granting_another_in_its_epoch(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.on_send(1, 2, vote_request(1, 2), correlation_id=1)
    grant(checker, voter=1, candidate=3, epoch=2, cid=1)


def second_vote_granted_per_partition(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    grant(checker, voter=2, candidate=1, epoch=3, cid=5)
    grant(checker, voter=2, candidate=3, epoch=3, cid=6, answer=partitioned_answer(3, True))


def snapshot(end: int, epoch: int, records: list[bytes]) -> tuple[SnapshotId, bytes]:
    snapshot_id = SnapshotId(end, epoch)
    return snapshot_id, encode_snapshot(snapshot_id, records)


def committed_xy(checker: Checker) -> None:
    """x, y committed in epoch 1 (offsets 0 and 1)."""
    checker.on_high_watermark(fake_node(1, log=log_with((1, [b"x", b"y"]))), 2)


def node_starting_at(start: int, *held: SnapshotId, node_id: int = 1,
                     hw: int | None = 0) -> SimpleNamespace:
    """A node whose log (x, y, z in epoch 1) starts at `start`, holding snapshots `held`."""
    log = log_with((1, [b"x", b"y", b"z"]))
    log.advance_start(start)
    store = MemorySnapshotStore()
    for snapshot_id in held:
        store.add(snapshot_id, b"")
    node = fake_node(node_id, hw=hw, log=log)
    node.snapshots = store
    return node


def log_start_without_a_snapshot(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    node = node_starting_at(2)
    checker.after_event(node, [node])


def log_start_with_a_snapshot_elsewhere(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    node = node_starting_at(2, SnapshotId(1, 1), SnapshotId(3, 1))
    checker.check_snapshot_at_log_start(node)


def snapshot_with_another_record(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    checker.on_snapshot(2, *snapshot(2, 1, [b"x", b"w"]))


def snapshot_short_of_a_record(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    checker.on_snapshot(2, *snapshot(2, 1, [b"x"]))


def snapshot_of_another_epoch(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    checker.on_snapshot(2, *snapshot(2, 2, [b"x", b"y"]))


VERSION_1 = KRaftVersionRecord(kraft_version=1)


def voters_committed(checker: Checker) -> list[bytes]:
    """x, the voters {1, 2, 3} and kraft.version 1 committed in epoch 1 (0 to 2)."""
    records = [b"x", dynamic_voters(1, 2, 3).to_record().encode(), VERSION_1.encode()]
    checker.on_high_watermark(fake_node(1, log=log_with((1, records))), 3)
    return records


def snapshot_carrying_another_voter_set(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    records = voters_committed(checker)
    raft = [VERSION_1.encode(), dynamic_voters(1, 2).to_record().encode()]
    checker.on_snapshot(2, *snapshot(3, 1, raft + records))


def snapshot_without_its_kraft_version(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    records = voters_committed(checker)
    checker.on_snapshot(2, *snapshot(3, 1, [dynamic_voters(1, 2, 3).to_record().encode(),
                                            *records]))


def snapshot_with_a_record_too_many(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    checker.on_snapshot(2, *snapshot(2, 1, [b"x", b"y", b"z"]))


def snapshot_of_an_earlier_epoch(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.on_high_watermark(fake_node(1, log=log_with((1, [b"x", b"y"]), (2, [b"z"]))), 3)
    checker.on_snapshot(2, *snapshot(3, 1, [b"x", b"y", b"z"]))


def snapshot_that_does_not_read(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    snapshot_id, data = snapshot(2, 1, [b"x", b"y"])
    checker.on_snapshot(2, snapshot_id, data[:-1])


def snapshot_above_the_committed_offset(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    checker.on_snapshot(2, *snapshot(3, 1, [b"x", b"y", b"z"]))


def log_start_above_the_committed_offset(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.on_high_watermark(fake_node(1, log=log_with((1, [b"x"]))), 1)
    checker.on_high_watermark(node_starting_at(2, SnapshotId(2, 1), node_id=2), 3)


def state_loaded_with_another_record(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    checker.on_applied_state(fake_node(2), [b"x", b"w"], 1, "loaded snapshot 2-1")


def state_loaded_above_the_committed_offset(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    checker.on_applied_state(fake_node(2), [b"x", b"y", b"z"], 1, "loaded snapshot 3-1")


def state_rebuilt_in_another_epoch(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    committed_xy(checker)
    checker.on_applied_state(fake_node(2), [b"x", b"y"], 2, "rebuilt from snapshot 2-2")


def snapshot_loaded_below_the_high_watermark(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    node = fake_node(1, log=log_with((1, [b"x", b"y"])))
    checker.on_high_watermark(node, 2)
    checker.on_snapshot_loaded(node, SnapshotId(1, 1))


def log_start_past_the_applied_records(skip: Skip = ()) -> None:
    checker = Checker([1, 2, 3], [], skip=skip)
    checker.check_applicable(node_starting_at(2, SnapshotId(2, 1)), 1, 3)


def dynamic_voters(*ids: int) -> VoterSet:
    """A dynamic run's voter set: node n's directory id is Uuid(n)."""
    return VoterSet(Voter(ReplicaKey(n, Uuid(n))) for n in ids)


def append_voters(skip: Skip, *, previous: VoterSet, previous_offset: int | None,
                  new: VoterSet, hw: int = 10, spare: Any = None) -> None:
    checker = Checker([1, 2, 3], [4], skip=skip, dynamic=True)
    leader = fake_node(1, leader=True, hw=hw)
    checker.on_voters_appended(leader, 20, previous=previous, previous_offset=previous_offset,
                               new=new, nodes={} if spare is None else {4: spare},
                               max_lag=5)


def voter_change_while_previous_uncommitted(skip: Skip = ()) -> None:
    append_voters(skip, previous=dynamic_voters(1, 2, 3), previous_offset=10,
                  new=dynamic_voters(1, 2))


def two_voters_changed_in_one_record(skip: Skip = ()) -> None:
    append_voters(skip, previous=dynamic_voters(1, 2, 3), previous_offset=4,
                  new=dynamic_voters(1))


def own_epoch_leader(hw: int, *batches: tuple[int, list[bytes]]) -> SimpleNamespace:
    """The leader (node 1) of epoch 3 over `batches`, at high watermark `hw`."""
    return fake_node(1, leader=True, epoch=3, hw=hw, log=log_with(*batches))


def append_voters_as(checker: Checker, leader: SimpleNamespace) -> None:
    checker.on_voters_appended(leader, 20, previous=dynamic_voters(1, 2, 3),
                               previous_offset=None, new=dynamic_voters(1, 2), nodes={},
                               max_lag=5)


def voter_change_before_own_epoch_committed(skip: Skip = ()) -> None:
    """Epoch 3 began at offset 5 (after epochs 1 and 2); nothing of it is committed."""
    append_voters_as(Checker([1, 2, 3], [], skip=skip, dynamic=True),
                     own_epoch_leader(5, (1, [b"a", b"b"]), (2, [b"c"] * 3), (3, [b"f"])))


def voter_change_before_own_epoch_committed_at_log_start(skip: Skip = ()) -> None:
    """The same, with the log starting where epoch 3 does: its first record is there."""
    leader = own_epoch_leader(5, (1, [b"a", b"b"]), (2, [b"c"] * 3), (3, [b"f"]))
    leader.log.advance_start(5)
    append_voters_as(Checker([1, 2, 3], [], skip=skip, dynamic=True), leader)


def voter_added_far_behind(skip: Skip = ()) -> None:
    spare = fake_node(4, log=log_with((1, [b"x"] * 14)))
    spare.directory_id = Uuid(4)
    append_voters(skip, previous=dynamic_voters(1, 2, 3), previous_offset=None,
                  new=dynamic_voters(1, 2, 3, 4), spare=spare)


def voter_added_with_a_lost_directory(skip: Skip = ()) -> None:
    spare = fake_node(4, log=log_with((1, [b"x"] * 20)))
    spare.directory_id = Uuid(44)  # formatted anew since
    append_voters(skip, previous=dynamic_voters(1, 2, 3), previous_offset=None,
                  new=dynamic_voters(1, 2, 3, 4), spare=spare)


Plant = Callable[..., None]
PLANTS: dict[str, tuple[Plant, ...]] = {
    ONE_VOTER_CHANGE: (voter_change_while_previous_uncommitted,
                       two_voters_changed_in_one_record,
                       voter_change_before_own_epoch_committed,
                       voter_change_before_own_epoch_committed_at_log_start),
    ADDED_VOTER_CAUGHT_UP: (voter_added_far_behind, voter_added_with_a_lost_directory),
    ONE_LEADER_PER_EPOCH: (two_leaders_in_one_epoch, follower_of_another_leader_in_a_led_epoch),
    LOG_MATCHING: (different_records_at_one_offset_and_epoch, same_entry_after_different_epochs),
    COMMITTED_DATA: (committed_entry_changed_on_another_node,
                     truncation_below_own_high_watermark, new_leader_without_a_committed_entry,
                     new_leader_with_another_committed_entry),
    HW_MONOTONIC: (high_watermark_going_back,),
    HW_WITHIN_LOG: (high_watermark_past_log_end_after_an_event,
                    high_watermark_reported_past_log_end),
    OBSERVER_NEVER_VOTES: (vote_request_to_an_observer, vote_request_from_an_observer,
                           vote_granted_by_an_observer,
                           vote_granted_per_partition_by_an_observer, observer_campaigning,
                           vote_granted_by_another_directory,
                           leader_change_counting_an_observer),
    MAJORITY_HOLDS_HW: (high_watermark_held_by_a_minority, high_watermark_held_unflushed_only,
                        high_watermark_held_by_diverging_voters,
                        high_watermark_held_by_a_minority_of_keys),
    ACKNOWLEDGED_WRITES: (acknowledged_write_lost_in_a_crash,
                          acknowledged_write_recovered_as_another),
    EPOCH_MONOTONIC: (persisted_epoch_going_back,),
    ONE_VOTE_PER_EPOCH: (persisted_second_vote_in_one_epoch, two_votes_sent_in_one_epoch,
                         candidate_granting_another_in_its_epoch,
                         second_vote_granted_per_partition),
    SNAPSHOT_AT_LOG_START: (log_start_without_a_snapshot, log_start_with_a_snapshot_elsewhere),
    SNAPSHOT_MATCHES_COMMITTED: (snapshot_with_another_record, snapshot_short_of_a_record,
                                 snapshot_of_another_epoch, snapshot_that_does_not_read,
                                 snapshot_carrying_another_voter_set,
                                 snapshot_with_a_record_too_many, snapshot_of_an_earlier_epoch,
                                 snapshot_without_its_kraft_version),
    SNAPSHOT_WITHIN_COMMITTED: (snapshot_above_the_committed_offset,
                                log_start_above_the_committed_offset),
    APPLIED_STATE: (state_loaded_with_another_record, state_loaded_above_the_committed_offset,
                    state_rebuilt_in_another_epoch, snapshot_loaded_below_the_high_watermark,
                    log_start_past_the_applied_records),
}
# What each plant's violation says: the nodes, offsets and epochs involved.
DETAILS: dict[Plant, str] = {
    voter_change_while_previous_uncommitted:
        f"leader 1 appended voters {dynamic_voters(1, 2)} at 20 while the VotersRecord at "
        "10 was uncommitted (high watermark 10)",
    two_voters_changed_in_one_record:
        f"leader 1 changed voters {dynamic_voters(1, 2, 3)} -> {dynamic_voters(1)} at 20",
    voter_change_before_own_epoch_committed:
        f"leader 1 of epoch 3 appended voters {dynamic_voters(1, 2)} at 20 before a record of "
        "its epoch (from 5) committed (high watermark 5)",
    voter_change_before_own_epoch_committed_at_log_start:
        f"leader 1 of epoch 3 appended voters {dynamic_voters(1, 2)} at 20 before a record of "
        "its epoch (from 5) committed (high watermark 5)",
    voter_added_far_behind: f"leader 1 added voter {ReplicaKey(4, Uuid(4))} at offset 20 "
                            "holding only 14 records (more than 5 behind)",
    voter_added_with_a_lost_directory:
        f"leader 1 added voter {ReplicaKey(4, Uuid(4))}, a replica that does not exist",
    two_leaders_in_one_epoch: "nodes 1 and 2 both led epoch 1",
    follower_of_another_leader_in_a_led_epoch: "node 2 follows 3 in epoch 1, led by 1",
    different_records_at_one_offset_and_epoch:
        "node 2 has a different record at offset 0 epoch 1",
    same_entry_after_different_epochs:
        "node 2 has a different preceding epoch at offset 1 epoch 3",
    committed_entry_changed_on_another_node:
        "node 2 committed offset 0 epoch 2, but epoch 1 was committed there",
    truncation_below_own_high_watermark: "node 1 truncated to 1, below its high watermark 2",
    new_leader_without_a_committed_entry:
        "leader 2 of epoch 2 ends at 1, without offset 1 committed in epoch 1",
    new_leader_with_another_committed_entry:
        "leader 2 of epoch 2 has a different entry at offset 0, committed in epoch 1",
    high_watermark_going_back: "node 1 high watermark went from 2 to 1",
    high_watermark_past_log_end_after_an_event: "node 1 high watermark 3 is past its log end 2",
    high_watermark_reported_past_log_end: "node 1 reported high watermark 2 past its log end 1",
    vote_request_to_an_observer: "VoteRequest from 1 to 4 involves an observer",
    vote_request_from_an_observer: "VoteRequest from 4 to 1 involves an observer",
    vote_granted_by_an_observer: "observer 4 granted a vote to 1",
    vote_granted_per_partition_by_an_observer: "observer 4 granted a vote to 1",
    observer_campaigning: "observer 4 is candidate in epoch 1",
    vote_granted_by_another_directory:
        f"node 2 (directory {Uuid(22)}) granted 1 a vote asked of directory {Uuid(2)}",
    leader_change_counting_an_observer:
        "leader 1 of epoch 3 counts votes of non-voters [4] (offset 2)",
    high_watermark_held_by_a_minority: "leader 1 has high watermark 2 but only voters [1] hold it",
    high_watermark_held_unflushed_only:
        "leader 1 has high watermark 2 but only voters [1] hold it",
    high_watermark_held_by_diverging_voters:
        "leader 1 has high watermark 2 but only voters [1] hold it",
    high_watermark_held_by_a_minority_of_keys:
        f"leader 1 has high watermark 2 but only these voters hold it: "
        f"{dynamic_voters(1, 2, 3)}: [1] (lost 0); {dynamic_voters(*range(1, 8))}: [1] (lost 2)",
    acknowledged_write_lost_in_a_crash:
        "node 1 recovered a log ending at 1, but its disk acknowledged writes up to 2",
    acknowledged_write_recovered_as_another:
        "node 1 recovered epoch 1 at offset 0, not the entry its disk acknowledged there",
    persisted_epoch_going_back: "node 1 persisted epoch 2 after epoch 3",
    persisted_second_vote_in_one_epoch: "node 1 voted for 1 and then 2 in epoch 3",
    two_votes_sent_in_one_epoch: "voter 2 voted for 1 and then for 3 in epoch 3",
    candidate_granting_another_in_its_epoch: "voter 1 voted for 1 and then for 3 in epoch 2",
    second_vote_granted_per_partition: "voter 2 voted for 1 and then for 3 in epoch 3",
    log_start_without_a_snapshot:
        "node 1's log starts at 2 (epoch 1) but it holds no snapshot 2-1 (newest: none)",
    log_start_with_a_snapshot_elsewhere:
        "node 1's log starts at 2 (epoch 1) but it holds no snapshot 2-1 (newest: 3-1)",
    snapshot_with_another_record:
        "node 2 holds snapshot 2-1: record at offset 1 differs from the committed one",
    snapshot_short_of_a_record: "node 2 holds snapshot 2-1: 1 records where 2 are committed",
    snapshot_of_another_epoch:
        "node 2 holds snapshot 2-2: epoch 2, but the last record was committed in epoch 1",
    snapshot_with_a_record_too_many: "node 2 holds snapshot 2-1: 3 records where 2 are "
                                     "committed",
    snapshot_of_an_earlier_epoch:
        "node 2 holds snapshot 3-1: epoch 1, but the last record was committed in epoch 2",
    snapshot_carrying_another_voter_set:
        f"node 2 holds snapshot 3-1: it carries {dynamic_voters(1, 2).to_record()} where the "
        f"committed records leave {dynamic_voters(1, 2, 3).to_record()} in force",
    snapshot_without_its_kraft_version:
        f"node 2 holds snapshot 3-1: it carries None where the committed records leave "
        f"{VERSION_1} in force",
    snapshot_that_does_not_read: "node 2 holds snapshot 2-1: it does not read: truncated: "
                                 "42 bytes of an incomplete batch at the end",
    snapshot_above_the_committed_offset:
        "node 2 holds snapshot 3-1, ending above the committed offset 2",
    log_start_above_the_committed_offset:
        "node 2 has high watermark 3 over a log starting at 2, above the committed offset 1",
    state_loaded_with_another_record: "node 2's state loaded snapshot 2-1: record at offset 1 "
                                      "differs from the committed one",
    state_loaded_above_the_committed_offset:
        "node 2's state loaded snapshot 3-1: it ends at 3, above the committed offset 2",
    state_rebuilt_in_another_epoch: "node 2's state rebuilt from snapshot 2-2: epoch 2, but "
                                    "the last record was committed in epoch 1",
    snapshot_loaded_below_the_high_watermark:
        "node 1 loaded snapshot 1-1 below its high watermark 2",
    log_start_past_the_applied_records:
        "node 1 applied up to 1 but its log starts at 2: records [1, 2) were never applied",
}
ALL_PLANTS = [(name, plant) for name, plants in PLANTS.items() for plant in plants]
# What `skip` turns off: the committed-data checks, the majority check and the vote
# history built from the votes sent (a quorum-state overwritten is still caught).
SKIPPABLE = {COMMITTED_DATA: PLANTS[COMMITTED_DATA],
             MAJORITY_HOLDS_HW: PLANTS[MAJORITY_HOLDS_HW],
             ACKNOWLEDGED_WRITES: PLANTS[ACKNOWLEDGED_WRITES],
             ONE_VOTE_PER_EPOCH: PLANTS[ONE_VOTE_PER_EPOCH][1:],
             **{name: PLANTS[name] for name in (SNAPSHOT_AT_LOG_START,
                                                SNAPSHOT_MATCHES_COMMITTED,
                                                SNAPSHOT_WITHIN_COMMITTED, APPLIED_STATE)}}


def plant_id(value: object) -> str:
    return getattr(value, "__name__", str(value))


def test_every_invariant_has_a_plant() -> None:
    """A new name in `INVARIANTS` needs a plant here (liveness: the sweep's, below)."""
    assert set(PLANTS) | {LIVENESS} == set(INVARIANTS)
    assert set(DETAILS) == {plant for _, plant in ALL_PLANTS}


@pytest.mark.parametrize(("invariant", "plant"), ALL_PLANTS, ids=plant_id)
def test_checker_raises_invariant_when_violation_planted(invariant: str, plant: Plant) -> None:
    """Raised by name, with a detail naming what broke (what a sweep prints)."""
    assert raises(invariant, plant).detail == DETAILS[plant]


@pytest.mark.parametrize(("invariant", "plant"), ALL_PLANTS, ids=plant_id)
def test_checker_raises_invariant_when_others_skipped(invariant: str, plant: Plant) -> None:
    """Skipping the other invariants does not hide this one."""
    raises(invariant, lambda: plant(skip=[name for name in INVARIANTS if name != invariant]))


@pytest.mark.parametrize(("invariant", "plant"),
                         [(name, plant) for name, plants in SKIPPABLE.items()
                          for plant in plants], ids=plant_id)
def test_checker_quiet_when_planted_invariant_skipped(invariant: str, plant: Plant) -> None:
    plant(skip=[invariant])


def test_persisted_second_vote_caught_when_vote_history_skipped() -> None:
    raises(ONE_VOTE_PER_EPOCH, lambda: persisted_second_vote_in_one_epoch(
        skip=[ONE_VOTE_PER_EPOCH]))


def test_violation_carries_its_invariant_and_detail_when_raised() -> None:
    """The exception names the invariant and says what broke; the cluster fills in
    `sim_cluster` (for the trace) only while it is unset."""
    violation = raises(HW_MONOTONIC, high_watermark_going_back)
    assert violation.detail == "node 1 high watermark went from 2 to 1"
    assert str(violation) == f"{HW_MONOTONIC}: node 1 high watermark went from 2 to 1"
    assert violation.sim_cluster is None


# ---- near misses: what the invariants allow -------------------------------------------------

def test_persisted_state_allowed_when_epoch_and_vote_move_forward() -> None:
    """The first state, the same one again, a later epoch with another vote, a vote cast
    after none and a vote dropped with the leader known are all fine."""
    checker = Checker([1, 2, 3], [])
    checker.on_persist(1, None, ElectionState(epoch=5, voted_id=1))
    checker.on_persist(1, ElectionState(epoch=3), ElectionState(epoch=3))
    checker.on_persist(1, ElectionState(epoch=3, voted_id=1), ElectionState(epoch=3, voted_id=1))
    checker.on_persist(1, ElectionState(epoch=3, voted_id=1), ElectionState(epoch=4, voted_id=2))
    checker.on_persist(1, ElectionState(epoch=4), ElectionState(epoch=4, voted_id=2))
    checker.on_persist(1, ElectionState(epoch=4, voted_id=2),
                       ElectionState(epoch=4, leader_id=3))


def test_observer_allowed_when_fetching_or_refusing_a_vote() -> None:
    """Observers fetch, and answering a (misrouted) vote request with a refusal is no
    vote; only requests to or from them and grants by them are."""
    checker = Checker([1, 2, 3], [4])
    fetch = FetchRequest(cluster_id="c", replica_id=4, current_leader_epoch=1, fetch_offset=0,
                         last_fetched_epoch=0)
    checker.on_send(4, 1, fetch)
    checker.on_send(1, 4, fetch)
    checker.on_send(4, 1, VoteResponse(leader_epoch=1, vote_granted=False))
    checker.on_send(4, 1, partitioned_answer(1, False))
    checker.on_send(4, 1, VoteResponsePartitions(leader_epoch=1, topics=()))
    checker.on_send(4, 1, VoteResponsePartitions(leader_epoch=1, topics=(
        SimpleNamespace(), SimpleNamespace(partitions=(SimpleNamespace(),)))))
    checker.on_send(4, 1, VoteResponseBare())


def test_vote_not_counted_when_the_answer_names_no_epoch() -> None:
    @dataclass(frozen=True)
    class VoteResponseNoEpoch:
        vote_granted: bool = True

    checker = Checker([1, 2, 3], [])
    grant(checker, voter=2, candidate=1, epoch=3, cid=1, answer=VoteResponseNoEpoch())
    grant(checker, voter=2, candidate=3, epoch=3, cid=2, answer=VoteResponseBare())
    assert checker.votes == {(1, 3): 1, (3, 3): 3}


def test_votes_recorded_when_granted_for_the_asked_epoch_only() -> None:
    """A vote counts when a real (not pre-) vote request in an epoch is granted in that
    epoch: pre-votes, refusals, answers for another epoch and answers to no known
    request are not votes; a candidate's request is its own vote."""
    checker = Checker([1, 2, 3], [])
    grant(checker, voter=2, candidate=1, epoch=4, cid=1, pre_vote=True)
    grant(checker, voter=2, candidate=3, epoch=4, cid=2, pre_vote=True)
    grant(checker, voter=3, candidate=1, epoch=4, cid=3,
          answer=VoteResponse(leader_epoch=4, vote_granted=False))
    grant(checker, voter=3, candidate=2, epoch=5, cid=4,
          answer=VoteResponse(leader_epoch=6, vote_granted=True))
    checker.on_send(3, 1, VoteResponse(leader_epoch=7, vote_granted=True), correlation_id=9)
    assert checker.votes == {(1, 4): 1, (2, 5): 2}
    grant(checker, voter=2, candidate=3, epoch=4, cid=5)
    grant(checker, voter=2, candidate=3, epoch=4, cid=5)
    assert checker.votes == {(1, 4): 1, (2, 5): 2, (3, 4): 3, (2, 4): 3}


def test_vote_counted_when_request_has_no_pre_vote_field() -> None:
    """A Vote request without a `pre_vote` field (an older version) asks for a real vote."""
    @dataclass(frozen=True)
    class VoteRequestV0:
        candidate_epoch: int

    checker = Checker([1, 2, 3], [])
    checker.on_send(1, 2, VoteRequestV0(candidate_epoch=2), correlation_id=1)
    assert checker.votes == {(1, 2): 1}


def test_truncation_allowed_when_at_high_watermark_or_after_a_restart() -> None:
    """Truncating at the node's high watermark is fine; after a restart the node has
    published nothing yet in this incarnation."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y", b"z"])))
    checker.on_high_watermark(a, 2)
    checker.on_truncate(a, 2)
    checker.on_restart(a)
    checker.on_truncate(a, 0)


def test_log_rechecked_when_rewritten_after_a_truncation() -> None:
    """A node that truncated and wrote other records there has them checked again,
    whether the checker heard of the truncation or saw the log shrink."""
    for told in (True, False):
        checker = Checker([1, 2, 3], [])
        a = fake_node(1, log=log_with((1, [b"x", b"y"])))
        b = fake_node(2, log=log_with((1, [b"x"]), (2, [b"w"])))
        checker.after_event(a, [a, b])
        checker.after_event(b, [a, b])
        a.log.truncate_to(1)
        if told:
            checker.on_truncate(a, 1)
        else:
            checker.after_event(a, [a, b])
        a.log.append(2, [b"z"])
        a.log.flush()
        raises(LOG_MATCHING, lambda: checker.after_event(a, [a, b]))  # noqa: B023


@pytest.mark.parametrize("wiped", [True, False], ids=["wiped", "restarted"])
def test_log_rechecked_from_start_when_node_restarted(wiped: bool) -> None:
    """A node back from a restart (its disk wiped and refilled, or not) with other
    records is checked from offset 0 again."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y"])))
    checker.after_event(a, [a])
    a.log = log_with((1, [b"z", b"y"]))
    checker.on_restart(a, wiped=wiped)
    raises(LOG_MATCHING, lambda: checker.after_event(a, [a]))


def test_log_checked_incrementally_when_it_grows() -> None:
    """A log checked up to its durable end is checked from there on when it grows, the
    entry before the new ones giving the preceding epoch; unflushed entries wait."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x"])))
    b = fake_node(2, log=log_with((1, [b"x"]), (3, [b"y"])))
    checker.after_event(b, [a, b])
    checker.after_event(a, [a, b])
    a.log.append(3, [b"y"])
    a.log.flush()
    checker.after_event(a, [a, b])  # the same history, grown: fine

    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x"])))
    b = fake_node(2, log=log_with((2, [b"x"]), (3, [b"y"])))
    checker.after_event(b, [a, b])
    checker.after_event(a, [a, b])
    a.log.append(3, [b"y"])
    checker.after_event(a, [a, b])
    a.log.flush()
    raises(LOG_MATCHING, lambda: checker.after_event(a, [a, b]))


def test_high_watermark_allowed_when_repeated_or_recovering() -> None:
    """The same HW twice is fine; after a restart the node may publish less until it is
    back at its largest HW (equal is back), then never less again."""
    checker = Checker([1], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y", b"z"])))
    checker.on_high_watermark(a, 2)
    checker.on_high_watermark(a, 2)
    checker.on_restart(a)
    checker.on_high_watermark(a, 1)
    checker.on_high_watermark(a, 0)
    checker.on_high_watermark(a, 2)
    raises(HW_MONOTONIC, lambda: checker.on_high_watermark(a, 1))


def test_high_watermark_monotonic_when_restarted_before_publishing() -> None:
    """A node that never published a HW is not recovering after a restart."""
    checker = Checker([1], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y"])))
    checker.on_restart(a)
    checker.on_high_watermark(a, 2)
    raises(HW_MONOTONIC, lambda: checker.on_high_watermark(a, 1))


def test_high_watermark_history_restarts_when_disk_wiped() -> None:
    """A wiped node starts over: it may publish less than before the wipe, and then is
    not recovering (its largest HW is what it published since the wipe)."""
    checker = Checker([1], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y", b"z"])))
    checker.on_high_watermark(a, 3)
    a.log = log_with((1, [b"x", b"y", b"z"]))
    checker.on_restart(a, wiped=True)
    checker.on_high_watermark(a, 2)
    raises(HW_MONOTONIC, lambda: checker.on_high_watermark(a, 1))
    checker = Checker([1], [])
    checker.on_high_watermark(a, 3)
    checker.on_restart(a, wiped=True)
    checker.on_high_watermark(a, 1)
    checker.on_restart(a)
    checker.on_high_watermark(a, 0)
    checker.on_high_watermark(a, 1)
    raises(HW_MONOTONIC, lambda: checker.on_high_watermark(a, 0))


def test_committed_data_rechecked_when_node_restarted() -> None:
    """After a restart the node's log below its HW is compared again: a disk that came
    back with another record there is caught."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x"])))
    checker.on_high_watermark(a, 1)
    checker.on_restart(a)
    a.log = log_with((2, [b"y"]))
    raises(COMMITTED_DATA, lambda: checker.on_high_watermark(a, 1))


def test_committed_data_rechecked_when_truncated_while_recovering() -> None:
    """A recovering node may publish less than before; truncating there and writing
    another record over one it had published as committed is caught."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y", b"z"])))
    checker.on_high_watermark(a, 3)
    checker.on_restart(a)
    checker.on_high_watermark(a, 2)
    checker.on_high_watermark(a, 1)
    checker.on_truncate(a, 1)
    rewrite(a.log, 1, 2, [b"w", b"v"])
    raises(COMMITTED_DATA, lambda: checker.on_high_watermark(a, 2))


def test_committed_data_compared_when_high_watermark_moves_inside_a_batch() -> None:
    """Only [old HW, new HW) is new; entries above the HW are not committed, so another
    node may commit other records there."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y", b"z"])))
    checker.on_high_watermark(a, 1)
    checker.on_high_watermark(fake_node(2, log=log_with((1, [b"x", b"w"]))), 2)
    raises(COMMITTED_DATA, lambda: checker.on_high_watermark(a, 2))

    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y", b"z"])))
    checker.on_high_watermark(a, 1)
    checker.on_high_watermark(a, 2)
    b = fake_node(2, log=log_with((1, [b"x", b"y", b"w"])))
    checker.on_high_watermark(b, 3)
    assert checker.committed == [entry_of(1, b"x"), entry_of(1, b"y"), entry_of(1, b"w")]
    c = fake_node(3, log=log_with((1, [b"x", b"v"])))
    raises(COMMITTED_DATA, lambda: checker.on_high_watermark(c, 2))


def test_high_watermark_allowed_when_at_log_end_or_unknown() -> None:
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, hw=2, log=log_with((1, [b"x", b"y"])))
    checker.after_event(a, [a])
    checker.on_high_watermark(a, 2)
    b = fake_node(2, hw=None)
    checker.after_event(b, [b])


def test_down_node_not_checked_when_core_is_gone() -> None:
    checker = Checker([1, 2, 3], [])
    down = SimpleNamespace(node_id=1, is_voter=True, core=None, log=None)
    checker.after_event(down, [down])
    assert checker.leaders == {}


def test_leaders_allowed_when_one_per_epoch() -> None:
    """A leader seen again, followers of the epoch's leader, followers naming a leader
    of an epoch not yet led, and leaders of other epochs are all fine."""
    checker = Checker([1, 2, 3], [4])
    a = fake_node(1, leader=True)
    nodes = [a, fake_node(2, leader_id=1), fake_node(3, epoch=2, leader_id=3),
             fake_node(4, voter=False, leader_id=1), fake_node(3, epoch=3, leader=True),
             fake_node(2)]
    for n in nodes + [a]:
        checker.after_event(n, nodes)
    assert checker.leaders == {1: 1, 3: 3}


@pytest.mark.parametrize("role", ["candidate", "prospective", "voted", "leader"])
def test_observer_caught_when_in_a_voter_only_role(role: str) -> None:
    checker = Checker([1, 2, 3], [4])
    observer = fake_node(4, voter=False, role=role, leader=role == "leader", hw=None)
    raises(OBSERVER_NEVER_VOTES, lambda: checker.after_event(observer, [observer]))


def test_leader_change_allowed_when_only_voters_grant_or_no_leader_change() -> None:
    """The first record of the leader's epoch is read: a LeaderChange of voters, a data
    record, another control record, or nothing of that epoch yet are fine; so is a
    later LeaderChange of that epoch (not the election's)."""
    logs = [log_with((1, [leader_change(1, 2)])),
            log_with((1, [b"x"]), (2, [b"data"])),
            log_with((2, [MetadataTopic(topic_id=Uuid(7)).encode()])),
            log_with((1, [b"x"])),
            log_with((2, [leader_change(1, 2), leader_change(1, 4)]))]
    for epoch, log in zip([1, 2, 2, 2, 2], logs, strict=True):
        checker = Checker([1, 2, 3], [4])
        leader = fake_node(1, epoch=epoch, leader=True, hw=None, log=log)
        checker.after_event(leader, [leader])


def test_leader_change_read_when_leader_log_starts_at_its_epoch() -> None:
    checker = Checker([1, 2, 3], [4])
    leader = fake_node(1, epoch=2, leader=True, hw=None, log=log_with((2, [leader_change(2, 4)])))
    raises(OBSERVER_NEVER_VOTES, lambda: checker.after_event(leader, [leader]))


def test_new_leader_allowed_when_not_bound_by_the_commit() -> None:
    """Leader completeness binds leaders of epochs above the commit's (Raft §5.4): a
    stale leader of an older epoch, or the leader of the committing epoch itself, may
    lack the entry; entries committed in the leader's epoch or later are not required."""
    checker = Checker([1, 2, 3], [])
    follower = fake_node(2, epoch=2, leader_id=1, log=log_with((2, [b"x"])))
    checker.on_high_watermark(follower, 1)
    for leader in (fake_node(3, epoch=1, leader=True, hw=None), fake_node(1, epoch=2, leader=True,
                                                                 hw=None)):
        checker.after_event(leader, [follower, leader])
    later = fake_node(3, epoch=4, leader_id=1, log=log_with((2, [b"x"]), (4, [b"y"])))
    checker.on_high_watermark(later, 2)
    leader = fake_node(2, epoch=3, leader=True, hw=None, log=log_with((2, [b"x"]), (3, [b"z"])))
    checker.after_event(leader, [leader])
    newer = fake_node(1, epoch=5, leader=True, hw=None, log=log_with((2, [b"x"]), (3, [b"z"])))
    raises(COMMITTED_DATA, lambda: checker.after_event(newer, [newer]))


def test_commit_epoch_lowered_when_an_older_epoch_reports_it() -> None:
    """An entry's commit epoch is the earliest any node reported it committed in."""
    checker = Checker([1, 2, 3], [])
    checker.on_high_watermark(fake_node(1, epoch=3, log=log_with((1, [b"x"]))), 1)
    checker.on_high_watermark(fake_node(2, epoch=1, log=log_with((1, [b"x"]))), 1)
    checker.on_high_watermark(fake_node(3, epoch=4, log=log_with((1, [b"x"]))), 1)
    assert checker.commit_epochs == [1]
    leader = fake_node(3, epoch=2, leader=True, hw=None)
    raises(COMMITTED_DATA, lambda: checker.after_event(leader, [leader]))


def test_commit_epoch_zero_when_reported_without_a_core() -> None:
    """A HW reported by a node whose core is gone is taken as committed in epoch 0, so
    the leader of any epoch must hold it."""
    checker = Checker([1, 2, 3], [])
    checker.on_high_watermark(SimpleNamespace(node_id=1, is_voter=True, core=None,
                                              log=log_with((1, [b"x"]))), 1)
    assert checker.commit_epochs == [0]
    leader = fake_node(2, epoch=1, leader=True, hw=None)
    raises(COMMITTED_DATA, lambda: checker.after_event(leader, [leader]))


@pytest.mark.parametrize(("voters", "holding"), [(3, 2), (4, 3), (5, 3)])
def test_majority_allowed_when_exactly_a_majority_holds(voters: int, holding: int) -> None:
    """Exactly a majority of voters with a flushed end at the leader's HW is enough; one
    fewer is not."""
    ids = list(range(1, voters + 1))
    full = log_with((1, [b"x", b"y"]))
    for count, fails in ((holding, False), (holding - 1, True)):
        checker = Checker(ids, [voters + 1])
        leader = fake_node(1, leader=True, hw=2, log=full)
        nodes = [leader] + [fake_node(i, log=full if i <= count else log_with((1, [b"x"])))
                            for i in ids[1:]] + [fake_node(voters + 1, voter=False, log=full)]
        if fails:
            raises(MAJORITY_HOLDS_HW, lambda: checker.after_event(leader, nodes))  # noqa: B023
        else:
            checker.after_event(leader, nodes)


def test_majority_not_checked_when_no_leader_hw() -> None:
    """Followers and a leader with no high watermark yet (None or 0) need no majority."""
    checker = Checker([1, 2, 3], [])
    nodes = [fake_node(1, hw=2, log=log_with((1, [b"x", b"y"]))), fake_node(2),
             fake_node(3, leader=True, hw=None), fake_node(3, epoch=2, leader=True, hw=0)]
    for n in nodes:
        checker.after_event(n, nodes)


@pytest.mark.parametrize("how", ["truncated", "wiped", "high watermark moved"])
def test_majority_rechecked_when_a_voter_loses_records_or_hw_moves(how: str) -> None:
    """The majority found for (leader, epoch, HW) is looked for again after a voter's
    truncation or wipe, and when the HW moves."""
    checker = Checker([1, 2, 3], [])
    leader = fake_node(1, leader=True, hw=1, log=log_with((1, [b"x", b"y"])))
    voter = fake_node(2, log=log_with((1, [b"x", b"y"])))
    nodes = [leader, voter, fake_node(3)]
    checker.after_event(leader, nodes)
    if how == "high watermark moved":
        voter.log = log_with((1, [b"x"]))
        checker.after_event(leader, nodes)
        leader.core.high_watermark = 2
    else:
        voter.log = SimLog()
        if how == "truncated":
            checker.on_truncate(voter, 0)
        else:
            checker.on_restart(voter, wiped=True)
    raises(MAJORITY_HOLDS_HW, lambda: checker.after_event(leader, nodes))


def test_snapshot_allowed_when_it_holds_a_committed_prefix() -> None:
    """A snapshot ending at or below the committed offset, of exactly those records and
    the last one's epoch, is fine, also again and on another node; an empty one too."""
    checker = Checker([1, 2, 3], [])
    committed_xy(checker)
    for node_id, (end, records) in enumerate([(2, [b"x", b"y"]), (1, [b"x"]), (0, []),
                                              (2, [b"x", b"y"])], start=1):
        checker.on_snapshot(node_id, *snapshot(end, 1 if end else 0, records))


def test_snapshot_allowed_when_raft_records_carry_what_is_in_force() -> None:
    """Raft's records at a snapshot's front (KIP-853) are not applied records: they
    carry the voter set and kraft.version the committed records leave in force, the
    latest of each (a set the records do not name, the bootstrap's, is not compared)."""
    checker = Checker([1, 2, 3], [])
    records = voters_committed(checker)
    later = dynamic_voters(1, 2).to_record().encode()
    checker.on_high_watermark(fake_node(1, log=log_with((1, [*records, later]))), 4)
    version, voters = VERSION_1.encode(), records[1]
    checker.on_snapshot(1, *snapshot(4, 1, [version, later, *records, later]))
    checker.on_snapshot(2, *snapshot(3, 1, [version, voters, *records]))
    checker.on_snapshot(3, *snapshot(2, 1, [version, voters, *records[:2]]))
    checker.on_snapshot(3, *snapshot(1, 1, [version, later, b"x"]))


def test_snapshot_compared_when_another_node_holds_other_bytes_under_its_name() -> None:
    checker = Checker([1, 2, 3], [])
    committed_xy(checker)
    checker.on_snapshot(1, *snapshot(2, 1, [b"x", b"y"]))
    raises(SNAPSHOT_MATCHES_COMMITTED,
           lambda: checker.on_snapshot(2, SnapshotId(2, 1), snapshot(2, 1, [b"x", b"w"])[1]))


def test_snapshot_compared_up_to_the_committed_offset_when_it_ends_above() -> None:
    """With the within-committed check skipped, the records below the committed offset
    are still compared (those above are unknown)."""
    checker = Checker([1, 2, 3], [], skip=[SNAPSHOT_WITHIN_COMMITTED])
    committed_xy(checker)
    checker.on_snapshot(2, *snapshot(3, 2, [b"x", b"y", b"z"]))
    raises(SNAPSHOT_MATCHES_COMMITTED,
           lambda: checker.on_snapshot(2, *snapshot(3, 2, [b"x", b"w", b"z"])))


def test_log_start_allowed_when_its_snapshot_is_held_or_at_zero() -> None:
    """A log starting at 0 needs no snapshot (nor a store); one starting above needs the
    snapshot of its start's offset and epoch, whatever else is held."""
    checker = Checker([1, 2, 3], [])
    nodes = [node_starting_at(0), node_starting_at(2, SnapshotId(2, 1), SnapshotId(1, 1)),
             fake_node(3, log=log_with((1, [b"x"])))]
    for node in nodes:
        checker.after_event(node, nodes)


def test_state_allowed_when_it_is_the_committed_prefix() -> None:
    checker = Checker([1, 2, 3], [])
    committed_xy(checker)
    for records in ([], [b"x"], [b"x", b"y"]):
        checker.on_applied_state(fake_node(2), records, 1 if records else 0, "loaded")


def test_snapshot_load_allowed_when_at_the_high_watermark_and_rechecks_the_log() -> None:
    """A loaded snapshot ending at the node's HW is fine; what the log then holds from
    the snapshot's end is checked again (it held other records there before)."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y"])))
    b = fake_node(2, log=log_with((1, [b"x", b"y"])))
    checker.on_high_watermark(a, 1)
    checker.after_event(a, [a, b])
    checker.after_event(b, [a, b])
    a.log.reset_to(1, 1)
    checker.on_snapshot_loaded(a, SnapshotId(1, 1))
    a.log.append(1, [b"w"])
    a.log.flush()
    raises(LOG_MATCHING, lambda: checker.after_event(a, [a, b]))


def test_majority_rechecked_when_a_voter_loads_a_snapshot_below_its_log_end() -> None:
    """A snapshot replaces a voter's log (its tail above the snapshot diverged): its
    durable end went down, so the majority is looked for again."""
    checker = Checker([1, 2, 3], [])
    leader = fake_node(1, leader=True, hw=2, log=log_with((1, [b"x", b"y", b"z"])))
    voter = fake_node(2, log=log_with((1, [b"x", b"y", b"z"])))
    nodes = [leader, voter, fake_node(3)]
    checker.after_event(leader, nodes)
    voter.log.reset_to(1, 1)
    checker.on_snapshot_loaded(voter, SnapshotId(1, 1))
    raises(MAJORITY_HOLDS_HW, lambda: checker.after_event(leader, nodes))


def test_records_applicable_when_the_log_holds_them_or_none_are_due() -> None:
    """Applying is fine from the log start on, and when nothing is committed past what
    was applied."""
    checker = Checker([1, 2, 3], [])
    node = node_starting_at(2, SnapshotId(2, 1))
    checker.check_applicable(node, 2, 3)
    checker.check_applicable(node, 3, 3)
    checker.check_applicable(node, 1, 1)


def keyed_leader(voters: VoterSet, hw: int) -> SimpleNamespace:
    leader = fake_node(1, leader=True, hw=hw, log=log_with((1, [b"x", b"y"])))
    leader.directory_id = Uuid(1)
    leader.core.voter_history = VoterHistory(voters, kraft_version=1)
    leader.core.voter_set = voters
    return leader


def keyed(node_id: int, directory: int, records: int) -> SimpleNamespace:
    node = fake_node(node_id, log=log_with((1, [b"x", b"y"][:records])) if records else None)
    node.directory_id = Uuid(directory)
    return node



def test_committed_history_extends_from_a_log_starting_at_a_snapshot() -> None:
    """Below a node's log start its snapshot stands in: the history grows from the
    records above it, and a log starting exactly at the committed offset is fine."""
    checker = Checker([1, 2, 3], [])
    checker.on_high_watermark(fake_node(1, log=log_with((1, [b"x"]))), 1)
    trimmed = log_with((1, [b"x", b"y", b"z"]))
    trimmed.advance_start(1)
    checker.on_high_watermark(fake_node(2, log=trimmed), 3)
    assert checker.committed == [entry_of(1, record) for record in (b"x", b"y", b"z")]
    at_end = log_with((1, [b"x", b"y", b"z"]))
    at_end.advance_start(3)
    checker.on_high_watermark(fake_node(3, log=at_end), 3)


def test_majority_counted_against_the_leaders_own_entry() -> None:
    """The reference is the leader's own entry below its high watermark (the committed
    one only below a snapshot it loaded, when known)."""
    checker = Checker([1, 2, 3], [], skip=[COMMITTED_DATA])
    checker.on_high_watermark(fake_node(2, log=log_with((1, [b"x", b"y"]))), 2)
    own = [(1, [b"x"]), (2, [b"w"])]
    leader = fake_node(1, epoch=2, leader=True, hw=2, log=log_with(*own))
    checker.after_event(leader, [leader, fake_node(3, log=log_with(*own))])

    checker = Checker([1, 2, 3], [])
    checker.on_high_watermark(fake_node(3, log=log_with((1, [b"x"]))), 1)
    loaded, also = SimLog(), SimLog()
    loaded.reset_to(2, 1)
    also.reset_to(2, 1)
    leader = fake_node(1, leader=True, hw=2, log=loaded)
    checker.after_event(leader, [leader, fake_node(2, log=also)])


def test_voter_change_allowed_once_a_record_of_the_leaders_epoch_committed() -> None:
    """From the record after the epoch's start on; a first leader's epoch starts at 0."""
    batches = ((1, [b"a", b"b"]), (2, [b"c"] * 3), (3, [b"f"]))
    append_voters_as(Checker([1, 2, 3], [], dynamic=True), own_epoch_leader(6, *batches))
    append_voters_as(Checker([1, 2, 3], [], dynamic=True), own_epoch_leader(1, (3, [b"f"])))


def test_each_voter_change_checked_once_by_leader_offset_and_epoch() -> None:
    """The cluster hands a leader's VotersRecord over once per Ready that holds it: the
    same (leader, offset, epoch) is not judged again, another offset is."""
    checker = Checker([1, 2, 3], [], dynamic=True)
    leader = own_epoch_leader(6, (1, [b"a", b"b"]), (2, [b"c"] * 3), (3, [b"f"]))
    append_voters_as(checker, leader)
    leader.core.high_watermark = 5
    append_voters_as(checker, leader)
    raises(ONE_VOTER_CHANGE, lambda: checker.on_voters_appended(
        leader, 21, previous=dynamic_voters(1, 2, 3), previous_offset=None,
        new=dynamic_voters(1, 2), nodes={}, max_lag=5))


def test_added_voter_allowed_when_exactly_max_lag_behind() -> None:
    spare = fake_node(4, log=log_with((1, [b"x"] * 15)))
    spare.directory_id = Uuid(4)
    append_voters((), previous=dynamic_voters(1, 2, 3), previous_offset=None,
                  new=dynamic_voters(1, 2, 3, 4), spare=spare)


def test_dynamic_run_judges_votes_and_leader_changes_by_the_voter_set() -> None:
    """A dynamic run's observers may become voters: an id outside the bootstrap voters
    may ask for and grant votes, and a LeaderChange may count it when the leader's set
    holds it."""
    checker = Checker([1, 2, 3], [4], dynamic=True)
    grant(checker, voter=4, candidate=1, epoch=2, cid=1)
    grant(checker, voter=1, candidate=4, epoch=3, cid=2)
    leader = fake_node(1, epoch=3, leader=True, hw=None,
                       log=log_with((3, [leader_change(1, 4)])))
    leader.core.voter_set = dynamic_voters(1, 2, 3, 4)
    checker.after_event(leader, [leader])


def test_entries_read_from_inside_a_batch() -> None:
    log = log_with((1, [b"a", b"b", b"c"]), (2, [b"d"]))
    assert list(entries_of(log, 1, 3)) == [(1, 1, b"b"), (2, 1, b"c")]
    assert list(entries_of(log, 2, 2)) == []
    assert list(entries_of(log, 3, 9)) == [(3, 2, b"d")]


# ---- the dynamic quorum: the majority by replica key --------------------------------------

def test_majority_allowed_when_a_lost_key_cannot_vote() -> None:
    """Voter 2's disk was wiped (another directory id now): its old key can never vote
    again, so the leader's copy is in every majority that can still form."""
    checker = Checker([1, 2, 3], [], dynamic=True)
    leader = keyed_leader(dynamic_voters(1, 2, 3), 2)
    checker.after_event(leader, [leader, keyed(2, 22, 2), keyed(3, 3, 0)])


def test_majority_of_previous_set_enough_when_latest_change_at_the_hw() -> None:
    """A VotersRecord at the high watermark itself is not below it: uncommitted, so the
    set before it still decides."""
    checker = Checker([1, 2, 3], [], dynamic=True)
    leader = keyed_leader(dynamic_voters(1, 2, 3), 2)
    leader.core.voter_history.sets.append((2, dynamic_voters(1, 2, 3, 4, 5)))
    checker.after_event(leader, [leader, keyed(2, 2, 2), keyed(3, 3, 0), keyed(4, 4, 0),
                                 keyed(5, 5, 0)])


def test_majority_violated_when_only_a_minority_of_keys_holds() -> None:
    checker = Checker([1, 2, 3, 4, 5], [], dynamic=True)
    leader = keyed_leader(dynamic_voters(1, 2, 3, 4, 5), 2)
    nodes = [leader, keyed(2, 2, 1), keyed(3, 3, 0), keyed(4, 4, 0), keyed(5, 55, 2)]
    with pytest.raises(InvariantViolation) as caught:
        checker.after_event(leader, nodes)
    assert caught.value.invariant == MAJORITY_HOLDS_HW


def test_majority_of_previous_set_enough_when_latest_change_uncommitted() -> None:
    """Voters 4 and 5 were just added (uncommitted at offset 5): the high watermark 2
    was committed by the old set."""
    checker = Checker([1, 2, 3], [], dynamic=True)
    leader = keyed_leader(dynamic_voters(1, 2, 3), 2)
    leader.core.voter_history.sets.append((5, dynamic_voters(1, 2, 3, 4, 5)))
    nodes = [leader, keyed(2, 2, 2), keyed(3, 3, 0), keyed(4, 4, 0), keyed(5, 5, 0)]
    checker.after_event(leader, nodes)
    leader.core.high_watermark = 6  # the addition committed: now the new set's turn
    leader.log = log_with((1, [b"x"] * 6))
    with pytest.raises(InvariantViolation):
        checker.after_event(leader, nodes)


# ---- liveness: the sweep's -----------------------------------------------------------------

LIVENESS_SPEC = RunSpec(voters=3, observers=1, faults="none", liveness_timeouts=2,
                        converge_timeouts=2)


def cut_off_for_good(*cut: int) -> Callable[[SimConfig], Cluster]:
    """A toy-core cluster in which `cut` are isolated from the start and never healed
    (no faults are scheduled, so nothing heals them)."""
    def make(config: SimConfig) -> Cluster:
        cluster = toy_cluster(config)
        for node_id in cut:
            cluster.network.isolate(node_id, cluster.nodes)
        return cluster
    return make


def test_sweep_reports_liveness_when_no_majority_can_ever_meet() -> None:
    """Two of three voters cut off for good: no leader, nothing commits after the heal."""
    results = list(sweep(LIVENESS_SPEC, [1, 2], make_cluster=cut_off_for_good(2, 3)))
    assert len(results) == 1
    assert results[0].invariant == LIVENESS
    assert "committed within 2 election timeouts" in results[0].detail
    assert results[0].replay.endswith("--seed 1 --seeds 1")


def test_sweep_reports_liveness_when_an_observer_never_converges() -> None:
    """The voters commit, but an observer cut off for good never holds their log."""
    [result] = sweep(LIVENESS_SPEC, [1], make_cluster=cut_off_for_good(4))
    assert result.invariant == LIVENESS
    assert "did not converge" in result.detail
    assert "n4:" in result.detail
    assert result.commits > 0


def test_sweep_clean_when_nothing_is_cut() -> None:
    """The same runs with no node cut off pass: the two above fail for the cut alone."""
    assert [r.invariant for r in sweep(LIVENESS_SPEC, [1, 2],
                                       make_cluster=cut_off_for_good())] == [None, None]
