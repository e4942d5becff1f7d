"""The simulator's own parts: network and disk models, invariant checkers, determinism.

Run against a toy core (tests/support/toy_core.py) so that they test the simulator,
not the real core."""

from __future__ import annotations

import random

import pytest

from raft.messages import VoteRequest, VoteResponse
from raft.sim.cluster import Divergences, SimConfig
from raft.sim.disk import DiskConfig, RemovedTail, SimDisk, SimLog
from raft.sim.invariants import (
    COMMITTED_DATA,
    EPOCH_MONOTONIC,
    HW_MONOTONIC,
    LIVENESS,
    LOG_MATCHING,
    MAJORITY_HOLDS_HW,
    OBSERVER_NEVER_VOTES,
    ONE_LEADER_PER_EPOCH,
    ONE_VOTE_PER_EPOCH,
    Checker,
    InvariantViolation,
)
from raft.sim.network import Network, NetworkConfig
from raft.sim.scenarios import new_cluster, wait_for_commit, wait_for_leader
from raft.sim.sweep import RunSpec, require_convergence, run_seed
from raft.types import ElectionState
from tests.support.checker_fakes import fake_node, log_with, toy_cluster

# ---- network ------------------------------------------------------------------------

def test_partition_cuts_links_both_ways_when_groups_split() -> None:
    """Symmetric partition: no link between the two sides, links within a side stay."""
    net = Network(NetworkConfig(), random.Random(1))
    net.partition([1, 2], [3, 4, 5])
    assert not net.is_up(1, 3)
    assert not net.is_up(5, 2)
    assert net.is_up(1, 2)
    assert net.is_up(3, 5)
    net.heal()
    assert net.is_up(1, 3)
    assert net.is_healed


def test_one_way_cut_keeps_reverse_link_when_only_outbound_is_cut() -> None:
    """One-way partitions: a node that can hear but not speak (or the reverse)."""
    net = Network(NetworkConfig(), random.Random(1))
    net.isolate(1, [1, 2, 3], inbound=False, outbound=True)
    assert not net.is_up(1, 2)
    assert net.is_up(2, 1)
    assert net.delivery_delays_us(1, 3) == []
    assert len(net.delivery_delays_us(3, 1)) == 1


def test_only_links_leaves_exactly_kip996_links_when_applied() -> None:
    """KIP-996's partial partition: only 1-3, 2-4, 3-4, 3-5, 4-5 are up."""
    net = Network(NetworkConfig(), random.Random(1))
    net.only_links(range(1, 6), [(1, 3), (2, 4), (3, 4), (3, 5), (4, 5)])
    up = {(a, b) for a in range(1, 6) for b in range(1, 6) if a < b and net.is_up(a, b)}
    assert up == {(1, 3), (2, 4), (3, 4), (3, 5), (4, 5)}


def test_network_loses_and_duplicates_when_configured() -> None:
    """Loss and duplication: some messages vanish, some arrive twice, with own latency."""
    net = Network(NetworkConfig(loss_probability=0.3, duplicate_probability=0.3),
                  random.Random(7))
    counts = [len(net.delivery_delays_us(1, 2)) for _ in range(2000)]
    assert 0 in counts
    assert 2 in counts
    assert net.dropped == counts.count(0)
    assert net.duplicated == counts.count(2)


# ---- disk ---------------------------------------------------------------------------

def test_crash_loses_unflushed_records_when_disk_crashes() -> None:
    """Simulated disk: a crash keeps only what the last fsync made durable."""
    disk = SimDisk(DiskConfig(), random.Random(1))
    disk.log.append(1, [b"a"])
    disk.log.flush()
    disk.log.append(1, [b"b"])
    disk.quorum_state.persist(ElectionState(epoch=1))
    disk.crash()
    assert disk.log.end_offset == 1
    assert disk.quorum_state.load() == ElectionState(epoch=1)
    disk.wipe()
    assert disk.log.end_offset == 0
    assert disk.quorum_state.load() is None


# ---- the checkers have teeth -----------------------------------------------------------

def test_checker_rejects_two_leaders_when_same_epoch() -> None:
    """At most one leader per epoch, ever (Raft election safety)."""
    checker = Checker([1, 2, 3], [])
    nodes = [fake_node(1, leader=True), fake_node(2, leader=True)]
    checker.after_event(nodes[0], nodes)
    with pytest.raises(InvariantViolation) as caught:
        checker.after_event(nodes[1], nodes)
    assert caught.value.invariant == ONE_LEADER_PER_EPOCH


