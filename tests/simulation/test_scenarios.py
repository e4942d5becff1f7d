"""Kafka's RaftEventSimulationTest scenarios on the simulated cluster with the real core,
each over several seeds and cluster shapes (1-5 voters, 0-5 observers). The simulator
checks every safety invariant after every event; each scenario asserts its own outcome
(a leader, commits, catch-up) within a bound in election timeouts."""

from __future__ import annotations

import pytest

from raft.sim import scenarios
from raft.sim.cluster import SimNode
from raft.sim.invariants import COMMITTED_DATA, InvariantViolation
from raft.snapshot import parse_snapshot
from raft.types import SnapshotId

# (voters, observers) shapes; a seed is paired with each shape below.
ALL_SHAPES = [(1, 0), (1, 2), (2, 1), (3, 0), (3, 3), (4, 1), (5, 0), (5, 2), (5, 5)]
THREE_PLUS = [s for s in ALL_SHAPES if s[0] >= 3]


def cases(shapes: list[tuple[int, int]], seeds_per_shape: int) -> list[tuple[int, int, int]]:
    return [(v, o, 100 * v + 10 * o + k) for v, o in shapes for k in range(seeds_per_shape)]


def first_records(node: SimNode, count: int) -> tuple[bytes, ...]:
    """A node's first `count` records: from its log, or from the snapshot at its log
    start (which holds every record below it) when the log starts above 0."""
    log = node.log
    if log.start_offset == 0:
        return tuple(record for batch in log.read(0, 1 << 20)
                     for record in batch.records)[:count]
    snapshot_id = SnapshotId(log.start_offset, log.start_epoch)
    _, records = parse_snapshot(node.snapshots.snapshots[snapshot_id], "", snapshot_id.epoch)
    return records[:count]


@pytest.mark.parametrize(("voters", "observers", "seed"), cases(ALL_SHAPES, 3))
def test_leader_elected_and_commits_when_cluster_starts(voters: int, observers: int,
                                                        seed: int) -> None:
    """KIP-595 initial election: a leader is elected, commits, and everyone catches up."""
    cluster = scenarios.initial_election(voters, observers, seed)
    assert cluster.leader() is not None
    assert cluster.committed_offset() > 0


@pytest.mark.parametrize(("voters", "observers", "seed"), cases(ALL_SHAPES, 3))
@pytest.mark.parametrize("graceful", [False, True], ids=["killed", "shutdown"])
def test_new_leader_and_old_catches_up_when_leader_fails(voters: int, observers: int,
                                                         seed: int, graceful: bool) -> None:
    """KIP-595 fetch timeout / EndQuorumEpoch: after the leader is killed or resigns, a
    new leader of a higher epoch commits and the old leader rejoins and catches up."""
    cluster = scenarios.leader_failure(voters, observers, seed, graceful=graceful)
    assert len(cluster.checker.leaders) >= (2 if voters >= 3 else 1)


@pytest.mark.parametrize(("voters", "observers", "seed"), cases(ALL_SHAPES, 3))
def test_progress_when_only_a_majority_restarts(voters: int, observers: int,
                                                seed: int) -> None:
    """Raft §5.2: after every node dies, any majority of voters elects a leader again and
    no committed record is lost (quorum-state and flushed log survive the crash)."""
    cluster = scenarios.majority_restart(voters, observers, seed)
    assert cluster.leader() is not None


@pytest.mark.parametrize(("voters", "observers", "seed"), cases(ALL_SHAPES, 3))
def test_new_leader_when_leader_partitioned_away(voters: int, observers: int,
                                                 seed: int) -> None:
    """KIP-595 check-quorum and fetch timeout: the rest elect a new leader; after the heal
    the old leader steps down and catches up."""
    cluster = scenarios.leader_partitioned(voters, observers, seed)
    assert cluster.leader() is not None


@pytest.mark.parametrize(("voters", "observers", "seed"), cases([(5, 0), (5, 2), (5, 5)], 3))
def test_majority_side_progresses_when_split_two_three(voters: int, observers: int,
                                                       seed: int) -> None:
    """Asymmetric split {1,2} | {3,4,5}: the majority side keeps committing; full
    catch-up after the heal."""
    cluster = scenarios.asymmetric_split(voters, observers, seed)
    assert cluster.leader_id() in (1, 2, 3, 4, 5)


