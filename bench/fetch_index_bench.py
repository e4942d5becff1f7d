"""Fetch and ListOffsets by timestamp from random offsets of a large partition log,
without a cluster.

    python -m bench fetch_index_bench [-- --mb 1024]

A partition log of `--mb` MB (default 64; 1 GiB segments, Kafka's default) gets 1 KiB
batches of 10 records whose timestamps rise by 1 ms a batch, 1,000 batches an append.
Printed: the time to open it (the start-up scan of every segment, and the check of its
index files), then READS reads of up to 1 MiB and READS of one batch from random offsets
(PartitionLog.read: the offset index, then a scan to the batch) and TIMES lookups of
random timestamps (offset_for_timestamp: the time index), each as p50 / p99 / mean
microseconds.
"""

from __future__ import annotations

import argparse
import random
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from crc32c import crc32c

from bench.stats import percentile
from broker.kafka.partitions.partition_log import PartitionLog
from raft.common.kafka.record_batch import encode_batch

RECORDS_PER_BATCH = 10
VALUE_BYTES = 80
BATCHES_PER_APPEND = 1000
READS = 2000
TIMES = 1000


def _batch(template: bytes, timestamp: int) -> bytes:
    """`template` with its base and max timestamps set to `timestamp` (CRC kept valid)."""
    data = bytearray(template)
    struct.pack_into(">qq", data, 27, timestamp, timestamp)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def _fill(directory: Path, size: int) -> int:
    """Write the log; its number of batches."""
    template = encode_batch([(None, b"v" * VALUE_BYTES)] * RECORDS_PER_BATCH,
                            timestamps=[0] * RECORDS_PER_BATCH)
    log = PartitionLog(directory)
    batches = 0
    try:
        while log.path.stat().st_size < size:
            log.append([_batch(template, batches + number)
                        for number in range(BATCHES_PER_APPEND)], 0)
            batches += BATCHES_PER_APPEND
    finally:
        log.close()
    return batches


def _timed(calls: int, call: Callable[[], object]) -> str:
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    micros = [s * 1e6 for s in seconds]
    return (f"p50 {percentile(micros, 0.5):,.0f} us, p99 {percentile(micros, 0.99):,.0f} us, "
            f"mean {sum(micros) / len(micros):,.0f} us ({calls:,} calls)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench fetch_index_bench")
    parser.add_argument("--mb", type=int, default=64)
    args = parser.parse_args(argv or [])
    chooser = random.Random(36)
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        started = time.perf_counter()
        batches = _fill(directory, args.mb * 1_000_000)
        print(f"fetch index: wrote {args.mb} MB, {batches:,} batches in "
              f"{time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        log = PartitionLog(directory)
        print(f"fetch index: opened in {time.perf_counter() - started:.2f} s")
        try:
            end = log.log_end_offset
            print("fetch index: read 1 MiB at a random offset: " + _timed(
                READS, lambda: log.read(chooser.randrange(end), 1 << 20, end)))
            print("fetch index: read one batch at a random offset: " + _timed(
                READS, lambda: log.read(chooser.randrange(end), 1, end)))
            print("fetch index: offset for a random timestamp: " + _timed(
                TIMES, lambda: log.offset_for_timestamp(chooser.randrange(batches))))
        finally:
            log.close()
