"""MemoryLog and DiskLog: the RaftLog contract (append, read, truncate, epochs, flush)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from raft.log import (
    METADATA_PARTITION_DIR,
    DiskLog,
    LogCorruptionError,
    MemoryLog,
    SegmentSync,
)
from raft.segment import encode_batch, iter_batches, list_segments
from raft.types import NO_EPOCH, NO_OFFSET, Batch, RaftLog
from tests.support.crash_disk import CrashDisk


def _records(n: int, tag: str = "r") -> list[bytes]:
    return [f"{tag}{i}".encode() for i in range(n)]


@pytest.fixture(params=["memory", "disk"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], RaftLog]]:
    opened: list[DiskLog] = []

    def make() -> RaftLog:
        if request.param == "memory":
            return MemoryLog()
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
    assert log.flushed_end_offset == 2  # the rewritten head is durable already


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
    assert log.flushed_end_offset == log.end_offset == 1  # a truncation is durable
    log.append(1, _records(1))
    assert log.flushed_end_offset == 1


def test_flush_in_two_steps_covers_the_log_as_it_began_when_appends_follow(make_log) -> None:
    """`begin_flush` ... `finish_flush`: durable up to the log end at the beginning, the
    appends in between not; a truncation in between makes the sync cover nothing."""
    log = make_log()
    log.append(1, _records(3))
    sync = log.begin_flush()
    log.append(1, _records(2))
    sync.run()
    log.finish_flush(sync)
    assert (log.flushed_end_offset, log.end_offset) == (3, 5)

    sync = log.begin_flush()
    log.truncate_to(4)
    log.append(2, _records(3))
    sync.run()
    log.finish_flush(sync)
    assert (log.flushed_end_offset, log.end_offset) == (4, 7)  # the truncation's, not 5


def test_power_cut_keeps_what_a_two_step_flush_covered_when_appends_followed(
        tmp_path: Path) -> None:
    """The sync fsyncs its own copies of the descriptors (valid even if the log closed
    its own meanwhile): what it covered survives a power cut."""
    directory = tmp_path / "log"
    directory.mkdir()
    disk = CrashDisk(directory)
    with disk.installed():
        log = DiskLog(directory)
        log.append(1, _records(3))
        sync = log.begin_flush()
        log.append(1, _records(2, "later"))
        sync.run()
        log.finish_flush(sync)
        assert log.flushed_end_offset == 3
        log.close()
    with DiskLog(disk.power_cut(tmp_path / "cut")) as survivor:
        assert [r for b in survivor.read(0, 1 << 20) for r in b.records][:3] == _records(3)


def test_crash_undoes_unflushed_appends_when_memory_log_crashes() -> None:
    """Simulated disk: unflushed writes are lost by a crash, flushed ones survive."""
    log = MemoryLog()
    log.append(1, _records(3))
    log.flush()
    log.append(2, _records(3))
    log.crash()
    assert (log.end_offset, log.last_epoch, log.flushed_end_offset) == (3, 1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)


def test_crash_keeps_truncation_but_not_later_appends_when_memory_log_crashes() -> None:
    """Simulated disk: a truncation is durable when it returns (as DiskLog's is), the
    head of a batch it cut included; an append after it is not, until flushed."""
    log = MemoryLog()
    log.append(1, _records(3))
    log.append(2, _records(3))
    log.truncate_to(1)
    log.append(3, _records(1, "new"))
    log.crash()
    assert [(b.base_offset, b.epoch, b.records) for b in log.read(0, 1000)] == \
        [(0, 1, (b"r0",))]
    assert (log.end_offset, log.flushed_end_offset, log.last_epoch) == (1, 1, 1)
    assert log.end_offset_for_epoch(2) == (1, 1)


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


OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 1), st.integers(1, 3)),
    st.tuples(st.just("truncate"), st.floats(0, 1), st.just(0)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("crash"), st.just(0), st.just(0)),
), max_size=40)


@given(OPERATIONS)
def test_crash_restores_exactly_last_flushed_records_when_operations_are_random(
        operations: list[tuple[str, float, int]]) -> None:
    """Simulated disk: after crash() the log holds exactly what it held at the last flush()
    or truncation (no unflushed append survives, nothing flushed or truncated is lost)."""
    log = MemoryLog()
    flushed: list[tuple[int, int, bytes]] = []
    serial = 0
    for name, amount, count in operations:
        if name == "append":
            serial += 1
            log.append(max(log.last_epoch, 1) + int(amount),
                       [f"{serial}-{i}".encode() for i in range(count)])
        elif name == "truncate":
            end = log.end_offset
            log.truncate_to(int(end * amount))
            if log.end_offset < end:  # it removed something: durable now
                flushed = _contents(log)
        elif name == "flush":
            log.flush()
            flushed = _contents(log)
        else:
            log.crash()
            assert _contents(log) == flushed
            assert log.flushed_end_offset == log.end_offset == len(flushed)
        assert log.flushed_end_offset <= log.end_offset
        assert _contents(log)[:log.flushed_end_offset] == flushed[:log.flushed_end_offset]


def _contents(log: MemoryLog) -> list[tuple[int, int, bytes]]:
    """(offset, epoch, record) for every record in the log."""
    return [(b.base_offset + i, b.epoch, r) for b in log.read(0, 1 << 40)
            for i, r in enumerate(b.records)]


# --- DiskLog specifics: segments, recovery, corruption ------------------------------------

def _fill(log: DiskLog, batches: int, epoch: int = 1) -> None:
    for i in range(batches):
        log.append(epoch, [f"record-{i}".encode() * 3])
    log.flush()


def test_segments_roll_when_segment_bytes_is_reached(tmp_path: Path) -> None:
    """log.segment.bytes: a full segment is closed and the next starts at the batch's offset."""
    with DiskLog(tmp_path, segment_bytes=150) as log:
        _fill(log, 10)
        names = [p.name for p in list_segments(tmp_path)]
        assert len(names) > 1
        assert names[0] == "00000000000000000000.log"
        assert all(p.stat().st_size <= 150 for p in list_segments(tmp_path)[:-1])
        assert [b.base_offset for b in log.read(0, 10_000)] == list(range(10))


def test_reopen_restores_batches_and_epochs_when_log_was_closed(tmp_path: Path) -> None:
    """Recovery rebuilds the offset index and the epoch cache from the segments."""
    with DiskLog.open_metadata_log(tmp_path, segment_bytes=150) as log:
        _fill(log, 4, epoch=1)
        _fill(log, 4, epoch=3)
        before = log.read(0, 10_000)
    assert (tmp_path / METADATA_PARTITION_DIR).is_dir()
    with DiskLog.open_metadata_log(tmp_path, segment_bytes=150) as log:
        assert log.read(0, 10_000) == before
        assert log.end_offset_for_epoch(2) == (1, 4)
        assert (log.end_offset, log.flushed_end_offset, log.last_epoch) == (8, 8, 3)


def test_truncate_removes_later_segments_when_offset_is_in_earlier_segment(
        tmp_path: Path) -> None:
    """Truncation deletes whole later segments and cuts the one holding the offset."""
    with DiskLog(tmp_path, segment_bytes=150) as log:
        _fill(log, 10)
        log.truncate_to(1)
        log.flush()
        assert len(list_segments(tmp_path)) == 1
        assert log.end_offset == 1
        log.append(2, [b"after"])
        log.flush()
    with DiskLog(tmp_path, segment_bytes=150) as log:
        assert [(b.base_offset, b.epoch) for b in log.read(0, 10_000)] == [(0, 1), (1, 2)]


def test_torn_tail_is_truncated_when_last_batch_is_incomplete(tmp_path: Path) -> None:
    """Recovery: a partial batch at the end of the last segment is a torn write, cut off."""
    with DiskLog(tmp_path) as log:
        _fill(log, 3)
        size = log.segment_paths[-1].stat().st_size
    segment = list_segments(tmp_path)[-1]
    with segment.open("r+b") as f:
        f.truncate(size - 5)
    with DiskLog(tmp_path) as log:
        assert log.end_offset == 2
        assert segment.stat().st_size < size - 5
        log.append(1, [b"new"])
        assert log.read(2, 100)[0].records == (b"new",)


def test_torn_tail_is_truncated_when_final_batch_has_bad_crc(tmp_path: Path) -> None:
    """Recovery: a bad CRC on the final batch with nothing valid after it is a torn tail."""
    with DiskLog(tmp_path) as log:
        _fill(log, 3)
    segment = list_segments(tmp_path)[-1]
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data) + b"\0" * 40)  # plus zeros, as a crash can leave
    with DiskLog(tmp_path) as log:
        assert log.end_offset == 2


