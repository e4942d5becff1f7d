"""`python -m bench replay_scale_bench` (opt-in, not in `make bench`: ~7 minutes): `kraft
replay` of a 10,000,000-record log set on local[2] and on a Spark standalone cluster.

The log set: one metadata log of RECORDS records (`tests.support.scale_logs`, the shape
of `replay_bench`'s) written through `raft.log.DiskLog` to node 1, its segments copied to
the two other voters and three brokers (observers: the same log), each with a
high-watermark checkpoint at its end; under a temporary directory, deleted at the end.
The replay runs as users run it, `kraft replay --cluster DIR --master M --json`, once on
local[2] and once on a standalone master with two workers of one core each, started by
this benchmark from pyspark's own jars (`tests.support.standalone_spark`) on 127.0.0.1
and ended by their PIDs. The rate is the log's records over the replay's own time
(`seconds.total`: from its first Spark job, JVM and SparkSession start-up excluded);
beside it the rate at which the same files read sequentially (1 MiB reads, read twice,
the second timed: the page cache's rate, which bounds any replay). Every step is bounded:
the replays by REPLAY_TIMEOUT_S, the cluster's JVMs by their start timeout.
`KRAFT_REPLAY_SCALE_RECORDS` overrides the size.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stats import segment_read_rate
from raft.storage import write_high_watermark_checkpoint
from tests.support.scale_logs import scale_batches, write_log
from tests.support.standalone_spark import StandaloneCluster, driver_args
from tools.replay import METADATA_DIR

RECORDS = int(os.environ.get("KRAFT_REPLAY_SCALE_RECORDS", "10000000"))
VOTERS = (1, 2, 3)
BROKERS = (4, 5, 6)
REPLAY_TIMEOUT_S = 1200.0


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _log_set(cluster: Path) -> int:
    """Write the log to node 1 and copy it to every other node; returns its end offset."""
    first = cluster / f"node-{VOTERS[0]}" / "data"
    end = write_log(first, scale_batches(RECORDS))
    for node in (*VOTERS, *BROKERS):
        log_dir = cluster / f"node-{node}" / "data"
        if node != VOTERS[0]:
            shutil.copytree(first / METADATA_DIR, log_dir / METADATA_DIR)
        write_high_watermark_checkpoint(log_dir / METADATA_DIR, end)
        (log_dir / "meta.properties").write_text(f"version=1\nnode.id={node}\n",
                                                 encoding="utf-8")
    (cluster / "cluster.json").write_text(json.dumps({"voters": list(VOTERS)}),
                                          encoding="utf-8")
    return end


def _replay(cluster: Path, master: str, env: dict[str, str] | None = None,
            extra: tuple[str, ...] = ()) -> tuple[dict[str, Any] | None, float, str]:
    """`kraft replay --json` of `cluster` on `master`: (its JSON or None, wall seconds of
    the command, stderr's tail)."""
    command = [sys.executable, "-m", "tools.cli", "replay", "--cluster", str(cluster),
               "--master", master, "--shuffle-partitions", "4", "--json", *extra]
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=REPLAY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started, f"timed out after {REPLAY_TIMEOUT_S:.0f} s"
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        return None, wall, done.stderr[-2000:]
    return json.loads(done.stdout), wall, ""


def _report(label: str, records: int, result: dict[str, Any] | None, wall: float,
            error: str, load: str) -> None:
    if result is None:
        print(f"{label:<34} failed after {wall:.0f} s: {error}")
        return
    replay_s = result["seconds"]["total"]
    verdict = "all checks pass" if result["passed"] else f"FAILED {result['failed']}"
    print(f"{label:<34} {replay_s:.1f} s: {records / replay_s:,.0f} records/s, "
          f"{result['records'] / replay_s:,.0f} record copies/s ({load} at its start; "
          f"{wall:.0f} s with JVM start-up; {verdict})")
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in result["seconds"].items() if v >= 0.05)
    print(f"{'  phases':<34} {phases}")


def _standalone(root: Path, cluster: Path, records: int) -> None:
    spark = root / "spark"
    spark.mkdir()
    standalone = StandaloneCluster(spark, worker_memory="2g")
    try:
        started = time.monotonic()
        standalone.start_master()
        standalone.wait_for_master()
        standalone.start_workers()
        load = _load()
        result, wall, error = _replay(
            cluster, standalone.url, {**standalone.env(), "PYSPARK_SUBMIT_ARGS": driver_args()},
            ("--executor-memory", "1g"))
        _report("standalone, 2 workers x 1 core", records, result, wall, error, load)
        print(f"{'  cluster':<34} master + {standalone.registered_workers()} workers, "
              f"executors per worker {standalone.executors_run()}, "
              f"the master up in {time.monotonic() - started - wall:.0f} s")
    finally:
        standalone.stop()


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="kraft-replay-scale-"))
    cluster = root / "cluster"
    try:
        started = time.monotonic()
        records = _log_set(cluster)
        size = sum(p.stat().st_size for p in cluster.glob(f"node-*/data/{METADATA_DIR}/*.log"))
        nodes = len(VOTERS) + len(BROKERS)
        print(f"{'log set':<34} {records:,} records x {nodes} nodes ({size / 1e6:,.0f} MB), "
              f"generated and written in {time.monotonic() - started:.1f} s")
        read_bytes, read_s = segment_read_rate(cluster)
        print(f"{'sequential read, second pass':<34} {read_bytes / read_s / 1e6:,.0f} MB/s: "
              f"{records * nodes / read_s:,.0f} record copies/s, "
              f"{records / read_s:,.0f} records/s ({_load()})")
        load = _load()
        _report("local[2]", records, *_replay(cluster, "local[2]"), load)
        _standalone(root, cluster, records)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
