"""The chaos checker has teeth: planted anomalies are caught, a clean history passes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tests.support.chaos_history import NEW_ID, OLD_ID, Script
from tools.chaos.checker import (
    OVERDUE_GRACE_MS,
    BrokerDisk,
    BrokerObservation,
    FinalState,
    PartitionDir,
    ReadRecord,
    StagedDir,
    check,
)
from tools.chaos.history import HistoryWriter, pair, read_history


def clean_script() -> Script:
    script = Script()
    script.op("create", {"name": "t"}, 1, 2, topic_id=OLD_ID)
    script.op("produce", {"name": "t", "partition": 0, "value": "v0"}, 3, 4, offset=0)
    script.op("describe_id", {"topic_id": OLD_ID}, 5, 6, name="t", topic_id=OLD_ID)
    script.op("delete", {"name": "t"}, 7, 8, topic_id=OLD_ID)
    script.op("create", {"name": "t"}, 9, 10, topic_id=NEW_ID)
    script.op("describe_id", {"topic_id": OLD_ID}, 11, 12, status="failed",
              error="UNKNOWN_TOPIC_ID")
    script.op("produce", {"name": "t", "partition": 0, "value": "v1"}, 13, 14, offset=0)
    script.op("produce", {"name": "t", "partition": 0, "value": "v2"}, 15, 16, offset=1)
    script.op("produce", {"name": "t", "partition": 0, "value": "v3"}, 17, 18,
              status="unknown")
    return script


def final_state(reads: list[ReadRecord], hash_of_4: str = "h4") -> FinalState:
    return FinalState(topics={"t": NEW_ID}, reads=reads, read_complete={NEW_ID: True},
                      brokers=[BrokerObservation(node_id=4, applied_offset=4,
                                                 image_hash=hash_of_4),
                               BrokerObservation(node_id=5, applied_offset=4,
                                                 image_hash="h4")],
                      reference_hashes={3: "h3", 4: "h4"})


def new_reads(*values: str) -> list[ReadRecord]:
    return [ReadRecord(topic_id=NEW_ID, partition=0, offset=i, value=v)
            for i, v in enumerate(values)]


def kinds(result: Any) -> set[str]:
    return {v.kind for v in result.violations}


def test_checker_passes_when_history_is_clean() -> None:
    result = check(clean_script().events, final_state(new_reads("v1", "v2")))
    assert result.ok, result.violations
    assert result.operations["produce"] == {"ok": 3, "unknown": 1}
    assert result.records_read == 2
    assert result.writes_verified == 2  # v0's topic was deleted: it is not required


def test_checker_accepts_unknown_produce_when_it_took_effect() -> None:
    result = check(clean_script().events, final_state(new_reads("v1", "v2", "v3")))
    assert result.ok, result.violations


def test_checker_fails_when_acknowledged_write_is_lost() -> None:
    """An acks=all produce was acknowledged at offset 1; the partition does not hold it."""
    result = check(clean_script().events, final_state(new_reads("v1")))
    assert kinds(result) == {"lost_write"}
    assert "v2" in result.violations[0].message


def _keyed_script() -> Script:
    """Four acknowledged produces to a topic `k`: keys a, b, a, b at offsets 0-3."""
    script = Script()
    script.op("create", {"name": "k"}, 1, 2, topic_id=NEW_ID)
    for offset, key in enumerate("abab"):
        script.op("produce", {"name": "k", "partition": 0, "value": f"v{offset}",
                              "key": key}, 3 + offset, 4 + offset, offset=offset)
    return script


def _keyed_final(offsets: list[int], *, compacted: bool = True,
                 log_start: int = 0) -> FinalState:
    reads = [ReadRecord(topic_id=NEW_ID, partition=0, offset=o, value=f"v{o}",
                        key="abab"[o]) for o in offsets]
    return FinalState(topics={"k": NEW_ID}, reads=reads, read_complete={NEW_ID: True},
                      log_starts={(NEW_ID, 0): log_start},
                      compacted=frozenset({NEW_ID} if compacted else ()))


def test_writes_compaction_or_retention_removed_are_not_lost() -> None:
    """Superseded by a later record of its key on a compacted topic, or below the log
    start: legally gone, and not counted as verified."""
    result = check(_keyed_script().events, _keyed_final([2, 3]))
    assert result.ok, result.violations
    assert (result.writes_verified, result.writes_removed) == (2, 2)
    assert check(_keyed_script().events, _keyed_final([2, 3], compacted=False,
                                                      log_start=2)).ok


def test_a_planted_lost_record_is_flagged_beside_legal_removals() -> None:
    """Records removed from a copy of a compacted log: the latest of key a is lost (no
    later record of its key), b's older one legally gone; on a topic that is not
    compacted, or above the log start, a superseded record is lost too."""
    result = check(_keyed_script().events, _keyed_final([0, 3]))
    assert [(v.kind, v.op_index) for v in result.violations] == [("lost_write", 3)]
    result = check(_keyed_script().events, _keyed_final([2, 3], compacted=False,
                                                        log_start=1))
    assert [(v.kind, v.op_index) for v in result.violations] == [("lost_write", 2)]


def test_checker_fails_when_describe_by_id_is_stale() -> None:
    """KIP-516: after the delete of OLD_ID was acknowledged, no describe finds it."""
    script = clean_script()
    script.op("describe_id", {"topic_id": OLD_ID}, 19, 20, name="t", topic_id=OLD_ID)
    result = check(script.events, final_state(new_reads("v1", "v2")))
    assert kinds(result) == {"stale_read"}


def test_violation_serialised_for_the_verdict_when_reported() -> None:
    """chaos-verdict.json lists each violation as this object (tools/commands/chaos.py)."""
    script = clean_script()
    script.op("describe_id", {"topic_id": OLD_ID}, 19, 20, name="t", topic_id=OLD_ID)
    result = check(script.events, final_state(new_reads("v1", "v2")))
    assert [v.to_json() for v in result.violations] == [{
        "kind": "stale_read", "op_index": 9,
        "message": f"describe by ID {OLD_ID} found 't' after its delete was acknowledged"}]


def test_checker_fails_when_describe_by_id_answers_another_topic() -> None:
    script = clean_script()
    script.op("describe_id", {"topic_id": OLD_ID}, 19, 20, name="t", topic_id=NEW_ID)
    assert kinds(check(script.events, final_state(new_reads("v1", "v2")))) == {"stale_read"}


def test_checker_fails_when_deleted_topic_data_is_readable_under_recreated_one() -> None:
    """v0 was written to OLD_ID before NEW_ID was created: it must not show up there
    (after v1 and v2, so both stay at their acknowledged offsets)."""
    reads = new_reads("v1", "v2", "v0")
    result = check(clean_script().events, final_state(reads))
    assert [v.kind for v in result.violations] == ["deleted_data"]
    assert "'v0'" in result.violations[0].message


def test_checker_also_reports_the_writes_displaced_by_deleted_data() -> None:
    """Deleted data at offset 0 pushes v1 and v2 off their acknowledged offsets: each is
    a lost write too."""
    result = check(clean_script().events, final_state(new_reads("v0", "v1", "v2")))
    assert [v.kind for v in result.violations] == ["deleted_data", "lost_write", "lost_write"]


def test_checker_fails_when_a_value_is_read_twice() -> None:
    reads = [*new_reads("v1", "v2"), ReadRecord(topic_id=NEW_ID, partition=0, offset=2,
                                                value="v2")]
    result = check(clean_script().events, final_state(reads))
    assert [v.kind for v in result.violations] == ["duplicate"]
    assert "'v2' readable 2 times" in result.violations[0].message


def test_checker_fails_when_acknowledged_create_is_lost_or_id_reused() -> None:
    """u reuses OLD_ID: the ID is reused, u is missing from the final metadata, and the
    earlier describe of OLD_ID (which answered t) now contradicts OLD_ID's create (u)."""
    script = clean_script()
    script.op("create", {"name": "u"}, 19, 20, topic_id=OLD_ID)
    result = check(script.events, final_state(new_reads("v1", "v2")))
    assert [(v.kind, v.op_index) for v in result.violations] == [
        ("id_reused", 9), ("create_lost", 9), ("stale_read", 2)]


