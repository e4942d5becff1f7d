"""The scenarios of Kafka's `RaftEventSimulationTest`, on the simulated cluster.

Each scenario takes (voters, observers, seed), drives a `Cluster` with a steady workload
and raises `ScenarioFailure` (naming the seed) if an expected outcome does not happen in
time; the invariants are checked after every event as in any run. Time limits are in
election timeouts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from raft.common.errors import ErrorCode
from raft.messages import (
    AddRaftVoterRequest,
    NodeEndpoints,
    RemoveRaftVoterRequest,
    UpdateKRaftVersionRequest,
)
from raft.sim.cluster import CLUSTER_ID, Cluster, SimConfig, SimNode, listeners_of
from raft.sim.invariants import MAJORITY_HOLDS_HW
from raft.sim.snapshots import SnapshotConfig
from raft.voters import ReplicaKey, Voter, VoterSet

# Only links 1-3, 2-4, 3-4, 3-5 and 4-5 up (KIP-996's motivating partial partition).
KIP_996_LINKS = ((1, 3), (2, 4), (3, 4), (3, 5), (4, 5))
# Snapshots are taken but no log start moves: a diverging node must truncate its tail
# (with its log start moved, a snapshot may replace the tail instead).
LONG_LOGS = SnapshotConfig(keep_long_log_probability=1.0)


class ScenarioFailure(AssertionError):
    def __init__(self, cluster: Cluster, message: str) -> None:
        self.cluster = cluster
        self.message = message
        cfg = cluster.config
        super().__init__(f"seed {cfg.seed} ({cfg.voters} voters, {cfg.observers} observers)"
                         f" at {cluster.now_ms:.0f} ms: {message}\n"
                         + "\n".join(cluster.trace.lines()[-25:]))


def new_cluster(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    config = replace(SimConfig(voters=voters, observers=observers, seed=seed), **overrides)
    cluster = Cluster(config)
    cluster.start_workload()
    return cluster


def _ets(cluster: Cluster, count: float) -> float:
    return count * cluster.config.election_timeout_ms


def wait_for_leader(cluster: Cluster, *, timeout_ets: float = 10, above_epoch: int = -1,
                    among: Iterable[int] | None = None) -> SimNode:
    allowed = None if among is None else set(among)

    def elected() -> bool:
        leader = cluster.leader()
        return (leader is not None and leader.core.epoch > above_epoch
                and (allowed is None or leader.node_id in allowed))
    if not cluster.run_until(elected, _ets(cluster, timeout_ets)):
        raise ScenarioFailure(cluster, f"no leader above epoch {above_epoch} within "
                                       f"{timeout_ets} election timeouts")
    leader = cluster.leader()
    assert leader is not None
    return leader


def wait_for_commit(cluster: Cluster, *, timeout_ets: float = 10) -> None:
    """A record proposed from now on commits."""
    since = cluster.now_us

    def committed() -> bool:
        for time_us, epoch, offset in reversed(cluster.proposals):
            if time_us < since:
                return False
            if cluster.is_committed(epoch, offset):
                return True
        return False
    if not cluster.run_until(committed, _ets(cluster, timeout_ets)):
        raise ScenarioFailure(cluster, f"nothing proposed after {since / 1000:.0f} ms "
                                       f"committed within {timeout_ets} election timeouts")


def wait_caught_up(cluster: Cluster, node_ids: Iterable[int] | None = None, *,
                   timeout_ets: float = 20) -> None:
    ids = sorted(cluster.nodes if node_ids is None else node_ids)
    if not cluster.run_until(lambda: cluster.all_caught_up(ids), _ets(cluster, timeout_ets)):
        behind = {i: cluster.nodes[i].core.high_watermark if cluster.nodes[i].up else "down"
                  for i in ids}
        raise ScenarioFailure(cluster, f"nodes did not catch up: {behind}")


def wait_converged(cluster: Cluster, *, timeout_ets: float = 10) -> None:
    """Proposals stop; every running node ends with the leader's log and high
    watermark."""
    gaps = cluster.run_until_converged(_ets(cluster, timeout_ets))
    if gaps:
        raise ScenarioFailure(cluster, "no convergence: " + "; ".join(gaps))


def _require(cluster: Cluster, condition: bool, message: str) -> None:
    if not condition:
        raise ScenarioFailure(cluster, message)


# ---- the scenarios --------------------------------------------------------------------

def initial_election(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    cluster = new_cluster(voters, observers, seed, **overrides)
    wait_for_leader(cluster)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    return cluster


def leader_failure(voters: int, observers: int, seed: int, *, graceful: bool = False,
                   **overrides: Any) -> Cluster:
    """The leader is killed (or shut down gracefully); a new one is elected and commits;
    the old leader comes back and catches up."""
    cluster = new_cluster(voters, observers, seed, **overrides)
    old = wait_for_leader(cluster)
    wait_for_commit(cluster)
    old_id, old_epoch = old.node_id, old.core.epoch
    if graceful:
        cluster.resign(old_id)
        cluster.run_for(20)
    cluster.crash(old_id)
    if voters >= 3:  # the others still form a majority
        wait_for_leader(cluster, above_epoch=old_epoch)
        wait_for_commit(cluster)
    cluster.start(old_id)
    wait_for_leader(cluster)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    return cluster


def majority_restart(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    """Every node is killed; only a majority of voters (and the observers) restart."""
    cluster = new_cluster(voters, observers, seed, **overrides)
    wait_for_leader(cluster)
    wait_for_commit(cluster)
    for node_id in cluster.nodes:
        cluster.crash(node_id)
    cluster.run_for(_ets(cluster, 1))
    majority = cluster.fault_rng.sample(cluster.voter_ids, voters // 2 + 1)
    for node_id in sorted(majority) + list(cluster.observer_ids):
        cluster.start(node_id)
    wait_for_leader(cluster, among=majority)
    wait_for_commit(cluster)
    wait_caught_up(cluster, sorted(majority) + list(cluster.observer_ids))
    return cluster


def leader_partitioned(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    """The leader is cut off from everyone; the rest elect a new leader; after the heal
    the old leader follows and catches up."""
    cluster = new_cluster(voters, observers, seed, **overrides)
    old = wait_for_leader(cluster)
    wait_for_commit(cluster)
    old_id, old_epoch = old.node_id, old.core.epoch
    cluster.network.isolate(old_id, cluster.nodes)
    if voters >= 3:  # the others still form a majority
        others = [v for v in cluster.voter_ids if v != old_id]
        wait_for_leader(cluster, above_epoch=old_epoch, among=others)
        wait_for_commit(cluster)
    cluster.network.heal()
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    return cluster


def asymmetric_split(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    """5 voters split {1,2} | {3,4,5}: the majority side makes progress; after the heal
    everyone catches up."""
    _require_voters(voters, 5)
    cluster = new_cluster(voters, observers, seed, **overrides)
    wait_for_leader(cluster)
    wait_for_commit(cluster)
    minority = [1, 2]
    majority = [n for n in cluster.nodes if n not in minority]  # observers stay here
    cluster.network.partition(minority, majority)
    before = cluster.committed_offset()
    wait_for_leader(cluster, among=[3, 4, 5], timeout_ets=10)
    wait_for_commit(cluster)
    _require(cluster, cluster.committed_offset() > before, "majority side made no progress")
    cluster.network.heal()
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    return cluster


def back_to_back_failures(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    """Kill the leader; once another leads, bring the first back and kill the second."""
    _require_voters(voters, 3)
    cluster = new_cluster(voters, observers, seed, **overrides)
    first = wait_for_leader(cluster)
    first_id, epoch = first.node_id, first.core.epoch
    cluster.crash(first_id)
    second = wait_for_leader(cluster, above_epoch=epoch)
    second_id, epoch = second.node_id, second.core.epoch
    cluster.start(first_id)
    cluster.crash(second_id)
    wait_for_leader(cluster, above_epoch=epoch)
    wait_for_commit(cluster)
    cluster.start(second_id)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    return cluster


def disk_loss(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    """One voter loses its whole log and quorum-state; it restarts once another node
    leads and catches up. As in Kafka, the majority-holds-HW check is off here (the
    wiped voter no longer holds what it acknowledged)."""
    _require_voters(voters, 3)
    cluster = new_cluster(voters, observers, seed,
                          **{"skip_invariants": (MAJORITY_HOLDS_HW,), **overrides})
    leader = wait_for_leader(cluster)
    wait_for_commit(cluster)
    victim = cluster.fault_rng.choice([v for v in cluster.voter_ids if v != leader.node_id])
    cluster.crash(victim, wipe=True)
    wait_for_leader(cluster, among=[v for v in cluster.voter_ids if v != victim])
    wait_for_commit(cluster)
    cluster.start(victim)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    return cluster


def pre_vote_partial_partition(voters: int, observers: int, seed: int,
                               **overrides: Any) -> Cluster:
    """KIP-996: with only links 1-3, 2-4, 3-4, 3-5, 4-5 up, exactly one leader is ever
    elected (nodes 1 and 2 cannot reach the leader but their pre-votes are refused)."""
    _require_voters(voters, 5, exact=True)
    cluster = new_cluster(voters, observers, seed, **{"pre_vote": True, **overrides})
    cluster.network.only_links(cluster.voter_ids, KIP_996_LINKS)
    wait_for_leader(cluster, timeout_ets=20)
    wait_for_commit(cluster)
    cluster.run_for(_ets(cluster, 30))
    _require(cluster, len(cluster.checker.leaders) == 1,
             f"leaders by epoch: {cluster.checker.leaders}")
    return cluster


def partial_partition_around_leader(voters: int, observers: int, seed: int,
                                    **overrides: Any) -> Cluster:
    """With pre-vote, cutting the leader off from a minority of voters (which can still
    reach each other and the rest) never changes leadership."""
    _require_voters(voters, 3)
    cluster = new_cluster(voters, observers, seed, **{"pre_vote": True, **overrides})
    leader = wait_for_leader(cluster)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    leaders_before = dict(cluster.checker.leaders)
    followers = [v for v in cluster.voter_ids if v != leader.node_id]
    cut = cluster.fault_rng.sample(followers, (voters - 1) // 2)
    for node_id in cut:
        cluster.network.cut(leader.node_id, node_id)
    cluster.run_for(_ets(cluster, 20))
    wait_for_commit(cluster)
    _require(cluster, cluster.checker.leaders == leaders_before,
             f"leadership changed: {leaders_before} -> {cluster.checker.leaders}")
    return cluster


class NotApplicable(Exception):
    """The scenario needs a different number of voters."""


def _require_voters(voters: int, minimum: int, *, exact: bool = False,
                    alternative: int | None = None) -> None:
    if voters < minimum or (exact and voters != minimum):
        what = f"{minimum} or {alternative}" if alternative else str(minimum)
        raise NotApplicable(f"needs {'exactly' if exact else 'at least'} {what} voters")




def figure_eight(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    """Raft's Figure 8 (§5.4.2) on 5 voters, one batch per Fetch. A (leader, epoch e1)
    writes X at offset k to itself and B only; E is elected in {C,D,E} (epoch e2) and at
    once cut off, so its LeaderChange at offset k stays on E; A or B becomes leader W in
    epoch e3 and replicates X to C. Counting replicas, X now sits on a majority: a correct
    core still waits for its own epoch's LeaderChange, a core with
    `commit_old_epoch_by_count` commits X. W and the other X holder crash, E returns and
    wins with C and D (its last epoch e2 beats e1), and overwrites X: committed data lost
    if (and only if) X was committed."""
    _require_voters(voters, 5, exact=True)
    config = SimConfig(voters=5, observers=observers, seed=seed, fetch_max_bytes=1,
                       trace_size=80)
    cluster = Cluster(replace(config, **overrides))
    et = _ets(cluster, 1)
    a = wait_for_leader(cluster).node_id
    cluster.run_until(lambda: cluster.committed_offset() > 0, 10 * et)
    wait_caught_up(cluster)
    b, c, d, e = [v for v in cluster.voter_ids if v != a]
    k = cluster.nodes[a].log.end_offset
    cluster.network.partition([a, b], [c, d, e])
    cluster.propose(node_id=a)
    _require(cluster, cluster.run_until(lambda: cluster.nodes[b].log.end_offset > k, et),
             "X did not reach B")
    e = wait_for_leader(cluster, among=[c, d, e], timeout_ets=10).node_id
    e_epoch = cluster.nodes[e].core.epoch
    cluster.network.heal()
    cluster.network.isolate(e, cluster.nodes)  # E's LeaderChange stays on E alone

    def x_counted() -> bool:
        leader = cluster.leader()
        return (leader is not None and leader.core.epoch > e_epoch
                and (leader.core.high_watermark or 0) > k)
    _require(cluster, cluster.run_until(x_counted, 20 * et), "no leader in epoch e3")
    w = cluster.leader_id()
    assert w is not None
    cluster.network.isolate(w, cluster.nodes)  # W's later responses never arrive
    cluster.crash(w)
    cluster.crash(a if w == b else b)
    cluster.run_for(et)  # W's messages still in flight are lost on the cut links
    cluster.network.heal()
    cluster.run_for(30 * et)
    return cluster




def empty_voter_completes_quorum(voters: int, observers: int, seed: int,
                                 **overrides: Any) -> Cluster:
    """A voter that was down since the cluster formed (empty log, never saw the
    MetadataTopic record) comes up just as the leader dies: with the remaining voters it
    is a majority and must elect one of them (Raft §5.4.1: its empty log is behind, so it
    grants its vote), whatever topic ID the candidates address the partition by
    (KIP-516: a node that does not know the ID yet)."""
    _require_voters(voters, 3, exact=True)
    cluster = Cluster(replace(SimConfig(voters=3, observers=observers, seed=seed),
                              **overrides))
    cluster.start_workload()
    cluster.crash(3)
    leader = wait_for_leader(cluster, among=[1, 2])
    wait_for_commit(cluster)
    epoch = leader.core.epoch
    cluster.crash(leader.node_id)
    cluster.start(3)
    wait_for_leader(cluster, above_epoch=epoch, timeout_ets=10)
    wait_for_commit(cluster)
    return cluster


def _first_leader_cut_off(voters: int, observers: int, seed: int, **overrides: Any
                          ) -> tuple[Cluster, int, SimNode]:
    """3 voters: the first leader A is cut off the moment it wins (what it wrote stays in
    its log only), the workload starts and the others elect B in a later epoch: (the
    cluster, A's id, B)."""
    _require_voters(voters, 3, exact=True)
    cluster = Cluster(replace(SimConfig(voters=3, observers=observers, seed=seed),
                              **overrides))
    first = wait_for_leader(cluster, timeout_ets=10)
    a, a_epoch = first.node_id, first.core.epoch
    cluster.network.isolate(a, cluster.nodes)
    cluster.start_workload()
    return cluster, a, wait_for_leader(cluster, above_epoch=a_epoch, timeout_ets=10)


def stale_metadata_topic(voters: int, observers: int, seed: int,
                         **overrides: Any) -> Cluster:
    """The first leader A is cut off the moment it wins, so its LeaderChange and its
    MetadataTopic{T1} stay in A's log only; B and C elect a leader that writes and commits
    MetadataTopic{T2}. C crashes and A reconnects: A and the leader are a majority, so
    they must commit again (KIP-516: A knows a different ID, T1, until it truncates)."""
    cluster, a, b_leader = _first_leader_cut_off(voters, observers, seed, **overrides)
    b = b_leader.node_id
    wait_for_commit(cluster)
    c = next(v for v in cluster.voter_ids if v not in (a, b))
    cluster.crash(c)
    cluster.network.heal()
    wait_for_commit(cluster, timeout_ets=10)
    cluster.start(c)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    return cluster


def stale_metadata_topic_election(voters: int, observers: int, seed: int,
                                  **overrides: Any) -> Cluster:
    """As `stale-metadata-topic`, but an election needs A: the first leader A is cut off
    the moment it wins (its MetadataTopic{T1} stays on A); B, C elect B, which commits
    MetadataTopic{T2}; B dies for good and A reconnects. A and C are a majority and must
    elect C (A's log is behind), whatever topic ID C's VoteRequest addresses A by
    (KIP-516: A knows T1 until it truncates, which it does only once it follows C)."""
    cluster, a, b = _first_leader_cut_off(voters, observers, seed, **overrides)
    b_id, b_epoch = b.node_id, b.core.epoch
    wait_for_commit(cluster)
    cluster.crash(b_id)
    cluster.network.heal()
    c = next(v for v in cluster.voter_ids if v not in (a, b_id))
    wait_for_leader(cluster, above_epoch=b_epoch, among=[c], timeout_ets=20)
    wait_for_commit(cluster)
    wait_converged(cluster)
    return cluster


def divergence(voters: int, observers: int, seed: int, **overrides: Any) -> Cluster:
    """Multi-epoch divergence, forced step by step on 5 voters (A, F, B, M, D; 3 voters
    and any observers: `divergence_three_voters`). The observers stay on A's side.

    1. A leads; {A, F} | {B, M, D}: A writes a tail that reaches F (and the observers)
       only;
    2. {B, M, D} elect a leader, B, in a newer epoch; the link B-D is cut the moment B
       wins, so B's LeaderChange reaches M only;
    3. {A, F, D} | {B, M}: A or F (their logs are longer than D's) wins the next epoch
       and is cut off the moment it wins: its tail now spans two epochs;
    4. everyone else reconnects: B or M (last epoch 2 beats the others' 1) wins, commits;
    5. heal: every node must converge on that leader's log, the cut-off winner by
       truncating records of two epochs (a multi-epoch divergence).

    A follower that took the leader's high watermark on a Fetch answer carrying a
    diverging epoch would publish its stale tail as committed here. The nodes keep their
    logs whole (`LONG_LOGS`)."""
    if voters == 3:
        return divergence_three_voters(voters, observers, seed, **overrides)
    _require_voters(voters, 5, exact=True, alternative=3)
    cluster = new_cluster(voters, observers, seed, **{"snapshots": LONG_LOGS, **overrides})
    a, f = _leader_writing_a_tail(cluster, company=1)
    rest = [v for v in cluster.voter_ids if v not in (a, f)]
    b, m = _elect_and_cut(cluster, rest, reached=1)
    d = next(v for v in rest if v not in (b, m))
    cluster.network.heal()
    cluster.network.partition([a, f, d, *cluster.observer_ids], [b, m])
    w = _win_and_isolate(cluster, [a, f], above_epoch=cluster.nodes[b].core.epoch)
    cluster.network.heal()
    cluster.network.isolate(w, cluster.nodes)
    wait_for_leader(cluster, above_epoch=cluster.nodes[w].core.epoch, among=[b, m])
    wait_for_commit(cluster)
    return _heal_and_converge(cluster)


def divergence_three_voters(voters: int, observers: int, seed: int,
                            **overrides: Any) -> Cluster:
    """`divergence` on 3 voters (A, B, C) and any observers, which stay with A:
    {A} | {B, C}: A writes a tail only the observers get; B wins a newer epoch and its
    link to C is cut at once (its LeaderChange stays on B); {A, C} | {B}: A wins the
    next epoch with C's vote and is cut off at once (its tail spans two epochs); B (last
    epoch 2) wins with C and commits; heal: A truncates both epochs and the observers
    end with B's log. The nodes keep their logs whole (`LONG_LOGS`)."""
    _require_voters(voters, 3, exact=True, alternative=5)
    cluster = new_cluster(voters, observers, seed, **{"snapshots": LONG_LOGS, **overrides})
    a, = _leader_writing_a_tail(cluster, company=0)
    rest = [v for v in cluster.voter_ids if v != a]
    b, c = _elect_and_cut(cluster, rest, reached=0)
    cluster.network.heal()
    cluster.network.partition([a, c, *cluster.observer_ids], [b])
    w = _win_and_isolate(cluster, [a], above_epoch=cluster.nodes[b].core.epoch)
    cluster.network.heal()
    cluster.network.isolate(w, cluster.nodes)
    wait_for_leader(cluster, above_epoch=cluster.nodes[w].core.epoch, among=[b])
    wait_for_commit(cluster)
    return _heal_and_converge(cluster)


def _leader_writing_a_tail(cluster: Cluster, *, company: int) -> tuple[int, ...]:
    """A leader that committed, then is split off with `company` other voters and the
    observers; returns (leader, *company) once its tail reached all of them."""
    a = wait_for_leader(cluster).node_id
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    others = [v for v in cluster.voter_ids if v != a]
    voters = [a, *cluster.fault_rng.sample(others, company)]
    side = [*voters, *cluster.observer_ids]
    cluster.network.partition(side, [n for n in cluster.nodes if n not in side])
    start = cluster.nodes[a].log.end_offset
    cluster.propose(node_id=a)
    _require(cluster, cluster.run_until(
        lambda: all(cluster.nodes[n].log.end_offset > start for n in side),
        _ets(cluster, 1)), f"A's tail did not reach {side}")
    return tuple(voters)


def _elect_and_cut(cluster: Cluster, candidates: list[int], *,
                   reached: int) -> tuple[int, int]:
    """Among `candidates` (a majority cut off from the old leader) a leader B is elected;
    the moment it wins, its links to all candidates but `reached` (0 or 1) of them are
    cut, so its LeaderChange reaches those only. Returns (B, M): M the one reached, once
    it holds that record, or (with `reached` 0) one not reached."""
    chosen: list[int] = []

    def cut(leader: SimNode) -> None:
        if leader.node_id in candidates:
            others = [n for n in candidates if n != leader.node_id]
            chosen.append(cluster.fault_rng.choice(others))
            for n in others:
                if reached == 0 or n != chosen[0]:
                    cluster.network.cut(leader.node_id, n)
    old_epoch = max(n.core.epoch for n in cluster.running() if n.core.is_leader)
    cluster.when_elected(cut)
    b = wait_for_leader(cluster, among=candidates, above_epoch=old_epoch).node_id
    m, epoch = chosen[0], cluster.nodes[b].core.epoch
    if reached:
        _require(cluster, cluster.run_until(
            lambda: cluster.nodes[m].log.last_epoch == epoch, _ets(cluster, 2)),
            f"n{b}'s LeaderChange of epoch {epoch} did not reach n{m}")
    return b, m


def _win_and_isolate(cluster: Cluster, candidates: list[int], *, above_epoch: int) -> int:
    """One of `candidates` wins an epoch above `above_epoch` and is cut off from
    everyone the moment it wins (before anything it sends has left it)."""
    def isolate(leader: SimNode) -> None:
        if leader.node_id in candidates:
            cluster.network.isolate(leader.node_id, cluster.nodes)
    cluster.when_elected(isolate)
    return wait_for_leader(cluster, above_epoch=above_epoch, among=candidates,
                           timeout_ets=20).node_id


def replaced_sole_voter(voters: int, observers: int, seed: int,
                        **overrides: Any) -> Cluster:
    """KIP-853 at its smallest (one voter, dynamic): an observer is added as a voter,
    the first voter removed, then its disk wiped and formatted anew without voters. The
    wiped replica must find the leader (its bootstrap servers name it among others:
    it asks them, never itself) and catch up; the quorum commits throughout."""
    _require_voters(voters, 1, exact=True)
    if observers < 1:
        raise NotApplicable("needs an observer to become the voter")
    cluster = new_cluster(voters, observers, seed, **{"dynamic": True, **overrides})
    old = wait_for_leader(cluster)
    wait_for_commit(cluster)
    new = cluster.nodes[cluster.observer_ids[0]]
    wait_caught_up(cluster, [new.node_id])
    assert new.directory_id is not None  # a dynamic run's nodes all have one
    assert old.directory_id is not None
    _change_voters(cluster, AddRaftVoterRequest(
        cluster_id=CLUSTER_ID, voter_id=new.node_id, voter_directory_id=new.directory_id))
    _change_voters(cluster, RemoveRaftVoterRequest(
        cluster_id=CLUSTER_ID, voter_id=old.node_id, voter_directory_id=old.directory_id))
    wait_for_leader(cluster, among=[new.node_id])
    cluster.crash(old.node_id, wipe=True)
    cluster.start(old.node_id)
    wait_for_commit(cluster)
    wait_converged(cluster)
    _require(cluster, cluster.nodes[old.node_id].core.leader_id == new.node_id,
             f"the wiped n{old.node_id} does not follow n{new.node_id}")
    return cluster


def kraft_version_upgrade(voters: int, observers: int, seed: int,
                          **overrides: Any) -> Cluster:
    """kraft.version 0 -> 1 (UpdateKRaftVersion, as `kraft features upgrade` sends it):
    a static quorum formatted with directory ids commits, then the leader turns its
    voters, with the directory ids it heard in their Fetches and the endpoints the
    request names, into the log's first VotersRecord; once that commits every node,
    observers included, runs kraft.version 1 with that voter set."""
    cluster = new_cluster(voters, observers, seed, **{"directory_ids": True, **overrides})
    wait_for_leader(cluster)
    wait_for_commit(cluster)
    wait_caught_up(cluster)
    nodes = tuple(NodeEndpoints(node_id=v, listeners=listeners_of(v, 1))
                  for v in cluster.voter_ids)
    _change_voters(cluster, UpdateKRaftVersionRequest(cluster_id=CLUSTER_ID, kraft_version=1,
                                                      nodes=nodes))
    wait_for_commit(cluster)
    wait_converged(cluster)
    expected = VoterSet(Voter(ReplicaKey(v, cluster.nodes[v].directory_id), listeners_of(v, 1))
                        for v in cluster.voter_ids)
    for node in cluster.running():
        _require(cluster, node.core.kraft_version == 1 and node.core.voter_set == expected,
                 f"n{node.node_id}: kraft.version {node.core.kraft_version}, voters "
                 f"{node.core.voter_set} (expected 1, {expected})")
    return cluster


def _change_voters(cluster: Cluster, request: Any, *, timeout_ets: float = 20) -> None:
    """Hand `request` to the leader, as a tool would, again after each refusal, until it
    commits (answered NONE)."""
    answers: list[Any] = []
    deadline_ms = cluster.now_ms + _ets(cluster, timeout_ets)
    while cluster.now_ms < deadline_ms:
        answers.clear()
        if cluster.reconfigure(request, answers.append):
            cluster.run_until(lambda: bool(answers), _ets(cluster, 2))
        if answers and answers[0].error_code == ErrorCode.NONE:
            return
        cluster.run_for(_ets(cluster, 0.5))
    raise ScenarioFailure(cluster, f"{request} did not commit within {timeout_ets} "
                                   "election timeouts")


def _heal_and_converge(cluster: Cluster) -> Cluster:
    cluster.network.heal()
    wait_for_commit(cluster)
    wait_converged(cluster)
    _require(cluster, cluster.divergences.multi_epoch > 0,
             "no node truncated a tail of two epochs")
    return cluster


SCENARIOS: dict[str, Callable[..., Cluster]] = {
    "initial-election": initial_election,
    "leader-killed": leader_failure,
    "leader-shutdown": lambda v, o, s, **kw: leader_failure(v, o, s, graceful=True, **kw),
    "majority-restart": majority_restart,
    "leader-partitioned": leader_partitioned,
    "asymmetric-split": asymmetric_split,
    "back-to-back-failures": back_to_back_failures,
    "disk-loss": disk_loss,
    "pre-vote-partial-partition": pre_vote_partial_partition,
    "partial-partition-around-leader": partial_partition_around_leader,
    "figure-eight": figure_eight,
    "empty-voter-completes-quorum": empty_voter_completes_quorum,
    "stale-metadata-topic": stale_metadata_topic,
    "divergence": divergence,
    "stale-metadata-topic-election": stale_metadata_topic_election,
    "replaced-sole-voter": replaced_sole_voter,
    "kraft-version-upgrade": kraft_version_upgrade,
}
