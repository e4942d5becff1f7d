"""Hypothesis drives the simulated cluster (the real core): its rules are ticks (time
passing), deliveries, drops, partitions, crashes, restarts and proposals. Every event is
checked against the safety invariants by the simulator itself; when hypothesis finds a
violating schedule it shrinks it to a short one. At the end everything heals and the
cluster must elect a leader and commit within 10 election timeouts (liveness)."""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from raft.sim.cluster import Cluster, SimConfig
from raft.sim.faults import heal_all
from raft.sim.invariants import InvariantViolation
from raft.sim.scenarios import wait_for_commit


class SimulatedQuorum(RuleBasedStateMachine):
    """KIP-595 quorum under an adversarial schedule: safety after every event (election
    safety, log matching, leader completeness, monotonic HW and epochs), liveness after
    the heal."""

    cluster: Cluster

    @initialize(voters=st.integers(1, 5), observers=st.integers(0, 2),
                seed=st.integers(0, 2**32 - 1))
    def start(self, voters: int, observers: int, seed: int) -> None:
        self.cluster = Cluster(SimConfig(voters=voters, observers=observers, seed=seed,
                                         trace_size=40))

    def _node(self, index: int) -> int:
        ids = sorted(self.cluster.nodes)
        return ids[index % len(ids)]

    @rule(count=st.integers(1, 40))
    def deliver_events(self, count: int) -> None:
        for _ in range(count):
            if not self.cluster.step():
                break

    @rule(ms=st.integers(1, 3000))
    def time_passes(self, ms: int) -> None:
        self.cluster.run_for(ms)

    @rule(index=st.integers(0, 50))
    def drop_a_message(self, index: int) -> None:
        self.cluster.drop_in_flight(index)

    @rule(mask=st.integers(1, 2**7 - 2))
    def partition(self, mask: int) -> None:
        ids = sorted(self.cluster.nodes)
        side = [n for i, n in enumerate(ids) if mask >> i & 1]
        self.cluster.network.partition(side, [n for n in ids if n not in side])

    @rule(src=st.integers(0, 6), dst=st.integers(0, 6))
    def cut_one_way(self, src: int, dst: int) -> None:
        self.cluster.network.cut(self._node(src), self._node(dst), both_ways=False)

    @rule()
    def heal_network(self) -> None:
        self.cluster.network.heal()

    @rule(index=st.integers(0, 6))
    def crash(self, index: int) -> None:
        self.cluster.crash(self._node(index))

    @rule(index=st.integers(0, 6))
    def restart(self, index: int) -> None:
        self.cluster.start(self._node(index))

    @precondition(lambda self: self.cluster.leader() is not None)
    @rule()
    def propose(self) -> None:
        self.cluster.propose()

    @rule()
    def resign_leader(self) -> None:
        leader = self.cluster.leader_id()
        if leader is not None:
            self.cluster.resign(leader)

    @invariant()
    def hw_never_past_log_end(self) -> None:
        for node in self.cluster.running():
            assert (node.core.high_watermark or 0) <= node.log.end_offset

    def teardown(self) -> None:
        cluster = getattr(self, "cluster", None)
        if cluster is None:
            return
        heal_all(cluster)
        cluster.start_workload()
        wait_for_commit(cluster, timeout_ets=10)


SimulatedQuorum.TestCase.settings = settings(max_examples=80, stateful_step_count=30,
                                             deadline=None)
test_simulated_quorum = SimulatedQuorum.TestCase


class VotesIgnoringLogs(SimulatedQuorum):
    """The same rules on 3 voters whose core grants votes without comparing logs."""

    @initialize(seed=st.integers(0, 2**32 - 1))
    def start(self, seed: int) -> None:  # type: ignore[override]
        self.cluster = Cluster(SimConfig(voters=3, observers=0, seed=seed, trace_size=40,
                                         planted_bug="vote_without_log_check"))

    def teardown(self) -> None:
        pass  # the point is the safety violation, not liveness


def test_machine_finds_and_shrinks_a_violation_when_bug_planted() -> None:
    """The state machine has teeth (Raft §5.4.1): with votes granted without the log
    comparison, hypothesis finds a schedule that loses committed data, and shrinks it to a
    short list of rule calls, a third of the 60-step schedule or less (how short exactly
    depends on the core's timing, which the search follows)."""
    with pytest.raises(InvariantViolation) as caught:
        run_state_machine_as_test(VotesIgnoringLogs, settings=settings(
            max_examples=2000, stateful_step_count=60, deadline=None, derandomize=True,
            database=None, phases=[Phase.generate, Phase.shrink]))
    steps = [line for line in "\n".join(getattr(caught.value, "__notes__", [])).splitlines()
             if line.startswith("state.") and "hw_never_past_log_end" not in line]
    assert 0 < len(steps) <= 20, steps