@pytest.mark.parametrize(("voters", "observers", "seed"), cases(THREE_PLUS, 3))
def test_progress_when_leaders_fail_back_to_back(voters: int, observers: int,
                                                 seed: int) -> None:
    """Back-to-back leader failures: the third leader still has every committed record."""
    cluster = scenarios.back_to_back_failures(voters, observers, seed)
    assert len(cluster.checker.leaders) >= 3


@pytest.mark.parametrize(("voters", "observers", "seed"), cases(THREE_PLUS, 3))
def test_recovery_when_one_node_loses_its_disk(voters: int, observers: int,
                                               seed: int) -> None:
    """Kafka's single-node committed-data loss scenario: the wiped voter catches up from
    the leader; HW, single-leader and committed-data invariants hold."""
    cluster = scenarios.disk_loss(voters, observers, seed)
    assert cluster.all_caught_up()


@pytest.mark.parametrize(("observers", "seed"), [(o, s) for o in (0, 2, 5) for s in range(4)])
def test_exactly_one_leader_ever_when_kip996_partial_partition(observers: int,
                                                               seed: int) -> None:
    """KIP-996 pre-vote: with only links 1-3, 2-4, 3-4, 3-5, 4-5 up, exactly one leader is
    ever elected; the nodes that cannot reach it are refused their pre-votes."""
    cluster = scenarios.pre_vote_partial_partition(5, observers, seed)
    assert len(cluster.checker.leaders) == 1


@pytest.mark.parametrize(("voters", "observers", "seed"), cases(THREE_PLUS, 3))
def test_leadership_unchanged_when_partial_partition_around_leader(
        voters: int, observers: int, seed: int) -> None:
    """KIP-996 pre-vote: cutting the leader off from a minority of voters that can still
    reach the others never changes leadership (no disruptive elections)."""
    cluster = scenarios.partial_partition_around_leader(voters, observers, seed)
    assert len(cluster.checker.leaders) == 1


@pytest.mark.parametrize("seed", range(4))
def test_uncommitted_entry_overwritten_safely_when_figure_eight(seed: int) -> None:
    """Raft §5.4.2 Figure 8: an old-epoch entry replicated to a majority by a later
    leader is not committed by counting, so the leader that overwrites it loses nothing
    (the same schedule with `commit_old_epoch_by_count` planted is a violation)."""
    cluster = scenarios.figure_eight(5, 0, seed)
    assert len(cluster.checker.leaders) >= 4


@pytest.mark.parametrize(("observers", "seed"), [(o, s) for o in (0, 2) for s in range(3)])
def test_new_leader_when_empty_voter_completes_the_quorum(observers: int, seed: int) -> None:
    """KIP-516 addressing must not block an election: a voter that never learned the
    metadata topic ID (empty log) still grants its vote to an up-to-date candidate."""
    cluster = scenarios.empty_voter_completes_quorum(3, observers, seed)
    assert cluster.leader_id() == 2 or cluster.leader_id() == 1


@pytest.mark.parametrize(("observers", "seed"), [(o, s) for o in (0, 2) for s in range(3)])
def test_progress_when_a_voter_holds_a_stale_metadata_topic_id(observers: int,
                                                              seed: int) -> None:
    """KIP-516 stale state: a voter whose log starts with a losing leader's MetadataTopic
    record (a different ID) still lets the quorum commit once it is needed for a majority,
    and truncates to the committed ID."""
    cluster = scenarios.stale_metadata_topic(3, observers, seed)
    firsts = {first_records(n, 2) for n in cluster.running()}
    assert len(firsts) == 1


@pytest.mark.parametrize(("observers", "seed"), [(1, 1), (3, 2), (3, 3)])
def test_wiped_replica_finds_leader_when_sole_voter_replaced(observers: int,
                                                             seed: int) -> None:
    """KIP-853: the only voter replaced by an observer, then wiped and formatted anew
    without voters, follows the new voter and ends with its log. Before the wiped
    replica asked the others (never itself), it asked only itself and never converged."""
    cluster = scenarios.replaced_sole_voter(1, observers, seed)
    new = cluster.observer_ids[0]
    voters = cluster.voter_set()
    assert cluster.leader_id() == new
    assert voters is not None
    assert voters.ids == (new,)
    assert cluster.convergence_gaps() == []


