"""The log start offset: `advance_start` (segments below a snapshot deleted) and
`reset_to` (a fetched snapshot replaces the log), on both logs, across reopen and crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from raft.log import DiskLog, LogCorruptionError, MemoryLog
from raft.segment import list_segments, segment_base_offset
from raft.storage import LOG_START_OFFSET, read_log_start, write_log_start
from raft.types import NO_EPOCH, NO_OFFSET, RaftLog

SEGMENT_BYTES = 1024


def fill(log: RaftLog) -> None:
    """Epoch 1: offsets 0-29, epoch 3: 30-59, in batches of 3 records of 40 bytes."""
    for epoch in (1, 3):
        for _ in range(10):
            log.append(epoch, [bytes(40)] * 3)
    log.flush()


def bases(directory: Path) -> list[int]:
    return [segment_base_offset(p) for p in list_segments(directory)]


@pytest.fixture(params=["memory", "disk"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> RaftLog:
    if request.param == "memory":
        return MemoryLog()
    return DiskLog(tmp_path / "p", segment_bytes=SEGMENT_BYTES)


def test_advance_start_keeps_the_records_above_and_answers_for_the_snapshot_epoch(
        log: RaftLog) -> None:
    fill(log)
    log.advance_start(33)
    assert (log.start_offset, log.start_epoch, log.end_offset) == (33, 3, 60)
    assert log.read(33, 1)[0].base_offset <= 33 < log.read(33, 1)[0].next_offset
    with pytest.raises(ValueError, match="before the log start"):
        log.read(32, 1)
    assert log.end_offset_for_epoch(1) == (NO_EPOCH, NO_OFFSET)  # below the start
    assert log.end_offset_for_epoch(3) == (3, 60)
    with pytest.raises(ValueError, match="outside"):
        log.advance_start(61)
    with pytest.raises(ValueError, match="before the log start"):
        log.truncate_to(30)


def test_start_at_an_epoch_boundary_knows_where_the_older_epoch_ended(log: RaftLog) -> None:
    fill(log)
    log.advance_start(30)
    assert (log.start_epoch, log.end_offset_for_epoch(1), log.end_offset_for_epoch(2)) == (
        1, (1, 30), (1, 30))


def test_reset_to_empties_the_log_and_appends_continue_after_the_snapshot(
        log: RaftLog) -> None:
    fill(log)
    log.reset_to(100, 5)
    assert (log.start_offset, log.end_offset, log.last_epoch) == (100, 100, 5)
    assert log.end_offset_for_epoch(5) == (5, 100)
    assert log.end_offset_for_epoch(9) == (5, 100)
    log.append(6, [b"x"])
    log.flush()
    assert (log.end_offset, log.end_offset_for_epoch(5), log.epoch_at(100)) == (101, (5, 100), 6)


def test_memory_log_keeps_its_start_through_a_crash() -> None:
    log = MemoryLog()
    fill(log)
    log.advance_start(45)
    log.append(4, [b"lost"])
    log.crash()
    assert (log.start_offset, log.end_offset, log.end_offset_for_epoch(3)) == (45, 60, (3, 60))


def test_disk_log_deletes_whole_segments_below_the_start_and_reopens_there(
        tmp_path: Path) -> None:
    directory = tmp_path / "p"
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        fill(log)
        before = bases(directory)
        log.advance_start(33)
    kept = bases(directory)
    assert len(before) > len(kept)
    assert kept[0] <= 33
    assert kept == [b for b in before if b >= kept[0]]
    assert read_log_start(directory) == (33, 3)
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        assert (log.start_offset, log.start_epoch, log.end_offset) == (33, 3, 60)
        assert log.end_offset_for_epoch(3) == (3, 60)


def test_disk_log_reset_survives_reopen_with_one_empty_segment(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        fill(log)
        log.reset_to(100, 5)
    assert bases(directory) == [100]
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        assert (log.start_offset, log.end_offset, log.last_epoch) == (100, 100, 5)


@pytest.mark.parametrize("start", [33, 60, 100])
def test_recovery_finishes_deleting_what_a_crash_left_below_the_start(
        tmp_path: Path, start: int) -> None:
    """A crash after the start file was written, before the segments went."""
    directory = tmp_path / "p"
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        fill(log)
    write_log_start(directory, start, 3)
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        assert (log.start_offset, log.end_offset) == (start, max(start, 60))
        assert all(b <= start for b in bases(directory)[:1])
        assert log.last_epoch == 3


def test_a_damaged_start_file_is_a_corrupt_log_naming_it(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        fill(log)
    (directory / LOG_START_OFFSET).write_text("version: 0\noffset: x\n")
    with pytest.raises(LogCorruptionError, match=LOG_START_OFFSET):
        DiskLog(directory, segment_bytes=SEGMENT_BYTES)


def test_a_gap_between_the_start_and_the_first_segment_is_a_corrupt_log(
        tmp_path: Path) -> None:
    directory = tmp_path / "p"
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        fill(log)
    first, second = list_segments(directory)[:2]
    first.unlink()  # offsets 0..k gone, but the start file says the log starts at 0
    with pytest.raises(LogCorruptionError, match=f"starts at offset {segment_base_offset(second)}"):
        DiskLog(directory, segment_bytes=SEGMENT_BYTES)