def test_checker_rejects_different_records_when_same_offset_and_epoch() -> None:
    """Log matching (Raft §5.3): same (offset, epoch) means the same record."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y"])))
    b = fake_node(2, log=log_with((1, [b"x", b"z"])))
    checker.after_event(a, [a, b])
    with pytest.raises(InvariantViolation) as caught:
        checker.after_event(b, [a, b])
    assert caught.value.invariant == LOG_MATCHING


def test_checker_rejects_changed_entry_when_below_high_watermark() -> None:
    """Committed data is never lost or changed."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x"])))
    b = fake_node(2, log=log_with((2, [b"y"])))
    checker.on_high_watermark(a, 1)
    with pytest.raises(InvariantViolation) as caught:
        checker.on_high_watermark(b, 1)
    assert caught.value.invariant == COMMITTED_DATA


def test_checker_rejects_new_leader_when_missing_committed_entry() -> None:
    """Leader completeness (Raft §5.4): every later leader holds every committed entry."""
    checker = Checker([1, 2, 3], [])
    a = fake_node(1, log=log_with((1, [b"x", b"y"])))
    checker.on_high_watermark(a, 2)
    b = fake_node(2, epoch=2, leader=True, log=log_with((1, [b"x"])))
    with pytest.raises(InvariantViolation) as caught:
        checker.after_event(b, [a, b])
    assert caught.value.invariant == COMMITTED_DATA


def test_checker_rejects_lower_high_watermark_when_not_restarted() -> None:
    """Per node, the high watermark never decreases."""
    checker = Checker([1], [])
    node = fake_node(1, log=log_with((1, [b"x", b"y"])))
    checker.on_high_watermark(node, 2)
    with pytest.raises(InvariantViolation) as caught:
        checker.on_high_watermark(node, 1)
    assert caught.value.invariant == HW_MONOTONIC


def test_checker_allows_lower_high_watermark_when_recovering_after_restart() -> None:
    """HW is monotonic across restarts only once the node has recovered."""
    checker = Checker([1], [])
    node = fake_node(1, log=log_with((1, [b"x", b"y"])))
    checker.on_high_watermark(node, 2)
    checker.on_restart(node)
    checker.on_high_watermark(node, 1)
    checker.on_high_watermark(node, 2)
    with pytest.raises(InvariantViolation):
        checker.on_high_watermark(node, 1)


def test_checker_rejects_epoch_going_back_when_persisted() -> None:
    """The persisted epoch never decreases; one vote per epoch."""
    checker = Checker([1, 2, 3], [])
    with pytest.raises(InvariantViolation) as caught:
        checker.on_persist(1, ElectionState(epoch=3), ElectionState(epoch=2))
    assert caught.value.invariant == EPOCH_MONOTONIC
    with pytest.raises(InvariantViolation) as caught:
        checker.on_persist(1, ElectionState(epoch=3, voted_id=1),
                           ElectionState(epoch=3, voted_id=2))
    assert caught.value.invariant == ONE_VOTE_PER_EPOCH


def test_checker_rejects_observer_in_vote_when_asked_or_granting() -> None:
    """Observers never vote and are never asked to (KIP-595)."""
    checker = Checker([1, 2, 3], [4])
    request = VoteRequest(cluster_id="c", candidate_epoch=1, candidate_id=1,
                          last_offset_epoch=0, last_offset=0)
    checker.on_send(1, 2, request)
    with pytest.raises(InvariantViolation) as caught:
        checker.on_send(1, 4, request)
    assert caught.value.invariant == OBSERVER_NEVER_VOTES
    with pytest.raises(InvariantViolation):
        checker.on_send(4, 1, VoteResponse(leader_epoch=1, vote_granted=True))


def test_checker_rejects_leader_hw_when_only_minority_holds_it() -> None:
    """A majority of voters (never observers) holds a log end at or above the leader HW."""
    checker = Checker([1, 2, 3], [4])
    full = log_with((1, [b"x", b"y"]))
    leader = fake_node(1, leader=True, hw=2, log=full)
    nodes = [leader, fake_node(2, log=log_with((1, [b"x"]))),
             fake_node(3, log=SimLog()), fake_node(4, voter=False, log=full)]
    with pytest.raises(InvariantViolation) as caught:
        checker.after_event(leader, nodes)
    assert caught.value.invariant == MAJORITY_HOLDS_HW


# ---- the whole simulator, on the toy core --------------------------------------------

def test_same_trace_when_same_seed() -> None:
    """Determinism: everything flows from one seed, so a run replays exactly."""
    spec = RunSpec(voters=3, observers=1, faults="all", trace_size=400)
    runs = [run_seed(spec, 11, lambda c: toy_cluster(c)) for _ in range(2)]
    clusters = []
    for _ in range(2):
        cluster = toy_cluster(SimConfig(voters=3, observers=1, seed=11, trace_size=400))
        cluster.start_workload()
        cluster.run_for(3000)
        clusters.append(cluster)
    assert runs[0] == runs[1]
    assert clusters[0].trace.lines() == clusters[1].trace.lines()
    assert clusters[0].events == clusters[1].events > 0


