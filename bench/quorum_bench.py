"""3-voter multi-process quorum with fsync: commit throughput and latency, next to the raw
fsync rate and latency of the same disk measured in the same run; failover time.

    python -m bench quorum_bench

Throughput: `Append` of NoOp records with up to 64 batches waiting for their commit.
Latency: one batch at a time (propose on the leader -> committed, measured on the leader).
Failover: SIGKILL the leader, time until an append commits on a new leader (default
Kafka timeouts: election 1000 ms, fetch 2000 ms). Bounded: well under 60 s.
"""

from __future__ import annotations

import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from tools.cluster import Cluster, ClusterError

BATCH_SIZES = (1, 100, 1000)
THROUGHPUT_SECONDS = 2.0  # target duration of each throughput run
LATENCY_SAMPLES = 200
FAILOVER_KILLS = 5
FSYNC_SECONDS = 1.5


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def raw_fsync(directory: Path, seconds: float = FSYNC_SECONDS) -> tuple[float, float, float]:
    """(fsyncs/s, p50 ms, p99 ms) of appending 4 KiB + fsync to one file."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    latencies = []
    try:
        chunk = b"x" * 4096
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            begin = time.perf_counter()
            os.write(fd, chunk)
            os.fsync(fd)
            latencies.append((time.perf_counter() - begin) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return len(latencies) / seconds, percentile(latencies, 0.5), percentile(latencies, 0.99)


def throughput(cluster: Cluster, batch: int) -> tuple[float, float, float]:
    """(records/s, p50 ms, p99 ms) with 64 batches in flight, sized to take ~2 s."""
    probe = cluster.append(batch * 20, batch=batch)
    rate = probe["count"] / max(probe["elapsed_ms"], 1) * 1000
    count = max(batch * 20, min(int(rate * THROUGHPUT_SECONDS), 200_000) // batch * batch)
    reply = cluster.append(count, batch=batch, timeout_s=30)
    latencies = reply["latencies_ms"]
    return (reply["count"] / reply["elapsed_ms"] * 1000, percentile(latencies, 0.5),
            percentile(latencies, 0.99))


def latency(cluster: Cluster, batch: int) -> tuple[float, float]:
    """(p50 ms, p99 ms) of one batch at a time."""
    samples = max(20, LATENCY_SAMPLES // max(1, batch // 100))
    reply = cluster.append(batch * samples, batch=batch, in_flight=1, timeout_s=30)
    latencies = reply["latencies_ms"]
    return percentile(latencies, 0.5), percentile(latencies, 0.99)


def failovers(cluster: Cluster, kills: int) -> list[float]:
    """Seconds from SIGKILL of the leader to the next committed append."""
    times = []
    for _ in range(kills):
        leader = cluster.wait_for_leader(15)["leader_id"]
        cluster.append(1)
        killed_at = time.monotonic()
        cluster.kill(leader, signal.SIGKILL)
        cluster.append(1, exclude=[leader], timeout_s=15)
        times.append(time.monotonic() - killed_at)
        cluster.start_node(leader)
    return times


def main() -> None:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="quorum-bench-") as temp:
        directory = Path(temp)
        fsync_rate, fsync_p50, fsync_p99 = raw_fsync(directory)
        cluster = Cluster.create(directory / "cluster", voters=3)
        try:
            cluster.start()
            cluster.wait_for_leader(20)
            print(f"raw fsync (4 KiB append + fsync, same disk): {fsync_rate:,.0f} fsyncs/s, "
                  f"p50 {fsync_p50:.2f} ms, p99 {fsync_p99:.2f} ms")
            print(f"{'batch':>6} {'records/s':>11} {'% of fsync/s x batch':>21} "
                  f"{'p50 loaded':>11} {'p99 loaded':>11} {'p50 1-by-1':>11} "
                  f"{'p99 1-by-1':>11}")
            for batch in BATCH_SIZES:
                rate, loaded_p50, loaded_p99 = throughput(cluster, batch)
                p50, p99 = latency(cluster, batch)
                share = rate / (fsync_rate * batch) * 100
                print(f"{batch:>6} {rate:>11,.0f} {share:>20.0f}% {loaded_p50:>9.2f}ms "
                      f"{loaded_p99:>9.2f}ms {p50:>9.2f}ms {p99:>9.2f}ms")
            print(f"batch 1 target: p99 commit <= 3 x p99 fsync + 2 ms = "
                  f"{3 * fsync_p99 + 2:.2f} ms")
            budget = 55 - (time.monotonic() - started)
            kills = max(1, min(FAILOVER_KILLS, int(budget // 6)))
            times = failovers(cluster, kills)
            print(f"failover (SIGKILL leader -> next committed append, default timeouts): "
                  f"median {statistics.median(times):.2f} s over {len(times)} kills "
                  f"(min {min(times):.2f}, max {max(times):.2f})")
        except ClusterError as exc:
            print(f"quorum bench failed: {exc}")
        finally:
            cluster.stop(timeout_s=5)
            cluster.kill_all_started()
    print(f"(quorum bench took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
