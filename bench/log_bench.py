"""Disk log throughput next to raw write+fsync of the same bytes, and record codec rates.

Log and raw steps alternate one by one in the same run (same disk, same moment) and each
figure is the median step, so the noise of a shared disk hits both alike. The last log
line isolates the per-append CPU cost: there the raw side writes pre-encoded bytes."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from metadata.records import Partition, Record, Topic, decode
from raft.common.uuid import Uuid
from raft.log import DiskLog
from raft.segment import encode_batch
from raft.types import Batch

SECONDS_PER_FIGURE = 1.0
MAX_STEPS = 2_000


def _sample_records(count: int) -> list[bytes]:
    topic_id = Uuid.random()
    out: list[Record] = [Topic(name="bench", topic_id=topic_id, initial_partition_count=count)]
    out += [Partition(topic_id=topic_id, partition=p, replicas=(1, 2, 3), isr=(1, 2, 3),
                      leader=1 + p % 3) for p in range(count - 1)]
    return [r.encode() for r in out]


def _interleaved(log_step: Callable[[], None], raw_step: Callable[[], None]
                 ) -> tuple[float, float]:
    """Median seconds per step of each, alternating steps so that the disk's noise (it is
    shared) hits both alike; bounded by SECONDS_PER_FIGURE and MAX_STEPS."""
    log_times: list[float] = []
    raw_times: list[float] = []
    deadline = time.perf_counter() + SECONDS_PER_FIGURE
    for _ in range(MAX_STEPS):
        for step, times in ((raw_step, raw_times), (log_step, log_times)):
            started = time.perf_counter()
            step()
            times.append(time.perf_counter() - started)
        if time.perf_counter() >= deadline:
            break
    return statistics.median(log_times), statistics.median(raw_times)


def _compare(directory: Path, label: str, records: list[bytes],
             appends_per_fsync: int) -> None:
    """appends of `records` as one batch each, one fsync every `appends_per_fsync`."""
    name = "".join(c if c.isalnum() else "-" for c in label)
    log = DiskLog(directory / f"log-{name}")
    log.append(1, records)
    log.flush()  # the segment and directory exist before timing starts
    raw_path = directory / f"raw-{name}"
    raw_fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    encoded = encode_batch(Batch(base_offset=0, epoch=1, records=tuple(records)))
    os.write(raw_fd, encoded)
    os.fsync(raw_fd)

    def log_step() -> None:
        for _ in range(appends_per_fsync):
            log.append(1, records)
        log.flush()

    def raw_step() -> None:
        for _ in range(appends_per_fsync):
            os.write(raw_fd, encoded)
        os.fsync(raw_fd)

    try:
        log_seconds, raw_seconds = _interleaved(log_step, raw_step)
    finally:
        log.close()
        os.close(raw_fd)
    per_step = appends_per_fsync * (1 if len(records) == 1 else len(records))
    unit = "appends" if len(records) == 1 else "records"
    overhead = log_seconds / raw_seconds - 1
    print(f"{label:<34} log {per_step / log_seconds:>10,.0f} {unit}/s   raw write+fsync "
          f"{per_step / raw_seconds:>10,.0f} {unit}/s   log costs {overhead:+6.1%} "
          f"({'within' if overhead < 0.20 else 'over'} the 20% target)")


def _codec_rates(count: int = 20_000) -> None:
    records = _sample_records(count)
    topic_id = Uuid.random()
    objects = [Partition(topic_id=topic_id, partition=p, replicas=(1, 2, 3), isr=(1, 2),
                         leader=1) for p in range(count)]
    started = time.perf_counter()
    for obj in objects:
        obj.encode()
    encode_rate = count / (time.perf_counter() - started)
    started = time.perf_counter()
    for data in records:
        decode(data)
    decode_rate = count / (time.perf_counter() - started)
    print(f"{'record codec (Partition)':<34} encode {encode_rate:>11,.0f} records/s   "
          f"decode {decode_rate:>11,.0f} records/s")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="kraft-log-bench-") as temp:
        directory = Path(temp)
        _compare(directory, "fsync per batch (1 record)", _sample_records(1), 1)
        _compare(directory, "1000 records per fsync (1 batch)", _sample_records(1000), 1)
        _compare(directory, "1000 records per fsync (1/batch)", _sample_records(1), 1000)
    _codec_rates()


if __name__ == "__main__":
    main()
