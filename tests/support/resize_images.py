"""Metadata images of an ordered topic before and after a resize, built from the records
the controller writes for it (`metadata.controller._grow` / `_shrink`), and a broker
serving them in process: the real dispatcher, handlers and partition logs over a log
directory, with an image the test moves on.

Topic A is created with 2 partitions (ordered delivery set explicitly), every replica
on `BROKER`, leader epoch 0."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from broker import partition_dir
from broker.kafka.handler_context import HandlerContext
from broker.kafka.listener import Dispatcher
from broker.kafka.replication.replica import ReplicaManager
from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage
from metadata.topic_configs import ORDERED_DELIVERY
from raft.common.uuid import Uuid
from tests.support.kafka_support import BROKER, TOPIC_ID

NAME = "A"


def created(replicas: Sequence[int] = (BROKER,), leader: int = BROKER) -> list[rec.Record]:
    """Topic A with 2 partitions and `enable.ordered.delivery=true`."""
    brokers = sorted(set(replicas) | {leader})
    entries: list[rec.Record] = [
        rec.RegisterBroker(broker_id=b, incarnation_id=Uuid(b + 100), broker_epoch=b,
                           endpoints=(f"PLAINTEXT://127.0.0.1:{9000 + b}",))
        for b in brokers]
    entries += [rec.UnfenceBroker(broker_id=b, broker_epoch=b) for b in brokers]
    entries += [rec.Topic(name=NAME, topic_id=TOPIC_ID, initial_partition_count=2),
                rec.TopicConfig(topic_id=TOPIC_ID, key=ORDERED_DELIVERY, value="true")]
    entries += [rec.Partition(topic_id=TOPIC_ID, partition=p, replicas=tuple(replicas),
                              isr=tuple(replicas), leader=leader) for p in range(2)]
    return entries


def grown(before: MetadataImage, count: int) -> list[rec.Record]:
    """The growth batch of `before`'s topic A to `count` partitions: the count, every
    existing partition's epoch bumped, the new partitions with their after-creation map."""
    topic = before.topic(TOPIC_ID)
    assert topic is not None
    after_creation = tuple((p.partition, p.leader_epoch) for p in topic.partitions)
    first = topic.partitions[0]
    return [rec.PartitionCount(topic_id=TOPIC_ID, undeleted_partition_count=count),
            *(rec.PartitionChange(topic_id=TOPIC_ID, partition=p.partition,
                                  bump_leader_epoch=True) for p in topic.partitions),
            *(rec.Partition(topic_id=TOPIC_ID, partition=index, replicas=first.replicas,
                            isr=first.replicas, leader=first.leader,
                            leader_epoch_after_creation=after_creation)
              for index in range(len(topic.partitions), count))]


def shrunk(before: MetadataImage, count: int) -> list[rec.Record]:
    """The shrink batch of `before`'s topic A to `count` partitions: the count, the
    partitions above it marked with the staying ones' epochs, the staying ones bumped."""
    topic = before.topic(TOPIC_ID)
    assert topic is not None
    before_deletion = tuple((p.partition, p.leader_epoch) for p in topic.partitions[:count])
    return [rec.PartitionCount(topic_id=TOPIC_ID, undeleted_partition_count=count),
            *(rec.PartitionChange(topic_id=TOPIC_ID, partition=p.partition,
                                  leader_epoch_before_deletion=before_deletion)
              for p in topic.partitions[count:]),
            *(rec.PartitionChange(topic_id=TOPIC_ID, partition=p.partition,
                                  bump_leader_epoch=True) for p in topic.partitions[:count])]


def image_of(*batches: Sequence[rec.Record]) -> MetadataImage:
    """The image of these batches, applied in order from an empty log."""
    return replay(enumerate(r for batch in batches for r in batch))


class MovingImage:
    """The broker's image, which the test moves on as a metadata commit would: at once
    (`current`), or to `next_image` right after the next `reads_left` reads."""

    def __init__(self, image: MetadataImage) -> None:
        self.current = image
        self.next_image: MetadataImage | None = None
        self.reads_left = 0

    def move_after(self, reads: int, image: MetadataImage) -> None:
        self.next_image, self.reads_left = image, reads

    def __call__(self) -> MetadataImage:
        image = self.current
        if self.next_image is not None:
            self.reads_left -= 1
            if self.reads_left == 0:
                self.current, self.next_image = self.next_image, None
        return image


def broker(log_dir: Path, image: MovingImage, partitions: Sequence[int] = (0,),
           broker_id: int = BROKER) -> Dispatcher:
    """The Kafka request handlers of broker `broker_id` over `log_dir`, which holds the
    directories of topic A's `partitions`."""
    for p in partitions:
        (log_dir / f"{NAME}-{p}").mkdir(exist_ok=True)
        partition_dir.write_partition_metadata(log_dir / f"{NAME}-{p}", TOPIC_ID)
    replicas = ReplicaManager(log_dir=log_dir, broker_id=broker_id, image=image)
    return Dispatcher(HandlerContext(broker_id=broker_id, cluster_id="test-cluster",
                                     image=image, replicas=replicas, controller=None))

