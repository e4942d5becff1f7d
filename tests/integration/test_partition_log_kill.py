"""A process appending to a segmented partition log and moving its log start (as
retention and DeleteRecords do) is killed with SIGKILL at seeded random points; after
each kill the log reopens and every record from the last start it reported to the last
end it reported is there, intact, in order (segments are deleted oldest first and
appends are fsynced before they are reported)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.kafka.partitions.partition_log import PartitionLog, split_batches
from tests.support.kafka_support import two_batch_segments

pytestmark = pytest.mark.integration

ROUNDS = 4
WRITER = """
import sys
from pathlib import Path
from broker.kafka.partitions.partition_log import PartitionLog
from tests.support.kafka_support import record_batch, two_batch_segments
log = PartitionLog(Path(sys.argv[1]), two_batch_segments())
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


def test_log_keeps_every_record_above_its_start_when_killed_mid_retention(
        tmp_path: Path) -> None:
    chooser = random.Random(253)
    for _ in range(ROUNDS):
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)],
                                  stdout=subprocess.PIPE, text=True,
                                  cwd=Path(__file__).resolve().parents[2])
        assert writer.stdout is not None
        reported = None
        deadline = time.monotonic() + 30
        for _ in range(chooser.randrange(5, 200)):
            line = writer.stdout.readline()
            assert line, "the writer stopped early"
            assert time.monotonic() < deadline, "the writer is too slow"
            reported = tuple(int(n) for n in line.split())
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(10)
        # The writer ran on while we read: its last report is the last line in the pipe.
        # A line cut by the kill has no newline yet: split's last piece, dropped.
        for line in writer.stdout.read().split("\n")[:-1]:
            reported = tuple(int(n) for n in line.split())
        writer.stdout.close()
        assert reported is not None
        start, end = reported
        log = PartitionLog(tmp_path, two_batch_segments())
        try:
            # Unreported: at most one more append and one more advance to (end + 1) - 4.
            assert log.log_start_offset <= max(start, end - 3)
            assert log.log_end_offset >= end
            kept = max(start, log.log_start_offset)
            assert _offsets_holding_their_number(log, kept, end) == list(range(kept, end))
        finally:
            log.close()
