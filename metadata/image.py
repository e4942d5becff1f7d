"""MetadataImage: what the committed metadata log says, built by pure replay of records.

An image is immutable. `MetadataDelta` (in `metadata.delta`) applies records to a base
image and `build()`s the next image (Kafka's MetadataImage / MetadataDelta); `replay` and
`replay_bytes` are there too, since every image is built by a delta. The maps are
`metadata.persistent` FrozenMaps: a new image shares all but the shards that changed, so
one more record costs about n/256 entries of copying, and a replay is one pass.

Invalid records never crash replay. A record that contradicts the image (a Partition for
a topic that does not exist, a Topic reusing an ID or a live name, a FenceBroker with a
stale broker epoch, ...) is skipped: the image is left as it was, except that the offset
advances and the skip is counted and described in `anomalies`. Every node replaying the
same log skips the same records, so images still agree; the replay checks flag them.
Offsets going backwards are a caller bug and raise `ValueError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import cast

from metadata.authorizer import EMPTY_ACLS, AclImage
from metadata.persistent import FrozenKeySet, FrozenMap, empty_map
from metadata.records import EpochMap
from metadata.scram_credentials import ScramCredentialImage
from metadata.topic_configs import ORDERED_DELIVERY
from raft.common.slots import positional_constructor
from raft.common.uuid import Uuid, pack, pack_array_header

NO_LEADER = -1  # the partition has no leader (the value Kafka uses)
NO_OFFSET = -1  # last_applied_offset of an empty image
MAX_KEPT_ANOMALIES = 100  # described in full; beyond that only counted
_HASH_FORMAT_VERSION = 2  # content_hash: 2 hashes each topic's digest (see there)
_UUID_ORDER = attrgetter("value")  # sorted(uuids) without a Python __lt__ per comparison
_BY_TOPIC_ID = attrgetter("topic_id.value")


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionImage:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # KIP-253 leader-epoch maps ((partition, leader epoch) pairs sorted by partition):
    # where consumers of this partition wait for the others, across a resize
    leader_epoch_after_creation: EpochMap | None = None
    leader_epoch_before_deletion: EpochMap | None = None
    # KIP-455: an ongoing reassignment (metadata.reassignments); both empty when none
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def marked_for_deletion(self) -> bool:
        """A shrink marked it (a non-empty before-deletion map); it is removed once empty."""
        return bool(self.leader_epoch_before_deletion)

    def canonical(self) -> list[object]:
        # tuples pack as msgpack arrays, as lists do: no copies
        canonical: list[object] = [self.partition, self.replicas, self.isr, self.leader,
                     self.leader_epoch, self.partition_epoch, self.leader_epoch_after_creation,
                     self.leader_epoch_before_deletion]
        if self.reassigning:  # only then: images without one hash as before
            canonical += [self.adding_replicas, self.removing_replicas]
        return canonical


# PartitionImage(partition, replicas, isr, leader, leader_epoch, partition_epoch,
# leader_epoch_after_creation, leader_epoch_before_deletion, adding_replicas,
# removing_replicas), every field in order, without the dataclass's __init__
# (raft.common.slots): replay makes one per Partition and PartitionChange record
new_partition_image = positional_constructor(PartitionImage)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicImage:
    """A live topic. `partitions[i].partition == i`: partition numbers are contiguous."""

    name: str
    topic_id: Uuid
    partitions: tuple[PartitionImage, ...] = ()
    initial_partition_count: int | None = None  # with the epochs above (PartitionImage)
    # KIP-253: the partitions producers hash keys over; those above are marked for
    # deletion. None until a PartitionCount record: then all of them (`undeleted_count`).
    undeleted_partition_count: int | None = None
    # TopicConfig records: (key, value) pairs sorted by key, only the keys set (Kafka's
    # defaults are metadata.topic_configs'); they go with the topic when it is removed
    configs: tuple[tuple[str, str], ...] = ()
    # memo of digest(), filled in on first use (not content: left out of ==, repr, init)
    _digest: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    @property
    def undeleted_count(self) -> int:
        if self.undeleted_partition_count is None:
            return len(self.partitions)
        return self.undeleted_partition_count

    @property
    def ordered_delivery(self) -> bool:
        """KIP-253's enable.ordered.delivery: on only when set to "true" (absence is off,
        also in a log written when on was the default: `metadata.topic_configs`)."""
        return self.config(ORDERED_DELIVERY) == "true"

    @property
    def marked_partitions(self) -> tuple[int, ...]:
        return tuple(p.partition for p in self.partitions if p.marked_for_deletion)

    def config(self, key: str) -> str | None:
        """The value set for `key`, or None (the default applies)."""
        for k, value in self.configs:
            if k == key:
                return value
        return None

    def canonical(self) -> list[object]:
        canonical = self.canonical_head()
        canonical[3] = [p.canonical() for p in self.partitions]
        return canonical

    def canonical_head(self) -> list[object]:
        """`canonical()` with None in place of the partitions' list."""
        canonical: list[object] = [self.topic_id.to_bytes(), self.name,
                                   self.initial_partition_count, None]
        # Each only when set, so older images hash as before; a count comes after the
        # configs (then always present, if empty), so the positions stay unambiguous.
        if self.configs or self.undeleted_partition_count is not None:
            canonical.append(self.configs)
        if self.undeleted_partition_count is not None:
            canonical.append(self.undeleted_partition_count)
        return canonical

    def digest(self, packed: dict[int, bytes] | None = None) -> bytes:
        """sha256 of the msgpack of `canonical()`: the topic's part of the image's
        `content_hash`. Remembered, since a topic image never changes and the next image
        shares every topic a record did not touch: hashing an image after a change
        digests only the changed topics again. `packed`: id(partition image) -> the
        msgpack of its `canonical()`, shared by the topics of one `content_hash` (a
        loaded snapshot's million partitions are a few dozen shared partition images,
        `metadata.fast_records`: each is packed once, not once per partition)."""
        digest = self._digest
        if digest is None:
            digest = hashlib.sha256(self._canonical_bytes({} if packed is None else packed)
                                    ).digest()
            object.__setattr__(self, "_digest", digest)  # a memo, on a frozen object
        return digest

    def _canonical_bytes(self, packed: dict[int, bytes]) -> bytes:
        """`pack(self.canonical())`, the same bytes (a msgpack array is its header and
        its items' bytes), with each partition's taken from `packed`."""
        canonical, partitions = self.canonical_head(), self.partitions
        items = list(map(packed.get, map(id, partitions)))  # in C: a million at a load
        if None in items:
            for index, partition in enumerate(partitions):
                if items[index] is None:
                    items[index] = packed[id(partition)] = pack(partition.canonical())
        return b"".join([pack_array_header(len(canonical)), *map(pack, canonical[:3]),
                         pack_array_header(len(partitions)), *cast(list[bytes], items),
                         *map(pack, canonical[4:])])


