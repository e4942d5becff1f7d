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


def disk_with(batches: int, *, flush_syncs_dir: bool = True) -> SimDisk:
    """A disk holding `batches` flushed batches of one record each, in epoch 1."""
    disk = SimDisk(DiskConfig(flush_syncs_dir=flush_syncs_dir), random.Random(1))
    for index in range(batches):
        disk.log.append(1, [b"r%d" % index])
        disk.log.flush()
    return disk


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
