"""Which partitions a broker hosts, derived from the metadata image (pure).

In place of LeaderAndIsr (KIP-516, KIP-631 style): the broker reads its assignment from
the replicated metadata log instead of having the controller push it.
"""

from __future__ import annotations

from broker.reconcile import Assignment, HostedPartition
from metadata.image import MetadataImage


def hosted_partitions(image: MetadataImage, broker_id: int) -> tuple[HostedPartition, ...]:
    """Every partition whose replica set contains `broker_id`, sorted by (topic, partition),
    with its current leader and leader epoch."""
    hosted = [
        HostedPartition(topic=topic.name, topic_id=topic.topic_id, partition=p.partition,
                        replicas=p.replicas, leader=p.leader, leader_epoch=p.leader_epoch)
        for topic in image.topics.values()
        for p in topic.partitions
        if broker_id in p.replicas
    ]
    return tuple(sorted(hosted, key=lambda h: (h.topic, h.partition)))


def led_partitions(image: MetadataImage, broker_id: int) -> tuple[HostedPartition, ...]:
    """The hosted partitions this broker currently leads."""
    return tuple(h for h in hosted_partitions(image, broker_id) if h.leader == broker_id)


def assignment_for(image: MetadataImage, broker_id: int) -> Assignment:
    """What `broker.reconcile.reconcile` needs from the image."""
    return Assignment(topic_ids=dict(image.topic_ids_by_name),
                      hosted=hosted_partitions(image, broker_id))
