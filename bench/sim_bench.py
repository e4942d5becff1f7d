"""Simulator benchmark: simulated events per second (one core, the real raft core under
all faults) and the median simulated time to elect a new leader after the leader crashes,
in election timeouts."""

from __future__ import annotations

import statistics
import time

from raft.sim.scenarios import new_cluster, wait_for_commit, wait_for_leader
from raft.sim.sweep import RunSpec, run_seed

_SWEEP_SECONDS = 8.0
_ELECTION_SEEDS = 60


def events_per_second(max_seconds: float = _SWEEP_SECONDS) -> tuple[int, int, float]:
    """(seeds run, events, wall seconds) of a 5-voter, 2-observer sweep with all faults."""
    spec = RunSpec(voters=5, observers=2, faults="all")
    started = time.perf_counter()
    seeds = events = 0
    while time.perf_counter() - started < max_seconds:
        result = run_seed(spec, 1 + seeds)
        seeds += 1
        events += result.events
    return seeds, events, time.perf_counter() - started


def election_after_leader_crash(seed: int, voters: int = 5) -> float:
    """Simulated time from the leader's crash to the next leader, in election timeouts."""
    cluster = new_cluster(voters, 0, seed)
    leader = wait_for_leader(cluster)
    wait_for_commit(cluster)
    cluster.run_for(cluster.config.election_timeout_ms * 2)
    crashed_at_ms, epoch = cluster.now_ms, leader.core.epoch
    cluster.crash(leader.node_id)
    wait_for_leader(cluster, above_epoch=epoch, timeout_ets=30)
    return (cluster.now_ms - crashed_at_ms) / cluster.config.election_timeout_ms


def main() -> None:
    seeds, events, seconds = events_per_second()
    print(f"sim sweep (5 voters, 2 observers, all faults): {seeds} seeds, {events} events "
          f"in {seconds:.1f} s = {events / seconds:,.0f} simulated events/s")
    samples = [election_after_leader_crash(seed) for seed in range(1, _ELECTION_SEEDS + 1)]
    quartiles = statistics.quantiles(samples, n=4)
    print(f"election after leader crash (5 voters, {len(samples)} seeds): median "
          f"{statistics.median(samples):.2f} election timeouts (p25 {quartiles[0]:.2f}, "
          f"p75 {quartiles[2]:.2f}, max {max(samples):.2f})")


if __name__ == "__main__":
    main()