def test_checker_fails_when_acknowledged_delete_is_undone() -> None:
    final = final_state(new_reads("v1", "v2"))
    undone = FinalState(topics={"t": NEW_ID, "old": OLD_ID}, reads=final.reads,
                        read_complete=final.read_complete, brokers=final.brokers,
                        reference_hashes=final.reference_hashes)
    result = check(clean_script().events, undone)
    # OLD_ID is back, and under a name its create never used
    assert [v.kind for v in result.violations] == ["delete_undone", "create_lost"]
    assert OLD_ID in result.violations[0].message
    assert "created as 't'" in result.violations[1].message


def test_checker_fails_when_broker_image_diverges() -> None:
    result = check(clean_script().events, final_state(new_reads("v1", "v2"), hash_of_4="bad"))
    assert kinds(result) == {"divergence"}


SEEN_MS = 1_000_000


def disks(*entries: PartitionDir, staged: tuple[StagedDir, ...] = ()) -> FinalState:
    """The clean final state where broker 4 hosts t-0 (NEW_ID) and t-1 is broker 5's."""
    hosted = BrokerDisk(node_id=4, observed_ms=SEEN_MS, staged=staged, partitions=[
        PartitionDir(topic="t", partition=0, topic_id=NEW_ID), *entries])
    return dataclasses.replace(final_state(new_reads("v1", "v2")),
                               assignments={NEW_ID: {0: (4,), 1: (5,)}}, disks=[hosted])


