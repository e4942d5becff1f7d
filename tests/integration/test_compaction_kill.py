"""A process appending keyed records to a segmented partition log and compacting it (the
cleaner's own steps: broker.kafka.partitions.compaction's prepare and install, with their
fsyncs) is killed with SIGKILL at seeded random points: anywhere while it runs on, while
its cleaner's pace callback (called after each segment read and each cleaned copy
written, before it becomes a swap) waits for the test, or right after a swap was renamed
over its segment (before the segment's new index files are written and the directory
fsynced), so some kills land between the cleaner's steps with a `.cleaned` or a `.swap`
on disk, or a cleaned segment beside its old index. After each kill the log reopens with
no cleaner file left over, every record in it is one that was appended, at its own
offset, the latest record of every key up to the last end the writer reported is there
(appends are fsynced before they are reported; a cleaned copy replaces its segment whole
or not at all), and every segment's index files are exactly the index of its batches.
The default suite kills at 4 points, `make soak` at 20."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from broker.kafka.partitions.partition_log import PartitionLog, split_batches
from broker.kafka.partitions.segments import RollLimits
from tests.support.log_kill import PAUSE_SCRIPT, index_problems, run_and_kill

pytestmark = pytest.mark.integration

KEYS = 7
LIMITS = RollLimits(segment_bytes=400, index_interval_bytes=1)  # an entry every batch
WRITER = PAUSE_SCRIPT + f"""
from pathlib import Path
from broker.kafka.partitions import partition_log
from broker.kafka.partitions.cleaner import CompactionSettings
from broker.kafka.partitions.compaction import cleanable_segments, install_all, prepare
from broker.kafka.partitions.partition_log import PartitionLog
from broker.kafka.partitions.segments import RollLimits
from raft.common.durable import fsync_dir
from raft.common.kafka.record_batch import encode_batch
install_swap = partition_log.install
def paused_install(directory, base):  # the cleaned segment in place, its index not yet
    install_swap(directory, base)
    pause()
partition_log.install = paused_install
log = PartitionLog(Path(sys.argv[1]), RollLimits(segment_bytes={LIMITS.segment_bytes},
                                                 index_interval_bytes=1))
always = CompactionSettings(min_cleanable_dirty_ratio=0.0)
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
                                 producer_last_offsets={{}}, pace=pause), end)
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


@pytest.mark.parametrize("kills", [4, pytest.param(20, marks=pytest.mark.soak)])
def test_a_log_killed_while_compacting_keeps_every_keys_latest_record(
        tmp_path: Path, kills: int) -> None:
    chooser = random.Random(36)
    left_over: set[str] = set()
    for _ in range(kills):
        reported = int(run_and_kill(WRITER, tmp_path, chooser.randrange(20, 600),
                                    timeout_s=60)[-1])
        left_over.update(n for n in os.listdir(tmp_path) if n.endswith((".cleaned", ".swap")))
        log = PartitionLog(tmp_path, LIMITS)
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
            assert index_problems(tmp_path, LIMITS) == []
        finally:
            log.close()
    # where a kill lands past the chosen line depends on where the last one did: 20 kills
    # catch both kinds of cleaner file, 4 at least one
    kinds = {name.rsplit(".", 1)[1] for name in left_over}
    assert kinds == {"cleaned", "swap"} if kills >= 20 else kinds, \
        "no kill landed between the cleaner's steps"
