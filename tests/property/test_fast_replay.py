"""The replay fast paths against the plain ones: `MetadataDelta.apply_bytes` (a
Partition record taken from its msgpack map, `apply_partition_map`) against
`apply_bytes_reference` (`rec.decode`, then `apply`);
`metadata.image_snapshot.image_from_bytes` against `image_from_records` of the decoded
records; `image_record_bytes` against the encoding of each of `image_records`. Same skip
reasons, same errors, same images (content hash and anomalies), same bytes, on metadata
logs with Partition records broken in every way the codec refuses."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from metadata import records as rec
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.image_snapshot import (
    ImageSnapshotError,
    image_from_bytes,
    image_from_records,
    image_record_bytes,
    image_records,
)
from raft.common.uuid import Uuid
from tests.support.codec_mutations import mutations
from tests.support.metadata_strategies import BROKERS, TOPIC_IDS, images, metadata_logs
from tests.support.record_strategies import EDGE_VALUES, PARTITION_FIELDS

EDGES = st.sampled_from(EDGE_VALUES)


@st.composite
def partition_maps(draw: st.DrawFn) -> dict[str, Any]:
    """A Partition record's map, mostly of topics the logs use, at times broken."""
    replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3))
    record = rec.Partition(
        topic_id=draw(st.sampled_from(TOPIC_IDS)),
        partition=draw(st.sampled_from([0, 0, 1, 1, 2, 3, 4, -1])),
        replicas=tuple(replicas), isr=tuple(replicas[:draw(st.integers(0, 3))]),
        leader=replicas[0], leader_epoch=draw(st.integers(0, 3)),
        partition_epoch=draw(st.integers(0, 3)),
        leader_epoch_after_creation=draw(st.sampled_from([None, None, None, ((0, 1),)])))
    body = record.to_dict()
    kind = draw(st.sampled_from([0, 0, 1, 1, 1, 1, 2, 3]))
    if kind == 1:  # one field given an edge value
        body[draw(st.sampled_from(PARTITION_FIELDS))] = draw(EDGES)
    elif kind == 2:  # one broken as the codec tests break fields
        _, _, body = draw(mutations(body))
    elif kind == 3:  # a 15- or 17-byte topic ID
        body["topic_id"] = bytes(draw(st.sampled_from([15, 17])))
    return body


@st.composite
def logs(draw: st.DrawFn) -> list[tuple[int, bytes, bool]]:
    """(offset, bytes, build the image after it): a metadata log with Partition maps
    mixed in, now and then an offset that does not advance."""
    records: list[bytes] = []
    for _, data in draw(metadata_logs(max_steps=20)):
        records.append(data)
        for _ in range(draw(st.integers(0, 2))):
            records.append(msgpack.packb(draw(partition_maps()), use_bin_type=True))
    entries, offset = [], -1
    for data in records:
        offset += draw(st.sampled_from([1, 1, 1, 1, 1, 1, 1, 1, 2, 0]))
        entries.append((offset, data, draw(st.integers(0, 9)) == 0))
    return entries


