"""DiskLog.truncate_to across crashes: at every step a process death or a power cut keeps
every record below the truncation offset, and once it returns the truncation is durable.
DiskLog.reset_to across process deaths: never an old record above the new start.

`CrashDisk` (tests/support/crash_disk.py) stands in for `os` inside `raft.log`: it kills the process
just before a chosen step, and builds the directory a power cut would leave (only what
was fsynced, names included).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest

from raft.log import SWAP_SUFFIX, DiskLog, MemoryLog, list_swaps
from raft.segment import encode_batch, list_segments, segment_name
from raft.types import Batch, RaftLog
from tests.support.crash_disk import CrashDisk, Died
from tools.cli import main
from tools.log_dump.files import dump_lines

SEGMENT_BYTES = 200  # two batches a segment: bases 0 3 | 6 9 | 12 15 | 18 21 | 24 27
Record = tuple[int, int, bytes]  # (offset, epoch, record)


def _seg(base: int) -> str:
    return segment_name(base)


def _swap(base: int) -> str:
    return segment_name(base) + SWAP_SUFFIX


CUT_MID = [("open", _swap(9)), ("pwrite", _swap(9)), ("fsync", _swap(9)), ("fsync_dir", ""),
           ("ftruncate", _seg(6)), ("fsync", _seg(6)), ("rename", f"{_swap(9)} -> {_seg(9)}"),
           ("fsync_dir", "")]

# offset -> the steps truncate_to(offset) takes, every fsync among them.
SCENARIOS: dict[str, tuple[int, list[tuple[str, str]]]] = {
    "inside a batch, mid-segment, later segments": (10, [
        ("unlink", _seg(24)), ("unlink", _seg(18)), ("unlink", _seg(12)), *CUT_MID]),
    "inside the first batch of a segment, later segments": (13, [
        ("unlink", _seg(24)), ("unlink", _seg(18)),
        ("open", _swap(12)), ("pwrite", _swap(12)), ("fsync", _swap(12)), ("fsync_dir", ""),
        ("replace", f"{_swap(12)} -> {_seg(12)}"), ("fsync_dir", "")]),
    "inside the first batch of the log": (1, [
        ("unlink", _seg(24)), ("unlink", _seg(18)), ("unlink", _seg(12)), ("unlink", _seg(6)),
        ("open", _swap(0)), ("pwrite", _swap(0)), ("fsync", _swap(0)), ("fsync_dir", ""),
        ("replace", f"{_swap(0)} -> {_seg(0)}"), ("fsync_dir", "")]),
    "inside a batch of the last segment": (28, [
        ("open", _swap(27)), ("pwrite", _swap(27)), ("fsync", _swap(27)), ("fsync_dir", ""),
        ("ftruncate", _seg(24)), ("fsync", _seg(24)),
        ("rename", f"{_swap(27)} -> {_seg(27)}"), ("fsync_dir", "")]),
    "inside the first batch of the last segment": (26, [
        ("open", _swap(24)), ("pwrite", _swap(24)), ("fsync", _swap(24)),
        ("replace", f"{_swap(24)} -> {_seg(24)}"), ("fsync_dir", "")]),
    "at a batch boundary": (15, [
        ("unlink", _seg(24)), ("unlink", _seg(18)), ("fsync_dir", ""),
        ("ftruncate", _seg(12)), ("fsync", _seg(12))]),
    "at a segment start": (12, [
        ("unlink", _seg(24)), ("unlink", _seg(18)), ("fsync_dir", ""),
        ("ftruncate", _seg(12)), ("fsync", _seg(12))]),
}


def _build(directory: Path) -> DiskLog:
    """Ten batches of three records in five segments, epochs 1 to 4, all flushed."""
    log = DiskLog(directory, segment_bytes=SEGMENT_BYTES)
    for i in range(10):
        log.append(1 + i // 3, [f"r{i}-{j}".encode() * 4 for j in range(3)])
    log.flush()
    return log


def _contents(log: RaftLog) -> list[Record]:
    return [(b.base_offset + i, b.epoch, r) for b in log.read(0, 1 << 40)
            for i, r in enumerate(b.records)]


def _check_recovered(directory: Path, original: list[Record], offset: int, *,
                     truncated: bool) -> None:
    """Reopened, the log is a prefix of `original` holding every record below `offset`
    (exactly those once the truncation returned), with no swap left, and still works."""
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        got = _contents(log)
        if truncated:
            assert len(got) == offset, f"truncation to {offset} undone: log ends at {len(got)}"
        assert len(got) >= offset, f"records below {offset} lost: log ends at {len(got)}"
        assert got == original[:len(got)]
        assert [log.epoch_at(o) for o in range(len(got))] == [e for _, e, _ in got]
        assert log.flushed_end_offset == log.end_offset == len(got)
        assert list_swaps(directory) == []
        log.append(9, [b"after"])
        log.flush()
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as log:
        assert _contents(log) == [*got, (len(got), 9, b"after")]


def _crash_cases() -> Iterator[tuple[str, int]]:
    for name, (_, steps) in SCENARIOS.items():
        for step in range(len(steps) + 1):  # the last: the process dies once it returned
            yield name, step


def _died_before_renaming_the_swap(directory: Path) -> tuple[CrashDisk, int, list[Record]]:
    """A log built in `directory` whose cut inside a batch (later segments deleted) died
    just before the head's swap was renamed over segment 9: (the disk that saw it, the
    offset cut to, the records before the cut)."""
    offset, steps = SCENARIOS["inside a batch, mid-segment, later segments"]
    log = _build(directory)
    original = _contents(log)
    disk = CrashDisk(directory)
    disk.inject(steps.index(("rename", f"{_swap(9)} -> {_seg(9)}")), Died())
    with disk.installed():
        with pytest.raises(Died):
            log.truncate_to(offset)
        log.close()
        disk.abandon()
    return disk, offset, original


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_truncate_takes_these_steps_and_is_durable_when_it_returns(
        tmp_path: Path, scenario: str) -> None:
    """The truncation protocol, step by step (every fsync listed); when it returns the
    log is durable up to the offset, and a power cut keeps exactly the truncated log."""
    offset, steps = SCENARIOS[scenario]
    log = _build(tmp_path / "log")
    original = _contents(log)
    disk = CrashDisk(tmp_path / "log")
    with disk.installed():
        log.truncate_to(offset)
        assert disk.steps == steps
        assert log.flushed_end_offset == log.end_offset == offset
        assert _contents(log) == original[:offset]
        log.close()
    _check_recovered(disk.power_cut(tmp_path / "power-cut"), original, offset, truncated=True)


@pytest.mark.parametrize(("scenario", "step"), list(_crash_cases()))
def test_every_record_below_offset_survives_when_truncate_dies_at_any_step(
        tmp_path: Path, scenario: str, step: int) -> None:
    """The process dies just before step `step` (or right after truncate_to returned): both
    a process death (page cache kept) and a power cut (only fsynced data and names kept)
    leave every record below the offset, each in its epoch, and no swap after recovery."""
    offset, _ = SCENARIOS[scenario]
    log = _build(tmp_path / "log")
    original = _contents(log)
    disk = CrashDisk(tmp_path / "log")
    disk.inject(step, Died())
    with disk.installed():
        try:  # returns at the last step (the test above pins the steps)
            log.truncate_to(offset)
            returned = True
        except Died:
            returned = False
        log.close()
        disk.abandon()
    _check_recovered(disk.power_cut(tmp_path / "power-cut"), original, offset,
                     truncated=returned)
    _check_recovered(tmp_path / "log", original, offset, truncated=returned)


def test_every_record_survives_when_recovery_itself_dies_adopting_the_swap(
        tmp_path: Path) -> None:
    """A power cut left the cut segment shortened and the head in its swap; recovery
    adopts the swap, and dying at any step of that recovery loses nothing either."""
    disk, offset, original = _died_before_renaming_the_swap(tmp_path / "log")
    image = disk.power_cut(tmp_path / "image")
    assert sorted(p.name for p in image.iterdir()) == [_seg(0), _seg(6), _swap(9)]
    step = 0
    while True:
        attempt = tmp_path / f"attempt-{step}"
        attempt.mkdir()
        for path in image.iterdir():
            (attempt / path.name).write_bytes(path.read_bytes())
        recovery = CrashDisk(attempt)
        recovery.inject(step, Died())
        with recovery.installed():
            try:
                DiskLog(attempt, segment_bytes=SEGMENT_BYTES).close()
                died = False
            except Died:
                died = True
            recovery.abandon()
        _check_recovered(recovery.power_cut(tmp_path / f"power-cut-{step}"), original, offset,
                         truncated=True)
        _check_recovered(attempt, original, offset, truncated=True)
        if not died:
            break
        step += 1
    assert step >= 4  # it did adopt: open, fsync and rename the swap, sync the directory


RESET_STEPS = [*(("unlink", _seg(base)) for base in (24, 18, 12, 6, 0)), ("fsync_dir", ""),
               ("open", _seg(12)), ("fsync_dir", "")]


@pytest.mark.parametrize("step", range(len(RESET_STEPS) + 1))
def test_a_reset_below_the_log_end_that_dies_at_any_step_resurrects_nothing(
        tmp_path: Path, step: int) -> None:
    """A fetched snapshot replaces a longer log that diverges from it (`reset_to` below the
    log end). Dying before any step (the last: once it returned) leaves a prefix of the
    old log at its old start, or the empty log at the new start, never old records after
    the new start: they would follow a snapshot of another history. The start file is
    written between the steps listed (through `raft.storage`), once every segment is
    gone: written first, a death at the first unlink left segments 12 to 24 after it."""
    directory = tmp_path / "log"
    log = _build(directory)
    original = _contents(log)
    disk = CrashDisk(directory)
    disk.inject(step, Died())
    with disk.installed():
        try:
            log.reset_to(12, 7)
            returned = True
        except Died:
            returned = False
        assert disk.steps[:step] == RESET_STEPS[:step]
        log.close()
        disk.abandon()
    with DiskLog(directory, segment_bytes=SEGMENT_BYTES) as again:
        got = [(b.base_offset + i, b.epoch, r) for b in again.read(again.start_offset, 1 << 40)
               for i, r in enumerate(b.records)]
        if again.start_offset == 12:
            assert (got, again.last_epoch) == ([], 7)
        else:
            assert (again.start_offset, returned) == (0, False)
            assert got == original[:len(got)]
        assert returned == (step == len(RESET_STEPS))
        again.append(8, [b"after"])
        assert again.end_offset == again.start_offset + len(got) + 1


@pytest.mark.parametrize("make", ["memory", "disk"])
def test_unflushed_records_below_offset_are_durable_when_truncate_returns(
        tmp_path: Path, make: str) -> None:
    """truncate_to returns durable up to its offset, records never flushed before included
    (for MemoryLog: crash() keeps them; for DiskLog: so does a power cut)."""
    disk: CrashDisk | None = None
    log: RaftLog
    if make == "memory":
        log = MemoryLog()
    else:
        log = DiskLog(tmp_path / "log", segment_bytes=SEGMENT_BYTES)
        disk = CrashDisk(tmp_path / "log")
    with disk.installed() if disk else nullcontext():
        log.append(1, [b"a", b"b"])
        log.flush()
        for i in range(4):  # rolls a segment, which syncs the full one
            log.append(2, [f"unflushed-{i}-{j}".encode() * 3 for j in range(3)])
        assert log.flushed_end_offset == 2
        log.truncate_to(10)
        assert log.flushed_end_offset == log.end_offset == 10
        expected = _contents(log)
        if isinstance(log, DiskLog):
            log.close()
    if isinstance(log, MemoryLog):
        log.crash()
        assert _contents(log) == expected
        return
    assert disk is not None
    with DiskLog(disk.power_cut(tmp_path / "power-cut"), segment_bytes=SEGMENT_BYTES) as again:
        assert _contents(again) == expected


def test_log_is_unchanged_and_usable_when_writing_the_head_fails(tmp_path: Path) -> None:
    """A full disk while writing the head: truncate_to raises, the cut batch stays whole
    (on disk and in the log), no swap is left, and the truncation can be retried."""
    offset, steps = SCENARIOS["inside a batch, mid-segment, later segments"]
    log = _build(tmp_path / "log")
    original = _contents(log)
    disk = CrashDisk(tmp_path / "log")
    disk.inject(steps.index(("pwrite", _swap(9))), OSError(errno.ENOSPC, "No space left"))
    with disk.installed():
        with pytest.raises(OSError, match="No space left"):
            log.truncate_to(offset)
        assert list_swaps(tmp_path / "log") == []
        assert log.end_offset == 12  # the segments after the cut one were removed
        assert _contents(log) == original[:12]
        failed = disk.power_cut(tmp_path / "power-cut")
        log.truncate_to(offset)
        assert _contents(log) == original[:offset]
        log.close()
    _check_recovered(failed, original, offset, truncated=False)
    _check_recovered(disk.power_cut(tmp_path / "power-cut-2"), original, offset,
                     truncated=True)
    _check_recovered(tmp_path / "log", original, offset, truncated=True)


@pytest.mark.parametrize("failing", ["ftruncate", "fsync_dir"])
def test_log_refuses_use_until_reopened_when_a_cut_fails_half_way(
        tmp_path: Path, failing: str) -> None:
    """An I/O error once the segment is being changed: the files hold the old or the new
    log, so every later call raises OSError; reopening settles it, nothing below the
    offset lost."""
    offset, steps = SCENARIOS["inside a batch, mid-segment, later segments"]
    log = _build(tmp_path / "log")
    original = _contents(log)
    disk = CrashDisk(tmp_path / "log")
    disk.inject(max(i for i, (call, _) in enumerate(steps) if call == failing),
                OSError(errno.EIO, "Input/output error"))
    with disk.installed():
        with pytest.raises(OSError, match="Input/output error"):
            log.truncate_to(offset)
        for call in (lambda: log.read(0, 100), lambda: log.append(5, [b"x"]), log.flush,
                     lambda: log.truncate_to(1)):
            with pytest.raises(OSError, match="reopen it to recover"):
                call()
        log.close()
        disk.abandon()
    _check_recovered(disk.power_cut(tmp_path / "power-cut"), original, offset,
                     truncated=False)
    _check_recovered(tmp_path / "log", original, offset, truncated=False)


def _write_swap(directory: Path, batch: Batch, *, torn: bool = False) -> Path:
    data = encode_batch(batch)
    path = directory / _swap(batch.base_offset)
    path.write_bytes(data[:-3] if torn else data)
    return path


@pytest.mark.parametrize(("base", "epoch", "torn", "adopted"), [
    (6, 2, False, True),  # at the log end, whole: the cut segment was shortened
    (6, 2, True, False),  # torn: never synced, so the segment was never shortened
    (3, 2, False, False),  # inside the log: the segment still holds the whole batch
    (9, 2, False, False),  # past the log end: nothing of ours
    (6, 1, False, False),  # an epoch below the log's: not a head this log cut
])
def test_recovery_adopts_a_swap_only_when_it_is_whole_at_the_log_end(
        tmp_path: Path, base: int, epoch: int, torn: bool, adopted: bool) -> None:
    """A leftover `.swap` becomes the next segment only if it scans cleanly and starts at
    the log end; otherwise it is removed. Either way it is never read as a segment."""
    with DiskLog(tmp_path, segment_bytes=SEGMENT_BYTES) as log:
        log.append(1, [b"a"] * 3)
        log.append(2, [b"b"] * 3)
    head = Batch(base_offset=base, epoch=epoch, records=(b"head-1", b"head-2"))
    _write_swap(tmp_path, head, torn=torn)
    (tmp_path / "notes.swap").write_bytes(b"not ours")  # not a segment's swap: left alone
    with DiskLog(tmp_path, segment_bytes=SEGMENT_BYTES) as log:
        assert log.end_offset == (8 if adopted else 6)
        assert list_swaps(tmp_path) == []
        assert (tmp_path / _seg(base)).exists() == adopted
        if adopted:
            assert log.read(6, 100) == [head]
    assert (tmp_path / "notes.swap").exists()


def test_dump_log_skips_a_leftover_swap_when_a_cut_was_interrupted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kraft dump-log` reads segments only: a swap left by a crash is not dumped (it does
    not fail either); opening the log settles it."""
    _, offset, _ = _died_before_renaming_the_swap(tmp_path / "log")
    assert [p.name for p in list_swaps(tmp_path / "log")] == [_swap(9)]
    lines = list(dump_lines(tmp_path / "log"))
    assert [line for line in lines if line.startswith("Dumping")] == \
        [f"Dumping {tmp_path / 'log' / _seg(0)}", f"Dumping {tmp_path / 'log' / _seg(6)}"]
    assert main(["dump-log", "--dir", str(tmp_path / "log")]) == 0
    assert SWAP_SUFFIX not in capsys.readouterr().out
    with DiskLog(tmp_path / "log", segment_bytes=SEGMENT_BYTES) as log:
        assert log.end_offset == offset
    assert [p.name for p in list_segments(tmp_path / "log")] == [_seg(0), _seg(6), _seg(9)]