def test_toy_sweep_is_clean_when_core_is_correct() -> None:
    """No false alarms: a correct (toy) Raft passes every invariant under all faults."""
    spec = RunSpec(voters=5, observers=2, faults="all", fault_window_ms=15_000)
    results = [run_seed(spec, seed, lambda c: toy_cluster(c)) for seed in range(10)]
    assert [r.invariant for r in results] == [None] * 10
    assert sum(r.faults for r in results) > 0
    assert all(r.commits > 0 for r in results)


def test_toy_sweep_catches_planted_bug_when_votes_ignore_logs() -> None:
    """The checker has teeth (Raft §5.4.1 election restriction): a core granting votes
    without comparing logs loses committed data, and the run names a replayable seed."""
    spec = RunSpec(voters=5, observers=2, faults="all")
    make = lambda c: toy_cluster(c, bug="vote_without_log_check")  # noqa: E731
    failed = next(r for r in (run_seed(spec, s, make) for s in range(40)) if not r.ok)
    assert failed.invariant in (COMMITTED_DATA, LOG_MATCHING, MAJORITY_HOLDS_HW)
    assert f"--seed {failed.seed}" in failed.replay
    assert failed.trace
    assert run_seed(spec, failed.seed, make) == failed


def test_checker_rejects_leader_change_when_observer_granted_vote() -> None:
    """Observers never count in an election: the LeaderChange record lists voters only."""
    from metadata.records import LeaderChange

    checker = Checker([1, 2, 3], [4])
    record = LeaderChange(leader_id=1, voters=(1, 2, 3), granting_voters=(1, 4)).encode()
    leader = fake_node(1, epoch=1, leader=True, log=log_with((1, [record])))
    with pytest.raises(InvariantViolation) as caught:
        checker.after_event(leader, [leader])
    assert caught.value.invariant == OBSERVER_NEVER_VOTES


def test_checker_allows_rewrite_when_unflushed_entries_lost_in_crash() -> None:
    """Log matching covers durable entries: a leader that crashes before its fsync may
    win the same epoch again and write different records (nobody saw the lost ones)."""
    checker = Checker([1, 2, 3], [])
    node = fake_node(1, leader=True, log=log_with((1, [b"lost"]), flush=False))
    checker.after_event(node, [node])
    node.log.crash()
    node.log.append(1, [b"kept"])
    node.log.flush()
    checker.on_restart(node)
    checker.after_event(node, [node])
    other = fake_node(2, log=log_with((1, [b"lost"])))
    with pytest.raises(InvariantViolation):
        checker.after_event(other, [node, other])


def test_checker_allows_stale_leader_when_its_epoch_is_older_than_the_commit() -> None:
    """Leader completeness binds leaders of *higher* epochs only (Raft §5.4): a candidate
    of epoch 1 may still win late, after epoch 2 committed entries it does not hold."""
    checker = Checker([1, 2, 3], [])
    follower = fake_node(2, epoch=2, leader_id=1, log=log_with((2, [b"x"])))
    checker.on_high_watermark(follower, 1)
    stale = fake_node(3, epoch=1, leader=True, log=SimLog())
    checker.after_event(stale, [follower, stale])
    newer = fake_node(1, epoch=3, leader=True, log=SimLog())
    with pytest.raises(InvariantViolation):
        checker.after_event(newer, [follower, stale, newer])


def granted_vote(checker: Checker, voter: int, candidate: int, epoch: int, cid: int, *,
                 pre_vote: bool = False) -> None:
    """`candidate` asks `voter` (correlation id `cid`) and `voter` grants."""
    checker.on_send(candidate, voter, VoteRequest(
        cluster_id="c", candidate_epoch=epoch, candidate_id=candidate, last_offset_epoch=0,
        last_offset=0, pre_vote=pre_vote), correlation_id=cid)
    checker.on_send(voter, candidate, VoteResponse(leader_epoch=epoch, vote_granted=True),
                    correlation_id=cid)


def test_checker_rejects_second_vote_when_voter_disk_wiped_in_between() -> None:
    """One vote per (voter, epoch), from what voters sent: a voter whose disk was wiped
    (or whose vote never reached it) and votes again in that epoch is caught."""
    checker = Checker([1, 2, 3], [])
    granted_vote(checker, voter=2, candidate=1, epoch=3, cid=5)
    checker.on_restart(fake_node(2), wiped=True)
    with pytest.raises(InvariantViolation) as caught:
        granted_vote(checker, voter=2, candidate=3, epoch=3, cid=9)
    assert caught.value.invariant == ONE_VOTE_PER_EPOCH
    assert checker.votes[(2, 3)] == 1