def test_checker_passes_when_broker_dirs_hold_exactly_the_assignment() -> None:
    not_yet_due = StagedDir(name=f"t-0.{OLD_ID}-delete", due_ms=SEEN_MS + 1)
    assert check(clean_script().events, disks(staged=(not_yet_due,))).ok


def test_checker_fails_when_a_deleted_topic_id_is_left_on_a_broker() -> None:
    """KIP-516: the old incarnation of a recreated name must not stay in place."""
    stale = PartitionDir(topic="t", partition=0, topic_id=OLD_ID)
    final = dataclasses.replace(disks(), disks=[BrokerDisk(
        node_id=4, observed_ms=SEEN_MS, partitions=[stale], staged=[])])
    result = check(clean_script().events, final)
    assert kinds(result) == {"stale_partition", "missing_partition"}
    assert OLD_ID in result.violations[0].message


def test_checker_fails_when_a_broker_keeps_a_partition_not_assigned_to_it() -> None:
    result = check(clean_script().events,
                   disks(PartitionDir(topic="t", partition=1, topic_id=NEW_ID)))
    assert kinds(result) == {"stale_partition"}


def test_checker_fails_when_a_staged_deletion_is_overdue() -> None:
    overdue = StagedDir(name=f"t-0.{OLD_ID}-delete", due_ms=SEEN_MS - OVERDUE_GRACE_MS - 1)
    result = check(clean_script().events, disks(staged=(overdue,)))
    assert kinds(result) == {"stale_partition"}
    assert "overdue" in result.violations[0].message


def test_history_round_trips_through_json_lines_when_written(tmp_path: Path) -> None:
    ticks = iter(range(100))
    writer = HistoryWriter(tmp_path / "history.jsonl", clock=lambda: float(next(ticks)))
    first = writer.invoke("admin", "create", {"name": "t"})
    second = writer.invoke("admin", "delete", {"name": "t"})
    writer.complete(first, "admin", "create", "ok", {"topic_id": OLD_ID})
    writer.close()
    operations = pair(read_history(tmp_path / "history.jsonl"))
    assert [(o.op, o.status, o.complete_time) for o in operations] == [
        ("create", "ok", 2.0), ("delete", "unknown", None)]
    assert second == 1
