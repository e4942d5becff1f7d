"""The data-plane simulator (broker/dataplane/sim): clean seeds hold every invariant and
converge, each planted bug is found by the random sweep by itself and named, a seed
replays exactly, and `kraft sim --data-plane` reports both. The KIP-253 plants (ordered
clients over a resized topic, docs/kip-253.md) take more seeds: their sweeps run in two
worker processes, and `make soak` sweeps each over more."""

from __future__ import annotations

import json
import os
import shlex

import pytest

from broker.dataplane.sim.planted import ORDERED_BUGS, PLANTED_BUGS, Plant
from broker.dataplane.sim.run import LIVENESS, DataPlaneSpec, run_seed, sweep
from broker.dataplane.sim.world import World
from broker.kafka.ordered.rules import undeleted_count
from tools.cli import main as kraft

# What each bug breaks first (found with `kraft sim --data-plane --planted-bug BUG
# --seeds 300 --jobs 1`); the sweep must find it within the first seeds. First found at
# seed 1 (ack_before_isr, isr_shrink_before_commit, truncate_below_hw,
# consumer_reads_log_end), 2 (hw_from_diverging_answer, producer_state_not_rebuilt: 2.1 s
# wall), 7 (stale_leader_accepts_writes: 6.0 s) and 12 (truncate_to_leader_end: 25 s), on
# a host at load 10, before the topic was resized (SLOW_FIRST_SEEDS below).
EXPECTED = {
    "dp_hw_from_diverging_answer": {"no-truncation-below-hw", "committed-prefix"},
    "dp_ack_before_isr": {"acked-is-committed"},
    "dp_isr_shrink_before_commit": {"committed-prefix", "leader-holds-committed",
                                    "acked-is-committed"},
    "dp_truncate_below_hw": {"no-truncation-below-hw"},
    "dp_consumer_reads_log_end": {"consumer-reads-committed"},
    "dp_truncate_to_leader_end": {LIVENESS},
    "dp_producer_state_not_rebuilt": {"idempotent-stored-once"},
    "dp_stale_leader_accepts_writes": {"acked-is-committed"},
    **{bug: {"per-key-order"} for bug in ORDERED_BUGS},
}
FIRST_SEEDS = range(1, 41)
# Plants the sweep finds only after more seeds than the default run affords, since the
# topic is resized with an ordered consumer group on it (docs/kip-253.md): the default
# run replays the first seed the sweep found each at (`kraft sim --data-plane
# --planted-bug BUG --seeds 300 --jobs 2`), `make soak` sweeps from seed 1.
SLOW_FIRST_SEEDS = {"dp_count_and_stamp_two_images": 22,
                    "dp_gated_source_reports_position": 6,
                    "dp_deletion_gate_uses_high_watermark": 186,
                    "dp_truncate_to_leader_end": 12,
                    "dp_lagging_leader_answers_gate": 91,
                    "dp_member_fetch_unfenced": 45}
# Schedule b, and a member on an older layout of the same count, need metadata that stays
# behind resizes for seconds: their sweeps add the opt-in fault (`--metadata-freezes`,
# docs/kip-253.md)
NEEDS_FREEZES = {"dp_lagging_leader_answers_gate", "dp_member_fetch_unfenced"}
SOAK_SEEDS = range(1, 301)


def _spec(bug: str | None, *, sweep_of: str) -> DataPlaneSpec:
    """The spec the sweep for `sweep_of` runs, with `bug` planted (None: clean)."""
    return DataPlaneSpec(planted_bug=bug, metadata_freezes=sweep_of in NEEDS_FREEZES)


def test_every_planted_bug_has_an_expectation() -> None:
    assert set(EXPECTED) == set(PLANTED_BUGS)


