"""Which partitions a broker hosts, derived from the metadata image (pure).

In place of LeaderAndIsr (KIP-516, KIP-631 style): the broker reads its assignment from
the replicated metadata log instead of having the controller push it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from operator import attrgetter
from typing import TypeVar

from broker.reconcile import Assignment, HostedPartition
from metadata.image import MetadataImage, TopicImage
from raft.common.slots import positional_constructor
from raft.common.uuid import Uuid

# HostedPartition(topic, topic_id, partition, replicas, leader, leader_epoch), without the
# dataclass's __init__ (raft.common.slots): a broker may host most of a million partitions
_new_hosted = positional_constructor(HostedPartition)
_BY_NAME = attrgetter("topic", "partition")
T = TypeVar("T")


def hosted_partitions(image: MetadataImage, broker_id: int,
                      topic_ids: Iterable[Uuid] | None = None) -> tuple[HostedPartition, ...]:
    """Every partition whose replica set contains `broker_id` (of the topics `topic_ids`
    only, when given), sorted by (topic, partition), with its current leader and leader
    epoch."""
    topics = image.topics.values() if topic_ids is None else \
        [t for t in map(image.topics.get, topic_ids) if t is not None]
    hosted = [
        _new_hosted(topic.name, topic.topic_id, p.partition, p.replicas, p.leader,
                    p.leader_epoch)
        for topic in topics
        for p in topic.partitions
        if broker_id in p.replicas
    ]
    hosted.sort(key=_BY_NAME)
    return tuple(hosted)


def led_partitions(image: MetadataImage, broker_id: int) -> tuple[HostedPartition, ...]:
    """The hosted partitions this broker currently leads."""
    return tuple(h for h in hosted_partitions(image, broker_id) if h.leader == broker_id)


def assignment_for(image: MetadataImage, broker_id: int,
                   topic_ids: Iterable[Uuid] | None = None) -> Assignment:
    """What `broker.reconcile.reconcile` needs from the image: its maps read through,
    not copied; the hosted partitions of the topics `topic_ids` only, when given."""
    return Assignment(topic_ids=image.topic_ids_by_name,
                      hosted=hosted_partitions(image, broker_id, topic_ids),
                      partition_counts=_TopicField(image.topics, _partition_count),
                      names_by_id=_TopicField(image.topics, _name),
                      hosts=partial(is_hosted, image, broker_id))


def is_hosted(image: MetadataImage, broker_id: int, topic_id: Uuid, partition: int) -> bool:
    """The image has that partition of that topic and `broker_id` among its replicas."""
    topic = image.topics.get(topic_id)
    return topic is not None and partition < len(topic.partitions) and \
        broker_id in topic.partitions[partition].replicas


def changed_topics(before: MetadataImage, after: MetadataImage) -> tuple[set[str], set[Uuid]]:
    """The topic names and IDs that differ between two versions of an image (a topic
    created, deleted, renamed or changed in any way: a shard-wise diff, so it costs what
    changed), each with the names its IDs had or have and the IDs its names had or have.
    Reconciling only the directories and hosted partitions these name, against `after`,
    decides as a whole reconciliation would when the disk was in line with `before`
    (`broker.server`; property-tested): a directory's decision depends only on its own
    topic's name and ID. At such a fixpoint every directory holds its topic's ID under
    its current name, so the two diffs alone name it; the closure costs little and keeps
    the scope whole should a directory ever be out of step."""
    ids = after.topics.changed_keys(before.topics)
    names = after.topic_ids_by_name.changed_keys(before.topic_ids_by_name)
    for image in (before, after):
        names.update(t.name for t in map(image.topics.get, list(ids)) if t is not None)
    for image in (before, after):
        ids.update(i for i in map(image.topic_ids_by_name.get, names) if i is not None)
    return names, ids


def _partition_count(topic: TopicImage) -> int:
    return len(topic.partitions)


def _name(topic: TopicImage) -> str:
    return topic.name


class _TopicField(Mapping[Uuid, T]):
    """A read-through view: topic ID -> `field(topic)` of the image's topics."""

    __slots__ = ("_field", "_topics")

    def __init__(self, topics: Mapping[Uuid, TopicImage], field: Callable[[TopicImage], T]
                 ) -> None:
        self._topics = topics
        self._field = field

    def __getitem__(self, topic_id: Uuid) -> T:
        return self._field(self._topics[topic_id])

    def __contains__(self, topic_id: object) -> bool:
        return topic_id in self._topics

    def __iter__(self) -> Iterator[Uuid]:
        return iter(self._topics)

    def __len__(self) -> int:
        return len(self._topics)
