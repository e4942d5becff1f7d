"""Which partitions a broker hosts, derived from the metadata image (pure).

In place of LeaderAndIsr (KIP-516, KIP-631 style): the broker reads its assignment from
the replicated metadata log instead of having the controller push it.
"""

from __future__ import annotations

from operator import attrgetter

from broker.reconcile import Assignment, HostedPartition
from metadata.image import MetadataImage
from raft.common.slots import positional_constructor

# HostedPartition(topic, topic_id, partition, replicas, leader, leader_epoch), without the
# dataclass's __init__ (raft.common.slots): a broker may host most of a million partitions
_new_hosted = positional_constructor(HostedPartition)
_BY_NAME = attrgetter("topic", "partition")


def hosted_partitions(image: MetadataImage, broker_id: int) -> tuple[HostedPartition, ...]:
    """Every partition whose replica set contains `broker_id`, sorted by (topic, partition),
    with its current leader and leader epoch."""
    hosted = [
        _new_hosted(topic.name, topic.topic_id, p.partition, p.replicas, p.leader,
                    p.leader_epoch)
        for topic in image.topics.values()
        for p in topic.partitions
        if broker_id in p.replicas
    ]
    hosted.sort(key=_BY_NAME)
    return tuple(hosted)


def led_partitions(image: MetadataImage, broker_id: int) -> tuple[HostedPartition, ...]:
    """The hosted partitions this broker currently leads."""
    return tuple(h for h in hosted_partitions(image, broker_id) if h.leader == broker_id)


def assignment_for(image: MetadataImage, broker_id: int) -> Assignment:
    """What `broker.reconcile.reconcile` needs from the image."""
    return Assignment(topic_ids=dict(image.topic_ids_by_name),
                      hosted=hosted_partitions(image, broker_id),
                      partition_counts={topic_id: len(topic.partitions)
                                        for topic_id, topic in image.topics.items()})