def test_checker_ignores_pre_votes_when_counting_votes() -> None:
    """KIP-996 pre-votes are no votes: granting pre-votes to two candidates, then a vote,
    is fine; so is the same vote answered twice (a duplicated request)."""
    checker = Checker([1, 2, 3], [])
    granted_vote(checker, voter=2, candidate=1, epoch=4, cid=1, pre_vote=True)
    granted_vote(checker, voter=2, candidate=3, epoch=4, cid=1, pre_vote=True)
    granted_vote(checker, voter=2, candidate=3, epoch=4, cid=2)
    granted_vote(checker, voter=2, candidate=3, epoch=4, cid=2)
    assert checker.votes == {(3, 4): 3, (2, 4): 3}


def test_checker_rejects_vote_for_other_when_candidate_voted_for_itself() -> None:
    """A candidate asks for votes only once it voted for itself: granting another
    candidate in that epoch is a second vote."""
    checker = Checker([1, 2, 3], [])
    granted_vote(checker, voter=2, candidate=1, epoch=2, cid=1)
    with pytest.raises(InvariantViolation) as caught:
        granted_vote(checker, voter=1, candidate=3, epoch=2, cid=1)
    assert caught.value.invariant == ONE_VOTE_PER_EPOCH


def test_checker_rejects_leader_hw_when_majority_holds_it_unflushed_only() -> None:
    """Only durable (flushed) log ends count: what a crash can take away never made a
    record committed."""
    checker = Checker([1, 2, 3], [])
    leader = fake_node(1, leader=True, hw=2, log=log_with((1, [b"x", b"y"])))
    nodes = [leader, fake_node(2, log=log_with((1, [b"x", b"y"]), flush=False)),
             fake_node(3, log=log_with((1, [b"x"])))]
    with pytest.raises(InvariantViolation) as caught:
        checker.after_event(leader, nodes)
    assert caught.value.invariant == MAJORITY_HOLDS_HW


# ---- divergences -------------------------------------------------------------------------

def test_divergence_counted_once_when_truncated_in_rounds_before_appending() -> None:
    """A divergence lasts from a node's first truncation to its next append; it is
    multi-epoch when it removed records of two epochs or took two truncations."""
    divergences = Divergences()
    divergences.on_truncated(1, [RemovedTail(10, 14, 3, 3)])
    assert (divergences.total, divergences.multi_epoch) == (1, 0)
    divergences.on_truncated(1, [RemovedTail(7, 10, 1, 1)])
    assert (divergences.total, divergences.multi_epoch) == (1, 1)
    divergences.on_appended(1)
    divergences.on_truncated(1, [RemovedTail(9, 12, 4, 4)])
    divergences.on_truncated(2, [RemovedTail(5, 9, 2, 5)])
    assert (divergences.total, divergences.multi_epoch) == (3, 2)


def test_log_records_removed_tail_when_truncated() -> None:
    """The simulated log notes what each truncation removed (offsets and epochs)."""
    log = SimLog()
    log.append(1, [b"a", b"b"])
    log.append(2, [b"c"])
    log.append(4, [b"d"])
    log.truncate_to(4)
    log.truncate_to(1)
    assert log.removed == [RemovedTail(1, 4, 1, 4)]
    assert log.removed[0].spans_epochs


# ---- overlapping faults, new leaders, convergence -----------------------------------------

def test_link_stays_cut_when_one_of_two_faults_releases_it() -> None:
    """Overlapping faults: a link cut by two of them comes back when both are over."""
    net = Network(NetworkConfig(), random.Random(1))
    net.hold({(1, 2), (2, 1)})
    net.hold({(1, 2)})
    net.release({(1, 2), (2, 1)})
    assert not net.is_up(1, 2)
    assert net.is_up(2, 1)
    net.release({(1, 2)})
    assert net.is_up(1, 2)


def test_callback_sees_new_leader_before_its_first_fsync_when_elected() -> None:
    """`when_elected` runs once, the moment a leader wins, before anything it sends has
    left it (its election is not yet durable)."""
    cluster = new_cluster(3, 0, 5)
    seen: list[tuple[int, bool]] = []
    cluster.when_elected(lambda node: seen.append((node.node_id, node.busy)))
    leader = wait_for_leader(cluster)
    cluster.run_for(3000)
    assert seen == [(leader.node_id, True)]


def test_liveness_names_node_when_observer_cannot_converge() -> None:
    """After the heal every running node, observers too, must end with the leader's log
    and high watermark; one that cannot is named, with what differs."""
    cluster = new_cluster(3, 1, 8)
    wait_for_leader(cluster)
    wait_for_commit(cluster)
    cluster.network.isolate(4, cluster.nodes)
    cluster.run_for(2000)
    with pytest.raises(InvariantViolation) as caught:
        require_convergence(cluster, 3)
    assert caught.value.invariant == LIVENESS
    assert "n4: high watermark" in caught.value.detail
    cluster.network.heal()
    require_convergence(cluster, 10)
