"""Snapshots in the simulator (`raft.sim.snapshots`, KIP-630): every node's state machine
applies what it commits and snapshots it, log starts move, and nodes that fell behind
the leader's log start catch up by FetchSnapshot; the disk keeps whole snapshots
through a crash and loses them in a wipe; the divergence count sees a diverging tail a
snapshot replaced. The real core runs here (the toy core has no snapshots)."""

from __future__ import annotations

import random
import zlib
from dataclasses import replace

from raft.sim.cluster import Cluster, SimConfig, SimNode, _diverged
from raft.sim.disk import DiskConfig, RemovedTail, SimDisk
from raft.sim.invariants import entry_of
from raft.sim.scenarios import new_cluster, wait_caught_up, wait_for_commit, wait_for_leader
from raft.sim.snapshots import SnapshotConfig, SnapshotPolicy, StateMachine
from raft.sim.sweep import RunSpec, run_seed
from raft.snapshot import encode_snapshot, parse_snapshot
from raft.types import SnapshotId
from tests.support.checker_fakes import log_with, toy_cluster

EAGER = SnapshotConfig(interval=(3, 3), keep_long_log_probability=0.0,
                       trim_at_once_probability=1.0, fetch_snapshot_max_bytes=128)


def commit_at_least(cluster: Cluster, count: int) -> None:
    assert cluster.run_until(lambda: cluster.committed_offset() >= count, 60_000)


def state_is_committed_prefix(node: SimNode, cluster: Cluster) -> bool:
    records = node.state_machine.records
    committed = cluster.checker.committed
    return [checksum for _, checksum in committed[:len(records)]] == [
        zlib.crc32(record) for record in records] and len(records) <= len(committed)


# ---- the state machine and the policy ------------------------------------------------------


def test_state_machine_applies_up_to_high_watermark_and_snapshots_what_it_applied() -> None:
    log = log_with((1, [b"a", b"b"]), (2, [b"c", b"d"]))
    machine = StateMachine()
    assert machine.apply(log, 3) == 3
    assert (machine.records, machine.epoch, machine.apply(log, 3)) == ([b"a", b"b", b"c"], 2, 0)
    snapshot_id, data = machine.snapshot(lambda _end: [])
    assert snapshot_id == SnapshotId(3, 2)
    assert parse_snapshot(data, "", 2)[1] == (b"a", b"b", b"c")
    other = StateMachine()
    other.load(snapshot_id, data)
    assert (other.records, other.epoch) == (machine.records, 2)
    log.advance_start(3)
    assert other.apply(log, 4) == 1
    assert other.records == [b"a", b"b", b"c", b"d"]


def test_policy_draws_intervals_and_trims_from_its_own_random() -> None:
    """Intervals within the configured bounds; a node keeping a long log never trims;
    the others trim at once or after a delay within bounds."""
    config = SnapshotConfig(interval=(5, 9), trim_delay_ms=(100.0, 200.0))
    delays = []
    for seed in range(40):
        policy = SnapshotPolicy(config, random.Random(seed))
        assert 5 <= policy.next_at <= 9
        at = policy.next_at
        delay = policy.taken_at(at)
        assert at + 5 <= policy.next_at <= at + 9
        assert policy.taken == 1
        if policy.keeps_long_log:
            assert delay is None
        else:
            delays.append(delay)
    assert 0.0 in delays
    assert any(d is not None and 100.0 <= d <= 200.0 for d in delays)


# ---- the disk --------------------------------------------------------------------------------


def test_disk_keeps_whole_snapshots_and_loses_the_download_when_crashed() -> None:
    stored: list[SnapshotId] = []
    disk = SimDisk(DiskConfig(), random.Random(1),
                   on_snapshot=lambda snapshot_id, _: stored.append(snapshot_id))
    whole, fetched = SnapshotId(2, 1), SnapshotId(4, 1)
    disk.snapshots.add(whole, encode_snapshot(whole, [b"a", b"b"]))
    disk.snapshots.download(fetched)
    disk.snapshots.write(fetched, 0, encode_snapshot(fetched, [b"a"] * 4)[:10])
    disk.crash()
    assert disk.snapshots.latest() == whole
    assert disk.snapshots.download(fetched) == 0  # the partial bytes are gone
    data = encode_snapshot(fetched, [b"a"] * 4)
    disk.snapshots.write(fetched, 0, data)
    disk.snapshots.finish(fetched)
    assert stored == [whole, fetched]  # the checker hears of each whole snapshot
    disk.wipe()
    assert disk.snapshots.latest() is None
    disk.snapshots.add(whole, encode_snapshot(whole, [b"a", b"b"]))
    assert stored == [whole, fetched, whole]  # the new store reports too


