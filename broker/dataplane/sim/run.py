"""One data-plane run per seed, and sweeps over seeds.

A run: start the cluster and the clients (Kafka's on partition 0, `plain`; KIP-253's
ordered ones over the resized topic, `ordered`), inject the seed's faults and resizes
for `fault_window_ms` (crashes, cut links, slow followers, lagging metadata, a paused
consumer; see `schedule_faults`), heal everything, then require liveness: within
`LIVENESS_MS` a write made after the heal is acknowledged; then, with the producers
stopped, within `CONVERGE_MS` every replica of each unmarked partition holds exactly
the longest log with its high watermark at the end. Every run stops by itself: its
simulated time is bounded by the window plus those two budgets.
"""

from __future__ import annotations

import multiprocessing
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from broker.dataplane.sim.invariants import DataPlaneViolation, KeyOrder
from broker.dataplane.sim.log import Record
from broker.dataplane.sim.node import TOPIC_ID, Broker, life_of
from broker.dataplane.sim.ordered import OrderedWorkload
from broker.dataplane.sim.plain import PlainClients
from broker.dataplane.sim.planted import PLANTS, Plant
from broker.dataplane.sim.world import CONTROLLER, World

LIVENESS_MS = 8_000
CONVERGE_MS = 5_000
LIVENESS = "liveness"


@dataclass(frozen=True, slots=True, kw_only=True)
class DataPlaneSpec:
    brokers: int = 3
    faults: bool = True
    metadata_freezes: bool = False  # `freeze` among the fault kinds (see schedule_faults)
    fault_window_ms: int = 30_000
    planted_bug: str | None = None

    def replay_command(self, seed: int) -> str:
        parts = [f"kraft sim --data-plane --brokers {self.brokers} --seed {seed} --seeds 1",
                 "" if self.faults else "--faults none",
                 "--metadata-freezes" if self.metadata_freezes else "",
                 f"--planted-bug {self.planted_bug}" if self.planted_bug else ""]
        return " ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataPlaneResult:
    seed: int
    invariant: str | None = None
    detail: str = ""
    trace: tuple[str, ...] = ()
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.invariant is None


FAULT_KINDS = ("crash", "crash", "cut", "cut", "slow", "lag")
FREEZE_MS = (1_000, 5_000)  # a broker that applies no image (`World.freeze_metadata`)


def schedule_faults(world: World, window_ms: int, *, metadata_freezes: bool = False) -> None:
    """The seed's faults, at random times in the window, each over by the window's end.
    With `metadata_freezes`, a quarter of them freeze a broker's metadata for seconds
    across the next resize (opt-in: it changes every seed's draw, and its freezes of a
    marked partition's leader hold removals back, so the other plants need more seeds)."""
    rng, ids = world.rng, sorted(world.brokers)
    kinds = FAULT_KINDS + (("freeze", "freeze") if metadata_freezes else ())
    time = rng.randint(200, 800)
    while time < window_ms - 500:
        kind = rng.choice(kinds)
        broker = world.brokers[rng.choice(ids)]
        length = min(rng.randint(200, 3_000), window_ms - time)
        if kind == "freeze":
            world.at(time, _freeze, world, broker, rng.randint(*FREEZE_MS),
                     rng.randint(1, 100), window_ms)
        elif kind == "crash":
            world.at(time, world.crash, broker, length)
        elif kind == "cut":
            other = rng.choice([CONTROLLER] + [b for b in ids if b != broker.broker_id])
            world.at(time, _cut, world, broker.broker_id, other, length)
        else:
            world.at(time, _slow if kind == "slow" else _lag, world, broker, length)
        time += rng.randint(100, 1_000)


def _cut(world: World, a: int, b: int, length: int) -> None:
    link = frozenset((a, b))
    world.stats["cuts"] += 1
    world.cuts[link] = world.cuts.get(link, 0) + 1
    world.at(world.now + length, _heal, world, link)


def _heal(world: World, link: frozenset[int]) -> None:
    world.cuts[link] -= 1


def _slow(world: World, broker: Broker, length: int) -> None:
    world.stats["slow"] += 1
    broker.slow_until = max(broker.slow_until, world.now + length)


def _lag(world: World, broker: Broker, length: int) -> None:
    world.stats["metadata_lag"] += 1
    broker.metadata_lag_until = max(broker.metadata_lag_until, world.now + length)


def _freeze(world: World, broker: Broker, length: int, lead: int, window_ms: int) -> None:
    """`lead` ms before the next resize, so that it spans one, on the leader of the
    partition a shrink would mark (`broker` when none leads it); over by the window's
    end all the same."""
    start = max(world.now, world.next_resize_at - lead)
    topic = world.committed_topic
    if topic is not None and topic.undeleted_count > 0:
        leader = topic.partitions[topic.undeleted_count - 1].leader
        broker = world.brokers.get(leader, broker)
    world.at(start, world.freeze_metadata, broker, min(length, window_ms - start))


