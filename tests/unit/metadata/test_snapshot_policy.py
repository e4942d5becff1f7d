"""When a node snapshots (byte accounting) and which snapshots it may start from
(metadata.snapshot_policy): pure, one rule per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from metadata.snapshot_policy import KEEP_EVERYTHING, Retention, SnapshotSchedule, plan_start
from raft.snapshot import SnapshotFile, SnapshotId

DIR = Path("/data/__cluster_metadata-0")


def files(*ends: int) -> list[SnapshotFile]:
    ids = [SnapshotId(end, 1) for end in ends]
    return [SnapshotFile(i, DIR / i.file_name) for i in ids]


def test_schedule_is_due_once_the_committed_bytes_reach_the_limit() -> None:
    schedule = SnapshotSchedule(max_bytes_between=100)
    schedule.record_committed(60)
    assert not schedule.due
    schedule.record_committed(39)
    assert not schedule.due
    schedule.record_committed(1)
    assert schedule.due
    assert schedule.bytes_since_snapshot == 100


def test_schedule_counts_bytes_committed_during_a_write_towards_the_next_snapshot() -> None:
    """The image is read at 120 bytes; 70 more commit while the file is written."""
    schedule = SnapshotSchedule(max_bytes_between=100)
    schedule.record_committed(120)
    covered = schedule.committed_bytes
    schedule.record_committed(70)
    schedule.snapshot_taken(covered, now_ms=0)
    assert schedule.bytes_since_snapshot == 70
    assert not schedule.due
    schedule.record_committed(30)
    assert schedule.due


def test_schedule_waits_a_whole_interval_after_a_failed_snapshot() -> None:
    """A failure is marked like a success: a full disk costs one error per interval."""
    schedule = SnapshotSchedule(max_bytes_between=100)
    schedule.record_committed(150)
    schedule.snapshot_taken(schedule.committed_bytes, now_ms=0)
    schedule.record_committed(99)
    assert not schedule.due


def test_schedule_counts_nothing_new_as_not_due_when_the_limit_is_one_byte() -> None:
    schedule = SnapshotSchedule(max_bytes_between=1)
    assert not schedule.due
    schedule.record_committed(1)
    schedule.snapshot_taken(1, now_ms=0)
    assert not schedule.due


def test_schedule_refuses_a_limit_below_one_byte() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SnapshotSchedule(max_bytes_between=0)


@pytest.mark.parametrize("covered", [-1, 51])
def test_schedule_refuses_covered_bytes_outside_what_was_counted(covered: int) -> None:
    schedule = SnapshotSchedule(max_bytes_between=10)
    schedule.record_committed(50)
    with pytest.raises(ValueError, match="outside"):
        schedule.snapshot_taken(covered, now_ms=0)


def test_schedule_is_due_by_time_only_when_something_new_committed() -> None:
    """metadata.log.max.snapshot.interval.ms: a quiet log gets a snapshot within the
    interval, an idle one (nothing since the last snapshot) none."""
    schedule = SnapshotSchedule(max_bytes_between=1000, max_interval_ms=500,
                                last_snapshot_ms=100)
    assert schedule.interval_deadline_ms == 600
    assert not schedule.due_at(10_000)  # nothing committed
    schedule.record_committed(1)
    assert not schedule.due_at(599)
    assert schedule.due_at(600)
    schedule.snapshot_taken(schedule.committed_bytes, now_ms=600)
    assert (schedule.interval_deadline_ms, schedule.due_at(5_000)) == (1100, False)


def test_schedule_by_bytes_only_when_the_interval_is_zero() -> None:
    schedule = SnapshotSchedule(max_bytes_between=1000)
    schedule.record_committed(999)
    assert (schedule.interval_deadline_ms, schedule.due_at(10**12)) == (None, False)
    schedule.record_committed(1)
    assert schedule.due_at(0)


@pytest.mark.parametrize(("log_bytes", "age_ms", "advance"), [
    (100, 0, False), (101, 0, True), (0, 1000, False), (0, 1001, True)])
def test_retention_advances_the_log_start_past_either_limit(
        log_bytes: int, age_ms: int, advance: bool) -> None:
    retention = Retention(max_bytes=100, max_ms=1000)
    assert retention.should_advance_log_start(log_bytes, age_ms) is advance


def test_retention_of_minus_one_keeps_everything() -> None:
    assert not KEEP_EVERYTHING.should_advance_log_start(10**12, 10**12)
    assert Retention(max_bytes=0, max_ms=-1).should_advance_log_start(1, 10**12)


def test_start_may_use_every_snapshot_at_or_below_the_checkpoint() -> None:
    plan = plan_start(files(10, 20), log_end_offset=30, committed_end_offset=20)
    assert plan.max_end_offset == 20
    assert plan.unproven == ()


def test_start_passes_over_snapshots_above_the_checkpoint_newest_first() -> None:
    plan = plan_start(files(10, 20, 25), log_end_offset=30, committed_end_offset=15)
    assert plan.max_end_offset == 15
    assert [f.snapshot_id.end_offset for f in plan.unproven] == [25, 20]


def test_start_proves_nothing_without_a_checkpoint() -> None:
    plan = plan_start(files(10), log_end_offset=30, committed_end_offset=None)
    assert plan.max_end_offset == 0
    assert [f.snapshot_id.end_offset for f in plan.unproven] == [10]


def test_start_never_trusts_a_checkpoint_beyond_the_log() -> None:
    plan = plan_start(files(10), log_end_offset=10, committed_end_offset=50)
    assert plan.max_end_offset == 10
    assert plan.unproven == ()


def test_start_takes_the_newest_snapshot_ahead_of_the_log_and_resets_the_log() -> None:
    """One fetched from the leader just before a crash: the log restarts at it."""
    plan = plan_start(files(10, 40, 50), log_end_offset=30, committed_end_offset=30)
    assert (plan.max_end_offset, plan.reset_log, plan.unproven) == (50, True, ())


def test_start_never_uses_a_snapshot_below_the_log_start() -> None:
    plan = plan_start(files(10, 20), log_start_offset=20, log_end_offset=30,
                      committed_end_offset=None)
    assert (plan.min_end_offset, plan.max_end_offset, plan.reset_log) == (20, 20, False)
    assert plan.unproven == ()


def test_start_has_nothing_to_choose_without_snapshots() -> None:
    plan = plan_start([], log_end_offset=30, committed_end_offset=30)
    assert (plan.max_end_offset, plan.unproven) == (30, ())