def test_replaced_tail_counts_from_first_uncommitted_record_when_snapshot_loaded() -> None:
    committed = [entry_of(1, b"a"), entry_of(1, b"b"), entry_of(2, b"c")]
    replaced = [(1, 1, b"b"), (2, 1, b"x"), (3, 1, b"y")]
    assert _diverged(replaced, SnapshotId(3, 2), committed) == RemovedTail(2, 4, 1, 1)
    assert _diverged(replaced[:1], SnapshotId(3, 2), committed) is None
    assert _diverged([(3, 1, b"y"), (4, 3, b"z")], SnapshotId(3, 2),
                     committed) == RemovedTail(3, 5, 1, 3)


# ---- the cluster ---------------------------------------------------------------------------


def test_nodes_snapshot_and_move_their_log_start_when_records_commit() -> None:
    cluster = new_cluster(3, 1, 7, snapshots=EAGER)
    commit_at_least(cluster, 12)
    wait_caught_up(cluster)
    assert cluster.snapshots_taken >= 4
    for node in cluster.running():
        assert node.log.start_offset >= 3
        assert node.snapshots.size(SnapshotId(node.log.start_offset,
                                              node.log.start_epoch)) is not None
        assert state_is_committed_prefix(node, cluster)
        assert node.state_machine.applied_end == node.core.high_watermark


def test_wiped_observer_catches_up_by_fetch_snapshot_when_leader_log_starts_above() -> None:
    """An observer back with an empty disk is sent to the leader's snapshot, fetches it
    in several chunks, loads it and then fetches records: its state is the committed
    prefix and its log matches the leader's from there."""
    cluster = new_cluster(3, 1, 11, snapshots=EAGER)
    commit_at_least(cluster, 6)
    cluster.crash(4, wipe=True)
    commit_at_least(cluster, cluster.committed_offset() + 10)
    fetches, chunks = cluster.snapshot_fetches, cluster.snapshot_chunks
    cluster.start(4)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    observer = cluster.nodes[4]
    assert cluster.snapshot_fetches == fetches + 1
    assert cluster.snapshot_chunks - chunks >= 3  # 128 bytes a chunk
    assert observer.log.start_offset > 0
    assert state_is_committed_prefix(observer, cluster)
    assert cluster.run_until_converged(10_000) == []


def test_restarted_voter_rebuilds_its_state_from_the_snapshot_at_its_log_start() -> None:
    cluster = new_cluster(3, 0, 5, snapshots=EAGER)
    leader = wait_for_leader(cluster)
    commit_at_least(cluster, 10)
    victim = next(n for n in cluster.voter_ids if n != leader.node_id)
    wait_caught_up(cluster)
    start = cluster.nodes[victim].log.start_offset
    assert start > 0
    cluster.crash(victim)
    cluster.start(victim)
    node = cluster.nodes[victim]
    assert node.state_machine.applied_end == node.log.start_offset >= start
    assert state_is_committed_prefix(node, cluster)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    assert state_is_committed_prefix(node, cluster)


def test_snapshots_off_with_the_toy_core_and_when_disabled() -> None:
    config = SimConfig(voters=3, observers=0, seed=1)
    assert not toy_cluster(config).snapshots_on
    cluster = Cluster(replace(config, snapshots=SnapshotConfig(enabled=False)))
    cluster.start_workload()
    commit_at_least(cluster, 10)
    assert cluster.snapshots_taken == 0
    assert all(n.log.start_offset == 0 for n in cluster.running())


def test_sweep_reports_snapshots_and_fetches_when_faults_run() -> None:
    """A random run takes snapshots and, with laggards and wiped observers, completes
    snapshot fetches; each counted in its result."""
    results = [run_seed(RunSpec(voters=5, observers=2, faults="all"), seed)
               for seed in (2, 3)]
    assert all(r.ok for r in results), [r.detail for r in results]
    assert all(r.snapshots > 0 for r in results)
    assert sum(r.snapshot_fetches for r in results) > 0
    assert all(r.snapshot_chunks >= r.snapshot_fetches for r in results)