def test_clean_seeds_hold_every_invariant_and_go_deep() -> None:
    results = list(sweep(DataPlaneSpec(), range(1, 21), jobs=2, stop_on_violation=False))
    assert [r.seed for r in results if not r.ok] == []
    changes = sorted(r.stats["leader_changes"] for r in results)
    assert changes[len(changes) // 2] >= 5  # the faults move leadership, often
    assert sum(r.stats["truncations"] for r in results) > 0  # divergence is exercised
    assert all(r.stats["acked"] > 0 for r in results)
    # producers retry, and the producer state answers retries of stored batches
    assert all(r.stats["produce_retries"] > 0 for r in results)
    assert sum(r.stats["duplicates"] for r in results) > 0
    assert sum(r.stats["acked_leader"] for r in results) > 0  # acks=1 drawn somewhere
    assert sum(r.stats["sent_no_ack"] for r in results) > 0  # and acks=0


@pytest.mark.parametrize("bug", [b for b in PLANTED_BUGS
                                 if b not in ORDERED_BUGS and b not in SLOW_FIRST_SEEDS])
def test_the_random_sweep_finds_each_planted_bug(bug: str) -> None:
    found = next((r for r in sweep(DataPlaneSpec(planted_bug=bug), FIRST_SEEDS)
                  if not r.ok), None)
    assert found is not None, f"{bug} not found in seeds {FIRST_SEEDS}"
    assert found.invariant in EXPECTED[bug], (found.invariant, found.detail)
    again = run_seed(DataPlaneSpec(planted_bug=bug), found.seed)
    assert (again.invariant, again.detail, again.trace) == \
        (found.invariant, found.detail, found.trace)


@pytest.mark.parametrize("bug", sorted(SLOW_FIRST_SEEDS))
def test_each_slow_plant_is_found_at_the_seed_the_sweep_found_it(bug: str) -> None:
    seed = SLOW_FIRST_SEEDS[bug]
    found = run_seed(_spec(bug, sweep_of=bug), seed)
    assert found.invariant in EXPECTED[bug], (found.invariant, found.detail)
    assert run_seed(_spec(None, sweep_of=bug), seed).ok  # the same seed without the plant


def test_a_frozen_broker_serves_its_image_through_a_resize_then_applies_the_newest(
        ) -> None:
    """The metadata-freeze fault: the broker keeps serving by the image it holds (so do
    the clients that take their metadata from it) while the others apply a growth; at
    the thaw it applies the newest image it missed, at once; a crash ends the freeze."""
    world = World(brokers=3, seed=1, plant=Plant())
    world.start()
    world.run_until(1_000)
    frozen, other = world.brokers[1], world.brokers[2]
    world.freeze_metadata(frozen, 2_000)
    assert world.resize(3)
    assert world.resize(4)
    world.run_until(2_500)
    topic, applied = frozen.topic(), other.topic()
    assert topic is not None
    assert applied is not None
    assert (undeleted_count(topic), undeleted_count(applied)) == (2, 4)
    assert frozen.image.last_applied_offset < world.committed_image.last_applied_offset
    world.run_until(3_001)
    assert frozen.image.last_applied_offset == other.image.last_applied_offset
    assert world.stats["metadata_freeze"] == 1
    world.freeze_metadata(frozen, 5_000)
    world.crash(frozen, 100)
    world.run_until(3_500)
    assert frozen.alive
    assert frozen.metadata_frozen_until == 0


def test_the_ordered_workload_resizes_and_delivers() -> None:
    """What the ordered plants rest on: growths, shrinks, removals, keyed records
    acknowledged and delivered by a group that rebalances, in a clean seed."""
    stats = run_seed(DataPlaneSpec(), 1).stats
    assert min(stats["growths"], stats["shrinks"], stats["removals"]) > 0
    assert min(stats["ordered_delivered"], stats["ordered_acked"]) > 100
    assert stats["generations"] > stats["growths"] + stats["shrinks"]


def test_without_faults_leadership_and_isr_hold_and_writes_are_acknowledged() -> None:
    """The resizes still run: their epoch bumps and each broker's lag in applying them
    refuse a few produces (retried), nothing else does."""
    result = run_seed(DataPlaneSpec(faults=False), 3)
    assert result.ok
    # the first election of each initial partition only (those a growth adds start led)
    assert result.stats["leader_changes"] == 2
    assert result.stats["isr_changes"] == result.stats["truncations"] == 0
    assert result.stats["duplicates"] == 0
    assert result.stats["refused"] < 10
    assert result.stats["acked"] > 150  # acks=all batches, a third of those sent


def test_cli_reports_a_planted_bug_with_its_replay_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert kraft(["sim", "--data-plane", "--planted-bug", "dp_ack_before_isr",
                  "--seeds", "5", "--jobs", "1", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "VIOLATION seed=1 invariant=acked-is-committed" in out
    replay = next(line for line in out.splitlines() if line.startswith("replay: "))
    args = shlex.split(replay.removeprefix("replay: kraft "))
    assert kraft([*args, "--json", "--no-progress"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["invariant"] for f in report["failures"]] == ["acked-is-committed"]


def test_cli_exits_0_with_depth_and_2_on_a_bad_argument(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert kraft(["sim", "--data-plane", "--seeds", "2", "--jobs", "1",
                  "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "ok: 2 seeds, 0 violations" in out
    assert "leader changes" in out
    assert "duplicates refused by the producer state" in out
    assert "acks=1" in out
    assert "acks=0" in out
    assert kraft(["sim", "--data-plane", "--planted-bug", "diverging_hw"]) == 2
    assert "for --data-plane" in capsys.readouterr().err
    assert kraft(["sim", "--data-plane", "--brokers", "1"]) == 2


@pytest.mark.soak
@pytest.mark.timeout(900)
@pytest.mark.parametrize("bug", sorted(SLOW_FIRST_SEEDS))
def test_soak_the_random_sweep_finds_each_slow_plant(bug: str) -> None:
    found = next((r for r in sweep(_spec(bug, sweep_of=bug), SOAK_SEEDS,
                                   jobs=os.cpu_count() or 1) if not r.ok), None)
    assert found is not None, f"{bug} not found in seeds {SOAK_SEEDS}"
    assert found.invariant in EXPECTED[bug], (found.invariant, found.detail)


@pytest.mark.soak
@pytest.mark.timeout(900)  # a chunk is ~1 min of two cores; the default 300 s is per test
@pytest.mark.parametrize("chunk", range(100))
def test_soak_data_plane_holds_over_many_seeds(chunk: int) -> None:
    """make soak: 10,000 data-plane seeds (3 brokers, all faults) in chunks of 100, in
    worker processes."""
    seeds = range(100_000 + chunk * 100, 100_000 + (chunk + 1) * 100)
    failures = [(r.seed, r.invariant, r.detail) for r in sweep(
        DataPlaneSpec(), seeds, jobs=os.cpu_count() or 1, stop_on_violation=False)
        if not r.ok]
    assert failures == []