def _damage_second_of_three_batches(directory: Path, at: int, damage: Callable[[int], int]
                                    ) -> tuple[Path, int, int]:
    """A log of three batches in `directory`, byte `at` of the second one replaced by
    `damage` of it: (the segment, the first batch's size, the segment's size)."""
    with DiskLog(directory) as log:
        _fill(log, 3)
        first_size = len(encode_batch(log.read(0, 0)[0]))
    segment = list_segments(directory)[0]
    data = bytearray(segment.read_bytes())
    data[first_size + at] = damage(data[first_size + at])
    segment.write_bytes(bytes(data))
    return segment, first_size, len(data)


def test_open_refuses_with_file_and_offset_when_middle_batch_is_corrupt(tmp_path: Path) -> None:
    """DESIGN: a bad CRC before the tail is an error naming file and offset, never skipped."""
    segment, first_size, size = _damage_second_of_three_batches(
        tmp_path, 30, lambda byte: byte ^ 0x01)  # inside the second batch
    with pytest.raises(LogCorruptionError) as info:
        DiskLog(tmp_path)
    assert info.value.path == str(segment)
    assert info.value.position == first_size
    assert f"{segment}: corrupt log at byte offset {first_size}" in str(info.value)
    assert len(segment.read_bytes()) == size  # nothing was "repaired"


