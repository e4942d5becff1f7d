"""A log whose start advances to its very end (a snapshot of everything it held, as a
node snapshots its state when its high watermark reaches its log end) and then grows:
found by the simulator (`kraft sim --voters 5 --observers 2 --seed 1 --seeds 1`, a new
leader whose whole log lay below its log start could not append its LeaderChange)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raft.log import DiskLog, MemoryLog
from raft.types import RaftLog


@pytest.fixture(params=["memory", "disk"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> RaftLog:
    if request.param == "memory":
        return MemoryLog()
    return DiskLog(tmp_path / "p", segment_bytes=1024)


def test_next_epoch_appends_when_log_start_advanced_to_the_log_end(log: RaftLog) -> None:
    """The epoch cache forgets the epochs of the records gone: the snapshot's epoch is
    the log start's, and a newer epoch starts at the (empty) log's end."""
    log.append(2, [b"a", b"b"])
    log.append(6, [b"c"])
    log.flush()
    log.advance_start(3)
    assert (log.start_offset, log.start_epoch, log.end_offset, log.last_epoch) == (3, 6, 3, 6)
    assert log.end_offset_for_epoch(6) == (6, 3)
    log.append(7, [b"d"])
    log.flush()
    assert (log.end_offset, log.last_epoch, log.epoch_at(3)) == (4, 7, 7)
    assert log.end_offset_for_epoch(6) == (6, 3)
    assert log.end_offset_for_epoch(7) == (7, 4)


def test_same_epoch_appends_when_log_start_advanced_to_the_log_end(log: RaftLog) -> None:
    log.append(6, [b"a"])
    log.flush()
    log.advance_start(1)
    log.append(6, [b"b"])
    log.flush()
    assert (log.start_offset, log.end_offset, log.epoch_at(1)) == (1, 2, 6)
    assert log.end_offset_for_epoch(6) == (6, 2)
