"""The seed sweep: random fault schedules on a five-voter, two-observer cluster, every
safety invariant checked after every event, liveness and convergence after the heal, and
enough depth per seed (elections, multi-epoch divergences) to matter. `make soak` runs
the big sweeps (in worker processes)."""

from __future__ import annotations

import os
import statistics

import pytest

from raft.sim.cluster import Cluster, SimConfig
from raft.sim.invariants import LIVENESS
from raft.sim.sweep import RunResult, RunSpec, run_seed, summarize, sweep

CHUNK = 10
SOAK_CHUNK = 1000


def explain(failed: RunResult) -> str:
    return (f"seed {failed.seed}: {failed.invariant}: {failed.detail}\n"
            + "\n".join(failed.trace) + f"\nreplay: {failed.replay}")


def run_chunk(spec: RunSpec, first: int, count: int, jobs: int = 1) -> list[RunResult]:
    results = list(sweep(spec, range(first, first + count), jobs=jobs))
    failed = [r for r in results if not r.ok]
    assert not failed, explain(failed[0])
    return results


@pytest.mark.parametrize("chunk", range(5))
def test_no_violation_and_many_epochs_when_five_voters_under_all_faults(chunk: int) -> None:
    """KIP-595 safety and liveness under crashes, pauses, partitions, loss, duplication,
    slow disks and links and leader-chasing faults, 50 seeded runs: each seed sees many
    elections and logs that diverge over several epochs, and ends converged; nodes
    snapshot, move their log starts, and catch up by FetchSnapshot (KIP-630)."""
    results = run_chunk(RunSpec(voters=5, observers=2, faults="all"), 1 + chunk * CHUNK,
                        CHUNK)
    assert len(results) == CHUNK
    assert statistics.median(r.elections for r in results) >= 10
    assert sum(r.multi_epoch_divergences for r in results) >= CHUNK
    assert all(r.commits > 0 and r.faults > 0 for r in results)
    assert all(r.snapshots > 0 for r in results)
    # a FetchSnapshot every other seed at least: how many a seed makes moves with the
    # bytes a format holds (a torn write's cut and a corrupted frame's byte are drawn
    # over them); 8, 19, 29, 31 and 34 in these chunks with timed batches
    assert sum(r.snapshot_fetches for r in results) >= CHUNK // 2


@pytest.mark.parametrize(("voters", "observers"), [(1, 1), (2, 0), (3, 2), (4, 3)])
def test_no_violation_when_other_sizes_under_all_faults(voters: int, observers: int) -> None:
    """Safety and liveness hold for every quorum size, including even ones."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all"), 1, 4)


SMALL_AND_EVEN = [(1, 3), (2, 2), (4, 1)]


@pytest.mark.parametrize(("voters", "observers"), SMALL_AND_EVEN)
def test_no_violation_when_small_or_even_dynamic_quorum_under_all_faults(
        voters: int, observers: int) -> None:
    """KIP-853 at 1, 2 and 4 voters: voters added, removed (down to one), wiped and
    replaced among the faults; a wiped replica finds the leader and every seed ends
    converged."""
    results = run_chunk(RunSpec(voters=voters, observers=observers, faults="all",
                                dynamic=True), 1, 6)
    assert sum(r.reconfigurations for r in results) > 0


@pytest.mark.parametrize(("voters", "observers"), [*SMALL_AND_EVEN, (5, 2)])
def test_no_violation_when_no_pre_vote(voters: int, observers: int) -> None:
    """Without KIP-996 pre-vote: candidates disrupt with real epochs, safety holds."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all", pre_vote=False),
              1, 3)


@pytest.mark.parametrize("faults", ["net", "crash"])
def test_no_violation_when_one_kind_of_faults(faults: str) -> None:
    """Network faults alone, process and disk faults alone."""
    run_chunk(RunSpec(voters=5, observers=2, faults=faults), 1, 4)


