"""The simulator's dynamic quorum (KIP-853, `kraft sim --dynamic`): random voter
changes among the faults keep every invariant and converge, a spare is added and a
wiped voter replaced by its new key, the majority check counts replica keys (a wiped
disk holds nothing for its old key), and a vote granted by another directory than the
one asked is caught."""

from __future__ import annotations

import pytest

from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.messages import AddRaftVoterRequest, RemoveRaftVoterRequest, VoteRequest, VoteResponse
from raft.sim.cluster import CLUSTER_ID, Cluster, SimConfig, listeners_of
from raft.sim.faults import schedule_faults
from raft.sim.invariants import OBSERVER_NEVER_VOTES, InvariantViolation
from raft.sim.sweep import RunSpec, require_commit_after_heal, require_convergence, sweep
from raft.types import Envelope
from raft.voters import Voter


def test_dynamic_sweep_clean_and_changes_voters_when_reconfiguration_faults_run() -> None:
    results = list(sweep(RunSpec(dynamic=True), range(1, 9), stop_on_violation=False))
    failures = [(r.seed, r.invariant, r.detail) for r in results if not r.ok]
    assert not failures
    assert sum(r.reconfigurations for r in results) >= 8


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_voter_entries_name_the_listeners_of_the_last_restart_when_converged(
        seed: int) -> None:
    """Each restart puts a node on another port (`listeners_of`): after the heal, every
    running voter's entry in the leader's set names the port it serves on now, updated
    by UpdateRaftVoter the voters sent on their own (or the leader itself), and voters
    added without endpoints got theirs the same way."""
    spec = RunSpec(voters=3, observers=2, dynamic=True)
    cluster = Cluster(spec.sim_config(seed))
    heal_ms = schedule_faults(cluster, spec.faults, spec.fault_window_ms)
    cluster.start_workload()
    cluster.run_for(heal_ms)
    require_commit_after_heal(cluster, heal_ms, spec.liveness_timeouts)
    require_convergence(cluster, spec.converge_timeouts)

    def running_voters() -> list[Voter]:
        voters = cluster.voter_set()
        assert voters is not None
        return [v for v in voters if cluster.nodes[v.key.id].up
                and cluster.nodes[v.key.id].directory_id == v.key.directory_id]

    def entries_current() -> bool:
        return all(v.endpoints == listeners_of(v.key.id, cluster.nodes[v.key.id].incarnation)
                   for v in running_voters())
    # a follower asks once per fetch timeout, a change waits for the one before
    assert cluster.run_until(entries_current, 10 * cluster.config.election_timeout_ms)
    assert any(cluster.nodes[v.key.id].incarnation > 1 for v in running_voters())


def run_until(cluster: Cluster, predicate: object, timeout_ms: float = 20_000) -> None:
    assert cluster.run_until(predicate, timeout_ms), "timed out"  # type: ignore[arg-type]


def request(cluster: Cluster, message: object) -> ErrorCode:
    answers: list[ErrorCode] = []
    for _ in range(50):
        answers.clear()
        assert cluster.reconfigure(message, lambda a: answers.append(a.error_code))
        cluster.run_until(lambda: bool(answers), 5_000)
        if answers and answers[0] != ErrorCode.REQUEST_TIMED_OUT:
            return answers[0]
        cluster.run_for(300)
    return answers[0]


def test_spare_added_and_wiped_voter_replaced_when_requested() -> None:
    cluster = Cluster(SimConfig(voters=3, observers=1, seed=7, dynamic=True))
    cluster.start_workload()
    run_until(cluster, lambda: cluster.leader() is not None and cluster.committed_offset() > 5)
    spare = cluster.nodes[4]
    add = AddRaftVoterRequest(cluster_id=CLUSTER_ID, voter_id=4,
                              voter_directory_id=spare.directory_id)  # type: ignore[arg-type]
    assert request(cluster, add) == ErrorCode.NONE
    voters = cluster.voter_set()
    assert voters is not None
    assert voters.ids == (1, 2, 3, 4)
    leader = cluster.leader_id()
    victim = next(v for v in (1, 2, 3) if v != leader)
    old = cluster.nodes[victim].directory_id
    cluster.crash(victim, wipe=True)
    cluster.start(victim)
    assert cluster.nodes[victim].directory_id != old
    remove = RemoveRaftVoterRequest(cluster_id=CLUSTER_ID, voter_id=victim,
                                    voter_directory_id=old)  # type: ignore[arg-type]
    assert request(cluster, remove) == ErrorCode.NONE
    new = cluster.nodes[victim].directory_id
    readd = AddRaftVoterRequest(cluster_id=CLUSTER_ID, voter_id=victim,
                                voter_directory_id=new)  # type: ignore[arg-type]
    assert request(cluster, readd) == ErrorCode.NONE
    voters = cluster.voter_set()
    assert voters is not None
    assert voters.directory_of(victim) == new
    assert not cluster.run_until_converged(20_000)


