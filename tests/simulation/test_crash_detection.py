"""Crash detection in the simulator (simulated time, Kafka's default timeouts: election
1000 ms, fetch 2000 ms): a crashed voter's peers hear their connection lost and then
refused and elect a successor well before the fetch timeout; a paused leader's peers
hear nothing and wait for it; a connection reset while the leader lives moves no epoch;
observers move to a new leader soon after its election even while the old one is
paused."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pytest

from raft.sim.cluster import Cluster, SimConfig, SimNode


def running_cluster(seed: int, voters: int = 3, observers: int = 0,
                    **config: object) -> tuple[Cluster, SimNode]:
    """A cluster with a leader whose followers and observers all fetch from it, under a
    steady workload."""
    cluster = Cluster(SimConfig(voters=voters, observers=observers, seed=seed,
                                **config))  # type: ignore[arg-type]
    cluster.start_workload()
    assert cluster.run_until(lambda: cluster.leader() is not None
                             and cluster.committed_offset() > 3
                             and all(n.core.leader_id == cluster.leader_id()
                                     for n in cluster.running() if n is not cluster.leader()),
                             20_000)
    leader = cluster.leader()
    assert leader is not None
    return cluster, leader


def newer_leader(cluster: Cluster, epoch: int) -> SimNode | None:
    leader = cluster.leader()
    return leader if leader is not None and leader.core.epoch > epoch else None


def crash_failover_ms(seed: int) -> float:
    """Crash the leader of a running 3-voter cluster; simulated ms to its successor."""
    cluster, old = running_cluster(seed)
    epoch, crashed_at = old.core.epoch, cluster.now_ms
    cluster.crash(old.node_id)
    assert cluster.run_until(lambda: newer_leader(cluster, epoch) is not None, 10_000)
    failover = cluster.now_ms - crashed_at
    assert cluster.failovers_ms == [pytest.approx(failover, abs=0.01)]
    refusals = [r for r in cluster.peer_reports if r[2] == old.node_id and r[3]]
    assert refusals, "no follower heard the crashed leader refuse"
    return failover


def test_successor_wins_the_next_epoch_without_a_split_vote_when_the_leader_crashes(
        ) -> None:
    """The followers of a crashed leader hear its port refuse within a millisecond of each
    other. Were both to stand at once, each would grant the other's pre-vote, both would
    be candidates in the same epoch and split the vote (then back off up to a second):
    they take turns, so over thirty crashes every successor wins the very next epoch."""
    for seed in range(30):
        epoch, successor = successor_after(seed, Cluster.crash)
        assert successor.core.epoch == epoch + 1, (seed, successor.core.epoch, epoch)


def successor_after(seed: int, fault: Callable[[Cluster, int], None]) -> tuple[int, SimNode]:
    """Crash or pause the leader of a running 3-voter cluster: (its epoch, the next
    leader)."""
    cluster, old = running_cluster(seed)
    epoch = old.core.epoch
    fault(cluster, old.node_id)
    assert cluster.run_until(lambda: newer_leader(cluster, epoch) is not None, 20_000)
    successor = newer_leader(cluster, epoch)
    assert successor is not None
    return epoch, successor


def test_successor_is_elected_well_before_the_fetch_timeout_when_the_leader_crashes() -> None:
    """A crashed leader's port refuses: its followers ask for pre-votes at once, so over
    ten crashes each successor is elected in a fraction of the fetch timeout (2000 ms),
    the median under 300 ms of simulated time. Without the refused-connection input the
    followers would wait the whole fetch timeout."""
    failovers = [crash_failover_ms(seed) for seed in range(10)]
    assert max(failovers) < SimConfig().fetch_timeout_ms / 2, failovers
    assert statistics.median(failovers) < 300, failovers


def test_followers_wait_for_the_fetch_timeout_when_the_leader_is_paused() -> None:
    """A paused leader refuses nothing: its peers hear nothing of it, and the successor
    is elected on the fetch timeout (counted from each follower's last answer, at most a
    long-poll wait before the pause), far later than after a crash."""
    cluster, old = running_cluster(seed=3)
    epoch, paused_at = old.core.epoch, cluster.now_ms
    cluster.pause(old.node_id)
    reports = len(cluster.peer_reports)
    assert cluster.run_until(lambda: newer_leader(cluster, epoch) is not None, 10_000)
    config = cluster.config
    assert cluster.now_ms - paused_at > config.fetch_timeout_ms - 2 * config.fetch_max_wait_ms
    assert cluster.peer_reports[reports:] == []


def test_successor_wins_the_next_epoch_without_a_split_vote_when_the_leader_is_paused(
        ) -> None:
    """The followers of a paused leader last heard it at about the same moment, so their
    fetch timeouts would fire together and split the vote (2 in 40 seeds did): their
    deadlines are a turn apart by id, and over forty pauses every successor wins the very
    next epoch."""
    for seed in range(40):
        epoch, successor = successor_after(seed, Cluster.pause)
        assert successor.core.epoch == epoch + 1, (seed, successor.core.epoch, epoch)


@pytest.mark.parametrize("seed", range(5))
def test_no_epoch_moves_when_connections_reset_while_the_leader_lives(seed: int) -> None:
    """Connection resets, and a reconnect refused by mistake at one follower, while the
    leader runs: that follower asks for pre-votes, the voters that hear from the leader
    refuse them, and every node stays in the leader's epoch with the leader in place,
    still committing."""
    cluster, leader = running_cluster(seed, voters=5, observers=2)
    epoch = leader.core.epoch
    others = [n.node_id for n in cluster.running() if n is not leader]
    mistaken = others[seed % len(others)]
    for node_id in others:
        cluster.reset_connection(node_id, leader.node_id, refused=node_id == mistaken)
    committed = cluster.committed_offset()
    cluster.run_for(5000)
    assert cluster.leader() is leader
    assert {n.core.epoch for n in cluster.running()} == {epoch}
    assert cluster.committed_offset() > committed
    assert cluster.nodes[mistaken].core.leader_id == leader.node_id


def test_mistaken_refusal_starts_a_pre_vote_that_is_refused() -> None:
    """The mechanism behind the test above, on one follower: it becomes prospective at
    the mistaken refusal and, refused by the others, follows the same leader again."""
    cluster, leader = running_cluster(seed=7, trace_size=2000)
    follower = next(n for n in cluster.running() if n is not leader)
    epoch = leader.core.epoch
    cluster.reset_connection(follower.node_id, leader.node_id, refused=True)
    cluster.run_for(2000)
    states = [line for line in cluster.trace.lines()
              if f"n{follower.node_id}" in line and " is " in line]
    assert any("is prospective" in line for line in states), states
    assert follower.core.leader_id == leader.node_id
    assert {n.core.epoch for n in cluster.running()} == {epoch}


@pytest.mark.parametrize("seed", range(5))
def test_observers_fetch_from_the_new_leader_soon_after_it_is_elected_while_the_old_is_paused(
        seed: int) -> None:
    """Observers whose Fetch is parked on a paused leader ask the other voters who leads
    and follow the new leader within a second of its election (simulated). Their own
    fetch timeout (60 s) is far beyond that, so only asking can have moved them."""
    cluster, old = running_cluster(seed, voters=3, observers=3,
                                   observer_fetch_timeout_ms=60_000)
    epoch = old.core.epoch
    observers = [cluster.nodes[o] for o in cluster.observer_ids]
    cluster.pause(old.node_id)
    assert cluster.run_until(lambda: newer_leader(cluster, epoch) is not None, 10_000)
    new = cluster.leader()
    assert new is not None
    elected_at = cluster.now_ms
    assert cluster.run_until(lambda: all(o.core.leader_id == new.node_id
                                         for o in observers), 1000)
    assert cluster.now_ms - elected_at <= 1000