def test_no_violation_when_messages_round_trip_the_codec() -> None:
    """The wire codec is lossless for every message the core sends (KIP-516 topic ids)."""
    run_chunk(RunSpec(voters=3, observers=1, faults="net", codec_roundtrip=True,
                      fault_window_ms=10_000), 1, 3)


def test_no_violation_when_regression_seed() -> None:
    """Before the fix of the high watermark taken from a diverging Fetch answer, 945 of
    the first 1000 seeds lost committed data; seed 186 did so soonest (6.2 s)."""
    result = run_seed(RunSpec(voters=5, observers=2, faults="all"), 186)
    assert result.ok, explain(result)


@pytest.mark.parametrize(("voters", "observers", "dead"), [(5, 2, 2), (3, 1, 1)])
def test_live_majority_commits_when_a_minority_stays_dead(voters: int, observers: int,
                                                         dead: int) -> None:
    """A partial heal: at the end of the faults a minority of voters (the leader among
    them as often as any) crashes for good, and no fault's undo brings it back; the rest
    elect a leader, commit a record proposed after the heal within 10 election
    timeouts and converge."""
    clusters: list[Cluster] = []

    def keep(config: SimConfig) -> Cluster:
        clusters.append(Cluster(config))
        return clusters[-1]
    spec = RunSpec(voters=voters, observers=observers, faults="all", dead_voters=dead)
    for seed in range(1, 6):
        result = run_seed(spec, seed, keep)
        assert result.ok, explain(result)
        cluster = clusters[-1]
        # A voter refusing to start (its quorum-state corrupt) is one of the dead.
        down = cluster.dead_for_good | cluster.refusing
        assert len(down & set(cluster.voter_ids)) == dead
        assert cluster.dead_for_good <= set(cluster.voter_ids)
        assert {n.node_id for n in cluster.running()} == set(cluster.nodes) - down


def test_liveness_violation_when_a_majority_stays_dead() -> None:
    """The partial-heal check has teeth: with a majority dead nothing can commit, and
    the sweep says so, with a replay line that leaves them dead again."""
    spec = RunSpec(voters=5, observers=2, faults="all", dead_voters=3,
                   fault_window_ms=10_000)
    results = list(sweep(spec, range(1, 4), stop_on_violation=False))
    assert [r.invariant for r in results] == [LIVENESS] * 3
    assert all("--dead-voters 3" in r.replay for r in results)
    assert run_seed(spec, 2) == results[1]


def test_same_results_when_seeds_run_in_worker_processes() -> None:
    """`jobs` > 1: each seed's result depends on the seed alone, in seed order."""
    spec = RunSpec(voters=3, observers=1, faults="all", fault_window_ms=8000)
    seeds = range(40, 44)
    assert list(sweep(spec, seeds, jobs=2)) == list(sweep(spec, seeds))


def test_summary_counts_depth_when_sweep_done() -> None:
    """The summary: elections per seed (median, min, max), divergences and multi-epoch
    divergences (total, median per seed), snapshots and snapshot fetches (total, per
    seed), events, simulated and wall time."""
    spec = RunSpec(voters=5, observers=2, faults="all")
    results = [run_seed(spec, seed) for seed in (1, 2, 3)]
    summary = summarize(results, 2.0)
    assert summary["seeds"] == 3
    assert summary["elections_per_seed"]["min"] == min(r.elections for r in results)
    assert summary["elections_per_seed"]["median"] == statistics.median(
        r.elections for r in results)
    assert summary["divergences"] == sum(r.divergences for r in results) > 0
    assert summary["multi_epoch_divergences"] <= summary["divergences"]
    assert summary["snapshots"] == sum(r.snapshots for r in results) > 0
    assert summary["snapshots_per_seed"]["max"] == max(r.snapshots for r in results)
    assert summary["snapshot_fetches"] == sum(r.snapshot_fetches for r in results)
    assert summary["snapshot_fetches_per_seed"]["min"] == min(
        r.snapshot_fetches for r in results)
    assert summary["snapshot_chunks"] >= summary["snapshot_fetches"]
    assert summary["snapshot_resumes"] <= summary["snapshot_chunks"]
    assert summary["sim_seconds_per_seed"]["min"] >= spec.fault_window_ms / 1000
    assert summary["events_per_second"] == round(summary["events"] / 2.0)


