"""What an idle cluster costs: the CPU each process of a 3-voter + 3-broker cluster on
127.0.0.1 uses while nothing is asked of it, against a limit of 1% of one core.

    python -m bench idle_bench [-- --seconds S] [-- --topics N]

The cluster is started, given `--topics` topics of 3 partitions (RF 3, so every broker
hosts and follows partitions), allowed `SETTLE_S` to finish the work that creates, then
each process's user + system time is read from /proc/PID/stat at the start and the end of
a `--seconds` window (default 60). What remains is the steady cost of staying a quorum:
the voters' Fetch loop and heartbeats, the brokers' metadata Fetch, their replica
fetchers' long polls and the broker heartbeats. Bounded: the start by `START_TIMEOUT_S`,
the window by its length; only the nodes it started are stopped, by pid.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.stats import verdict
from tools.cluster import Cluster

LIMIT_PERCENT = 1.0
SETTLE_S = 5.0
START_TIMEOUT_S = 60.0
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def idle_window(cluster: Cluster, seconds: float) -> tuple[dict[int, float], float]:
    """Each running node's share of a core (%) over a window of `seconds`, and the
    1-minute load average at its end."""
    pids = {n: cluster.node(n).pid for n in sorted(cluster.nodes) if cluster.is_running(n)}
    before = {n: cpu_seconds(pid) for n, pid in pids.items() if pid}
    started = time.monotonic()
    time.sleep(seconds)  # a fixed window by design: the cost is a rate over time
    elapsed = time.monotonic() - started
    return ({n: 100 * (cpu_seconds(pid) - before[n]) / elapsed
             for n, pid in pids.items() if pid and n in before}, os.getloadavg()[0])


def print_idle(cluster: Cluster, percents: dict[int, float]) -> None:
    for node, percent in sorted(percents.items()):
        role = "voter" if cluster.node(node).is_voter else "broker"
        print(f"  node {node} ({role:6s}): {percent:5.2f}% of a core; limit "
              f"< {LIMIT_PERCENT:.0f}%: {verdict(percent < LIMIT_PERCENT)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench idle_bench")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--topics", type=int, default=20)
    args = parser.parse_args(argv or [])
    with tempfile.TemporaryDirectory(prefix="idle-bench-") as directory:
        cluster = Cluster.create(Path(directory) / "cluster", voters=3, brokers=3)
        try:
            cluster.start()
            cluster.wait_for_leader(START_TIMEOUT_S)
            cluster.wait_for_brokers(START_TIMEOUT_S)
            for index in range(args.topics):
                subprocess.run([sys.executable, "-m", "tools.cli", "topics", "--cluster",
                                str(cluster.directory), "--create", "--topic", f"idle-{index}",
                                "--partitions", "3", "--replication-factor", "3"],
                               check=True, capture_output=True, timeout=START_TIMEOUT_S)
            time.sleep(SETTLE_S)  # a fixed window by design: the creates settle
            percents, load = idle_window(cluster, args.seconds)
            print(f"idle cluster, 3 voters + 3 brokers, {args.topics} topics x 3 partitions "
                  f"(RF 3), {args.seconds:.0f} s window, load {load:.1f}:")
            print_idle(cluster, percents)
        finally:
            cluster.shut_down(timeout_s=5)


if __name__ == "__main__":
    main(sys.argv[1:])