def run_seed(spec: DataPlaneSpec, seed: int) -> DataPlaneResult:
    plant = PLANTS[spec.planted_bug] if spec.planted_bug else Plant()
    world = World(brokers=spec.brokers, seed=seed, plant=plant)
    plain, ordered = PlainClients(world), OrderedWorkload(world, KeyOrder())
    window = spec.fault_window_ms if spec.faults else 0
    try:
        world.start()
        plain.start()
        ordered.start(resize_until=spec.fault_window_ms)
        if spec.faults:
            schedule_faults(world, window, metadata_freezes=spec.metadata_freezes)
        world.run_until(window)
        acked = world.stats["acked"]
        world.run_until(window + LIVENESS_MS)
        if world.stats["acked"] == acked:
            raise DataPlaneViolation(LIVENESS, f"no write acknowledged within {LIVENESS_MS} "
                                     "ms after the heal")
        world.producing = False
        world.run_until(window + LIVENESS_MS + CONVERGE_MS)
        _check_converged(world)
    except DataPlaneViolation as exc:
        return DataPlaneResult(seed=seed, invariant=exc.invariant, detail=exc.detail,
                               trace=world.trace_lines(), stats=dict(world.stats))
    return DataPlaneResult(seed=seed, stats=dict(world.stats))


def _check_converged(world: World) -> None:
    """Each unmarked partition's replicas (a marked one's followers may stay behind its
    leader's deleted records until it is removed)."""
    topic = world.committed_image.topic(TOPIC_ID)
    assert topic is not None
    for partition in topic.partitions:
        if partition.marked_for_deletion:
            continue
        logs: dict[int, tuple[list[Record], int]] = {}
        for broker in world.brokers.values():
            replica = broker.replicas.get(partition.partition)
            logs[broker.broker_id] = ([], -1) if replica is None or \
                replica.life != life_of(partition) else (replica.log.entries, (
                    replica.progress.high_watermark if replica.progress else -1))
        longest = max(logs.values(), key=lambda entry: len(entry[0]))[0]
        for broker_id, (entries, hw) in sorted(logs.items()):
            if entries != longest or hw != len(longest):
                raise DataPlaneViolation(
                    LIVENESS, f"broker {broker_id} holds {len(entries)} records of "
                    f"partition {partition.partition} (high watermark {hw}), not the "
                    f"longest log's {len(longest)} {CONVERGE_MS} ms after the producers "
                    "stopped")


def _run_one(args: tuple[DataPlaneSpec, int]) -> DataPlaneResult:
    return run_seed(*args)


def sweep(spec: DataPlaneSpec, seeds: range, *, jobs: int = 1,
          stop_on_violation: bool = True) -> Iterator[DataPlaneResult]:
    """The results of `seeds` in seed order (`jobs` worker processes when > 1)."""
    work = [(spec, seed) for seed in seeds]
    if jobs <= 1:
        results: Iterator[DataPlaneResult] = map(_run_one, work)
        for result in results:
            yield result
            if not result.ok and stop_on_violation:
                return
        return
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for result in pool.imap(_run_one, work):
            yield result
            if not result.ok and stop_on_violation:
                pool.terminate()
                return


def summarize(results: list[DataPlaneResult], wall_s: float) -> dict[str, Any]:
    def per_seed(key: str) -> dict[str, float]:
        counts = [r.stats.get(key, 0) for r in results] or [0]
        return {"median": statistics.median(counts), "max": max(counts)}

    totals = {key: sum(r.stats.get(key, 0) for r in results)
              for key in ("crashes", "cuts", "slow", "metadata_lag", "metadata_freeze",
                          "acked", "acked_leader",
                          "sent_no_ack", "refused", "produce_retries", "duplicates",
                          "epoch_bumps")}
    return {"seeds": len(results), "violations": sum(not r.ok for r in results),
            "wall_s": round(wall_s, 1),
            "leader_changes_per_seed": per_seed("leader_changes"),
            "isr_changes_per_seed": per_seed("isr_changes"),
            "truncations_per_seed": per_seed("truncations"),
            "faults_injected": {k: totals[k] for k in ("crashes", "cuts", "slow",
                                                        "metadata_lag", "metadata_freeze")},
            "writes_acked": {"acks_all": totals["acked"], "acks_1": totals["acked_leader"]},
            "writes_sent_acks_0": totals["sent_no_ack"], "writes_refused": totals["refused"],
            "produce_retries": totals["produce_retries"],
            "duplicates_refused": totals["duplicates"],
            "producer_epoch_bumps": totals["epoch_bumps"],
            "ordered": {key: sum(r.stats.get(key, 0) for r in results) for key in (
                "growths", "shrinks", "removals", "ordered_acked", "ordered_delivered",
                "generations")}}