def test_same_trace_when_seed_replayed() -> None:
    """Everything flows from one seed: a replay of a run with the real core produces the
    same events, the same trace and the same numbers."""
    from raft.sim.scenarios import new_cluster

    traces = []
    for _ in range(2):
        cluster = new_cluster(5, 2, 4242, trace_size=5000)
        cluster.run_for(8000)
        traces.append((cluster.events, cluster.trace.lines(), cluster.checker.leaders))
    assert traces[0] == traces[1]
    assert traces[0][0] > 100


@pytest.mark.soak
@pytest.mark.parametrize(("voters", "observers"), [(5, 2), (3, 3)])
@pytest.mark.parametrize("chunk", range(10))
def test_soak_no_violation_when_many_seeds(voters: int, observers: int, chunk: int) -> None:
    """make soak: 10,000 seeds with all faults at 5 voters + 2 observers and at 3 voters +
    3 observers, in worker processes."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all"),
              10_000 + chunk * SOAK_CHUNK, SOAK_CHUNK, jobs=os.cpu_count() or 1)


@pytest.mark.soak
@pytest.mark.parametrize(("voters", "observers", "dynamic", "pre_vote"),
                         [*((v, o, True, True) for v, o in SMALL_AND_EVEN), (5, 2, False, False)])
@pytest.mark.parametrize("chunk", range(10))
def test_soak_no_violation_in_10_000_seeds_of_each_small_even_or_no_pre_vote_shape(
        voters: int, observers: int, dynamic: bool, pre_vote: bool, chunk: int) -> None:
    """make soak: 10,000 seeds in each shape of the dynamic sweeps at 1, 2 and 4 voters
    and of 5 voters without pre-vote."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all", dynamic=dynamic,
                      pre_vote=pre_vote),
              10_000 + chunk * SOAK_CHUNK, SOAK_CHUNK, jobs=os.cpu_count() or 1)


@pytest.mark.soak
@pytest.mark.parametrize(("voters", "observers", "dead"), [(5, 2, 2), (3, 3, 1), (4, 1, 1)])
def test_soak_live_majority_commits_when_a_minority_stays_dead(voters: int, observers: int,
                                                              dead: int) -> None:
    """make soak: partial heals, 1,000 seeds per shape."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all", dead_voters=dead),
              60_000, SOAK_CHUNK, jobs=os.cpu_count() or 1)


@pytest.mark.soak
@pytest.mark.parametrize(("voters", "observers"), [(1, 0), (2, 1), (4, 0), (5, 5)])
def test_soak_no_violation_when_any_size(voters: int, observers: int) -> None:
    """make soak: other cluster shapes under all faults."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all"), 50_000, 300,
              jobs=os.cpu_count() or 1)


@pytest.mark.soak
@pytest.mark.parametrize(("voters", "observers"), [*SMALL_AND_EVEN, (5, 2)])
@pytest.mark.parametrize(("dynamic", "pre_vote"), [(True, True), (False, True),
                                                   (False, False)])
def test_soak_no_violation_when_small_even_dynamic_or_no_pre_vote(
        voters: int, observers: int, dynamic: bool, pre_vote: bool) -> None:
    """make soak: 1,000 seeds at 1, 2, 4 and 5 voters, with a dynamic quorum, a static
    one, and a static one without pre-vote."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all", dynamic=dynamic,
                      pre_vote=pre_vote), 60_000, 1000, jobs=os.cpu_count() or 1)
