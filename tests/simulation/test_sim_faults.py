"""The simulator's wider faults, each shown to do what it says and to be caught or
survived as it must: a lying fsync reported by the sweep, torn writes recovered through
the real segment scan (and a scan that cut acknowledged data reported), a corrupt
quorum-state refusing every start, wall-clock jumps read at restart, corrupted frames
never applied, messages held for election timeouts, one-way link cuts, and the summary
counting each kind."""

from __future__ import annotations

import random
from typing import Any

import pytest

import raft.sim.disk
from raft.log import SegmentScan, scan_segment
from raft.sim.cluster import Cluster, SimConfig
from raft.sim.disk import DiskConfig, SimDisk
from raft.sim.faults import heal_all, make_fault
from raft.sim.invariants import ACKNOWLEDGED_WRITES, Checker, InvariantViolation, entries_of
from raft.sim.network import INTACT, Network, NetworkConfig
from raft.sim.scenarios import new_cluster, wait_for_commit, wait_for_leader
from raft.sim.sweep import RunSpec, run_seed, summarize, sweep
from tests.support.checker_fakes import fake_node

NEW_KINDS = ("long-delay", "one-way-link", "corrupt-wire", "torn-write",
             "corrupt-quorum-state", "clock-jump")


def written_disk(flushed: int, unflushed: int) -> SimDisk:
    """A disk with `flushed` batches of two records flushed, then `unflushed` more."""
    disk = SimDisk(DiskConfig(), random.Random(1))
    for index in range(flushed + unflushed):
        disk.log.append(1 + index // 3, [b"r%d" % index, b"s%d" % index])
        if index < flushed:
            disk.log.flush()
    return disk


def records(disk: SimDisk) -> list[tuple[int, int, bytes]]:
    return list(entries_of(disk.log, 0, disk.log.end_offset))


# ---- a lying fsync -------------------------------------------------------------------------

def test_sweep_reports_lost_acknowledged_writes_when_fsync_lies() -> None:
    """Disks whose crash loses the last batch they acknowledged: the sweep reports the
    node that came back short, and the replay line turns the lie on again."""
    spec = RunSpec(voters=5, observers=2, faults="all", lying_fsync_writes=1)
    failed = next(r for r in sweep(spec, range(1, 4)) if not r.ok)
    assert failed.invariant == ACKNOWLEDGED_WRITES, failed.detail
    assert "but its disk acknowledged writes up to" in failed.detail
    assert "--lying-fsync 1" in failed.replay
    assert run_seed(spec, failed.seed) == failed


# ---- torn writes ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(12))
def test_torn_write_recovers_exactly_the_flushed_batches(seed: int) -> None:
    """A crash tears or corrupts the batch being written: the segment scan keeps every
    flushed batch and nothing of the torn one, and the ledger agrees."""
    disk = written_disk(flushed=4, unflushed=2)
    flushed = records(disk)[:8]
    disk.crash(random.Random(seed))
    assert records(disk) == flushed
    assert disk.torn_writes == 1
    Checker([1], []).on_restart(fake_node(1, log=disk.log))


def test_crash_between_steps_keeps_the_quorum_state_and_tears_the_log_write() -> None:
    """A torn-write crash strikes between the shell's steps: the election state it was
    writing is durable (the restarted node is in that epoch), the log write is not,
    and nothing the node was to send after them left."""
    cluster = new_cluster(3, 0, 4)
    leader = wait_for_leader(cluster)
    cluster.crash(leader.node_id)

    def electing() -> bool:
        return any(n.busy and n.writing is not None and n.writing.election is not None
                   for n in cluster.running())
    assert cluster.run_until(electing, 10_000)
    victim = next(n for n in cluster.running() if n.busy)
    assert victim.writing is not None
    election, held = victim.writing.election, victim.log.flushed_end_offset
    in_flight = len(cluster.in_flight())
    cluster.crash(victim.node_id, tear=random.Random(3))
    assert victim.disk.quorum_state.load() == election
    assert victim.log.end_offset == held
    assert len(cluster.in_flight()) == in_flight
    cluster.start(victim.node_id)
    assert election is not None
    assert victim.core.epoch == election.epoch


def test_no_torn_write_when_everything_was_flushed() -> None:
    disk = written_disk(flushed=3, unflushed=0)
    before = records(disk)
    disk.crash(random.Random(1))
    assert (records(disk), disk.torn_writes) == (before, 0)


def test_recovery_cutting_an_acknowledged_batch_is_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A recovery that drops a flushed batch with the torn one (here a scan that stops a
    batch early) leaves the node short of what its disk acknowledged: reported."""
    def short_scan(data: bytes, path: str, **kwargs: Any) -> SegmentScan:
        scan = scan_segment(data, path, **kwargs)
        return SegmentScan(batches=scan.batches[:-1], valid_bytes=0)
    monkeypatch.setattr(raft.sim.disk, "scan_segment", short_scan)
    disk = written_disk(flushed=3, unflushed=1)
    disk.crash(random.Random(1))
    assert disk.log.end_offset == 4
    with pytest.raises(InvariantViolation) as caught:
        Checker([1], []).on_restart(fake_node(1, log=disk.log))
    assert caught.value.invariant == ACKNOWLEDGED_WRITES


# ---- a corrupt quorum-state ----------------------------------------------------------------

def test_node_with_corrupt_quorum_state_refuses_every_start_and_never_votes_again() -> None:
    """It may have voted in an epoch it can no longer tell: it stays down through every
    restart and the heal, no vote of it appears in a later epoch, and the others still
    elect and commit."""
    cluster = new_cluster(3, 0, 5)
    leader = wait_for_leader(cluster)
    victim = next(v for v in cluster.voter_ids if v != leader.node_id)
    cluster.crash(victim)
    cluster.nodes[victim].disk.quorum_state.corrupt()
    epoch = max(n.core.epoch for n in cluster.running())
    cluster.start(victim)
    cluster.crash(leader.node_id)
    heal_all(cluster)
    cluster.run_for(5000)
    assert not cluster.nodes[victim].up
    assert cluster.refusing == {victim}
    assert not [e for (voter, e) in cluster.checker.votes if voter == victim and e > epoch]
    assert max(n.core.epoch for n in cluster.running()) > epoch
    wait_for_commit(cluster)


def test_corrupt_quorum_state_spares_a_majority_of_voters() -> None:
    """The fault corrupts voters only while those refusing stay short of half of them:
    six tries leave two of five refusing, and the other three commit."""
    cluster = new_cluster(5, 0, 3)
    rng = random.Random(1)
    for _ in range(6):
        inject, _undo = make_fault(cluster, rng, "corrupt-quorum-state", 0.0)
        inject()
    heal_all(cluster)
    assert len(cluster.refusing) == 2
    wait_for_commit(cluster)
    assert len(cluster.running()) == 3


def test_corrupt_quorum_state_spares_every_voter_when_the_quorum_is_dynamic() -> None:
    """Voter sets move in a dynamic quorum: only nodes no set names are corrupted, and
    only while every node knows a set (one that knows none may have been wiped)."""
    cluster = new_cluster(3, 2, 3, dynamic=True)
    wait_for_leader(cluster)
    wait_for_commit(cluster)  # the observers have fetched the voter set
    voters = {key.id for node in cluster.running() for key in node.core.voter_set.keys()}
    rng = random.Random(1)
    for _ in range(4):
        inject, _undo = make_fault(cluster, rng, "corrupt-quorum-state", 0.0)
        inject()
    heal_all(cluster)
    assert cluster.refusing == set(cluster.nodes) - voters
    wait_for_commit(cluster)


# ---- wall-clock jumps ----------------------------------------------------------------------

@pytest.mark.parametrize("jump_ms", [-30_000, 45_000])
def test_clock_jump_shows_from_the_next_start_and_changes_nothing(jump_ms: int) -> None:
    """As `RaftNode.now_ms`: the core's clock is monotonic time plus the wall clock's
    offset read at start, so a jump shows only after a restart; the run stays safe and
    the node catches up."""
    cluster = new_cluster(3, 0, 9)
    wait_for_leader(cluster)
    node = cluster.nodes[2]
    raw = node.local_ms(cluster.now_us)
    node.wall_clock_ms += jump_ms
    assert node.local_ms(cluster.now_us) == raw
    cluster.crash(2)
    cluster.start(2)
    assert node.local_ms(cluster.now_us) == max(0, raw + jump_ms)
    wait_for_commit(cluster)
    cluster.run_for(5000)
    assert cluster.run_until_converged(10_000) == []


# ---- the wire ------------------------------------------------------------------------------

def test_corrupted_frames_are_never_delivered() -> None:
    """While every frame is corrupted, only those that came through intact reach the
    network; the others are refused by the decoders or dropped below them. After the
    fault a record commits."""
    cluster = new_cluster(3, 1, 2)
    wait_for_leader(cluster)
    network = cluster.network
    network.corruption_probability = 1.0
    sent = network.sent
    cluster.run_for(3000)
    refused = network.corrupted["refused by the decoders"]
    assert network.sent - sent == network.corrupted[INTACT]
    assert refused > 10 * (sum(network.corrupted.values()) - refused) / 9
    heal_all(cluster)
    wait_for_commit(cluster)


def test_long_delay_holds_messages_for_election_timeouts() -> None:
    network = Network(NetworkConfig(), random.Random(3))
    network.long_delay_probability, network.long_delay_max_ms = 1.0, 4000.0
    delays = [network.delivery_delays_us(1, 2)[0] for _ in range(200)]
    assert network.long_delayed == 200
    assert max(delays) > 3_000_000
    assert max(delays) < 4_000_000 + 1_000_000  # the hold, plus the latency and its tail
    network.heal()
    assert network.is_healed
    assert max(network.delivery_delays_us(1, 2)[0] for _ in range(50)) < 1_000_000


def test_one_way_link_cuts_one_direction_of_one_link() -> None:
    cluster = Cluster(SimConfig(voters=3, observers=1, seed=4))
    inject, undo = make_fault(cluster, random.Random(2), "one-way-link", 0.0)
    inject()
    (cut,) = cluster.network.cut_links
    assert not cluster.network.is_up(*cut)
    assert cluster.network.is_up(cut[1], cut[0])
    undo()
    assert cluster.network.is_healed


# ---- the summary ---------------------------------------------------------------------------

def test_summary_counts_each_new_fault_kind_when_injected() -> None:
    """Every new kind is drawn by the default sweep, and the summary adds up each
    seed's counts (with what the wire and the disks made of them)."""
    results = [run_seed(RunSpec(voters=5, observers=2), seed) for seed in range(1, 21)]
    assert all(r.ok for r in results)
    counts = summarize(results, 1.0)["fault_counts"]
    assert all(counts.get(kind, 0) > 0 for kind in NEW_KINDS), counts
    assert counts["long-delay"] == sum(dict(r.fault_counts).get("long-delay", 0)
                                       for r in results)
    assert counts["torn writes scanned off"] <= counts["torn-write"]
    assert counts["nodes refusing to start"] <= counts["corrupt-quorum-state"]
    assert sum(dict(r.fault_counts).get("messages long-delayed", 0) for r in results) > 0