def test_open_refuses_when_middle_batch_length_is_corrupt(tmp_path: Path) -> None:
    """A damaged length that hides valid batches after it is not mistaken for a torn tail."""
    _, first_size, _ = _damage_second_of_three_batches(
        tmp_path, 16, lambda _: 0x7F)  # payload_length of the second batch: huge
    with pytest.raises(LogCorruptionError, match=f"byte offset {first_size}"):
        DiskLog(tmp_path)


def test_open_refuses_when_earlier_segment_has_torn_tail(tmp_path: Path) -> None:
    """Only the last segment may have a torn tail; earlier damage is corruption."""
    with DiskLog(tmp_path, segment_bytes=150) as log:
        _fill(log, 10)
    first = list_segments(tmp_path)[0]
    size = first.stat().st_size
    with first.open("r+b") as f:
        f.truncate(size - 3)
    with pytest.raises(LogCorruptionError, match=first.name):
        DiskLog(tmp_path, segment_bytes=150)


def test_open_refuses_when_segments_leave_an_offset_gap(tmp_path: Path) -> None:
    """Offsets must continue across segments: a missing segment is corruption."""
    with DiskLog(tmp_path, segment_bytes=150) as log:
        _fill(log, 12)
    segments = list_segments(tmp_path)
    assert len(segments) >= 3
    segments[1].unlink()
    with pytest.raises(LogCorruptionError, match="gap"):
        DiskLog(tmp_path, segment_bytes=150)


@pytest.mark.parametrize(("batches", "reason"), [
    ([(0, 1, 2), (5, 1, 1), (6, 1, 1)], "gap or out of order"),
    ([(0, 1, 2), (1, 1, 1), (2, 1, 1)], "gap or out of order"),
    ([(0, 3, 2), (2, 1, 1), (3, 3, 1)], "epoch 1 after epoch 3"),
])
def test_open_refuses_when_batches_in_segment_are_inconsistent(
        tmp_path: Path, batches: list[tuple[int, int, int]], reason: str) -> None:
    """Offsets continue batch to batch and epochs never go back; else it is corruption."""
    encoded = [encode_batch(Batch(base_offset=base, epoch=epoch, records=(b"x",) * count))
               for base, epoch, count in batches]
    (tmp_path / "00000000000000000000.log").write_bytes(b"".join(encoded))
    with pytest.raises(LogCorruptionError, match=reason) as info:
        DiskLog(tmp_path)
    assert info.value.position == len(encoded[0])


def test_open_refuses_when_first_segment_does_not_start_at_log_start(tmp_path: Path) -> None:
    """Without snapshots the log starts at offset 0; a missing first segment is a gap."""
    data = encode_batch(Batch(base_offset=10, epoch=1, records=(b"x",)))
    (tmp_path / "00000000000000000010.log").write_bytes(data)
    with pytest.raises(LogCorruptionError, match="log starts at offset 10"):
        DiskLog(tmp_path)