@pytest.mark.parametrize(("voters", "observers", "seed"), cases([(1, 1), (3, 2), (4, 0)], 2))
def test_kraft_version_upgraded_from_0_to_1_when_update_sent(voters: int, observers: int,
                                                             seed: int) -> None:
    """UpdateKRaftVersion 0 -> 1 through the leader: the static voters, keyed by their
    directory ids, become the log's voters; every node runs kraft.version 1."""
    cluster = scenarios.kraft_version_upgrade(voters, observers, seed)
    leader = cluster.leader()
    assert leader is not None
    assert leader.core.describe_quorum(0).kraft_version == 1
    assert all(v.key.directory_id == cluster.nodes[v.key.id].directory_id
               for v in leader.core.voter_set)


def test_replaced_sole_voter_not_applicable_when_not_one_voter_and_an_observer() -> None:
    for voters, observers in ((3, 1), (1, 0)):
        with pytest.raises(scenarios.NotApplicable):
            scenarios.replaced_sole_voter(voters, observers, 1)


@pytest.mark.parametrize(("voters", "observers", "seed"),
                         [(5, 0, 1), (5, 2, 2), (5, 5, 3), (3, 1, 4), (3, 0, 5)])
def test_every_node_converges_when_logs_diverge_over_epochs(voters: int, observers: int,
                                                            seed: int) -> None:
    """Multi-epoch divergence: a cut-off leader holds a tail of two epochs that no later
    leader has; after the heal it truncates both and every node, observers included,
    ends with the leader's log and high watermark."""
    cluster = scenarios.divergence(voters, observers, seed)
    assert cluster.divergences.multi_epoch >= 1
    assert len(cluster.checker.leaders) >= 4
    assert cluster.convergence_gaps() == []


@pytest.mark.parametrize(("voters", "observers", "seed"), [(5, 2, 1), (3, 1, 2)])
def test_committed_data_lost_when_follower_takes_hw_from_diverging_answer(
        voters: int, observers: int, seed: int) -> None:
    """The same schedule on a core that takes the leader's high watermark from a Fetch
    answer carrying a diverging epoch publishes records no leader committed."""
    with pytest.raises(InvariantViolation) as caught:
        scenarios.divergence(voters, observers, seed, planted_bug="diverging_hw")
    assert caught.value.invariant == COMMITTED_DATA


def test_divergence_refused_when_voter_count_does_not_fit() -> None:
    with pytest.raises(scenarios.NotApplicable):
        scenarios.divergence(4, 0, 1)


# Found by the deeper sweep: a voter whose log starts with a losing first leader's
# MetadataTopic record answered INCONSISTENT_TOPIC_ID to VoteRequests addressed by the
# committed topic ID, and the candidate never fell back to the sentinel (as it does on
# UNKNOWN_TOPIC_ID); when that voter was needed for a majority, no leader was elected.
@pytest.mark.parametrize(("observers", "seed"), [(0, 1), (2, 2)])
def test_new_leader_when_needed_voter_holds_a_stale_metadata_topic_id(observers: int,
                                                                     seed: int) -> None:
    """KIP-516 stale state must not block an election: with the leader dead, the voter
    holding another topic ID in its first batch votes for the up-to-date one."""
    cluster = scenarios.stale_metadata_topic_election(3, observers, seed)
    assert cluster.leader() is not None


@pytest.mark.soak
@pytest.mark.parametrize("name", [
    name for name in sorted(scenarios.SCENARIOS)])
def test_soak_scenario_holds_when_many_seeds(name: str) -> None:
    """make soak: every scenario over 10 seeds per cluster shape (where it applies)."""
    run = scenarios.SCENARIOS[name]
    ran = 0
    for voters in range(1, 6):
        for observers in (0, 1, 3, 5):
            for seed in range(1000, 1010):
                try:
                    run(voters, observers, seed)
                except scenarios.NotApplicable:
                    break
                ran += 1
    assert ran >= 10
