"""The replay scan's fast paths. It follows only the topics a batch may resize
(`sequential.resize_topics`): on any metadata log cut into batches of any size it finds
exactly what it finds when it follows every topic a partition record names, as it did
before (violations, counts, claims, aggregates). The logs
(`tests.support.metadata_strategies`) hold KIP-253 counts, marks and removals, records
naming dead or malformed topics, and undecodable bytes. `decode_batch` judges every
record as `decode_record` does, and `plain_record`, which reads a plain PartitionChange
or Partition from its bytes, agrees with the strict codec (`metadata.records.decode`)
wherever it answers, on valid and broken bytes, and answers for every plain one. The
analysis aggregates the scan keeps, batch by batch, are what each record counts for on
its own."""

from __future__ import annotations

from collections import Counter
from typing import Any
from unittest import mock

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata import records as rec
from raft.common.uuid import Uuid
from tests.support.metadata_strategies import metadata_logs
from tools.replay import sequential
from tools.replay.sequential import (
    TOPIC_ID,
    Match,
    NodeScan,
    ScanResult,
    decode_batch,
    plain_record,
)


def _every_partition_topic(kinds: list[int], maps: list[Any], _: Any) -> set[bytes]:
    return {fields.string[TOPIC_ID] if type(fields) is Match else fields["topic_id"]
            for kind, fields in zip(kinds, maps, strict=True) if kind in (7, 8, 17, 18)
            and (type(fields) is Match or isinstance(fields.get("topic_id"), bytes))}


def _scan(records: list[bytes], cuts: list[int]) -> ScanResult:
    scan = NodeScan(analysis=True)
    start = 0
    for seq, end in enumerate([*sorted(set(cuts)), len(records)]):
        if end > start:
            scan.batch(seq, start, 1, records[start:end])
            start = end
    return scan.result()


def _outputs(result: ScanResult) -> tuple[Any, ...]:
    return (result.violations, {k: list(v) for k, v in result.marks.items()}, result.claims,
            result.first_topic_batch, result.metadata_topic_batch, result.aggregates)


@settings(max_examples=300, deadline=None)
@given(metadata_logs(max_steps=40), st.lists(st.integers(0, 120), max_size=30))
def test_following_only_resizable_topics_finds_what_following_all_finds(
        log: list[tuple[int, bytes]], cuts: list[int]) -> None:
    records = [data for _, data in log]
    cuts = [c for c in cuts if c < len(records)]
    fast = _scan(records, cuts)
    with mock.patch.object(sequential, "resize_topics", _every_partition_topic):
        followed_all = _scan(records, cuts)
    assert _outputs(fast) == _outputs(followed_all)


@settings(max_examples=200, deadline=None)
@given(metadata_logs(max_steps=40), st.lists(st.integers(0, 120), max_size=30))
def test_aggregates_are_what_each_record_counts_for(log: list[tuple[int, bytes]],
                                                    cuts: list[int]) -> None:
    """Batches with falling epochs (epoch 3, 2, 1, 3, ...), so an epoch's range is a
    min and max over batches that are not in order."""
    records = [data for _, data in log]
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(records)}), len(records)]
    scan = NodeScan(analysis=True)
    epochs: dict[int, list[int]] = {}
    for seq, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if end > start:
            epoch = 3 - seq % 3
            scan.batch(seq, start, epoch, records[start:end])
            first, last, count = epochs.get(epoch, [start, end - 1, 0])
            epochs[epoch] = [min(first, start), max(last, end - 1), count + end - start]
    aggregates = scan.result().aggregates
    decoded = [sequential.decode_record(data)[:2] for data in records]
    topics = [(offset, fields) for offset, (kind, fields) in enumerate(decoded) if kind == 6]
    removals = [(offset, fields) for offset, (kind, fields) in enumerate(decoded)
                if kind == 9]
    assert aggregates is not None
    assert aggregates.epochs == epochs
    assert aggregates.kind_counts == dict(Counter(kind for kind, _ in decoded))
    assert list(aggregates.topic_offsets) == [offset for offset, _ in topics]
    assert list(aggregates.remove_offsets) == [offset for offset, _ in removals]
    removed = {_topic_id(f) for _, f in removals} - {None}
    assert aggregates.recreated_names == _recreated([(_name(f), _topic_id(f), offset)
                                                     for offset, f in topics], removed)


def _recreated(topics: list[tuple[str | None, bytes | None, int]],
               removed: set[bytes | None]) -> list[dict[str, Any]]:
    """The recreated-names table, record by record: each name with more than one ID, its
    Topic records in offset order, the IDs some RemoveTopic names old, the last other
    one current; the names with the most records first, then by name."""
    rows: dict[str, list[tuple[bytes | None, int]]] = {}
    for name, topic_id, offset in topics:
        if name is not None:
            rows.setdefault(name, []).append((topic_id, offset))
    table = []
    for name in sorted(rows):
        mine = sorted(rows[name], key=lambda row: row[1])
        if len({i for i, _ in mine if i is not None}) < 2:
            continue
        text = {i: str(Uuid.from_bytes(i)) for i, _ in mine if i is not None}
        current = [None if i is None else text[i] for i, _ in mine if i not in removed]
        table.append({"name": name, "old_ids": [text[i] for i, _ in mine if i in removed],
                      "current_id": current[-1] if current else None,
                      "offsets": [offset for _, offset in mine]})
    return sorted(table, key=lambda entry: -len(entry["offsets"]))


