"""The per-node scan (tools.replay.sequential) without Spark: topic liveness with
renames, ID reuse and the metadata topic, over real encoded records, and a prefix of a
scanned log seeing exactly what a scan of that prefix alone would."""

from __future__ import annotations

from typing import Any

from metadata import records as rec
from raft.common.uuid import Uuid
from tools.replay.sequential import NodeScan, ScanResult

A, B, META = Uuid(2), Uuid(3), Uuid(4)


def _scan(records: list[tuple[int, rec.Record]], epoch: int = 1) -> ScanResult:
    """One batch per record, at the given offsets."""
    scan = NodeScan()
    for seq, (offset, record) in enumerate(records):
        scan.batch(seq, offset, epoch, [record.encode()])
    return scan.result()


def _violations(result: ScanResult, batches: int | None = None) -> list[tuple[str, int, str]]:
    seen = result.view(10**9 if batches is None else batches)[0]
    return [(v[1], v[2], v[5]) for v in seen]


def _part(topic: Uuid) -> rec.Partition:
    return rec.Partition(topic_id=topic, partition=0, replicas=(1,), isr=(1,), leader=1)


def test_scan_passes_when_a_renamed_topic_frees_its_old_name():
    """KIP-516: a name maps to one live ID; after a rename the old name is free."""
    rows: list[tuple[int, Any]] = [
        (0, rec.LeaderChange(leader_id=1, voters=(1,))), (1, rec.MetadataTopic(topic_id=META)),
        (2, rec.Topic(name="orders", topic_id=A)),
        (3, rec.RenameTopic(topic_id=A, new_name="orders-old")),
        (4, rec.Topic(name="orders", topic_id=B)), (5, _part(B)), (6, _part(A))]
    assert _violations(_scan(rows)) == []


def test_scan_flags_a_reused_id_and_a_dead_topic_when_planted():
    """KIP-516: IDs are never reused; nothing names a topic after its RemoveTopic."""
    rows: list[tuple[int, Any]] = [
        (0, rec.MetadataTopic(topic_id=META)), (1, rec.Topic(name="x", topic_id=A)),
        (2, rec.RemoveTopic(topic_id=A)), (3, rec.PartitionChange(topic_id=A, partition=0)),
        (4, rec.Topic(name="y", topic_id=A))]
    found = _violations(_scan(rows))
    assert ("records_name_live_topic", 3, "no live topic with this ID here") in found
    assert [v[:2] for v in found if v[0] == "topic_ids_valid"] == [("topic_ids_valid", 4)]


def test_scan_flags_gaps_and_falling_epochs_when_the_log_is_out_of_order():
    """Raft: offsets are contiguous and epochs never decrease along a log."""
    scan = NodeScan()
    scan.batch(0, 0, 2, [rec.NoOp().encode()])
    scan.batch(1, 2, 1, [rec.NoOp().encode(), rec.NoOp().encode()])
    found = _violations(scan.result())
    assert sorted(v[:2] for v in found) == [("epochs_monotonic", 2), ("epochs_monotonic", 3),
                                            ("offsets_contiguous", 2)]


def test_scan_view_of_a_prefix_sees_only_what_that_prefix_holds():
    """A lagging follower holding the first n batches shares the leader's scan: its view
    keeps the violations, counts and claims of those batches, and a log that created a
    topic before the metadata topic ID is reported as missing it."""
    rows: list[tuple[int, Any]] = [
        (0, rec.Topic(name="x", topic_id=A)), (1, rec.PartitionChange(topic_id=B, partition=0)),
        (2, rec.MetadataTopic(topic_id=META)), (3, rec.PartitionChange(topic_id=B, partition=0))]
    result = _scan(rows)
    violations, counts, _, missing = result.view(2)
    assert [(v[1], v[2]) for v in violations] == [("records_name_live_topic", 1)]
    assert counts == {"records_name_live_topic": 1}
    assert missing
    violations, counts, _, missing = result.view(4)
    assert counts == {"records_name_live_topic": 2}
    assert not missing


def test_prefix_mismatches_finds_differing_epochs_below_a_shared_epoch():
    """Raft §5.3: nodes sharing epoch 5 at offsets 20-29 must agree on every epoch below;
    node b holding epoch 3 where a holds 2 (offsets 10-14) breaks the Log Matching prefix."""
    from tools.replay.crossnode import prefix_mismatches

    a = [[1, 0, 9], [2, 10, 19], [5, 20, 29]]
    b = [[1, 0, 9], [3, 10, 14], [2, 15, 19], [5, 20, 24]]
    assert prefix_mismatches(a, b) == [(10, 5, 2, 3)]
    assert prefix_mismatches(a, [[1, 0, 9], [4, 10, 12]]) == []  # stale tail: no shared epoch