def outcome(step: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", step()
    except (ValueError, ImageSnapshotError) as exc:  # RecordError is a ValueError
        return type(exc).__name__, str(exc)


def summary(image: MetadataImage) -> tuple[str, int, tuple[Any, ...]]:
    return image.content_hash(), image.anomaly_count, image.anomalies


@given(logs())
def test_apply_bytes_equals_the_reference_when_a_log_is_replayed(
        entries: list[tuple[int, bytes, bool]]) -> None:
    fast, plain = MetadataDelta(MetadataImage.empty()), MetadataDelta(MetadataImage.empty())
    for offset, data, build in entries:
        assert outcome(lambda: fast.apply_bytes(data, offset)) == \
            outcome(lambda: plain.apply_bytes_reference(data, offset))  # noqa: B023
        assert fast.last_applied_offset == plain.last_applied_offset
        if build:
            assert summary(fast.build()) == summary(plain.build())
    assert summary(fast.build()) == summary(plain.build())


@given(logs(), st.data())
def test_apply_records_equals_the_reference_when_a_log_is_replayed_in_batches(
        entries: list[tuple[int, bytes, bool]], data: st.DataObject) -> None:
    """`apply_records` (a committed batch, a log read from disk) against the reference
    record by record, over batches cut anywhere."""
    records = [data for _, data, _ in entries]
    cuts = sorted(data.draw(st.sets(st.integers(1, len(records) - 1), max_size=4))) \
        if len(records) > 1 else []
    fast, plain = MetadataDelta(MetadataImage.empty()), MetadataDelta(MetadataImage.empty())
    for start, stop in zip([0, *cuts], [*cuts, len(records)], strict=True):
        fast.apply_records(records[start:stop], start)
        for offset in range(start, stop):
            plain.apply_bytes_reference(records[offset], offset)
        assert fast.last_applied_offset == plain.last_applied_offset
        assert summary(fast.build()) == summary(plain.build())


@given(images(), st.data())
def test_image_from_bytes_equals_the_reference_when_a_snapshot_is_loaded(
        image: MetadataImage, data: st.DataObject) -> None:
    records = [r.encode() for r in image_records(image)]
    for _ in range(data.draw(st.integers(0, 2))):  # broken or extra records
        index = data.draw(st.integers(0, len(records)))
        body = msgpack.packb(data.draw(partition_maps()), use_bin_type=True)
        if data.draw(st.booleans()) and index < len(records):
            records[index] = body
        else:
            records.insert(index, body)
    offset = image.last_applied_offset
    fast = outcome(lambda: summary(image_from_bytes(records, offset)))
    plain = outcome(lambda: summary(image_from_records(map(rec.decode, records), offset)))
    assert fast == plain


@pytest.mark.parametrize("field", PARTITION_FIELDS)
@pytest.mark.parametrize("value", EDGE_VALUES, ids=repr)
def test_apply_bytes_equals_the_reference_when_a_partition_field_is_an_edge_value(
        field: str, value: Any) -> None:
    topic_id = TOPIC_IDS[0]
    log = [rec.Topic(name="a", topic_id=topic_id).encode(),
           rec.Partition(topic_id=topic_id, partition=0, replicas=(1, 2), isr=(1,),
                         leader=1).encode()]
    body = rec.Partition(topic_id=topic_id, partition=1, replicas=(2, 1), isr=(2,),
                         leader=2, leader_epoch=4, partition_epoch=5).to_dict()
    body[field] = value
    log.append(msgpack.packb(body, use_bin_type=True))
    fast, plain = MetadataDelta(MetadataImage.empty()), MetadataDelta(MetadataImage.empty())
    for offset, data in enumerate(log):
        assert outcome(lambda: fast.apply_bytes(data, offset)) == \
            outcome(lambda: plain.apply_bytes_reference(data, offset))  # noqa: B023
    assert summary(fast.build()) == summary(plain.build())


def test_apply_bytes_takes_partitions_of_the_right_topic_when_topics_interleave() -> None:
    """The memo of the last topic: a Partition of another topic, a removed topic."""
    first, second = TOPIC_IDS[0], TOPIC_IDS[1]
    log = [rec.Topic(name="a", topic_id=first), rec.Topic(name="b", topic_id=second),
           *(rec.Partition(topic_id=t, partition=p, replicas=(1,), isr=(1,), leader=1)
             for p in range(2) for t in (first, second)),
           rec.RemoveTopic(topic_id=first),
           rec.Partition(topic_id=first, partition=2, replicas=(1,), isr=(1,), leader=1),
           rec.Partition(topic_id=second, partition=2, replicas=(1,), isr=(1,), leader=1)]
    fast, plain = MetadataDelta(MetadataImage.empty()), MetadataDelta(MetadataImage.empty())
    for offset, record in enumerate(log):
        assert fast.apply_bytes(record.encode(), offset) == plain.apply(record, offset)
    image = fast.build()
    assert summary(image) == summary(plain.build())
    assert image.topic(first) is None
    topic = image.topic(second)
    assert topic is not None
    assert len(topic.partitions) == 3
    assert image.anomaly_count == 1
    assert Uuid.from_bytes(first.to_bytes()) == first


@given(images())
def test_image_record_bytes_are_the_records_encoded_when_an_image_is_written(
        image: MetadataImage) -> None:
    assert list(image_record_bytes(image)) == [r.encode() for r in image_records(image)]


def test_partitions_share_equal_replica_tuples_when_replayed_from_bytes() -> None:
    """One tuple per distinct replica list (memory: a million partitions hold a few
    brokers' permutations), and the same image past the bound on shared tuples."""
    topic_id = TOPIC_IDS[0]
    count = 5000  # more distinct lists than a delta keeps
    log = [rec.Topic(name="a", topic_id=topic_id).encode(),
           *(rec.Partition(topic_id=topic_id, partition=p, replicas=(1, 2, p % 2 + 3 * p),
                           isr=(1, 2), leader=1).encode() for p in range(count))]
    fast, plain = MetadataDelta(MetadataImage.empty()), MetadataDelta(MetadataImage.empty())
    for offset, data in enumerate(log):
        assert fast.apply_bytes(data, offset) is None
        assert plain.apply_bytes_reference(data, offset) is None
    image = fast.build()
    assert summary(image) == summary(plain.build())
    topic = image.topic(topic_id)
    assert topic is not None
    assert len(topic.partitions) == count
    assert topic.partitions[0].isr is topic.partitions[1].isr


@given(logs(), st.data())
def test_topic_partitions_are_each_topics_partitions_when_a_delta_is_half_built(
        entries: list[tuple[int, bytes, bool]], data: st.DataObject) -> None:
    """`MetadataDelta.topic_partitions` (the walk an unfence makes for leaderless
    partitions) against `partitions` of each topic ID, with partition lists the delta
    still holds open and after a build."""
    delta = MetadataDelta(MetadataImage.empty())
    for offset, record, build in entries:
        with contextlib.suppress(ValueError):  # an offset that does not advance
            delta.apply_bytes(record, offset)
        if build and data.draw(st.booleans()):
            delta.build()
        walked = list(delta.topic_partitions())
        assert [topic_id for topic_id, _ in walked] == list(delta.topic_ids())
        assert all(list(parts) == list(delta.partitions(topic_id))
                   for topic_id, parts in walked)
