"""The per-node scan (tools/replay/sequential.py) on small hand-made logs, without Spark:
each violation with the offset, epoch and reason the report shows, the per-check cap,
LeaderChange claims, what a prefix's view holds, the analysis aggregates, and the helpers
that decode a record and name its columns."""

from __future__ import annotations

from array import array
from typing import Any

import msgpack

from metadata import records as rec
from raft.common.uuid import ZERO_UUID, Uuid
from tools.replay.sequential import (
    MAX_KEPT,
    UNDECODABLE,
    Aggregates,
    NodeScan,
    ScanResult,
    decode_record,
    record_columns,
    record_hash,
    uuid_text,
)

A, B, C, D, E, META, META2 = Uuid(2), Uuid(3), Uuid(6), Uuid(7), Uuid(8), Uuid(4), Uuid(5)
DEAD_TOPIC = "no live topic with this ID here"
BAD_ID = "topic ID is missing, ZERO_UUID or the sentinel"

Item = rec.Record | bytes | dict[str, Any]  # a record, raw bytes, or a raw msgpack map


def _bytes(item: Item) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, dict):
        return msgpack.packb(item)
    return item.encode()


def _scan(*batches: tuple[int, int, list[Item]], analysis: bool = False) -> ScanResult:
    """(base offset, epoch, records) per batch, in log order."""
    scan = NodeScan(analysis=analysis)
    for seq, (offset, epoch, records) in enumerate(batches):
        scan.batch(seq, offset, epoch, [_bytes(r) for r in records])
    return scan.result()


def _one_per_batch(*records: Item, epoch: int = 3) -> ScanResult:
    """One record per batch from offset 0, all in `epoch`."""
    return _scan(*((offset, epoch, [r]) for offset, r in enumerate(records)))


def _found(result: ScanResult) -> list[tuple[str, int, int, str]]:
    """(check, offset, epoch, reason) of every violation kept, in scan order."""
    return [(v[1], v[2], v[3], v[5]) for v in result.violations]


def test_scan_reports_each_topic_violation_with_its_offset_epoch_and_reason():
    """KIP-516: topic IDs valid and never reused, one live ID per name, the metadata
    topic's ID assigned once, and Partition, PartitionChange, RenameTopic and RemoveTopic
    naming a live topic; B's Topic record is refused (its name is live), so B stays dead."""
    result = _one_per_batch(
        rec.MetadataTopic(topic_id=META), rec.Topic(name="a", topic_id=A),
        rec.Topic(name="b", topic_id=ZERO_UUID), rec.Topic(name="c", topic_id=META),
        rec.Topic(name="a", topic_id=B), rec.Topic(name="d", topic_id=A),
        rec.MetadataTopic(topic_id=META2), rec.PartitionChange(topic_id=B, partition=0),
        rec.Partition(topic_id=B, partition=1, replicas=(1,), isr=(1,), leader=1),
        rec.RenameTopic(topic_id=C, new_name="x"), rec.RemoveTopic(topic_id=B))
    assert _found(result) == [
        ("topic_ids_valid", 2, 3, BAD_ID),
        ("topic_ids_valid", 3, 3, "topic takes the metadata topic's ID (assigned at offset 0)"),
        ("name_one_live_id", 4, 3, f"name already maps to live topic ID {A}"),
        ("topic_ids_valid", 5, 3, "topic ID reused: first assigned at offset 1"),
        ("metadata_topic_once", 6, 3, "metadata topic ID assigned again (first at offset 0)"),
        ("records_name_live_topic", 7, 3, DEAD_TOPIC),
        ("records_name_live_topic", 8, 3, DEAD_TOPIC),
        ("records_name_live_topic", 9, 3, DEAD_TOPIC),
        ("records_name_live_topic", 10, 3, DEAD_TOPIC)]


def test_scan_says_after_remove_topic_only_while_the_id_stays_removed():
    """A reused ID is reported "after RemoveTopic" when the topic was removed; once the
    ID is live again, the next reuse is a plain reuse."""
    result = _one_per_batch(
        rec.MetadataTopic(topic_id=META), rec.Topic(name="a", topic_id=A),
        rec.RemoveTopic(topic_id=A), rec.Topic(name="b", topic_id=A),
        rec.Topic(name="c", topic_id=A))
    assert _found(result) == [
        ("topic_ids_valid", 3, 3, "topic ID reused after RemoveTopic: first assigned at offset 1"),
        ("topic_ids_valid", 4, 3, "topic ID reused: first assigned at offset 1")]


