"""`make bench` (replay): throughput of `kraft replay` on local[2].

A synthetic 3-node log set: one metadata log of RECORDS records (topics created, changed,
deleted and recreated, a leader change every 50,000 records), written by `raft.segment`
to three nodes' segment files (segments of 100,000 records), each with a high-watermark
checkpoint at its end (the committed prefix from checkpoints, as in a real run). The
replay runs end to end (every copy read and CRC-checked in the executors, the distinct
log decoded and scanned, every check, the analysis; no report files), and the rate is
given per log record and per record copy (three copies of each record are read and
checked). Beside it, the rate at which the same segment files read back sequentially
(`bench.stats.segment_read_rate`: the bound of any replay). Start-up (SparkSession,
plus a first tiny job that starts both Python workers and imports the replay's modules
in them, as every later task reuses them) is timed separately and excluded. Bounded:
Spark jobs are cancelled after BUDGET_S seconds.
`KRAFT_REPLAY_BENCH_RECORDS` overrides the size.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.stats import segment_read_rate
from tests.support.synthetic_logs import metadata_log, write_cluster
from tools.replay.inputs import from_cluster

RECORDS = int(os.environ.get("KRAFT_REPLAY_BENCH_RECORDS", "1000000"))
NODES = (1, 2, 3)
TARGET_RECORDS_PER_S = 500_000
BUDGET_S = 600.0
# The first run pays the JVM's first compilation of the Python-task path; the second
# shows the steady state. Both are printed: the first is the number to quote.
RUNS = ("replay end to end (local[2])", "  again, same session")


def _report(label: str, records: int, elapsed: float, result: Any, load: float) -> None:
    rate = records / elapsed
    verdict = "met" if rate >= TARGET_RECORDS_PER_S else "NOT met"
    print(f"{label:<34} {elapsed:.1f} s: {rate:,.0f} records/s, "
          f"{result.record_copies / elapsed:,.0f} record copies/s at load {load:.1f} "
          f"(target >= {TARGET_RECORDS_PER_S:,} records/s: {verdict})")
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    print(f"{'  phases':<34} {phases}")
    print(f"{'  verdict':<34} {'all checks pass' if result.passed else result.failed}")


def _import_replay(_: int) -> bool:
    import tools.replay.load  # noqa: F401  (and through it raft, metadata, msgpack)

    return True


def main() -> None:
    from tools.replay.compiled import scan_module
    from tools.replay.job import run_replay
    from tools.replay.load import spark_session

    root = Path(tempfile.mkdtemp(prefix="kraft-replay-bench-"))
    try:
        started = time.monotonic()
        log = metadata_log(records=RECORDS, batch_size=20, records_per_epoch=50_000,
                           max_live=500, seed=1)
        records = log[-1].next_offset
        write_cluster(root / "cluster", {n: log for n in NODES}, segment_records=100_000,
                      high_watermarks={n: records for n in NODES})
        print(f"{'synthetic log set':<34} {records:,} records x {len(NODES)} nodes, "
              f"generated and written in {time.monotonic() - started:.1f} s")
        read_bytes, read_s = segment_read_rate(root / "cluster")
        print(f"{'sequential read, second pass':<34} {read_bytes / read_s / 1e6:,.0f} MB/s: "
              f"{records * len(NODES) / read_s:,.0f} record copies/s, "
              f"{records / read_s:,.0f} records/s (the page cache's rate: any replay's bound)")

        started = time.monotonic()
        spark = spark_session("local[2]", shuffle_partitions=4, app_name="kraft-replay-bench")
        # starts the two Python workers, each importing what the replay's tasks import
        spark.sparkContext.parallelize(range(2), 2).map(_import_replay).collect()
        startup_s = time.monotonic() - started
        print(f"{'JVM + Spark + worker start-up':<34} {startup_s:.1f} s (excluded below)")
        print(f"{'scan':<34} {scan_module().__name__} (tools/replay/compiled.py)")

        timer = threading.Timer(BUDGET_S, spark.sparkContext.cancelAllJobs)
        timer.start()
        try:
            for label in RUNS:
                load = os.getloadavg()[0]  # the machine is shared: the figure needs it
                started = time.monotonic()
                result = run_replay(spark, from_cluster(root / "cluster"))
                _report(label, records, time.monotonic() - started, result, load)
        except Exception as exc:  # cancelled by the budget timer, or Spark failed
            print(f"{'replay':<34} did not finish within {BUDGET_S:.0f} s: "
                  f"{type(exc).__name__}")
        finally:
            timer.cancel()
            spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
