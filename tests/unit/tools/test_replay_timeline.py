"""The replay's time-axis tables (tools/replay/timeline.py, availability.py) over the
scripted story log (tests/support/synthetic_logs.py), without Spark: exact rows with
times, and the same log written before batches were timed (nulls, never zeros)."""

from __future__ import annotations

from tests.support.synthetic_logs import (
    STORY_OTHER,
    STORY_START_MS,
    STORY_TOPIC,
    story_log,
    story_timeline,
)
from tools.replay.availability import availability

T0 = STORY_START_MS
ORDERS, AUDIT = str(STORY_TOPIC), str(STORY_OTHER)


def test_leadership_names_each_epochs_leader_span_and_ending_when_timed() -> None:
    assert story_timeline(story_log()).leadership == [
        (1, 1, 0, T0, 12, T0 + 1000, "next epoch"),
        (2, 2, 12, T0 + 1000, 29, T0 + 4000, "next epoch"),
        (3, 3, 29, T0 + 4000, 36, T0 + 6000, "log end")]


def test_broker_sessions_time_each_fencing_until_the_next_event_when_timed() -> None:
    rows = [r for r in story_timeline(story_log()).broker_sessions if r[0] == 4]
    assert [(r[3], r[5] - T0, r[6], r[7], r[10]) for r in rows] == [
        ("register", 0, True, "unfence", 100),
        ("unfence", 100, False, "fence", 1400),
        ("fence", 1500, True, "unfence", 2000),
        ("unfence", 3500, False, "log end", 2500)]


def test_partition_history_keeps_leader_isr_epoch_and_the_end_when_changed() -> None:
    rows = [r for r in story_timeline(story_log()).partition_history
            if r[0] == ORDERS and r[2] == 0]
    assert [(r[3], r[6] - T0, r[7], r[8], r[10]) for r in rows] == [
        ("create", 200, 4, [4, 5, 6], 0),
        ("change", 1500, 5, [5, 6], 1),
        ("change", 2000, 6, [6], 2),
        ("change", 2500, None, [6], 3),
        ("change", 3000, 6, [6], 4),
        ("change", 3500, 6, [6, 4, 5], 4),
        ("deleted", 5000, None, None, None)]
    assert {r[1] for r in rows} == {"orders", "payments"}  # renamed at +4200 ms


def test_topic_lifecycle_tells_create_config_rename_resize_and_delete_when_timed() -> None:
    rows = story_timeline(story_log()).topic_lifecycle
    assert [(r[0], r[1], r[2], r[5] - T0, r[6], r[7], r[8], r[9]) for r in rows] == [
        (ORDERS, "orders", "create", 200, 2, None, None, None),
        (ORDERS, "orders", "config", 300, None, "min.insync.replicas", "2", None),
        (ORDERS, "orders", "rename", 4200, None, None, None, "payments"),
        (AUDIT, "audit", "create", 4500, 1, None, None, None),
        (ORDERS, "payments", "resize", 4600, 3, None, None, None),
        (ORDERS, "payments", "delete", 5000, None, None, None, None)]


def test_availability_sums_leaderless_under_replicated_and_under_min_isr_time() -> None:
    rows = {(r[0], r[2]): r for r in availability(story_timeline(story_log()))}
    assert rows[(ORDERS, 0)] == (ORDERS, "payments", 0, 9, T0 + 200, 34, T0 + 5000,
                                 "deleted", 500, 2000, 1500, 2, True)
    assert rows[(ORDERS, 2)][7:] == ("deleted", 0, 0, 0, 2, True)
    assert rows[(AUDIT, 0)][5:] == (36, T0 + 6000, "log end", 0, 0, 0, 1, True)


def test_a_log_without_times_gives_nulls_not_zeros_when_written_before_times() -> None:
    untimed = story_timeline(story_log(timed=False))
    assert all(r[3] is None and r[5] is None for r in untimed.leadership)
    assert all(r[5] is None and r[10] is None for r in untimed.broker_sessions)
    rows = availability(untimed)
    assert len(rows) == 4
    assert all(r[8:11] == (None, None, None) and r[12] is False for r in rows)
    # the same changes as the timed log, only the times differ
    timed = story_timeline(story_log())
    assert [r[:6] + r[7:] for r in untimed.partition_history] == \
        [r[:6] + r[7:] for r in timed.partition_history]