def test_scan_flags_a_metadata_topic_id_that_is_zero_or_already_a_topics():
    """The metadata topic takes neither ZERO_UUID nor a topic's ID; assigning it a second
    time is flagged as that too."""
    result = _one_per_batch(rec.Topic(name="a", topic_id=A), rec.MetadataTopic(topic_id=A),
                            rec.MetadataTopic(topic_id=ZERO_UUID), epoch=2)
    assert _found(result) == [
        ("topic_ids_valid", 1, 2, "metadata topic takes the ID of the topic created at offset 0"),
        ("topic_ids_valid", 2, 2, "metadata topic ID is missing, ZERO_UUID or the sentinel"),
        ("metadata_topic_once", 2, 2, "metadata topic ID assigned again (first at offset 1)")]


def test_scan_takes_a_metadata_topic_without_an_id_as_assigned_but_owning_no_id():
    """A MetadataTopic record with no topic_id is flagged once; later topics cannot take
    "its" ID, and a second MetadataTopic is an assignment again."""
    result = _one_per_batch({"type": 2}, rec.Topic(name="a", topic_id=A),
                            rec.MetadataTopic(topic_id=META))
    assert _found(result) == [
        ("topic_ids_valid", 0, 3, "metadata topic ID is missing, ZERO_UUID or the sentinel"),
        ("metadata_topic_once", 2, 3, "metadata topic ID assigned again (first at offset 0)")]


def test_scan_treats_a_malformed_topic_id_or_name_as_missing():
    """A topic_id that is not 16 bytes is missing (flagged); a name that is not a string
    is no name, so two topics with the same such "name" do not collide."""
    result = _one_per_batch(
        rec.MetadataTopic(topic_id=META),
        {"type": 6, "name": "a", "topic_id": b"\x01" * 15},
        {"type": 6, "name": 5, "topic_id": A.to_bytes()},
        {"type": 6, "name": 5, "topic_id": B.to_bytes()},
        rec.PartitionChange(topic_id=B, partition=0))
    assert _found(result) == [("topic_ids_valid", 1, 3, BAD_ID)]


def test_scan_moves_a_name_on_rename_and_frees_it_on_remove():
    """After A is renamed a -> b, "a" is free and "b" is A's; once A is removed, "b" is
    free again."""
    result = _one_per_batch(
        rec.MetadataTopic(topic_id=META), rec.Topic(name="a", topic_id=A),
        rec.RenameTopic(topic_id=A, new_name="b"), rec.Topic(name="b", topic_id=C),
        rec.Topic(name="a", topic_id=D), rec.RemoveTopic(topic_id=A),
        rec.Topic(name="b", topic_id=E))
    assert _found(result) == [("name_one_live_id", 3, 3, f"name already maps to live topic ID {A}")]


def test_scan_flags_a_rename_onto_a_live_name_naming_its_holder():
    result = _one_per_batch(
        rec.MetadataTopic(topic_id=META), rec.Topic(name="a", topic_id=A),
        rec.Topic(name="b", topic_id=B), rec.RenameTopic(topic_id=B, new_name="a"),
        {"type": 11, "topic_id": B.to_bytes()}, rec.Topic(name="c", topic_id=C))
    assert _found(result) == [
        ("name_one_live_id", 3, 3, f"new name already maps to live topic ID {A}")]


def test_scan_flags_only_the_first_record_after_a_gap_or_a_repeated_offset():
    """Offsets inside a batch are contiguous: a gap or repeat is at a batch's first record."""
    result = _scan((0, 1, [rec.NoOp(), rec.NoOp()]), (5, 1, [rec.NoOp(), rec.NoOp()]),
                   (6, 1, [rec.NoOp()]))
    assert _found(result) == [
        ("offsets_contiguous", 5, 1, "gap: previous record is at offset 1"),
        ("offsets_contiguous", 6, 1, "duplicate offset")]


def test_scan_flags_every_record_below_the_highest_epoch_so_far():
    """Epoch 2 after epochs 3 and 1 is still a fall (below 3, not only below the last
    batch's 1); a batch of the same epoch as the one before is no fall."""
    result = _scan((0, 3, [rec.NoOp()]), (1, 1, [rec.NoOp()]), (2, 2, [rec.NoOp(), rec.NoOp()]))
    assert _found(result) == [("epochs_monotonic", 1, 1, "epoch 1 after epoch 3"),
                              ("epochs_monotonic", 2, 2, "epoch 2 after epoch 3"),
                              ("epochs_monotonic", 3, 2, "epoch 2 after epoch 3")]
    assert _found(_scan((0, 2, [rec.NoOp()]), (1, 2, [rec.NoOp()]))) == []


