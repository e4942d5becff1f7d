"""The seed sweep: random fault schedules on a five-voter, two-observer cluster, every
safety invariant checked after every event and liveness after the heal. `make soak`
runs the big sweeps."""

from __future__ import annotations

import pytest

from raft.sim.sweep import RunResult, RunSpec, run_seed, sweep

CHUNK = 50


def explain(failed: RunResult) -> str:
    return (f"seed {failed.seed}: {failed.invariant}: {failed.detail}\n"
            + "\n".join(failed.trace) + f"\nreplay: {failed.replay}")


def run_chunk(spec: RunSpec, first: int, count: int) -> list[RunResult]:
    results = list(sweep(spec, range(first, first + count)))
    failed = [r for r in results if not r.ok]
    assert not failed, explain(failed[0])
    return results


@pytest.mark.parametrize("chunk", range(10))
def test_no_violation_when_five_voters_under_all_faults(chunk: int) -> None:
    """KIP-595 safety and liveness under crashes, pauses, partitions, loss, duplication
    and slow disks and links: 500 seeded runs (10 chunks of 50) with all faults."""
    results = run_chunk(RunSpec(voters=5, observers=2, faults="all"), 1 + chunk * CHUNK,
                        CHUNK)
    assert len(results) == CHUNK
    assert sum(r.faults for r in results) > 0
    assert all(r.commits > 0 for r in results)


@pytest.mark.parametrize(("voters", "observers"), [(1, 1), (2, 0), (3, 2), (4, 3)])
def test_no_violation_when_other_sizes_under_all_faults(voters: int, observers: int) -> None:
    """Safety and liveness hold for every quorum size, including even ones."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all"), 1, 15)


def test_no_violation_when_messages_round_trip_the_codec() -> None:
    """The wire codec is lossless for every message the core sends (KIP-516 topic ids)."""
    run_chunk(RunSpec(voters=3, observers=1, faults="net", codec_roundtrip=True), 1, 8)


@pytest.mark.parametrize(("voters", "observers", "faults", "seed"), [
    (1, 0, "all", 50112),  # leader crashed before its first fsync, re-won the same epoch
    (5, 2, "all", 11951),  # a candidate of epoch 1 won after epoch 2 had committed
    (5, 2, "all", 12837),
])
def test_no_violation_when_regression_seed(voters: int, observers: int, faults: str,
                                           seed: int) -> None:
    """Seeds that once raised an alarm (a false one, or a real bug) stay clean."""
    result = run_seed(RunSpec(voters=voters, observers=observers, faults=faults), seed)
    assert result.ok, explain(result)


@pytest.mark.soak
@pytest.mark.parametrize("faults", ["all", "net", "crash"])
@pytest.mark.parametrize("chunk", range(10))
def test_soak_no_violation_when_many_seeds(faults: int, chunk: int) -> None:
    """make soak: 3 x 10 x 350 = 10,500 five-voter runs."""
    run_chunk(RunSpec(voters=5, observers=2, faults=faults), 10_000 + chunk * 350, 350)


@pytest.mark.soak
@pytest.mark.parametrize(("voters", "observers"), [(1, 0), (2, 1), (3, 1), (4, 0), (5, 5)])
def test_soak_no_violation_when_any_size(voters: int, observers: int) -> None:
    """make soak: every cluster shape under all faults."""
    run_chunk(RunSpec(voters=voters, observers=observers, faults="all"), 50_000, 300)


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
