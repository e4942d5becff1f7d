"""Election, replication and the high watermark across a few cores (KIP-595, Raft §5.3)."""

from __future__ import annotations

from metadata.records import LeaderChange, MetadataTopic, decode
from raft.core import Role
from raft.messages import BeginQuorumEpochRequest
from tests.support.core_harness import Cluster, drain, make_core, make_leader


def test_three_voters_elect_one_leader_and_commit_when_started_fresh() -> None:
    """KIP-595: a fresh quorum elects one leader; a proposal commits on every voter."""
    cluster = Cluster((1, 2, 3))
    leader = cluster.elect()
    result = leader.propose([b"x", b"y"], cluster.now_ms)
    assert result is not None
    epoch, last_offset = result
    cluster.flush(leader.node_id)
    cluster.run(200)
    for core in cluster.cores.values():
        assert core.epoch == epoch
        assert core.high_watermark == last_offset + 1
        assert core.log.end_offset == last_offset + 1
    assert [c.role for c in cluster.cores.values()].count(Role.LEADER) == 1


def test_winner_sends_begin_quorum_epoch_and_appends_leader_change_when_elected() -> None:
    """KIP-595 BeginQuorumEpoch: the winner tells every voter, and its first entry of the
    epoch is a LeaderChange control record (then MetadataTopic on an empty log, KIP-516)."""
    cluster = Cluster((1, 2, 3))
    leader = cluster.elect()
    begins = [e for e in cluster.sent if isinstance(e.message, BeginQuorumEpochRequest)
              and e.src == leader.node_id]
    assert {e.dst for e in begins} == {1, 2, 3} - {leader.node_id}
    first = leader.log.read(0, 1 << 20)[0]
    assert first.epoch == leader.epoch
    records = [decode(r) for r in first.records]
    assert isinstance(records[0], LeaderChange)
    assert records[0].leader_id == leader.node_id
    assert isinstance(records[1], MetadataTopic)


def test_single_voter_commits_only_after_flush_when_it_proposes() -> None:
    """types.py contract: a leader counts its own log end only once flushed (advance)."""
    core = make_core(1, (1,))
    core.tick(5000)
    assert core.is_leader
    drain(core)
    hw = core.high_watermark
    core.propose([b"a"], 5001)
    assert core.high_watermark == hw  # not flushed yet
    ready = core.ready()
    assert ready.entries
    assert ready.needs_flush
    core.log.flush()
    core.advance(ready)
    assert core.high_watermark == core.log.end_offset


def test_observer_follows_but_never_counts_when_voters_are_down() -> None:
    """KIP-595 observers: they replicate but are never part of a high-watermark majority."""
    cluster = Cluster((1, 2, 3), observers=(4, 5))
    leader = cluster.elect()
    hw_before = leader.high_watermark
    followers = [n for n in (1, 2, 3) if n != leader.node_id]
    for node in followers:
        cluster.down.add(node)
    leader.propose([b"z"], cluster.now_ms)
    cluster.flush(leader.node_id)
    cluster.run(500)
    assert cluster.cores[4].log.end_offset == leader.log.end_offset  # observers have it
    assert leader.high_watermark == hw_before  # ...but it is not committed


def test_crashed_leader_is_replaced_and_catches_up_when_it_restarts() -> None:
    """Raft §5.2/§5.3: a new leader after the old one dies; the old one rejoins."""
    cluster = Cluster((1, 2, 3))
    old = cluster.elect()
    old.propose([b"before"], cluster.now_ms)
    cluster.flush(old.node_id)
    cluster.run(300)
    cluster.crash(old.node_id)
    cluster.run(8000)
    new = cluster.leader()
    assert new.node_id != old.node_id
    assert new.epoch > old.epoch
    new.propose([b"after"], cluster.now_ms)
    cluster.flush(new.node_id)
    cluster.restart(old.node_id)
    cluster.run(3000)
    rejoined = cluster.cores[old.node_id]
    assert rejoined.role is Role.FOLLOWER
    assert rejoined.leader_id == new.node_id
    assert rejoined.log.end_offset == new.log.end_offset
    assert rejoined.high_watermark == new.high_watermark == new.log.end_offset


def test_advance_keeps_what_arrived_after_ready_when_io_is_slow() -> None:
    """types.py contract with a slow disk: `advance(ready)` acknowledges exactly what
    that Ready held; messages, entries and HW produced meanwhile stay for the next one."""
    leader = make_leader(voters=(1,))
    first = leader.ready()
    assert first.is_empty
    leader.propose([b"a"], 20_000)
    ready_a = leader.ready()
    leader.propose([b"b"], 20_001)
    leader.log.flush()
    leader.advance(ready_a)
    ready_b = leader.ready()
    assert [b.records for b in ready_a.entries] == [(b"a",)]
    assert [b.records for b in ready_b.entries] == [(b"b",)]
    assert ready_b.high_watermark == leader.log.end_offset


def test_idle_cluster_keeps_its_leader_when_nothing_is_proposed() -> None:
    """KIP-595: long-polling followers count as fetching, so neither their fetch timeout
    nor the leader's check-quorum fires while the log is idle."""
    cluster = Cluster((1, 2, 3), observers=(4,), fetch_max_wait_ms=500, fetch_timeout_ms=2000)
    leader = cluster.elect()
    epoch = leader.epoch
    cluster.run(60_000, step_ms=50)
    assert cluster.leaders() == [leader.node_id]
    assert all(core.epoch == epoch for core in cluster.cores.values())
