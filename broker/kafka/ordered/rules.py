"""Ordered delivery across partition-count changes, the broker's rules (pure).

A topic with ordered delivery is partitioned by linear hashing over its *undeleted*
partition count (the partitions not marked for deletion). A client that partitioned by
another count must refresh its metadata before its records or fetches count, so:

- a Produce or consumer Fetch whose topic entry names a count (the tagged field of
  `raft.common.kafka.ordered_schemas`) different from the image's gets
  INVALID_PARTITION_METADATA on every partition of that entry; a topic without ordered
  delivery, or an entry without the tag (Kafka's clients), is not checked;
- a partition marked for deletion takes no new records from anyone: its log can then
  only shrink, so once empty it stays empty and the controller may remove it.

The image's fields for this come from `metadata.image`; they are read with defaults so
that an image without them (a topic never resized) means "no marks, count = partitions".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.kafka.group_shapes import EpochEntry, LeaderEpochsPartition, LeaderEpochsTopic
from metadata.image import MetadataImage, PartitionImage, TopicImage
from metadata.topic_configs import cleanup_policies
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

NO_VALUE = -1


def undeleted_count(topic: TopicImage) -> int:
    count = getattr(topic, "undeleted_count", None)
    return len(topic.partitions) if count is None else int(count)


def has_ordered_delivery(topic: TopicImage) -> bool:
    return bool(getattr(topic, "ordered_delivery", False))


def is_marked_for_deletion(topic: TopicImage, index: int) -> bool:
    if 0 <= index < len(topic.partitions) and \
            getattr(topic.partitions[index], "marked_for_deletion", False):
        return True
    return index in tuple(getattr(topic, "marked_partitions", ()) or ())


def count_mismatch(topic: TopicImage | None, client_count: int | None) -> bool:
    """The client's undeleted partition count (None: it sent none) is stale or ahead."""
    if topic is None or client_count is None or not has_ordered_delivery(topic):
        return False
    return int(client_count) != undeleted_count(topic)


def produce_refusal(topic: TopicImage | None, index: int, client_count: int | None = None
                    ) -> str | None:
    """Why partition `index` takes no records now from a producer that partitioned by
    `client_count` (None: it sent none), by one image (None: it may)."""
    if topic is not None and client_count is not None and count_mismatch(topic, client_count):
        return (f"undeleted partition count {client_count} differs from the broker's "
                f"{undeleted_count(topic)} for {topic.name}: refresh metadata")
    if topic is not None and is_marked_for_deletion(topic, index):
        return f"partition {index} of {topic.name} is marked for deletion"
    return None


# --- PartitionLeaderEpochs ----------------------------------------------------------


def _epoch_entries(pairs: Any) -> list[EpochEntry]:
    """(partition, leader epoch) pairs -> wire entries; None or an old-style single
    epoch (no map) -> none."""
    if not pairs or isinstance(pairs, int):
        return []
    return [{"partition": int(p), "leader_epoch": int(e)} for p, e in pairs]


def _partition_entry(partition: PartitionImage) -> LeaderEpochsPartition:
    return {"partition": partition.partition, "error_code": 0,
            "leader_epoch": partition.leader_epoch,
            "after_creation": _epoch_entries(partition.leader_epoch_after_creation),
            "before_deletion": _epoch_entries(partition.leader_epoch_before_deletion)}


def leader_epochs_topic(image: MetadataImage, topic_id: Uuid | None,
                        asked: tuple[int, ...]) -> LeaderEpochsTopic:
    """One topic of a PartitionLeaderEpochs response (without its ID): its counts and,
    for each partition asked (all when `asked` is empty), its leader epoch and the two
    epoch maps."""
    topic = None if topic_id is None else image.topic(topic_id)
    if topic is None:
        return {"error_code": int(ErrorCode.UNKNOWN_TOPIC_ID), "partitions": []}
    indexes = asked if asked else tuple(range(len(topic.partitions)))
    partitions: list[LeaderEpochsPartition] = [
        _partition_entry(topic.partitions[i]) if 0 <= i < len(topic.partitions) else
        {"partition": i, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
        for i in indexes]
    initial = topic.initial_partition_count
    return {"error_code": 0, "name": topic.name,
            # a topic never resized: the partitions it has are the ones it was created with
            "initial_partition_count": len(topic.partitions) if initial is None
            else initial,
            "undeleted_partition_count": undeleted_count(topic),
            "ordered_delivery": has_ordered_delivery(topic), "partitions": partitions,
            "compacted": "compact" in cleanup_policies(topic.configs)}


def marked_led_partitions(image: MetadataImage, broker_id: int
                          ) -> list[tuple[TopicImage, PartitionImage]]:
    """The partitions marked for deletion that `broker_id` leads in `image`."""
    return MarkedLedPartitions(broker_id)(image)


class MarkedLedPartitions:
    """`marked_led_partitions(image, broker_id)` for image after image (each broker
    heartbeat asks). Only a topic whose undeleted count is below its partitions has
    marks (a shrink lowers the count as it marks; growth waits until they are removed);
    those topics are remembered per shard of `image.topics`, and a shard the next image
    shares (`metadata.persistent.FrozenMap.shards`: no record wrote to it) is not walked
    again. An image whose topic map is the last one asked about (no record touched a
    topic: an idle cluster) gets the last answer without a look at any shard: at a
    million partitions a look at each of 8,192 shards was 1.1 ms a heartbeat, about a
    tenth of an idle broker's CPU."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        # id(shard) -> (shard, its topics with marks): held so that its id stays its own
        self._marked: dict[int, tuple[Mapping[Uuid, TopicImage], list[TopicImage]]] = {}
        self._last: tuple[object, list[tuple[TopicImage, PartitionImage]]] = (None, [])

    def __call__(self, image: MetadataImage) -> list[tuple[TopicImage, PartitionImage]]:
        topics, found_before = self._last
        if image.topics is topics:
            return list(found_before)
        known, marked = self._marked, {}
        found: list[tuple[TopicImage, PartitionImage]] = []
        for shard in image.topics.shards():
            entry = known.get(id(shard))
            if entry is None or entry[0] is not shard:
                entry = (shard, [topic for topic in shard.values()
                                 if topic.undeleted_count < len(topic.partitions)])
            marked[id(shard)] = entry
            if entry[1]:  # rare: a shrink in progress (a heartbeat looks at every shard)
                found.extend((topic, partition) for topic in entry[1]
                             for index, partition in enumerate(topic.partitions)
                             if partition.leader == self.broker_id
                             and is_marked_for_deletion(topic, index))
        self._marked = marked
        self._last = (image.topics, found)
        return list(found)