def test_scan_reports_an_undecodable_record_by_why_and_its_type_name_alone():
    """Not msgpack, an unknown type id, type 0 (no record's), not a map, or a type id
    that is a number but no int (6.0 is not a Topic record)."""
    result = _one_per_batch(b"\xc1", {"type": 250}, {"type": 0, "x": 1}, msgpack.packb([1, 2]),
                            {"type": 6.0, "name": "a"}, epoch=4)
    found = _found(result)
    assert [v[:3] for v in found] == [("records_decodable", offset, 4) for offset in range(5)]
    assert found[0][3].startswith("not msgpack: ")
    assert [v[3] for v in found[1:]] == [
        "unknown record {'type': 250}", "unknown record {'type': 0, 'x': 1}",
        "unknown record [1, 2]", "unknown record {'type': 6.0, 'name': 'a'}"]
    assert {str(v[6]) for v in result.violations} == {"{'record_type': 'UNDECODABLE'}"}


def test_scan_claims_each_leader_change_with_its_batch_epoch_leader_offset_and_hash():
    """A boolean type id counts as its int (True: LeaderChange); a leader_id that is not
    an int is claimed as None."""
    first = rec.LeaderChange(leader_id=2, voters=(1, 2)).encode()
    as_bool = msgpack.packb({"type": True, "leader_id": 3, "voters": [1, 3]})
    no_leader = msgpack.packb({"type": 1, "leader_id": "x", "voters": [1]})
    result = _scan((0, 1, [first]), (1, 2, [rec.NoOp(), as_bool]), (3, 3, [no_leader]))
    assert result.claims == [(0, 1, 2, 0, record_hash(first)), (1, 2, 3, 2, record_hash(as_bool)),
                             (2, 3, None, 3, record_hash(no_leader))]
    assert result.violations == []


def test_scan_keeps_the_first_10000_violations_of_a_check_and_counts_them_all():
    """The cap is per check: another check's violation is still kept after it."""
    dead = rec.PartitionChange(topic_id=A, partition=0).encode()
    result = _scan((0, 1, [dead] * (MAX_KEPT + 1)),
                   (MAX_KEPT + 1, 1, [rec.Topic(name="a", topic_id=ZERO_UUID)]))
    kept = _found(result)
    assert len(kept) == MAX_KEPT + 1
    assert kept[MAX_KEPT - 1] == ("records_name_live_topic", MAX_KEPT - 1, 1, DEAD_TOPIC)
    assert kept[MAX_KEPT] == ("topic_ids_valid", MAX_KEPT + 1, 1, BAD_ID)
    assert result.view(2)[1] == {"records_name_live_topic": MAX_KEPT + 1, "topic_ids_valid": 1}


def test_view_of_n_batches_leaves_out_what_batch_n_and_later_hold():
    """Batch 0 claims a leader, batch 1 creates a topic (the metadata topic ID not yet
    assigned), batch 2 names a dead topic, batch 3 claims again, batch 4 assigns the ID."""
    result = _one_per_batch(
        rec.LeaderChange(leader_id=1, voters=(1,)), rec.Topic(name="a", topic_id=A),
        rec.PartitionChange(topic_id=B, partition=0), rec.LeaderChange(leader_id=1, voters=(1,)),
        rec.MetadataTopic(topic_id=META))
    claims = [(c[0], c[3]) for c in result.claims]
    views = {n: result.view(n) for n in range(1, 6)}
    assert [(n, [v[2] for v in view[0]]) for n, view in views.items()] == [
        (1, []), (2, []), (3, [2]), (4, [2]), (5, [2])]
    assert [view[1] for view in views.values()] == [{}, {}] + [{"records_name_live_topic": 1}] * 3
    assert [[(c[0], c[3]) for c in view[2]] for view in views.values()] == [
        claims[:1], claims[:1], claims[:1], claims, claims]
    assert [view[3] for view in views.values()] == [False, True, True, True, False]