def _topic_image_constructor() -> Callable[
        [str, Uuid, tuple[PartitionImage, ...], int | None, int | None,
         tuple[tuple[str, str], ...]], TopicImage]:
    """TopicImage(name, topic_id, partitions, initial_partition_count,
    undeleted_partition_count, configs) with its digest memo empty, storing the slots
    as the dataclass's __init__ does, without its object.__setattr__ per field (replay
    makes one per topic and batch: 100,000 at a snapshot load)."""
    names = [f.name for f in fields(TopicImage)]
    if names != ["name", "topic_id", "partitions", "initial_partition_count",
                 "undeleted_partition_count", "configs", "_digest"]:
        raise AssertionError(f"TopicImage's fields changed: {names}")
    (set_name, set_topic_id, set_partitions, set_initial, set_undeleted, set_configs,
     set_digest) = [TopicImage.__dict__[name].__set__ for name in names]
    new = object.__new__

    def make(name: str, topic_id: Uuid, partitions: tuple[PartitionImage, ...],
             initial_partition_count: int | None, undeleted_partition_count: int | None,
             configs: tuple[tuple[str, str], ...]) -> TopicImage:
        topic = new(TopicImage)
        set_name(topic, name)
        set_topic_id(topic, topic_id)
        set_partitions(topic, partitions)
        set_initial(topic, initial_partition_count)
        set_undeleted(topic, undeleted_partition_count)
        set_configs(topic, configs)
        set_digest(topic, None)
        return topic
    return make


