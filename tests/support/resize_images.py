"""An ordered topic resized by the real controller (`tests/support/controller_harness.py`),
its images after each step, and a broker serving them in process: the real dispatcher,
handlers and partition logs over a log directory, with an image the test moves on as a
metadata commit would.

Topic A is created with 2 partitions and `enable.ordered.delivery=true`, set explicitly,
replicated on every broker of the harness."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from broker import partition_dir
from broker.kafka.handler_context import HandlerContext
from broker.kafka.listener import Dispatcher
from broker.kafka.replication.replica import ReplicaManager
from metadata.admin import (
    CreatableTopic,
    CreatableTopicConfig,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
)
from metadata.image import MetadataImage, TopicImage
from metadata.topic_configs import ORDERED_DELIVERY
from tests.support.controller_harness import Harness

NAME = "A"


class ResizedTopic:
    """Topic A on `brokers` brokers (ids 1, 2, ...), resized step by step."""

    def __init__(self, brokers: int = 1) -> None:
        self.harness = Harness(brokers=brokers)
        self.harness.run(CreateTopicsRequest(topics=(CreatableTopic(
            name=NAME, num_partitions=2, replication_factor=brokers,
            configs=(CreatableTopicConfig(name=ORDERED_DELIVERY, value="true"),)),)))

    def resize(self, count: int) -> MetadataImage:
        """The image once the controller's resize to `count` partitions committed."""
        decision = self.harness.run(CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name=NAME, count=count),)))
        assert decision.response.results[0].error_code == 0  # type: ignore[union-attr]
        return self.image

    @property
    def image(self) -> MetadataImage:
        return self.harness.controller.committed

    @property
    def topic(self) -> TopicImage:
        found = self.image.topic_by_name(NAME)
        assert found is not None
        return found


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


def broker(log_dir: Path, image: MovingImage, broker_id: int,
           partitions: Iterable[int]) -> Dispatcher:
    """The Kafka request handlers of broker `broker_id` over `log_dir`, which holds the
    directories of topic A's `partitions`."""
    topic = image.current.topic_by_name(NAME)
    assert topic is not None
    for p in partitions:
        (log_dir / f"{NAME}-{p}").mkdir(parents=True, exist_ok=True)
        partition_dir.write_partition_metadata(log_dir / f"{NAME}-{p}", topic.topic_id)
    replicas = ReplicaManager(log_dir=log_dir, broker_id=broker_id, image=image)
    return Dispatcher(HandlerContext(broker_id=broker_id, cluster_id="test-cluster",
                                     image=image, replicas=replicas, controller=None))