def test_analysis_scan_keeps_epoch_ranges_kind_counts_and_topic_history():
    """Per epoch [lowest offset, highest offset, records] even when the log repeats
    offsets; records per kind (the per-record list is dropped); Topic and RemoveTopic
    offsets (a rename is no removal); the names recreated with another ID (the Topic
    records and removed IDs they come from are dropped too)."""
    result = _scan(
        (0, 1, [rec.LeaderChange(leader_id=1, voters=(1,)), rec.MetadataTopic(topic_id=META)]),
        (2, 1, [rec.Topic(name="a", topic_id=A),
                rec.Partition(topic_id=A, partition=0, replicas=(1,), isr=(1,), leader=1)]),
        (4, 2, [rec.RemoveTopic(topic_id=A), rec.RenameTopic(topic_id=A, new_name="z"),
                rec.Topic(name="a", topic_id=B), {"type": 9}]),
        (2, 2, [rec.NoOp()]), analysis=True)
    aggregates = result.aggregates
    assert aggregates is not None
    assert aggregates.epochs == {1: [0, 3, 4], 2: [2, 7, 5]}
    assert aggregates.kind_counts == {1: 1, 2: 1, 6: 2, 7: 1, 9: 2, 11: 1, 10: 1}
    assert aggregates.kinds == []
    assert aggregates.topic_offsets == array("q", [2, 6])
    assert aggregates.remove_offsets == array("q", [4, 7])
    assert aggregates.recreated_names == [
        {"name": "a", "old_ids": [str(A)], "current_id": str(B), "offsets": [2, 6]}]
    assert (aggregates.topics, aggregates.removed_ids) == ([], set())


def test_scan_keeps_aggregates_only_when_asked():
    """Not by default: the per-record kinds list costs memory on every executor."""
    scan = NodeScan()
    scan.batch(0, 0, 1, [rec.NoOp().encode()])
    assert scan.result().aggregates is None
    assert _scan(analysis=True).aggregates == Aggregates()


def test_uuid_text_is_kip_516_text_of_16_bytes_and_none_otherwise():
    assert uuid_text(A.to_bytes()) == str(A) == "AAAAAAAAAAAAAAAAAAAAAg"
    assert [uuid_text(raw) for raw in (b"\x01" * 15, b"\x01" * 17, str(A), None)] == [None] * 4


def test_record_hash_is_a_signed_64_bit_int_of_the_bytes():
    """Spark's `long` column (tools/replay/report.py) holds it: both signs, 64 bits."""
    hashes = [record_hash(bytes([n])) for n in range(64)]
    assert all(-2**63 <= h < 2**63 for h in hashes)
    assert min(hashes) < 0 < max(hashes)
    assert len(set(hashes)) == 64
    assert record_hash(b"\x07") == hashes[7]


def test_decode_record_gives_kind_fields_and_why_it_is_undecodable():
    topic = rec.Topic(name="a", topic_id=A).encode()
    assert decode_record(topic) == (6, msgpack.unpackb(topic), None)
    assert decode_record(msgpack.packb({"type": True}))[0] == 1
    assert decode_record(msgpack.packb([1, 2])) == (UNDECODABLE, [1, 2], "unknown record [1, 2]")
    assert decode_record(msgpack.packb({"type": 0})) == (UNDECODABLE, {"type": 0},
                                                         "unknown record {'type': 0}")
    long_map = {"type": 250, "pad": "x" * 100}
    detail = decode_record(msgpack.packb(long_map))[2]
    assert detail == "unknown record {'type': 250, 'pad': '" + "x" * 58  # 80 characters


def test_record_columns_report_type_name_and_only_the_fields_that_are_set():
    def columns(item: Item) -> dict[str, Any]:
        kind, fields, _ = decode_record(_bytes(item))
        return record_columns(kind, fields)

    assert columns(rec.Topic(name="a", topic_id=A)) == {"record_type": "TOPIC", "topic_id": str(A),
                                                       "name": "a"}
    assert columns(rec.RenameTopic(topic_id=A, new_name="b")) == {
        "record_type": "RENAME_TOPIC", "topic_id": str(A), "name": "b"}
    assert columns(rec.Partition(topic_id=A, partition=2, replicas=(1,), isr=(1,), leader=1)) == {
        "record_type": "PARTITION", "topic_id": str(A), "partition": 2}
    assert columns(rec.LeaderChange(leader_id=3, voters=(3,))) == {"record_type": "LEADER_CHANGE",
                                                                  "leader_id": 3}
    # mistyped fields are left out; leader_id is only a LeaderChange's
    assert columns({"type": 6, "name": 5, "topic_id": b"short", "partition": "p",
                    "leader_id": 3}) == {"record_type": "TOPIC"}
    assert columns({"type": 1, "leader_id": "x"}) == {"record_type": "LEADER_CHANGE"}
    assert record_columns(UNDECODABLE, None) == {"record_type": "UNDECODABLE"}
