"""One simulated run per seed, and sweeps over many seeds.

A run: start the cluster and a steady workload, inject the seed's random faults, heal
everything at the end of the fault window, then require liveness: within
`liveness_timeouts` election timeouts a leader exists and a record proposed after the
heal commits. Any invariant violation, or an exception out of the core, ends the run.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from raft.sim.cluster import Cluster, SimConfig
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
    fault_window_ms: int = 4000
    liveness_timeouts: int = 10
    pre_vote: bool = True
    planted_bug: str | None = None
    codec_roundtrip: bool = False
    trace_size: int = 60
    scenario: str | None = None  # one of raft.sim.scenarios.SCENARIOS instead of faults

    def sim_config(self, seed: int) -> SimConfig:
        return SimConfig(voters=self.voters, observers=self.observers, seed=seed,
                         pre_vote=self.pre_vote, planted_bug=self.planted_bug,
                         codec_roundtrip=self.codec_roundtrip, trace_size=self.trace_size)

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
        return " ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    seed: int
    events: int
    elections: int
    commits: int
    faults: int
    sim_time_ms: float
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
        sim_time_ms=cluster.now_ms, invariant=invariant, detail=detail,
        trace=tuple(cluster.trace.lines()) if invariant else (),
        replay=spec.replay_command(seed) if invariant else "")


def _run_random(spec: RunSpec, cluster: Cluster) -> None:
    heal_ms = schedule_faults(cluster, spec.faults, spec.fault_window_ms)
    cluster.start_workload()
    cluster.run_for(heal_ms)
    budget_ms = spec.liveness_timeouts * cluster.config.election_timeout_ms
    heal_us = int(heal_ms * 1000)
    if not cluster.run_until(lambda: _committed_after(cluster, heal_us), budget_ms):
        raise InvariantViolation(
            LIVENESS, f"no record proposed after the heal at {heal_ms:.0f} ms committed "
                      f"within {spec.liveness_timeouts} election timeouts (leader: "
                      f"{cluster.leader_id()}, committed offset {cluster.committed_offset()})")


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


def sweep(spec: RunSpec, seeds: range,
          progress: Callable[[int, RunResult], None] | None = None,
          stop_on_violation: bool = True,
          make_cluster: Callable[[SimConfig], Cluster] = Cluster) -> Iterator[RunResult]:
    """Run each seed in turn; yields every result (stops after the first violation
    unless told otherwise)."""
    for index, seed in enumerate(seeds):
        result = run_seed(spec, seed, make_cluster)
        if progress is not None:
            progress(index + 1, result)
        yield result
        if stop_on_violation and not result.ok:
            return
