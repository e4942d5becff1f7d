"""Resizes: how long changing a topic's partition count pauses producers and ordered
consumers.

    python -m bench resize_bench

One multi-process cluster of 3 voters and 3 brokers on 127.0.0.1, heartbeats every
200 ms. A resize run (tests/support/resize_run.py): 3 ordered producers at 50 records/s each,
2 ordered consumers in one group, the topic going 2 → 3 → 4 → 8 → 5 → 3 partitions.
Run twice in the same cluster, the same way: with the ordering gates, then without (the
peer: a consumer that does not wait, as Kafka's own does, at its best for latency).

- Producer pause: for every resize and producer, the longest gap between two
  acknowledgements in the 5 s after the resize (a steady producer's gap is 20 ms).
- Consumer pause: for the records acknowledged within 5 s after a resize, the time from
  acknowledgement to delivery; beside it the same for records before the first resize.
p50 and p99 of each. Figures only, no assertions; the run bounds its own waits.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tests.support.resize_run import ResizeRun, ResizeRunConfig, ResizeRunResult
from tools.cluster import Cluster

VOTERS, BROKERS = 3, 3
SETTINGS = {"broker.heartbeat.interval.ms": 200}
RATE = 50.0
WINDOW_MS = 5000.0


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def producer_pauses(result: ResizeRunResult) -> list[float]:
    pauses = []
    for at in result.resize_ms:
        for rows in result.produced:
            seen = [row["seen_ms"] for row in rows]
            gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)
                    if at <= b <= at + WINDOW_MS]
            if gaps:
                pauses.append(max(gaps))
    return pauses


def delivery_latencies(result: ResizeRunResult) -> tuple[list[float], list[float]]:
    """(after a resize, before the first resize): ack-to-delivery times in ms."""
    acked: dict[tuple[str, int], float] = {}
    for rows in result.produced:
        for row in rows:
            acked[(str(row["key"]), int(row["value"]))] = row["seen_ms"]
    first_delivery: dict[tuple[str, int], float] = {}
    for rows in result.consumed:
        for row in rows:
            key = (str(row["key"]), int(row["value"]))
            first_delivery[key] = min(first_delivery.get(key, float("inf")), row["ts_ms"])
    after, before = [], []
    first_resize = result.resize_ms[0] if result.resize_ms else float("inf")
    for key, ack_ms in acked.items():
        if key not in first_delivery:
            continue
        latency = first_delivery[key] - ack_ms
        if ack_ms < first_resize:
            before.append(latency)
        elif any(at <= ack_ms <= at + WINDOW_MS for at in result.resize_ms):
            after.append(latency)
    return after, before


def show(label: str, result: ResizeRunResult) -> None:
    pauses = producer_pauses(result)
    after, before = delivery_latencies(result)

    def fmt(values: list[float]) -> str:
        return f"p50 {percentile(values, 0.5):7.0f} ms  p99 {percentile(values, 0.99):7.0f} ms"

    print(f"{label}: {result.report.summary()}")
    print(f"  producer pause after a resize   {fmt(pauses)}  ({len(pauses)} samples)")
    print(f"  ack→delivery after a resize     {fmt(after)}  ({len(after)} records)")
    print(f"  ack→delivery before any resize  {fmt(before)}  ({len(before)} records)")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="resize-bench-") as tmp:
        directory = Path(tmp)
        cluster = Cluster.create(directory / "cluster", voters=VOTERS, brokers=BROKERS,
                                 settings=SETTINGS)
        try:
            cluster.start()
            cluster.wait_for_leader(30)
            cluster.wait_for_brokers(60)
            runs: list[tuple[str, dict[str, Any]]] = [
                ("ordered (gates)", {"topic": "bench-gated", "group": "gated"}),
                ("unordered peer (no gates)", {"topic": "bench-free", "group": "free",
                                               "gates": False})]
            for label, options in runs:
                logs = directory / options["topic"]
                logs.mkdir()
                config = ResizeRunConfig(cluster_dir=cluster.directory, rate=RATE,
                                         records_per_step=100, **options)
                show(label, ResizeRun(config, logs).run())
        finally:
            cluster.kill_all_started()


if __name__ == "__main__":
    main()
