"""The log cleaner's throughput on one partition log, without a cluster.

    python -m bench cleaner_bench

A partition log (1 MiB segments) gets RECORDS records of 100-byte values in batches of
RECORDS_PER_BATCH, keys drawn from KEYS, one tombstone in 20; then one full cleaning
(broker.kafka.partitions.compaction: `prepare`, reading every segment below the active
one twice and writing the changed ones crash-safely, and `install_all`) is timed, with
the pacer off and then at PACED_RATE to show the cap holds. Printed: the bytes of the
cleaned segments per second (MB/s, 10**6) and their records per second, each the best
of REPEATS fresh logs (the first cleaning of a log: every segment is dirty).

Beside it, measured in the same run on the same file system: the disk's sequential write
rate (DISK_BYTES in 1 MiB writes, then one fsync), its read rate from the page cache (the
cleaner reads segments just written, as a broker's mostly are) and from the device (the
file's cached pages dropped first with posix_fadvise, where the kernel honours it); and
produce / consume on one partition log (appends of RECORDS_PER_BATCH-record batches,
each fsynced as a broker's are, then reads of the whole log in 1 MiB fetches) with the
cleaner idle and with a cleaner thread cleaning another log over and over meanwhile, as
a broker's cleaner shares its CPU and disk with the request path.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker.kafka.partitions.cleaner import CompactionSettings
from broker.kafka.partitions.compaction import Pacer, cleanable_segments, install_all, prepare
from broker.kafka.partitions.partition_log import PartitionLog, last_offset_delta, split_batches
from broker.kafka.partitions.segment_swap import swap_path
from broker.kafka.partitions.segments import RollLimits
from raft.common.kafka.record_batch import encode_batch

RECORDS = 100_000
RECORDS_PER_BATCH = 10
KEYS = 2_000
REPEATS = 3
PACED_RATE = 4e6  # bytes per second
PACED_RECORDS = 20_000
LIMITS = RollLimits(segment_bytes=1 << 20)
DISK_BYTES = 64 << 20
CHUNK = 1 << 20
LOAD_BATCHES = 2_000  # produced (fsynced one by one) while the cleaner is idle, then busy


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


def _disk_rates(directory: Path) -> None:
    """Sequential write (then fsync), cached read and device read of DISK_BYTES."""
    path = directory / "sequential"
    chunk = random.Random(36).randbytes(CHUNK)
    started = time.perf_counter()
    with open(path, "wb") as handle:
        for _ in range(DISK_BYTES // CHUNK):
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    write_s = time.perf_counter() - started
    rates = [f"write+fsync {DISK_BYTES / write_s / 1e6:.1f} MB/s"]
    for label, drop in (("read, cached", False), ("read, from the device", True)):
        with open(path, "rb", buffering=0) as handle:
            if drop:
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            started = time.perf_counter()
            while handle.read(CHUNK):
                pass
            rates.append(f"{label} {DISK_BYTES / (time.perf_counter() - started) / 1e6:.1f}"
                         " MB/s")
    path.unlink()
    print(f"disk, sequential {DISK_BYTES >> 20} MiB: {', '.join(rates)}")


def _produce_consume(directory: Path) -> tuple[float, float]:
    """(records/s appended, records/s read back) on a fresh log in `directory`."""
    chooser = random.Random(7)
    log = PartitionLog(directory, LIMITS)
    try:
        started = time.perf_counter()
        for number in range(LOAD_BATCHES):
            log.append([encode_batch([(b"key-%d" % chooser.randrange(KEYS),
                                       chooser.randbytes(100))
                                      for _ in range(RECORDS_PER_BATCH)],
                                     timestamps=[number] * RECORDS_PER_BATCH)], 0)
        produced = LOAD_BATCHES * RECORDS_PER_BATCH / (time.perf_counter() - started)
        started, offset = time.perf_counter(), 0
        while offset < log.log_end_offset:  # CRCs checked, as a consumer checks them
            last = split_batches(log.read(offset, CHUNK, log.log_end_offset))[-1]
            offset = int.from_bytes(last[:8], "big") + last_offset_delta(last) + 1
        return produced, log.log_end_offset / (time.perf_counter() - started)
    finally:
        log.close()


def _with_cleaner_busy(directory: Path, dirty: Path) -> tuple[tuple[float, float], int]:
    """`_produce_consume` in `directory` while the cleaner cleans a log in `dirty` over
    and over (each cleaning's copies dropped, not installed, so every one finds the whole
    log dirty); the cleaned bytes meanwhile."""
    stop = threading.Event()
    cleaned = 0
    log = _filled(dirty, PACED_RECORDS)

    def clean_repeatedly() -> None:
        nonlocal cleaned
        cleanable = cleanable_segments(log, high_watermark=log.log_end_offset,
                                       now_ms=PACED_RECORDS, settings=CompactionSettings())
        assert cleanable is not None
        while not stop.is_set():
            cleaning = prepare(dirty, cleanable[1], now_ms=PACED_RECORDS,
                               delete_retention_ms=0, producer_last_offsets={},
                               pace=lambda _: None)
            for segment in cleaning.segments:
                swap_path(dirty, segment.base_offset).unlink()
            cleaned += sum(segment.size for segment in cleanable[1])

    cleaner = threading.Thread(target=clean_repeatedly, name="cleaner")
    cleaner.start()
    try:
        return _produce_consume(directory), cleaned
    finally:
        stop.set()
        cleaner.join()
        log.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        _disk_rates(Path(scratch))
    _report("cleaner, unpaced", [_clean_once(RECORDS, lambda _: None)
                                 for _ in range(REPEATS)])
    _report(f"cleaner, paced to {PACED_RATE / 1e6:.0f} MB/s of reads and writes",
            [_clean_once(PACED_RECORDS, Pacer(PACED_RATE))])
    with tempfile.TemporaryDirectory() as idle, tempfile.TemporaryDirectory() as busy, \
            tempfile.TemporaryDirectory() as dirty:
        produced, consumed = _produce_consume(Path(idle))
        (produced_busy, consumed_busy), cleaned = _with_cleaner_busy(Path(busy), Path(dirty))
    print(f"produce (a {RECORDS_PER_BATCH}-record batch per fsync) / consume (1 MiB reads), "
          f"{LOAD_BATCHES * RECORDS_PER_BATCH:,} records: cleaner idle {produced:,.0f} / "
          f"{consumed:,.0f} records/s; cleaner busy {produced_busy:,.0f} / "
          f"{consumed_busy:,.0f} records/s ({cleaned / 1e6:.1f} MB cleaned meanwhile)")
