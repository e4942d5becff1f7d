"""Crashes between the steps of the simulated disk's multi-step operations, and directory
entries a crash loses (`raft.sim.disk_steps`): for each crash point, what the disk holds
after recovery is what the real code's steps and recovery leave; a planted disk bug
that skips the log's directory fsync loses acknowledged records; and the sweep counts
each crash point by kind."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import pytest

from raft.segment import segment_name
from raft.sim.disk import SEGMENT_BATCHES, DiskConfig, SimDisk
from raft.sim.disk_steps import CrashPoint
from raft.sim.invariants import entries_of
from raft.sim.sweep import RunSpec, run_seed
from raft.snapshot import encode_snapshot
from raft.types import SnapshotId

SNAPSHOT = SnapshotId(4, 1)
SNAPSHOT_BYTES = encode_snapshot(SNAPSHOT, [b"a", b"b"])


def disk_with(batches: int, *, flush_syncs_dir: bool = True, records: int = 1,
              cut_keeps_segment: bool = True) -> SimDisk:
    """A disk holding `batches` flushed batches of `records` records each, in epoch 1."""
    disk = SimDisk(DiskConfig(flush_syncs_dir=flush_syncs_dir,
                              cut_keeps_segment=cut_keeps_segment), random.Random(1))
    for index in range(batches):
        disk.log.append(1, [b"r%d-%d" % (index, i) for i in range(records)])
        disk.log.flush()
    return disk


def recovered(disk: SimDisk) -> list[tuple[int, int, bytes]]:
    return list(entries_of(disk.log, disk.log.start_offset, disk.log.end_offset))


def crash_at(disk: SimDisk, step: int, operation: Callable[[], object]) -> str | None:
    """Run `operation()` with a crash armed before its `step`-th step, then crash the
    disk as the simulator does; the step it struck before (None: it never struck)."""
    disk.steps.arm(step)
    try:
        operation()
    except CrashPoint as point:
        disk.crash()
        return point.step
    disk.steps.disarm()
    disk.crash()
    return None


# ---- a snapshot written: temp file, fsync, rename, directory fsync ------------------------

@pytest.mark.parametrize(("step", "kept"), [(0, False), (1, False), (2, False), (3, False),
                                             (4, True)])
def test_snapshot_write_survives_only_once_its_directory_is_synced(step: int,
                                                                   kept: bool) -> None:
    disk = disk_with(6)
    struck = crash_at(disk, step, lambda: disk.snapshots.add(SNAPSHOT, SNAPSHOT_BYTES))
    assert (struck is None) == kept
    assert (SNAPSHOT in disk.snapshots.snapshots) == kept
    # renamed but the directory not synced: the crash lost the name
    assert disk.directory.lost == (1 if step == 3 else 0)


def test_snapshot_download_survives_only_once_its_directory_is_synced() -> None:
    for step, kept in ((0, False), (1, False), (2, False), (3, True)):
        disk = disk_with(6)
        disk.snapshots.download(SNAPSHOT)
        disk.snapshots.write(SNAPSHOT, 0, SNAPSHOT_BYTES)
        crash_at(disk, step, partial(disk.snapshots.finish, SNAPSHOT))
        assert (SNAPSHOT in disk.snapshots.snapshots) == kept, step


def test_snapshots_deleted_go_at_the_unlink() -> None:
    for step, gone in ((0, False), (1, True), (2, True)):
        disk = disk_with(6)
        disk.snapshots.add(SNAPSHOT, SNAPSHOT_BYTES)
        crash_at(disk, step, partial(disk.snapshots.delete_before, 5))
        assert (SNAPSHOT not in disk.snapshots.snapshots) == gone, step


# ---- the log start moved: log-start file, then the segments below, then the directory ----

@pytest.mark.parametrize(("step", "start"), [(0, 0), (1, 0), (2, 0), (3, 0), (4, 4), (5, 4),
                                              (6, 4)])
def test_log_start_moves_once_its_file_is_durable(step: int, start: int) -> None:
    """Before the log-start file's rename is synced the crash leaves the old start (the
    rename lost); after, the new one, and recovery drops the records below it whether
    their segments were deleted yet or not. Nothing at or above the start is lost."""
    disk = disk_with(10)
    crash_at(disk, step, lambda: disk.log.advance_start(4))
    log = disk.log
    assert (log.start_offset, log.end_offset) == (start, 10)
    assert [offset for offset, _, _ in entries_of(log, start, 10)] == list(range(start, 10))
    assert log.ledger.durable_end == 10
    assert log.segments[0] <= start < (log.segments[1] if len(log.segments) > 1 else 11)


def test_log_start_past_the_durable_records_restarts_the_log_empty_there() -> None:
    disk = disk_with(4)
    disk.log.append(1, [b"unflushed"])
    crash_at(disk, 4, lambda: disk.log.advance_start(5))  # the file says 5, records end at 4
    assert (disk.log.start_offset, disk.log.end_offset, disk.log.start_epoch) == (5, 5, 1)


# ---- directory entries: a segment created since the last directory fsync ----------------

def test_a_segment_whose_name_was_never_synced_vanishes_with_its_records() -> None:
    """The planted `flush_skips_dir_fsync`: the flush makes the records durable but not
    the segment's name, so a crash loses what the disk acknowledged. The real flush
    syncs the directory, and nothing acknowledged is lost."""
    batches = SEGMENT_BATCHES + 2  # the last two in a second segment
    for syncs_dir, end in ((True, batches), (False, SEGMENT_BATCHES)):
        disk = disk_with(batches, flush_syncs_dir=syncs_dir)
        assert disk.log.segments == [0, SEGMENT_BATCHES]
        disk.crash()
        assert disk.log.end_offset == end
        assert disk.log.ledger.durable_end == batches  # what the disk acknowledged
        assert disk.directory.lost == (0 if syncs_dir else 1)
        assert disk.log.segments == ([0, SEGMENT_BATCHES] if syncs_dir else [0])


def test_an_unflushed_segment_lost_costs_nothing_acknowledged() -> None:
    disk = disk_with(SEGMENT_BATCHES)
    disk.log.append(1, [b"unflushed"])  # rolls a segment, never synced
    assert disk.directory.pending == {segment_name(SEGMENT_BATCHES)}
    disk.crash()
    assert disk.directory.lost == 1
    assert disk.log.end_offset == disk.log.ledger.durable_end == SEGMENT_BATCHES


def test_a_truncation_forgets_the_segments_it_removed() -> None:
    disk = disk_with(2 * SEGMENT_BATCHES + 1)
    disk.log.truncate_to(SEGMENT_BATCHES - 1)
    assert disk.log.segments == [0]
    disk.log.append(2, [b"next"])  # fills the first segment again, no roll
    assert disk.log.segments == [0]
    disk.log.append(2, [b"after"])
    assert disk.log.segments == [0, SEGMENT_BATCHES]


# ---- a truncation: later segments unlinked, then the cut, as DiskLog.truncate_to ---------

# (records per batch, offset cut to, the steps taken, the log end a crash before each
# leaves). One-record batches, 4 a segment: segments at 0 4 8; two-record: at 0 8 16.
TRUNCATIONS = {
    "at a batch boundary": (1, 6, [
        ("unlinking a segment after the cut", 10),
        ("fsyncing the directory before the cut", 10),  # the unlinked segment comes back
        ("shortening the cut segment", 8), ("fsyncing the cut segment", 8)]),
    "inside a batch, mid-segment": (2, 5, [
        ("unlinking a segment after the cut", 24), ("unlinking a segment after the cut", 24),
        ("writing the head of the cut batch to a swap file", 24),
        ("fsyncing the swap file", 24), ("fsyncing the directory before the cut", 24),
        ("shortening the cut segment", 8), ("fsyncing the cut segment", 8),
        ("renaming the swap file to a segment", 5),  # recovery adopts the swap
        ("fsyncing the directory after the rename", 5)]),
    "inside the first batch of a segment": (2, 9, [
        ("unlinking a segment after the cut", 24),
        ("writing the head of the cut batch to a swap file", 24),
        ("fsyncing the swap file", 24), ("fsyncing the directory before the cut", 24),
        ("replacing the cut segment by the swap file", 16),
        ("fsyncing the directory after the replace", 16)]),
}


@pytest.mark.parametrize("case", list(TRUNCATIONS))
def test_a_truncation_crashed_at_each_step_keeps_every_record_below_the_cut(case: str) -> None:
    """A crash before each step of a truncation leaves a prefix of the old log that holds
    every record below the cut: the old log until the unlinks are synced, then the log
    through the cut segment until it is cut durably, then exactly the cut log. The ledger
    promises nothing above the cut from the first step on."""
    records, offset, steps = TRUNCATIONS[case]
    for step, (name, end) in enumerate([*steps, ("", offset)]):
        disk = disk_with(24 // records if records > 1 else 10, records=records)
        original = recovered(disk)
        struck = crash_at(disk, step, partial(disk.log.truncate_to, offset))
        assert struck == (name or None), (case, step)
        assert recovered(disk) == original[:end], (case, step, name)
        assert disk.log.ledger.durable_end == offset
        assert disk.log.segments == [b for b in (0, 4 * records, 8 * records, 12 * records)
                                     if b < end or b == 0]


def test_a_truncation_rewriting_its_segment_loses_acknowledged_records() -> None:
    """The planted `truncation_rewrites_segment`: the cut segment is unlinked before the
    records kept in it are written anew, so a crash between loses records 4 and 5, which
    the disk acknowledged; the real order keeps them."""
    for keeps, end in ((True, 8), (False, 4)):
        disk = disk_with(10, cut_keeps_segment=keeps)
        struck = crash_at(disk, 3, partial(disk.log.truncate_to, 6))
        assert struck == ("fsyncing the cut segment" if keeps
                          else "writing the records kept to a new segment")
        assert disk.log.end_offset == end
        assert (disk.log.end_offset < disk.log.ledger.durable_end) == (not keeps)


# ---- a reset: every segment unlinked, the directory synced, then the log-start file -------

RESET_STEPS = ["unlinking a segment"] * 3 + [
    "fsyncing the directory after the unlinks", "writing the log-start temp file",
    "fsyncing the log-start temp file", "renaming it to log-start-offset",
    "fsyncing the directory after the rename", "creating the new segment",
    "fsyncing the directory after the creation"]


@pytest.mark.parametrize("step", range(len(RESET_STEPS) + 1))
def test_a_reset_below_the_log_end_never_leaves_old_records_above_the_new_start(
        step: int) -> None:
    """A snapshot at 6, epoch 3, replaces a log of 10 records in epoch 1 (a diverging
    one): a crash before each step leaves the old log, or the empty log at the old
    start (the unlinks synced, the log-start file not yet), or the empty log at 6;
    never records 6-9 after the snapshot. At the next start the node restarts at the
    snapshot past its log end (`start_at_newer_snapshot`, as build_node does)."""
    disk = disk_with(10)
    original = recovered(disk)
    disk.snapshots.add(SnapshotId(6, 3), encode_snapshot(SnapshotId(6, 3), [b"s"]))
    struck = crash_at(disk, step, partial(disk.log.reset_to, 6, 3))
    log = disk.log
    assert struck == (RESET_STEPS[step] if step < len(RESET_STEPS) else None)
    expected = (0, 10) if step < 4 else (0, 0) if step < 8 else (6, 6)
    assert (log.start_offset, log.end_offset) == expected
    assert recovered(disk) == original[expected[0]:expected[1]]
    disk.start_at_newer_snapshot()
    assert (log.start_offset, log.end_offset, log.start_epoch) == (
        (0, 10, 0) if step < 4 else (6, 6, 3))


# ---- the sweep ----------------------------------------------------------------------------

def test_sweep_strikes_between_steps_and_counts_each_crash_point() -> None:
    """A seed's crash-between-steps faults strike inside real operations of the run, each
    counted by operation and step, and the invariants hold."""
    result = run_seed(RunSpec(voters=5, observers=2, faults="all"), 1)
    assert result.invariant is None, result.detail
    counts = dict(result.fault_counts)
    assert counts["crash-between-steps"] > 0
    struck = {name: count for name, count in counts.items() if name.startswith("crash in ")}
    assert struck, counts
    assert sum(struck.values()) <= counts["crash-between-steps"]
