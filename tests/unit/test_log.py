"""MemoryLog and DiskLog: the RaftLog contract (append, read, truncate, epochs, flush)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from raft.log import MemoryLog
from raft.types import NO_EPOCH, NO_OFFSET, Batch, RaftLog


def _records(n: int, tag: str = "r") -> list[bytes]:
    return [f"{tag}{i}".encode() for i in range(n)]


@pytest.fixture(params=["memory"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], RaftLog]]:
    opened: list = []

    def make() -> RaftLog:
        if request.param == "memory":
            return MemoryLog()
        from raft.log import DiskLog
        log = DiskLog(tmp_path / "p", segment_bytes=200)
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


def test_append_assigns_offsets_from_log_end_when_leader_appends(make_log) -> None:
    """KIP-595: a leader append takes offsets from the log end offset."""
    log = make_log()
    first = log.append(1, _records(3))
    second = log.append(1, _records(2))
    assert (first.base_offset, second.base_offset, log.end_offset) == (0, 3, 5)
    assert log.last_epoch == 1


def test_read_returns_whole_batch_containing_offset_when_offset_is_mid_batch(make_log) -> None:
    """Reads return whole batches, starting with the one holding the offset."""
    log = make_log()
    log.append(1, _records(3))
    log.append(2, _records(3, "x"))
    batches = log.read(4, 1)
    assert [b.base_offset for b in batches] == [3]
    assert batches[0].records == tuple(_records(3, "x"))
    assert log.read(6, 1000) == []


def test_read_stops_at_max_bytes_when_more_batches_exist(make_log) -> None:
    """Fetch max_bytes: at least one batch, then more only within the budget."""
    log = make_log()
    for _ in range(5):
        log.append(1, [b"abcd"])
    assert len(log.read(0, 0)) == 1
    assert len(log.read(0, 8)) == 2
    assert len(log.read(0, 10_000)) == 5


def test_append_batches_refuses_when_first_batch_is_not_at_log_end(make_log) -> None:
    """Follower appends must continue the log exactly (ValueError otherwise)."""
    log = make_log()
    log.append(1, _records(2))
    with pytest.raises(ValueError, match="log end"):
        log.append_batches([Batch(base_offset=5, epoch=1, records=(b"a",))])
    with pytest.raises(ValueError, match="epoch"):
        log.append_batches([Batch(base_offset=2, epoch=0, records=(b"a",))])
    assert log.end_offset == 2


def test_truncate_removes_records_and_epochs_when_offset_is_below_end(make_log) -> None:
    """KIP-595 diverging epoch: truncation removes records and epoch entries past it."""
    log = make_log()
    log.append(1, _records(3))
    log.append(2, _records(3))
    log.append(3, _records(3))
    log.truncate_to(3)
    assert (log.end_offset, log.last_epoch) == (3, 1)
    assert log.end_offset_for_epoch(2) == (1, 3)
    log.append(4, _records(1))
    assert log.end_offset_for_epoch(3) == (1, 3)
    assert log.epoch_at(3) == 4


def test_truncate_keeps_head_of_batch_when_offset_is_mid_batch(make_log) -> None:
    """truncate_to(o) removes exactly the records at o and above."""
    log = make_log()
    log.append(1, _records(5))
    log.flush()
    log.truncate_to(2)
    assert log.end_offset == 2
    assert log.read(0, 100)[0].records == tuple(_records(2))
    assert log.flushed_end_offset == 0  # the rewritten head is not durable yet
    log.flush()
    assert log.flushed_end_offset == 2


def test_end_offset_for_epoch_follows_kafka_when_asked(make_log) -> None:
    """OffsetsForLeaderEpoch on the log: next epoch start, log end, or undefined."""
    log = make_log()
    assert log.end_offset_for_epoch(0) == (NO_EPOCH, NO_OFFSET)
    log.append(2, _records(4))
    log.append(5, _records(2))
    assert log.end_offset_for_epoch(1) == (NO_EPOCH, NO_OFFSET)
    assert log.end_offset_for_epoch(3) == (2, 4)
    assert log.end_offset_for_epoch(5) == (5, 6)
    assert log.end_offset_for_epoch(7) == (5, 6)


def test_epoch_at_refuses_when_offset_is_outside_log(make_log) -> None:
    """epoch_at is defined only for offsets in the log."""
    log = make_log()
    log.append(3, _records(2))
    assert log.epoch_at(1) == 3
    with pytest.raises(ValueError, match="outside"):
        log.epoch_at(2)


def test_flushed_end_tracks_durable_prefix_when_appending_and_truncating(make_log) -> None:
    """A leader counts only its flushed end toward the high watermark (KIP-595)."""
    log = make_log()
    log.append(1, _records(3))
    assert log.flushed_end_offset == 0
    log.flush()
    log.append(1, _records(3))
    assert log.flushed_end_offset == 3
    log.truncate_to(1)
    assert log.flushed_end_offset == 0
    log.flush()
    assert log.flushed_end_offset == log.end_offset == 1


def test_crash_undoes_unflushed_appends_when_memory_log_crashes() -> None:
    """Simulated disk: unflushed writes are lost by a crash, flushed ones survive."""
    log = MemoryLog()
    log.append(1, _records(3))
    log.flush()
    log.append(2, _records(3))
    log.crash()
    assert (log.end_offset, log.last_epoch, log.flushed_end_offset) == (3, 1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)


def test_crash_undoes_unflushed_truncation_when_memory_log_crashes() -> None:
    """Simulated disk: a truncation that was never flushed is undone by a crash."""
    log = MemoryLog()
    log.append(1, _records(3))
    log.append(2, _records(3))
    log.flush()
    log.truncate_to(1)
    log.append(3, _records(1, "new"))
    log.crash()
    assert log.end_offset == 6
    assert [b.epoch for b in log.read(0, 1000)] == [1, 2]
    assert log.epoch_at(4) == 2


def test_crash_keeps_flushed_truncation_when_flush_returned() -> None:
    """Simulated disk: after flush(), a truncation and its new appends are durable."""
    log = MemoryLog()
    log.append(1, _records(3))
    log.append(2, _records(3))
    log.flush()
    log.truncate_to(4)
    log.append(3, _records(2, "new"))
    log.flush()
    log.append(3, _records(2, "lost"))
    log.crash()
    assert log.end_offset == 6
    assert [(b.base_offset, b.epoch, len(b.records)) for b in log.read(0, 1000)] == \
        [(0, 1, 3), (3, 2, 1), (4, 3, 2)]
