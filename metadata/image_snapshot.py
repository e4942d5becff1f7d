"""A MetadataImage as the records of a snapshot, and back.

`image_records(image)` lists records whose replay from an empty image rebuilds `image`
(`image_record_bytes(image)`: their bytes, as a snapshot file holds them);
`image_from_records(records, offset)` replays them (`metadata.delta`, the same rules as
the log) into the image as of `offset` (`image_from_bytes`: from their bytes). The two
images have the same `content_hash()`, so a node that starts from a snapshot agrees with
one that replayed the whole log.

The records, in the order replay needs them (sorted within each kind, so one image
always gives the same bytes):
- `MetadataTopic`, if the metadata topic ID is known;
- `FeatureLevel` per finalized feature, by name (the level the records after it were
  written at);
- `RetiredTopicId` for every ID used once and no longer live (never to be reused);
- per live topic, `Topic`, then `PartitionCount` if the topic has an undeleted partition
  count (KIP-253), then its `Partition`s in partition order (full records: replicas,
  ISR, leader, both epochs and the leader-epoch maps), then a `TopicConfig` per config
  set, by key;
- per broker, `RegisterBroker`, then `UnfenceBroker` if it is unfenced (a broker
  registers fenced);
- `UserScramCredential` per user and mechanism, sorted by both;
- `AccessControlEntry` per ACL, by id;
- `ConfigRecord` per broker config set, by resource name and key;
- `ReplayAnomalies`, if replay skipped any records: their count and those kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import attrgetter
from typing import TypeVar

from metadata import records as rec
from metadata.admin import BROKER_RESOURCE
from metadata.delta import MetadataDelta
from metadata.image import MAX_KEPT_ANOMALIES, NO_OFFSET, Anomaly, MetadataImage, TopicImage
from raft.common.slots import positional_constructor
from raft.common.uuid import pack

T = TypeVar("T")

_UUID_ORDER = attrgetter("value")  # sorting by the int, not by Uuid.__lt__
_BY_TOPIC_ID = attrgetter("topic_id.value")
# a snapshot holds one Partition record per partition: made without the dataclass's
# __init__ (raft.common.slots)
_new_partition_record = positional_constructor(rec.Partition)
_PARTITION_TYPE = int(rec.RecordType.PARTITION)
_PARTITION_VERSION = rec.Partition.VERSION


class ImageSnapshotError(ValueError):
    """Snapshot records that do not make an image (replay skipped one, or the anomaly
    summary is malformed); the message names the record by its index."""


def image_records(image: MetadataImage) -> list[rec.Record]:
    """Records that rebuild `image` (see the module docstring for their order)."""
    return list(_listed(image, _topic_records, _as_is))


def image_record_bytes(image: MetadataImage) -> Iterator[bytes]:
    """`record.encode()` of each of `image_records(image)`, the same bytes, made as they
    are written (no list of a million records is held): a Partition record without
    leader-epoch maps, nearly every record of a snapshot, is packed from its partition
    image as the map `Record.encode` packs, with no record object."""
    return _listed(image, _topic_record_bytes, rec.Record.encode)


def _as_is(record: rec.Record) -> rec.Record:
    return record


def _listed(image: MetadataImage, topic_items: Callable[[TopicImage], Iterable[T]],
            item: Callable[[rec.Record], T]) -> Iterator[T]:
    """The records of `image` in order, each as `item` makes it; a topic's as
    `topic_items` makes them."""
    if image.metadata_topic_id is not None:
        yield item(rec.MetadataTopic(topic_id=image.metadata_topic_id))
    for name, level in image.finalized_features:
        yield item(rec.FeatureLevel(name=name, feature_level=level))
    retired = set(image.used_topic_ids) - set(image.topics) - {image.metadata_topic_id}
    for topic_id in sorted(retired, key=_UUID_ORDER):
        yield item(rec.RetiredTopicId(topic_id=topic_id))
    for topic in sorted(image.topics.values(), key=_BY_TOPIC_ID):  # one topic an ID
        yield from topic_items(topic)
    for broker_id in sorted(image.brokers):
        broker = image.brokers[broker_id]
        yield item(rec.RegisterBroker(
            broker_id=broker.broker_id, incarnation_id=broker.incarnation_id,
            broker_epoch=broker.broker_epoch, endpoints=broker.endpoints, rack=broker.rack))
        if not broker.fenced:
            yield item(rec.UnfenceBroker(broker_id=broker.broker_id,
                                         broker_epoch=broker.broker_epoch))
    for key in sorted(image.scram_credentials):
        yield item(image.scram_credentials[key].to_record())
    for acl in sorted(image.acls, key=lambda a: a.id.value):
        b = acl.binding
        yield item(rec.AccessControlEntry(
            id=acl.id, resource_type=b.resource_type, resource_name=b.resource_name,
            pattern_type=b.pattern_type, principal=b.principal, host=b.host,
            operation=b.operation, permission_type=b.permission_type))
    for resource_name, config_key, value in image.broker_configs:
        yield item(rec.ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=resource_name,
                                    name=config_key, value=value))
    if image.anomaly_count:
        yield item(rec.ReplayAnomalies(
            count=image.anomaly_count,
            offsets=tuple(a.offset for a in image.anomalies),
            record_types=tuple(a.record_type for a in image.anomalies),
            reasons=tuple(a.reason for a in image.anomalies)))


def _topic_records(topic: TopicImage) -> list[rec.Record]:
    records: list[rec.Record] = [rec.Topic(name=topic.name, topic_id=topic.topic_id,
                                           initial_partition_count=topic.initial_partition_count)]
    topic_id = topic.topic_id
    if topic.undeleted_partition_count is not None:
        records.append(rec.PartitionCount(
            topic_id=topic_id, undeleted_partition_count=topic.undeleted_partition_count))
    records.extend([_new_partition_record(  # rec.Partition(...), its fields in order
        topic_id, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch,
        p.partition_epoch, p.leader_epoch_after_creation, p.leader_epoch_before_deletion,
        p.adding_replicas or None, p.removing_replicas or None)
        for p in topic.partitions])
    records.extend(rec.TopicConfig(topic_id=topic.topic_id, key=key, value=value)
                   for key, value in topic.configs)
    return records


def _topic_record_bytes(topic: TopicImage) -> list[bytes]:
    """`_topic_records(topic)` encoded; the common Partition records packed directly."""
    if any(p.leader_epoch_after_creation is not None
           or p.leader_epoch_before_deletion is not None or p.reassigning
           for p in topic.partitions):
        # rare: resizes, reassignments
        return [record.encode() for record in _topic_records(topic)]
    topic_id = topic.topic_id
    records = [rec.Topic(name=topic.name, topic_id=topic_id,
                         initial_partition_count=topic.initial_partition_count).encode()]
    if topic.undeleted_partition_count is not None:
        records.append(rec.PartitionCount(
            topic_id=topic_id, undeleted_partition_count=topic.undeleted_partition_count
        ).encode())
    id_bytes = topic_id.to_bytes()
    records.extend([pack({"type": _PARTITION_TYPE, "version": _PARTITION_VERSION,
                          "topic_id": id_bytes, "partition": p.partition,
                          "replicas": p.replicas, "isr": p.isr, "leader": p.leader,
                          "leader_epoch": p.leader_epoch,
                          "partition_epoch": p.partition_epoch})
                    for p in topic.partitions])
    records.extend(rec.TopicConfig(topic_id=topic_id, key=key, value=value).encode()
                   for key, value in topic.configs)
    return records


def image_from_records(records: Iterable[rec.Record], offset: int) -> MetadataImage:
    """The image the snapshot `records` hold, as of log `offset` (inclusive: the
    snapshot's end offset - 1). Replayed by the log's rules; a record replay would skip
    means the snapshot contradicts itself, and is an ImageSnapshotError."""
    if offset < NO_OFFSET:
        raise ValueError(f"offset {offset} is below {NO_OFFSET}")
    replay = _Replay()
    for index, record in enumerate(records):
        replay.apply(record, index)
    return replay.image(offset)


def image_from_bytes(records: Sequence[bytes], offset: int) -> MetadataImage:
    """`image_from_records(map(rec.decode, records), offset)`, the same image and the
    same errors (RecordError for bytes that do not decode), faster: a Partition record
    in the common shape (nearly every record of a snapshot) is applied from its bytes by
    `MetadataDelta.apply_records` (`metadata.fast_records`), without a record object;
    every other record is decoded and applied as there."""
    return image_from_batches((records,), offset)


def image_from_batches(batches: Iterable[Sequence[bytes]], offset: int) -> MetadataImage:
    """`image_from_bytes` of the records of `batches` in order, each batch applied as it
    comes (`raft.snapshot.stream_snapshot`'s)."""
    if offset < NO_OFFSET:
        raise ValueError(f"offset {offset} is below {NO_OFFSET}")
    replay = _Replay()
    index = 0
    for records in batches:
        replay.delta.apply_records(records, index, replay.apply_bytes)
        index += len(records)
    return replay.image(offset)


class _Replay:
    """A snapshot's records applied in order, every one of them cleanly."""

    def __init__(self) -> None:
        self.delta = MetadataDelta(MetadataImage.empty())
        self.summary: rec.ReplayAnomalies | None = None

    def apply(self, record: rec.Record, index: int) -> None:
        if isinstance(record, rec.ReplayAnomalies):
            if self.summary is not None:
                raise ImageSnapshotError(f"snapshot record {index}: a second ReplayAnomalies")
            self.summary = record
            return
        # The records hold no offsets of their own: the index keeps the delta's order.
        skipped = self.delta.apply(record, index)
        if skipped is not None:
            raise ImageSnapshotError(f"snapshot record {index} ({type(record).__name__}) "
                                     f"does not apply: {skipped}")

    def apply_bytes(self, data: bytes, index: int) -> None:
        self.apply(rec.decode(data), index)  # raises its RecordError

    def image(self, offset: int) -> MetadataImage:
        summary = self.summary
        anomalies = () if summary is None else _anomalies(summary)
        return dataclasses.replace(
            self.delta.build(), last_applied_offset=offset,
            anomaly_count=0 if summary is None else summary.count, anomalies=anomalies)


def _anomalies(summary: rec.ReplayAnomalies) -> tuple[Anomaly, ...]:
    kept = len(summary.offsets)
    if not len(summary.record_types) == len(summary.reasons) == kept:
        raise ImageSnapshotError(f"ReplayAnomalies lists {kept} offsets, "
                                 f"{len(summary.record_types)} record types and "
                                 f"{len(summary.reasons)} reasons")
    if kept != min(summary.count, MAX_KEPT_ANOMALIES):
        raise ImageSnapshotError(f"ReplayAnomalies keeps {kept} of {summary.count} "
                                 f"anomalies, not the first {MAX_KEPT_ANOMALIES}")
    return tuple(Anomaly(offset=o, record_type=t, reason=r) for o, t, r in
                 zip(summary.offsets, summary.record_types, summary.reasons, strict=True))
