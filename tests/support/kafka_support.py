"""Helpers for the Kafka listener's unit tests: images from records, record batches."""

from __future__ import annotations

import struct

from crc32c import crc32c

from broker.kafka.framed_response import Part, close_regions
from broker.kafka.partitions.file_region import FileRegion
from broker.kafka.partitions.segments import RollLimits
from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.kafka.record_batch import encode_batch
from raft.common.uuid import Uuid

TOPIC_ID = Uuid(0xAAAA << 64 | 1)
OLD_TOPIC_ID = Uuid(0xBBBB << 64 | 1)
BROKER = 4


def image_with_topic(name: str = "A", topic_id: Uuid = TOPIC_ID, *, leader: int = BROKER,
                     replicas: tuple[int, ...] = (BROKER,), leader_epoch: int = 0,
                     partitions: int = 1, configs: dict[str, str] | None = None
                     ) -> MetadataImage:
    entries: list[rec.Record] = [
        rec.RegisterBroker(broker_id=b, incarnation_id=Uuid(b + 100), broker_epoch=b,
                           endpoints=(f"PLAINTEXT://127.0.0.1:{9000 + b}",))
        for b in sorted(set(replicas) | {leader})]
    entries += [rec.UnfenceBroker(broker_id=b, broker_epoch=b)
                for b in sorted(set(replicas) | {leader})]
    entries.append(rec.Topic(name=name, topic_id=topic_id))
    entries += [rec.Partition(topic_id=topic_id, partition=p, replicas=replicas,
                              isr=replicas, leader=leader, leader_epoch=leader_epoch)
                for p in range(partitions)]
    entries += [rec.TopicConfig(topic_id=topic_id, key=key, value=value)
                for key, value in (configs or {}).items()]
    return replay(enumerate(entries))


def record_batch(values: list[bytes], *, base_timestamp: int = 1000,
                 timestamps: list[int] | None = None) -> bytes:
    """A magic v2 batch of uncompressed records with null keys and the given values
    (and record timestamps: `base_timestamp` for all, unless `timestamps` are given)."""
    return encode_batch([(None, value) for value in values],
                        timestamps=timestamps or [base_timestamp] * len(values),
                        partition_leader_epoch=0)


def two_batch_segments() -> RollLimits:
    """Segments that hold two one-record batches (`record_batch([b"vN"])`) each."""
    return RollLimits(segment_bytes=2 * len(record_batch([b"v0"])))


def with_producer(batch: bytes, producer_id: int, base_sequence: int,
                  epoch: int = 0) -> bytes:
    """`batch` re-stamped with an idempotent producer's id, epoch and base sequence (CRC
    kept valid)."""
    data = bytearray(batch)
    struct.pack_into(">qhi", data, 43, producer_id, epoch, base_sequence)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def joined(parts: list[Part] | None) -> bytes | None:
    """A response frame's parts (`Dispatcher.handle_frame`) as one bytes object, each
    file region read in its place (and closed)."""
    if parts is None:
        return None
    try:
        return b"".join(part.read() if isinstance(part, FileRegion) else part
                        for part in parts)
    finally:
        close_regions(parts)
