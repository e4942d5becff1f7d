"""One simulated run per seed, and sweeps over many seeds.

A run: start the cluster and a steady workload, inject the seed's random faults for
`fault_window_ms` of simulated time (see `raft.sim.faults`), heal everything (or all but
`dead_voters` voters, dead for good: a partial heal), then require liveness of what
runs: within `liveness_timeouts` election timeouts a leader exists and a record
proposed after the heal commits; then, with the workload stopped, within
`converge_timeouts` election timeouts every running node (voters and observers) holds
the leader's high watermark and exactly the leader's log. Any invariant violation, or an
exception out of the core, ends the run. Every run stops by itself: its simulated time is
bounded by the window plus those two budgets.

A sweep runs seeds in order, in this process or (`jobs` > 1) in worker processes; each
seed's result depends on the seed alone, and results come back in seed order.
`summarize` gives how deep the sweep went: elections (epochs that had a leader),
divergences (`raft.sim.cluster.Divergences`), snapshots taken and snapshot fetches
completed (a fetched snapshot loaded in place of a node's log) per seed, and how long
failovers after a leader's crash took (simulated ms, over every such crash).
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import statistics
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from raft.sim.cluster import Cluster, SimConfig
from raft.sim.disk import DiskConfig
from raft.sim.faults import schedule_faults
from raft.sim.invariants import LIVENESS, InvariantViolation
from raft.sim.scenarios import SCENARIOS, NotApplicable, ScenarioFailure

CORE_EXCEPTION = "core-raised"
SCENARIO_FAILED = "scenario-outcome"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """Everything that determines a run besides the seed."""

    voters: int = 5
    observers: int = 2
    faults: str = "all"
    fault_window_ms: int = 40_000
    liveness_timeouts: int = 10  # after the heal: a leader, and a new record committed
    converge_timeouts: int = 10  # then: every running node holds the leader's log and HW
    pre_vote: bool = True
    planted_bug: str | None = None
    codec_roundtrip: bool = False
    trace_size: int = 60
    scenario: str | None = None  # one of raft.sim.scenarios.SCENARIOS instead of faults
    dynamic: bool = False  # kraft.version 1 with reconfiguration faults (KIP-853)
    dead_voters: int = 0  # voters left dead for good at the heal (see raft.sim.faults)
    lying_fsync_writes: int = 0  # a crash loses this many acknowledged batches (a bug)

    def sim_config(self, seed: int) -> SimConfig:
        return SimConfig(voters=self.voters, observers=self.observers, seed=seed,
                         pre_vote=self.pre_vote, planted_bug=self.planted_bug,
                         codec_roundtrip=self.codec_roundtrip, trace_size=self.trace_size,
                         dynamic=self.dynamic,
                         disk=DiskConfig(lying_fsync_writes=self.lying_fsync_writes))

    def replay_command(self, seed: int) -> str:
        parts = [f"kraft sim --voters {self.voters} --observers {self.observers}",
                 f"--scenario {self.scenario}" if self.scenario else f"--faults {self.faults}",
                 f"--seed {seed} --seeds 1"]
        defaults = RunSpec()
        if self.fault_window_ms != defaults.fault_window_ms:
            parts.append(f"--fault-window-ms {self.fault_window_ms}")
        if not self.pre_vote:
            parts.append("--no-pre-vote")
        if self.planted_bug:
            parts.append(f"--planted-bug {self.planted_bug}")
        if self.codec_roundtrip:
            parts.append("--codec")
        if self.dynamic:
            parts.append("--dynamic")
        if self.dead_voters:
            parts.append(f"--dead-voters {self.dead_voters}")
        if self.lying_fsync_writes:
            parts.append(f"--lying-fsync {self.lying_fsync_writes}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    seed: int
    events: int
    elections: int
    commits: int
    faults: int
    sim_time_ms: float
    divergences: int = 0
    multi_epoch_divergences: int = 0
    snapshots: int = 0  # taken by the nodes' state machines
    snapshot_fetches: int = 0  # fetched snapshots loaded in place of a log
    snapshot_chunks: int = 0  # FetchSnapshot requests
    snapshot_resumes: int = 0  # downloads resumed from the bytes held after a lost chunk
    failovers_ms: tuple[float, ...] = ()  # from each leader crash to the next leader
    reconfigurations: int = 0  # voter changes committed (dynamic runs)
    fault_counts: tuple[tuple[str, int], ...] = ()  # `Cluster.fault_counts`, sorted
    invariant: str | None = None
    detail: str = ""
    trace: tuple[str, ...] = ()
    replay: str = ""

    @property
    def ok(self) -> bool:
        return self.invariant is None

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def run_seed(spec: RunSpec, seed: int,
             make_cluster: Callable[[SimConfig], Cluster] = Cluster) -> RunResult:
    """`make_cluster` builds the cluster from its config (tests pass a toy core)."""
    cluster: Cluster | None = None
    invariant, detail = None, ""
    try:
        if spec.scenario is not None:
            cluster = _run_scenario(spec, seed)
        else:
            cluster = make_cluster(spec.sim_config(seed))
            _run_random(spec, cluster)
    except InvariantViolation as exc:
        invariant, detail = exc.invariant, exc.detail
        cluster = cluster or exc.sim_cluster
    except ScenarioFailure as exc:
        invariant, detail, cluster = SCENARIO_FAILED, exc.message, exc.cluster
    except NotApplicable:
        raise
    except Exception as exc:  # the core must not raise on any schedule: report it
        invariant = CORE_EXCEPTION
        detail = f"{type(exc).__name__}: {exc}\n" + "".join(
            traceback.format_exception(exc)[-6:])
        cluster = cluster or getattr(exc, "sim_cluster", None)
    if cluster is None:
        return RunResult(seed=seed, events=0, elections=0, commits=0, faults=0,
                         sim_time_ms=0.0, invariant=invariant, detail=detail,
                         replay=spec.replay_command(seed))
    return RunResult(
        seed=seed, events=cluster.events, elections=len(cluster.checker.leaders),
        commits=cluster.committed_offset(), faults=cluster.faults,
        sim_time_ms=cluster.now_ms, divergences=cluster.divergences.total,
        multi_epoch_divergences=cluster.divergences.multi_epoch,
        snapshots=cluster.snapshots_taken, snapshot_fetches=cluster.snapshot_fetches,
        snapshot_chunks=cluster.snapshot_chunks,
        snapshot_resumes=cluster.snapshot_resumes,
        failovers_ms=tuple(cluster.failovers_ms),
        reconfigurations=cluster.reconfigurations,
        fault_counts=tuple(sorted(cluster.fault_counts().items())),
        invariant=invariant, detail=detail,
        trace=tuple(cluster.trace.lines()) if invariant else (),
        replay=spec.replay_command(seed) if invariant else "")


def _run_random(spec: RunSpec, cluster: Cluster) -> None:
    heal_ms = schedule_faults(cluster, spec.faults, spec.fault_window_ms,
                              dead_voters=spec.dead_voters)
    cluster.start_workload()
    cluster.run_for(heal_ms)
    require_commit_after_heal(cluster, heal_ms, spec.liveness_timeouts)
    require_convergence(cluster, spec.converge_timeouts)


def require_commit_after_heal(cluster: Cluster, heal_ms: float, timeouts: int) -> None:
    """A leader exists and a record proposed after `heal_ms` commits within `timeouts`
    election timeouts."""
    heal_us = int(heal_ms * 1000)
    budget_ms = timeouts * cluster.config.election_timeout_ms
    if not cluster.run_until(lambda: _committed_after(cluster, heal_us), budget_ms):
        raise InvariantViolation(
            LIVENESS, f"no record proposed after the heal at {heal_ms:.0f} ms committed "
                      f"within {timeouts} election timeouts (leader: "
                      f"{cluster.leader_id()}, committed offset {cluster.committed_offset()})")


def require_convergence(cluster: Cluster, timeouts: int) -> None:
    """With proposals stopped, within `timeouts` election timeouts every running node
    holds the leader's high watermark and the leader's log, record for record."""
    gaps = cluster.run_until_converged(timeouts * cluster.config.election_timeout_ms)
    if gaps:
        raise InvariantViolation(
            LIVENESS, f"the running nodes did not converge within {timeouts} election "
                      f"timeouts of the first commit after the heal: " + "; ".join(gaps))


def _run_scenario(spec: RunSpec, seed: int) -> Cluster:
    scenario = SCENARIOS.get(spec.scenario or "")
    if scenario is None:
        raise ValueError(f"unknown scenario {spec.scenario!r}; known: {sorted(SCENARIOS)}")
    return scenario(spec.voters, spec.observers, seed, planted_bug=spec.planted_bug,
                    pre_vote=spec.pre_vote, codec_roundtrip=spec.codec_roundtrip,
                    trace_size=spec.trace_size)


def _committed_after(cluster: Cluster, since_us: int) -> bool:
    proposals = cluster.proposals
    for time_us, epoch, offset in reversed(proposals):
        if time_us < since_us:
            return False
        if cluster.is_committed(epoch, offset):
            return True
    return False


def sweep(spec: RunSpec, seeds: Iterable[int],
          progress: Callable[[int, RunResult], None] | None = None,
          stop_on_violation: bool = True,
          make_cluster: Callable[[SimConfig], Cluster] = Cluster,
          jobs: int = 1) -> Iterator[RunResult]:
    """Run each seed; yields every result in seed order (stops after the first violation
    unless told otherwise). `jobs` > 1 runs seeds in that many worker processes (with the
    real core only: `make_cluster` must stay the default)."""
    if jobs > 1 and make_cluster is not Cluster:
        raise ValueError("worker processes build the default Cluster only")
    results = (_in_workers(spec, seeds, jobs) if jobs > 1
               else (run_seed(spec, seed, make_cluster) for seed in seeds))
    for index, result in enumerate(results):
        if progress is not None:
            progress(index + 1, result)
        yield result
        if stop_on_violation and not result.ok:
            return


def _in_workers(spec: RunSpec, seeds: Iterable[int], jobs: int) -> Iterator[RunResult]:
    """Seeds handed out one at a time (runs differ in length), answered in seed order;
    leaving the loop early (a violation) terminates the workers."""
    with multiprocessing.Pool(jobs) as pool:
        yield from pool.imap(functools.partial(run_seed, spec), seeds, chunksize=1)


def summarize(results: Sequence[RunResult], wall_seconds: float) -> dict[str, Any]:
    """How many seeds ran and how deep they went, with totals and per-seed spreads."""
    def spread(values: list[int] | list[float]) -> dict[str, float]:
        if not values:
            return {"median": 0, "min": 0, "max": 0}
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    events = sum(r.events for r in results)
    fault_counts: Counter[str] = Counter()
    for result in results:
        fault_counts.update(dict(result.fault_counts))
    return {
        "seeds": len(results),
        "violations": sum(1 for r in results if not r.ok),
        "events": events,
        "commits": sum(r.commits for r in results),
        "faults": sum(r.faults for r in results),
        "fault_counts": dict(sorted(fault_counts.items())),
        "elections": sum(r.elections for r in results),
        "elections_per_seed": spread([r.elections for r in results]),
        "divergences": sum(r.divergences for r in results),
        "divergences_per_seed": spread([r.divergences for r in results]),
        "multi_epoch_divergences": sum(r.multi_epoch_divergences for r in results),
        "multi_epoch_divergences_per_seed": spread([r.multi_epoch_divergences
                                                    for r in results]),
        "snapshots": sum(r.snapshots for r in results),
        "snapshots_per_seed": spread([r.snapshots for r in results]),
        "snapshot_fetches": sum(r.snapshot_fetches for r in results),
        "snapshot_fetches_per_seed": spread([r.snapshot_fetches for r in results]),
        "snapshot_chunks": sum(r.snapshot_chunks for r in results),
        "snapshot_resumes": sum(r.snapshot_resumes for r in results),
        "reconfigurations": sum(r.reconfigurations for r in results),
        "leader_crash_failover_ms": spread([round(ms, 1) for r in results
                                            for ms in r.failovers_ms]),
        "sim_seconds_per_seed": spread([round(r.sim_time_ms / 1000, 1) for r in results]),
        "wall_seconds": round(wall_seconds, 2),
        "events_per_second": round(events / wall_seconds) if wall_seconds > 0 else None,
    }