def _topic_id(fields: dict[str, Any]) -> bytes | None:
    raw = fields.get("topic_id")
    return raw if isinstance(raw, bytes) and len(raw) == 16 else None


def _name(fields: dict[str, Any]) -> str | None:
    name = fields.get("name", fields.get("new_name"))
    return name if isinstance(name, str) else None


@settings(max_examples=200, deadline=None)
@given(metadata_logs(max_steps=20))
def test_decode_batch_judges_each_record_as_decode_record(log: list[tuple[int, bytes]]
                                                          ) -> None:
    records = [data for _, data in log]
    kinds, maps = decode_batch(records)
    assert kinds == [sequential.decode_record(data)[0] for data in records]
    for data, kind, fields in zip(records, kinds, maps, strict=True):
        if type(fields) is Match:
            plain = plain_record(data)
            assert plain is not None
            assert plain[0] == kind
        elif kind != sequential.UNDECODABLE:
            assert fields == sequential.decode_record(data)[1]


BROKER_IDS = st.integers(0, 130)  # across the one-byte (fixint) limit at 127
CHANGES = st.builds(
    rec.PartitionChange, topic_id=st.binary(min_size=16, max_size=16).map(Uuid.from_bytes),
    partition=st.integers(-2, 200), leader=st.none() | BROKER_IDS,
    isr=st.none() | st.lists(BROKER_IDS, max_size=17).map(tuple),
    replicas=st.none() | st.just((1, 2)), bump_leader_epoch=st.none() | st.booleans(),
    leader_epoch_before_deletion=st.none() | st.just(((0, 1),)))


def _broken(data: bytes, draw: st.DataObject) -> bytes:
    """`data` with one byte changed, cut short, or grown by a byte."""
    how = draw.draw(st.sampled_from(("flip", "cut", "grow")))
    at = draw.draw(st.integers(0, len(data) - 1))
    if how == "flip":
        return data[:at] + bytes([draw.draw(st.integers(0, 255))]) + data[at + 1:]
    if how == "cut":
        return data[:at]
    return data + bytes([draw.draw(st.integers(0, 255))])


SMALL = st.integers(-1, 130)  # across both ends of the one-byte (fixint) range
IDS = st.lists(BROKER_IDS, max_size=17).map(tuple)
EPOCH_MAPS = st.none() | st.just(((0, 1),))
PARTITIONS = st.builds(
    rec.Partition, topic_id=st.binary(min_size=16, max_size=16).map(Uuid.from_bytes),
    partition=SMALL, replicas=IDS, isr=IDS, leader=SMALL, leader_epoch=SMALL,
    partition_epoch=SMALL, leader_epoch_after_creation=EPOCH_MAPS,
    leader_epoch_before_deletion=EPOCH_MAPS)


def _fixints(*values: int) -> bool:
    return all(0 <= v < 128 for v in values)


def _is_plain(record: rec.PartitionChange | rec.Partition) -> bool:
    if isinstance(record, rec.Partition):
        return (record.leader_epoch_after_creation is None
                and record.leader_epoch_before_deletion is None
                and _fixints(record.partition, record.leader, record.leader_epoch,
                             record.partition_epoch, *record.replicas, *record.isr)
                and len(record.replicas) < 16 and len(record.isr) < 16)
    return (record.leader is not None and record.isr is not None
            and record.replicas is None and record.bump_leader_epoch is None
            and record.leader_epoch_before_deletion is None
            and _fixints(record.partition, record.leader, *record.isr)
            and len(record.isr) < 16)


@settings(max_examples=800, deadline=None)
@given(st.one_of(CHANGES, PARTITIONS), st.data())
def test_plain_record_agrees_with_the_strict_codec_or_declines(
        record: rec.PartitionChange | rec.Partition, data: st.DataObject) -> None:
    """Every plain PartitionChange (a leader and an ISR, nothing else) and Partition (no
    leader-epoch maps), ids and epochs below 128, is read from its bytes; wherever
    `plain_record` answers, on valid or broken bytes, the strict codec decodes that
    record, the same kind, topic ID, partition, leader and leader epoch, and msgpack
    the same map; everything else it declines (the scan then decodes the map)."""
    encoded = record.encode()
    assert (plain_record(encoded) is not None) == _is_plain(record)
    for candidate in (encoded, _broken(encoded, data)):
        found = plain_record(candidate)
        if found is None:
            continue
        decoded = rec.decode(candidate)
        assert msgpack.unpackb(candidate) == decoded.to_dict()
        if isinstance(decoded, rec.Partition):
            assert found == (7, decoded.topic_id.to_bytes(), decoded.partition,
                             decoded.leader, decoded.leader_epoch)
            assert (decoded.leader_epoch_after_creation,
                    decoded.leader_epoch_before_deletion) == (None, None)
        else:
            assert isinstance(decoded, rec.PartitionChange)
            assert found == (8, decoded.topic_id.to_bytes(), decoded.partition,
                             decoded.leader, None)
            assert (decoded.bump_leader_epoch, decoded.leader_epoch_before_deletion,
                    decoded.replicas) == (None, None, None)