def test_vote_caught_when_granted_by_another_directory_than_asked() -> None:
    cluster = Cluster(SimConfig(voters=3, observers=0, seed=1, dynamic=True))
    asked = cluster.nodes[2].directory_id
    cluster.nodes[2].directory_id = Uuid.random()
    request = VoteRequest(cluster_id=CLUSTER_ID, candidate_epoch=9, candidate_id=1,
                          last_offset_epoch=0, last_offset=0, voter_directory_id=asked)
    cluster._send(Envelope(src=1, dst=2, correlation_id=77, message=request))  # noqa: SLF001
    with pytest.raises(InvariantViolation) as caught:
        cluster._send(Envelope(src=2, dst=1, correlation_id=77,  # noqa: SLF001
                               message=VoteResponse(leader_epoch=9, vote_granted=True)))
    assert caught.value.invariant == OBSERVER_NEVER_VOTES


def test_observers_naming_each_others_dead_leader_go_on_to_the_next_replica() -> None:
    """Seed 892 of the 1 + 3 dynamic sweep: the leader two observers last knew never
    starts again, and each names it to the other. A probe whose own answer moved the
    observer to that leader was dropped without moving on, so they asked each other for
    ever and never reached the voter that leads; a spent probe now moves on."""
    (result,) = sweep(RunSpec(voters=1, observers=3, faults="all", dynamic=True),
                      range(892, 893))
    assert result.ok, (result.invariant, result.detail)


@pytest.mark.parametrize("seed", [10627, 17234])
def test_log_start_move_set_before_a_crash_does_not_run_after_the_restart(seed: int) -> None:
    """Seeds of the 1 + 3 dynamic soak: a voter took a snapshot and set its log start to
    move a while later, then crashed; the move fired in its next incarnation, which had
    rebuilt its state from an older snapshot, so the log start passed records it had not
    applied. A crash ends the incarnation's pending moves, as a real process's."""
    (result,) = sweep(RunSpec(voters=1, observers=3, faults="all", dynamic=True),
                      range(seed, seed + 1))
    assert result.ok, (result.invariant, result.detail)


@pytest.mark.parametrize("seed", [14847, 15612, 15265])
def test_faults_never_strand_a_voter_set_on_a_replica_gone_for_good(seed: int) -> None:
    """Seeds of the 1 + 3 dynamic soak where the fault model, not raft, stalled the
    quorum: an observer wiped while only a down leader's log named it a voter (14847);
    a node added while it was down for good with a corrupt quorum-state (15612); a node
    wiped while an AddRaftVoter for its old key waited in a paused leader's inbox, which
    stale Fetches of that key made look caught up (15265). An operator adds nodes it
    sees running, and no disk is lost while a change naming it is pending."""
    (result,) = sweep(RunSpec(voters=1, observers=3, faults="all", dynamic=True),
                      range(seed, seed + 1))
    assert result.ok, (result.invariant, result.detail)


@pytest.mark.parametrize(("spec", "seed"), [
    (RunSpec(voters=4, observers=1, faults="all", dynamic=True), 13934),
    (RunSpec(voters=4, observers=1, faults="all", dynamic=True), 17171),
    (RunSpec(voters=5, observers=2, faults="all", pre_vote=False), 12025),
    (RunSpec(voters=5, observers=2, faults="all", pre_vote=False), 11475)])
def test_a_tail_back_after_a_crashed_truncation_is_in_the_disks_ledger(spec: RunSpec,
                                                                       seed: int) -> None:
    """Seeds of the 10,000-seed soaks (4 + 1 dynamic; 5 + 2 without pre-vote, where the
    misplaced entries read as committed data lost or a high watermark no majority held):
    a follower crashed in a truncation before the cut
    was durable, so recovery brought back the old tail, which its disk's ledger had
    already taken back; the ledger, shorter than the log, then placed the next write at
    the wrong offset and the majority check read past it. The ledger now takes what
    recovery found as written (promised by the next fsync), and refuses a write past its
    end."""
    (result,) = sweep(spec, range(seed, seed + 1))
    assert result.ok, (result.invariant, result.detail)