def _flip_log() -> tuple[Path, list[tuple[Path, bytes]], int]:
    """A three-segment log in a fresh temp dir: (dir, [(segment, bytes)], last batch base)."""
    directory = Path(tempfile.mkdtemp(prefix="flip-"))
    with DiskLog(directory, segment_bytes=150) as log:
        _fill(log, 9)
        last_base = log.read(log.end_offset - 1, 0)[0].base_offset
    return directory, [(p, p.read_bytes()) for p in list_segments(directory)], last_base


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_flipped_bit_is_refused_or_cuts_only_last_batch_when_anywhere_in_log(
        data: st.DataObject) -> None:
    """CRC recovery: one flipped bit is never read back as data. In the last batch of the
    last segment it is a torn tail (that batch goes); anywhere else opening fails."""
    directory, segments, last_base = _flip_log()
    try:
        index = data.draw(st.integers(0, len(segments) - 1))
        path, original = segments[index]
        position = data.draw(st.integers(0, len(original) - 1))
        damaged = bytearray(original)
        damaged[position] ^= 1 << data.draw(st.integers(0, 7))
        path.write_bytes(bytes(damaged))
        last_batch_start = list(iter_batches(original))[-1].position
        if index == len(segments) - 1 and position >= last_batch_start:
            with DiskLog(directory, segment_bytes=150) as log:
                assert log.end_offset == last_base
                assert [b.base_offset for b in log.read(0, 10_000)] == list(range(last_base))
        else:
            with pytest.raises(LogCorruptionError) as info:
                DiskLog(directory, segment_bytes=150)
            assert info.value.path == str(path)
    finally:
        shutil.rmtree(directory)


# -- the tail cache (DiskLog keeps the batches appended last in memory) ------------------


class SmallTailLog(DiskLog):
    """A tail cache of a few batches, so that trimming it happens all the time."""

    TAIL_CACHE_BATCHES = 3
    TAIL_CACHE_BYTES = 24


def test_read_serves_appended_batches_from_memory_when_they_are_at_the_tail(
        tmp_path: Path) -> None:
    with DiskLog(tmp_path / "p", segment_bytes=200) as log:
        appended = [log.append(1, _records(2, f"b{i}")) for i in range(5)]
        assert log.read(4, 1 << 20) == appended[2:]
        assert log.read(4, 1 << 20)[0] is appended[2]  # no pread, no decode
        assert log.read(4, 1 << 20) == log._read_uncached(4, 1 << 20)


