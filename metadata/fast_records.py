"""The one fast decode of bulk replays: a Partition record's bytes to a shared PartitionImage.

Every bulk replay of metadata records (a broker catching up by Fetch from offset 0, a
controller publishing its log at start-up, a snapshot load, an image rebuild) is nine
Partition records in ten, and the controller and the snapshot writer pack each one as the
same map in the same key order: `{"type": 7, "version": 0, "topic_id": <16 bytes>,
"partition", "replicas", "isr", "leader", "leader_epoch", "partition_epoch"}`. At a
million partitions only a few dozen distinct tails follow the topic ID (partition
numbers times the placements of a few brokers), so `PartitionDecoder.image` decodes a
tail once, strictly, and hands out one immutable `PartitionImage` for every record that
ends with the same bytes: no msgpack map, no record object, no partition image per record.

The rule: `decode(data)` is `metadata.records.decode(data)` for every input, the same
record or a `RecordError`. A tail is decoded the codec's way (msgpack, then the checks
the codec makes of each field, written out for these fields) and taken only in the
common shape: exactly those nine keys, each value of its field's type, 64-bit ints;
anything else (another key order, the leader-epoch maps of a resize, a broken field)
is None here, and its caller decodes it with `metadata.records`, whose rules and
messages are the only ones. Bytes that end alike decode alike (msgpack reads the
16-byte topic ID by its length), so a cached tail stands for every record ending in it.
"""

from __future__ import annotations

from msgpack import packb, unpackb

from metadata import records as rec
from metadata.image import PartitionImage, new_partition_image
from raft.common.slots import positional_constructor
from raft.common.uuid import Uuid

_PARTITION_TYPE = int(rec.RecordType.PARTITION)
_PARTITION_VERSION = rec.Partition.VERSION
# the map header (nine entries), "type", "version" and the topic ID's bin header
PARTITION_PREFIX = (b"\x89" + packb("type") + packb(_PARTITION_TYPE) + packb("version")
                    + packb(_PARTITION_VERSION) + packb("topic_id") + b"\xc4\x10")
TOPIC_ID = slice(len(PARTITION_PREFIX), len(PARTITION_PREFIX) + 16)
TAIL = slice(TOPIC_ID.stop, None)  # what follows the topic ID
_KEYS = frozenset({"type", "version", "topic_id", "partition", "replicas", "isr", "leader",
                   "leader_epoch", "partition_epoch"})
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_CACHED_TAILS = 4096  # a snapshot of a million partitions holds a few dozen
_new_partition_record = positional_constructor(rec.Partition)


class PartitionDecoder:
    """Partition records in the common shape as shared partition images, by their tail
    (the bytes after the topic ID). Bounded: past MAX_CACHED_TAILS it starts over."""

    def __init__(self) -> None:
        # tail -> its image (None: not the common shape). Read directly by a bulk loop
        # (`MetadataDelta.apply_records`), which calls `image` only for a tail not in it.
        self.by_tail: dict[bytes, PartitionImage | None] = {}
        # replica and ISR lists, each kept once: a few brokers' permutations
        self._tuples: dict[tuple[int, ...], tuple[int, ...]] = {}

    def image(self, data: bytes) -> PartitionImage | None:
        """The partition image a Partition record in the common shape holds (its topic ID:
        `data[TOPIC_ID]`); None for any other bytes."""
        if not data.startswith(PARTITION_PREFIX):
            return None
        tail = data[TAIL]
        images = self.by_tail
        image = images.get(tail, images)
        if image is images:  # not seen yet
            if len(images) >= MAX_CACHED_TAILS:
                images.clear()
                self._tuples.clear()
            image = images[tail] = self._decoded(data)
        return image  # type: ignore[return-value]

    def _decoded(self, data: bytes) -> PartitionImage | None:
        try:
            fields = unpackb(data)
        except Exception:  # msgpack raises several unrelated types; rec.decode says which
            return None
        if type(fields) is not dict or fields.keys() != _KEYS:
            return None
        partition, replicas, isr = fields["partition"], fields["replicas"], fields["isr"]
        leader, leader_epoch = fields["leader"], fields["leader_epoch"]
        partition_epoch = fields["partition_epoch"]
        if not (_is_int64(partition) and _is_int64(leader) and _is_int64(leader_epoch)
                and _is_int64(partition_epoch) and _is_int64_list(replicas)
                and _is_int64_list(isr)):
            return None
        shared = self._tuples
        replicas, isr = tuple(replicas), tuple(isr)
        return new_partition_image(partition, shared.setdefault(replicas, replicas),
                              shared.setdefault(isr, isr), leader, leader_epoch,
                              partition_epoch, None, None, (), ())


def _is_int64(value: object) -> bool:
    return type(value) is int and _INT64_MIN <= value <= _INT64_MAX


def _is_int64_list(value: object) -> bool:
    return type(value) is list and all(_is_int64(item) for item in value)


# one for the process: a bulk replay makes a delta per batch (metadata.delta), and the
# tails it remembers hold for every delta; its images never change, so threads share it
PARTITIONS = PartitionDecoder()


def decode(data: bytes, partitions: PartitionDecoder = PARTITIONS) -> rec.Record:
    """`metadata.records.decode(data)`: the same record, or the same RecordError. A
    Partition record in the common shape is made from `partitions`' image of it."""
    image = partitions.image(data)
    if image is None:
        return rec.decode(data)
    return _new_partition_record(  # rec.Partition(...), its fields in order
        Uuid.from_bytes(data[TOPIC_ID]), image.partition, image.replicas, image.isr,
        image.leader, image.leader_epoch, image.partition_epoch, None, None, None, None)
