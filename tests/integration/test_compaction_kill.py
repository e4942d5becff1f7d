"""A process appending keyed records to a segmented partition log and compacting it (the
cleaner's own steps: broker.kafka.partitions.compaction's prepare and install, with their
fsyncs) is killed with SIGKILL at seeded random points: anywhere while it runs on, or
while its cleaner's pace callback (called after each segment read and each cleaned copy
written, before it becomes a swap) waits for the test, so some kills land between the
cleaner's steps with a `.cleaned` or a `.swap` on disk. After each kill the log reopens
with no cleaner file left over, every record in it is one that was appended, at its own
offset, and the latest record of every key up to the last end the writer reported is
there (appends are fsynced before they are reported; a cleaned copy replaces its segment
whole or not at all)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from broker.kafka.partitions.partition_log import PartitionLog, split_batches

pytestmark = pytest.mark.integration

ROUNDS = 8
KEYS = 7
WRITER = f"""
import sys
from pathlib import Path
from broker.kafka.partitions.cleaner import CompactionSettings
from broker.kafka.partitions.compaction import cleanable_segments, install_all, prepare
from broker.kafka.partitions.partition_log import PartitionLog
from broker.kafka.partitions.segments import RollLimits
from raft.common.durable import fsync_dir
from raft.common.kafka.record_batch import encode_batch
log = PartitionLog(Path(sys.argv[1]), RollLimits(segment_bytes=400))
always = CompactionSettings(min_cleanable_dirty_ratio=0.0)
def pace(size):
    print("paced", flush=True)
    sys.stdin.readline()
for n in range(20000):
    offset = log.log_end_offset
    key = b"k%d" % (offset % {KEYS})
    log.append([encode_batch([(key, b"%s@%d" % (key, offset))], timestamps=[n])], 0)
    print(log.log_end_offset, flush=True)
    cleanable = cleanable_segments(log, high_watermark=log.log_end_offset, now_ms=n,
                                   settings=always)
    if cleanable is not None:
        end, segments = cleanable
        install_all(log, prepare(log.directory, segments, now_ms=n, delete_retention_ms=0,
                                 producer_last_offsets={{}}, pace=pace), end)
        fsync_dir(log.directory)
"""


def _records(log: PartitionLog) -> dict[int, tuple[bytes, bytes]]:
    out: dict[int, tuple[bytes, bytes]] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        for raw in split_batches(log.read(offset, 1 << 20, log.log_end_offset)):
            batch = DefaultRecordBatch(raw)
            for record in batch:
                out[record.offset] = (record.key, record.value)
            offset = batch.next_offset
    return out


def test_a_log_killed_while_compacting_keeps_every_keys_latest_record(tmp_path: Path) -> None:
    chooser = random.Random(36)
    left_over: set[str] = set()
    for _ in range(ROUNDS):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  cwd=Path(__file__).resolve().parents[2])
        assert writer.stdin is not None
        assert writer.stdout is not None
        reported = 0
        deadline = time.monotonic() + 60
        lines = chooser.randrange(20, 600)
        for number in range(lines):
            line = writer.stdout.readline()
            assert line, "the writer stopped early"
            assert time.monotonic() < deadline, "the writer is too slow"
            if line != "paced\n":
                reported = int(line)
            elif number < lines - 1:  # the last: the kill lands while the cleaner waits
                writer.stdin.write("go\n")
                writer.stdin.flush()
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(10)
        for line in writer.stdout.read().split("\n")[:-1]:  # a cut last line: dropped
            if line != "paced":
                reported = int(line)
        writer.stdout.close()
        writer.stdin.close()
        left_over.update(n for n in os.listdir(tmp_path) if n.endswith((".cleaned", ".swap")))
        log = PartitionLog(tmp_path)
        try:
            assert [name for name in os.listdir(tmp_path)
                    if name.endswith((".cleaned", ".swap"))] == []
            assert log.log_end_offset >= reported
            records = _records(log)
            for offset, (key, value) in records.items():
                assert key == b"k%d" % (offset % KEYS)
                assert value == b"%s@%d" % (key, offset)
            latest = {offset % KEYS: offset for offset in range(reported)}
            assert set(latest.values()) <= set(records)
            assert len(records) < reported, "nothing was compacted"
        finally:
            log.close()
    assert {name.rsplit(".", 1)[1] for name in left_over} == {"cleaned", "swap"}, \
        "no kill landed between the cleaner's steps"