def test_read_matches_segments_when_tail_cache_was_trimmed(tmp_path: Path) -> None:
    with SmallTailLog(tmp_path / "p", segment_bytes=90) as log:
        for i in range(12):
            log.append(1 + i // 4, _records(1 + i % 3, f"b{i}"))
            for offset in range(log.end_offset):
                for max_bytes in (0, 10, 1 << 20):
                    assert log.read(offset, max_bytes) == log._read_uncached(offset, max_bytes)


@pytest.mark.parametrize("cut", [0, 3, 4, 5, 7])  # at a batch boundary, or inside a batch
def test_read_returns_log_after_truncation_when_truncated_batches_were_cached(
        tmp_path: Path, cut: int) -> None:
    with DiskLog(tmp_path / "p", segment_bytes=60) as log:
        for i in range(4):
            log.append(1, _records(2, f"b{i}"))  # batches at 0, 2, 4, 6
        log.truncate_to(cut)
        appended = log.append(2, [b"after"])
        assert appended.base_offset == cut
        everything = log.read(0, 1 << 20)
        assert everything == log._read_uncached(0, 1 << 20)
        assert [r for b in everything for r in b.records][cut] == b"after"
        assert sum(len(b.records) for b in everything) == cut + 1


def test_read_returns_log_after_start_moves_when_tail_was_cached(tmp_path: Path) -> None:
    with DiskLog(tmp_path / "p", segment_bytes=60) as log:
        for i in range(6):
            log.append(1, _records(2, f"b{i}"))
        log.advance_start(7)
        assert log.read(7, 1 << 20) == log._read_uncached(7, 1 << 20)
        assert log.read(7, 1 << 20)[0].base_offset == 6
        log.reset_to(20, 3)
        assert log.read(20, 1 << 20) == []
        assert log.append(3, [b"x"]) == log.read(20, 1 << 20)[0]


class DiskMatchesMemory(RuleBasedStateMachine):  # tmp_path is not available to state machines
    """DiskLog behaves as MemoryLog (its model) under any append/truncate/read/flush/reopen,
    and after a power cut keeps at least what the model keeps."""

    def __init__(self) -> None:
        super().__init__()
        self.model = MemoryLog()
        self.disk: DiskLog | None = None
        self.watching = ExitStack()  # the CrashDisk standing in for raft.log's os
        self.power_cuts = 0
        # a flush begun and not finished: the disk log's, the model's
        self.syncs: tuple[SegmentSync, SegmentSync] | None = None

    @initialize()
    def open_log(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="disklog-"))
        self.directory = self.root / "log-0"
        self.directory.mkdir()
        self.disk = self._open_watched()

    def _open_watched(self) -> DiskLog:
        """The log on `self.directory`, whose files count as durable as they are now."""
        self.watching.close()
        self.crash_disk = self.watching.enter_context(CrashDisk(self.directory).installed())
        return SmallTailLog(self.directory, segment_bytes=120)

    def _disk(self) -> DiskLog:
        assert self.disk is not None
        return self.disk

    @rule(bump=st.integers(0, 2), records=st.lists(st.binary(max_size=20), min_size=1,
                                                   max_size=4))
    def append(self, bump: int, records: list[bytes]) -> None:
        epoch = max(self.model.last_epoch, 1) + bump
        assert self._disk().append(epoch, records) == self.model.append(epoch, records)

    @precondition(lambda self: self.model.end_offset > 0)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.model.end_offset))
        self._disk().truncate_to(offset)
        self.model.truncate_to(offset)

    @rule(data=st.data(), max_bytes=st.integers(0, 100))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        offset = data.draw(st.integers(0, self.model.end_offset + 1))
        expected = self.model.read(offset, max_bytes)
        assert self._disk().read(offset, max_bytes) == expected
        assert self._disk()._read_uncached(offset, max_bytes) == expected

    @rule()
    def flush(self) -> None:
        self._disk().flush()
        self.model.flush()

    @precondition(lambda self: self.syncs is None)
    @rule()
    def begin_flush(self) -> None:
        """A flush in two steps (a broker's, beside its core loop): appends and
        truncations may come before it finishes."""
        self.syncs = (self._disk().begin_flush(), self.model.begin_flush())

    @precondition(lambda self: self.syncs is not None)
    @rule()
    def finish_flush(self) -> None:
        assert self.syncs is not None
        disk_sync, model_sync = self.syncs
        self.syncs = None
        disk_sync.run()
        self._disk().finish_flush(disk_sync)
        self.model.finish_flush(model_sync)

    def _drop_sync(self) -> None:
        if self.syncs is not None:
            for fd in self.syncs[0].fds:
                os.close(fd)
            self.syncs = None

    @rule()
    def reopen(self) -> None:
        """A clean restart keeps the page cache; recovery makes it all durable."""
        self._drop_sync()
        self._disk().close()
        self.disk = SmallTailLog(self.directory, segment_bytes=120)
        self.model.flush()

    @rule()
    def power_cut(self) -> None:
        """The model keeps exactly its durable state (the last flush or truncation). The
        disk log, opened on what its fsyncs made durable, keeps that batch for batch, and
        perhaps more of what it held (a full segment is synced when the next starts)."""
        held = self._disk().read(0, 1 << 40)
        self._drop_sync()
        self._disk().close()
        self.power_cuts += 1
        self.directory = self.crash_disk.power_cut(self.root / f"log-{self.power_cuts}")
        self.disk = self._open_watched()
        self.model.crash()
        durable = self.model.read(0, 1 << 40)
        kept = self.disk.read(0, 1 << 40)
        assert kept[:len(durable)] == durable
        assert held[:len(kept)] == kept
        self.model.append_batches(kept[len(durable):])
        self.model.flush()

    @invariant()
    def same_state(self) -> None:
        if self.disk is None:
            return
        disk, model = self.disk, self.model
        assert (disk.end_offset, disk.flushed_end_offset, disk.last_epoch) == \
            (model.end_offset, model.flushed_end_offset, model.last_epoch)
        assert disk.epoch_cache.entries() == model.epoch_cache.entries()
        for epoch in range(0, model.last_epoch + 2):
            assert disk.end_offset_for_epoch(epoch) == model.end_offset_for_epoch(epoch)

    def teardown(self) -> None:
        self._drop_sync()
        if self.disk is not None:
            self.disk.close()
        self.watching.close()
        shutil.rmtree(self.root, ignore_errors=True)


DiskMatchesMemory.TestCase.settings = settings(max_examples=60, stateful_step_count=30,
                                               deadline=None)
test_disk_log_matches_memory_log_when_operations_are_random = DiskMatchesMemory.TestCase
