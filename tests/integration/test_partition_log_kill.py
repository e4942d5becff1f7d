"""A process appending to a segmented partition log and moving its log start (as
retention and DeleteRecords do) is killed with SIGKILL at seeded random points: anywhere
while it runs on, or while it waits between the steps of a log-start move (a segment
unlinked, its index files not yet), so some kills land inside retention's deletion.
After each kill the log reopens and every record from the last start it reported to the
last end it reported is there, intact, at its own offset, in order (segments are deleted
oldest first and appends are fsynced before they are reported), and every segment's
index files are exactly the index of its batches. The default suite kills at 4 points,
`make soak` at 20."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker.kafka.partitions.partition_log import PartitionLog, split_batches
from broker.kafka.partitions.segments import RollLimits
from tests.support.kafka_support import record_batch
from tests.support.log_kill import PAUSE_SCRIPT, index_problems, run_and_kill

pytestmark = pytest.mark.integration

# two one-record batches a segment, an index entry for every batch
LIMITS = RollLimits(segment_bytes=2 * len(record_batch([b"v0"])), index_interval_bytes=1)
WRITER = PAUSE_SCRIPT + f"""
from pathlib import Path
from broker.kafka.partitions import partition_log
from broker.kafka.partitions.partition_log import PartitionLog
from broker.kafka.partitions.segments import RollLimits
from tests.support.kafka_support import record_batch
unlink_indexes = partition_log.index_files.unlink
def paused_unlink(directory, base):  # its segment is gone, its index files not yet
    pause()
    unlink_indexes(directory, base)
partition_log.index_files.unlink = paused_unlink
log = PartitionLog(Path(sys.argv[1]), RollLimits(segment_bytes={LIMITS.segment_bytes},
                                                 index_interval_bytes=1))
for n in range(5000):
    log.append([record_batch([str(log.log_end_offset).encode()])], 0)
    if n % 3 == 2:
        log.advance_log_start(log.log_end_offset - 4)
    print(log.log_start_offset, log.log_end_offset, flush=True)
"""


def _offsets_holding_their_number(log: PartitionLog, start: int, end: int) -> list[int]:
    """The base offsets of the one-record batches from `start` below `end` whose value
    (the batch's last field but the empty headers count) is that offset's number."""
    out: list[int] = []
    offset = start
    while offset < end:
        for batch in split_batches(log.read(offset, 1 << 20, end)):  # CRCs checked
            base = int.from_bytes(batch[:8], "big")
            if batch.endswith(str(base).encode() + b"\x00"):
                out.append(base)
            offset = base + 1
    return out


@pytest.mark.parametrize("kills", [4, pytest.param(20, marks=pytest.mark.soak)])
def test_log_keeps_every_record_above_its_start_when_killed_mid_retention(
        tmp_path: Path, kills: int) -> None:
    chooser = random.Random(253)
    inside = 0
    for _ in range(kills):
        lines = chooser.randrange(5, 300)
        reports = run_and_kill(WRITER, tmp_path, lines, timeout_s=30)
        inside += len(list(tmp_path.glob("*.index"))) > len(list(tmp_path.glob("*.log")))
        start, end = (int(n) for n in reports[-1].split())
        log = PartitionLog(tmp_path, LIMITS)
        try:
            # Unreported: at most one more append and one more advance to (end + 1) - 4.
            assert log.log_start_offset <= max(start, end - 3)
            assert log.log_end_offset >= end
            kept = max(start, log.log_start_offset)
            assert _offsets_holding_their_number(log, kept, end) == list(range(kept, end))
            assert index_problems(tmp_path, LIMITS) == []
        finally:
            log.close()
    assert inside, "no kill landed between a segment's deletion and its index files'"
