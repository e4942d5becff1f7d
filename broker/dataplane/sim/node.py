"""A simulated broker's state: what survives a crash (its replicas' logs) and what does
not. A broker holds a replica of each partition its image gives it, one object per life
of the partition's index (a partition removed after a shrink and added again by a later
growth starts with a new, empty log, as the real broker stages the old directory away)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.dataplane.progress import LeaderProgress
from broker.dataplane.sim.log import SimLog
from metadata.image import MetadataImage, PartitionImage, TopicImage
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

TOPIC_ID = Uuid(0x5EED)  # the one simulated topic

Life = tuple[tuple[int, int], ...] | None  # a partition's after-creation map: which life
# a produce's answer: error, first offset, and the life of the partition that holds it
Reply = Callable[[ErrorCode, int, Life], None]


def life_of(partition: PartitionImage) -> Life:
    """Which life of its index `partition` is: its after-creation map, whose epochs only
    grow (None: created with the topic, never removed)."""
    return partition.leader_epoch_after_creation


@dataclass(slots=True)
class Pending:
    """An acks=all produce appended by a leader (or found stored: a retry), waiting for
    its verdict on the records from `first_offset` to `offset`."""

    reply: Reply
    leader_epoch: int
    first_offset: int
    offset: int
    deadline: int


@dataclass(slots=True, eq=False)
class Replica:
    """One life of one partition on one broker."""

    index: int
    life: Life
    log: SimLog = field(default_factory=SimLog)  # survives a crash (the page cache)
    progress: LeaderProgress | None = None  # lost at a crash, as the process's memory
    fetch_id: int = 0  # the fetch in flight (answers to older ones are dropped)
    fetch_sent: int = -(1 << 40)  # when it was sent
    pending: list[Pending] = field(default_factory=list)
    alter_sent: int = -(1 << 40)  # when the AlterPartition in flight was sent
    waiting_fetches: list[tuple[Any, ...]] = field(default_factory=list)  # (leader side)


@dataclass(slots=True)
class Broker:
    broker_id: int
    replicas: dict[int, Replica] = field(default_factory=dict)
    alive: bool = True
    incarnation: int = 0
    broker_epoch: int = -1  # -1: not registered (yet)
    image: MetadataImage = field(default_factory=MetadataImage.empty)
    slow_until: int = 0  # fault: its fetches answered late until then
    metadata_lag_until: int = 0  # fault: images reach it late until then
    # fault: it applies no image until then, serving by the one it holds, and keeps the
    # newest it received (lost with the process at a crash) to apply at once when it thaws
    metadata_frozen_until: int = 0
    withheld: MetadataImage | None = None
    topic_image: TopicImage | None = None  # the image's topic, looked up once

    def apply(self, image: MetadataImage) -> None:
        self.image, self.topic_image = image, image.topic(TOPIC_ID)

    def topic(self) -> TopicImage | None:
        return self.topic_image

    def partition(self, index: int) -> PartitionImage | None:
        topic = self.topic()
        return None if topic is None or index >= len(topic.partitions) \
            else topic.partitions[index]

    def replica(self, index: int, error: ErrorCode) -> tuple[ErrorCode, Replica | None]:
        """The replica a request for partition `index` reaches, after `check_partition`
        answered `error`; a replica of another life than the image's is none."""
        partition = self.partition(index)
        replica = self.replicas.get(index)
        if error != ErrorCode.NONE:
            return error, None
        if partition is None or replica is None or replica.life != life_of(partition) \
                or replica.progress is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        return ErrorCode.NONE, replica
