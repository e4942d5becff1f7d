"""The log cleaner's throughput on one partition log, without a cluster.

    python -m bench cleaner_bench

A partition log (1 MiB segments) gets RECORDS records of 100-byte values in batches of
RECORDS_PER_BATCH, keys drawn from KEYS, one tombstone in 20; then one full cleaning
(broker.kafka.partitions.compaction: `prepare`, reading every segment below the active
one twice and writing the changed ones crash-safely, and `install_all`) is timed, with
the pacer off and then at PACED_RATE to show the cap holds. Printed: the bytes of the
cleaned segments per second (MB/s, 10**6) and their records per second, each the best
of REPEATS fresh logs (the first cleaning of a log: every segment is dirty).
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from broker.kafka.partitions.cleaner import CompactionSettings
from broker.kafka.partitions.compaction import Pacer, cleanable_segments, install_all, prepare
from broker.kafka.partitions.partition_log import PartitionLog
from broker.kafka.partitions.segments import RollLimits
from raft.common.kafka.record_batch import encode_batch

RECORDS = 100_000
RECORDS_PER_BATCH = 10
KEYS = 2_000
REPEATS = 3
PACED_RATE = 4e6  # bytes per second
PACED_RECORDS = 20_000
LIMITS = RollLimits(segment_bytes=1 << 20)


def _filled(directory: Path, records: int) -> PartitionLog:
    chooser = random.Random(36)
    log = PartitionLog(directory, LIMITS)
    batches = []
    for number in range(0, records, RECORDS_PER_BATCH):
        stored = [(b"key-%d" % chooser.randrange(KEYS),
                   None if chooser.random() < 0.05 else chooser.randbytes(100))
                  for _ in range(RECORDS_PER_BATCH)]
        batches.append(encode_batch(stored, timestamps=[number] * len(stored)))
        if len(batches) == 100:
            log.append(batches, 0)
            batches = []
    if batches:
        log.append(batches, 0)
    return log


def _clean_once(records: int, pace: Callable[[int], None]) -> tuple[float, int, int]:
    """(seconds, bytes, records) of one full cleaning of a fresh log."""
    with tempfile.TemporaryDirectory() as scratch:
        log = _filled(Path(scratch), records)
        try:
            cleanable = cleanable_segments(log, high_watermark=log.log_end_offset,
                                           now_ms=records, settings=CompactionSettings())
            assert cleanable is not None
            end, segments = cleanable
            started = time.perf_counter()
            cleaning = prepare(log.directory, segments, now_ms=records,
                               delete_retention_ms=0,
                               producer_last_offsets=log.producer_last_offsets(), pace=pace)
            install_all(log, cleaning, end)
            elapsed = time.perf_counter() - started
            return elapsed, sum(s.size for s in segments), end
        finally:
            log.close()


def _report(label: str, runs: list[tuple[float, int, int]]) -> None:
    seconds, size, records = min(runs)
    print(f"{label}: {size / seconds / 1e6:.1f} MB/s, {records / seconds:,.0f} records/s "
          f"({records:,} records, {size / 1e6:.1f} MB in {seconds:.2f} s, best of "
          f"{len(runs)})")


def main() -> None:
    _report("cleaner, unpaced", [_clean_once(RECORDS, lambda _: None)
                                 for _ in range(REPEATS)])
    _report(f"cleaner, paced to {PACED_RATE / 1e6:.0f} MB/s of reads and writes",
            [_clean_once(PACED_RECORDS, Pacer(PACED_RATE))])