new_topic_image = _topic_image_constructor()


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerImage:
    broker_id: int
    incarnation_id: Uuid
    broker_epoch: int  # the offset of its RegisterBroker record, as in Kafka
    endpoints: tuple[str, ...] = ()
    rack: str | None = None
    fenced: bool = True  # a broker registers fenced and is unfenced once caught up

    def canonical(self) -> list[object]:
        return [self.broker_id, self.incarnation_id.to_bytes(), self.broker_epoch,
                list(self.endpoints), self.rack, self.fenced]


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    """A record replay skipped, and why."""

    offset: int
    record_type: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class MetadataImage:
    """The cluster metadata as of `last_applied_offset` (inclusive). Compare two images
    with `content_hash()`; the maps are read-only views."""

    topics: FrozenMap[Uuid, TopicImage] = field(default_factory=empty_map)
    topic_ids_by_name: FrozenMap[str, Uuid] = field(default_factory=empty_map)
    brokers: FrozenMap[int, BrokerImage] = field(default_factory=empty_map)
    metadata_topic_id: Uuid | None = None
    # every topic ID ever assigned, live or not
    used_topic_ids: FrozenKeySet[Uuid] = field(default_factory=FrozenKeySet)
    last_applied_offset: int = NO_OFFSET
    anomaly_count: int = 0
    anomalies: tuple[Anomaly, ...] = ()  # the first MAX_KEPT_ANOMALIES
    # UserScramCredential records by (user name, mechanism) (metadata.scram_credentials)
    scram_credentials: FrozenMap[tuple[str, str], ScramCredentialImage] = field(
        default_factory=empty_map)
    # AccessControlEntry records by ACL id, indexed for metadata.authorizer.authorize
    acls: AclImage = EMPTY_ACLS
    # FeatureLevel records: (name, level) sorted by name, levels above 0 (metadata.features)
    finalized_features: tuple[tuple[str, int], ...] = ()
    # ConfigRecords on brokers: (resource name, key, value) sorted (metadata.broker_configs)
    broker_configs: tuple[tuple[str, str, str], ...] = ()
    _hash: list[str] = field(default_factory=list, init=False, repr=False)  # memo of content_hash()
    # memo of unfenced_broker_ids(): the controller places every new partition over them
    _unfenced: list[tuple[int, ...]] = field(default_factory=list, init=False, repr=False)

    @classmethod
    def empty(cls) -> MetadataImage:
        return cls()

    # --- lookups --------------------------------------------------------------------

    def topic(self, topic_id: Uuid) -> TopicImage | None:
        return self.topics.get(topic_id)

    def topic_by_name(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids_by_name.get(name)
        return None if topic_id is None else self.topics[topic_id]

    def unfenced_broker_ids(self) -> tuple[int, ...]:
        if not self._unfenced:  # remembered: a walk of every shard of `brokers` otherwise
            self._unfenced.append(tuple(sorted(
                b.broker_id for b in self.brokers.values() if not b.fenced)))
        return self._unfenced[0]

    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics.values())

    # --- comparison -----------------------------------------------------------------

    def content_hash(self) -> str:
        """sha256 (hex) over a canonical encoding of everything replay determines: topics
        (with partitions), brokers, ACLs, finalized features, broker configs, the metadata
        topic ID, every
        ID ever used, the last applied offset and the anomalies. Sorted by key, so
        insertion order does not matter; msgpack of ints, strings and bytes, so it is
        stable across processes.
        Each topic enters as its own digest (`TopicImage.digest`, remembered), so the
        hash of the next image costs a sort and a pass over the topics, not a new
        encoding of every partition (format 2; format 1 hashed the topics' msgpack)."""
        if self._hash:
            return self._hash[0]
        digest = hashlib.sha256()
        digest.update(pack([
            "kraft-py metadata image", _HASH_FORMAT_VERSION, self.last_applied_offset,
            None if self.metadata_topic_id is None else self.metadata_topic_id.to_bytes(),
            self.anomaly_count,
            [[a.offset, a.record_type, a.reason] for a in self.anomalies],
        ]))
        topics = sorted(self.topics.values(), key=_BY_TOPIC_ID)  # each ID is one topic's
        packed: dict[int, bytes] = {}  # the partition images' msgpack, by id (see digest)
        digest.update(b"".join([topic.digest(packed) for topic in topics]))
        digest.update(pack([self.brokers[b].canonical() for b in sorted(self.brokers)]))
        digest.update(pack([u.value.to_bytes(16, "big")
                            for u in sorted(self.used_topic_ids, key=_UUID_ORDER)]))
        if len(self.scram_credentials):  # only when any: images without hash as before
            digest.update(pack(["scram", [self.scram_credentials[k].canonical()
                                          for k in sorted(self.scram_credentials)]]))
        if len(self.acls):  # only when there are any: images without ACLs hash as before
            digest.update(pack(["acls", self.acls.canonical()]))
        if self.finalized_features:  # likewise: logs without FeatureLevel hash as before
            digest.update(pack(["features", self.finalized_features]))
        if self.broker_configs:  # likewise: logs without broker configs hash as before
            digest.update(pack(["broker configs", self.broker_configs]))
        result = digest.hexdigest()
        self._hash.append(result)
        return result

    def __repr__(self) -> str:
        return (f"MetadataImage(offset={self.last_applied_offset}, topics={len(self.topics)}, "
                f"brokers={len(self.brokers)}, anomalies={self.anomaly_count})")

