"""A simulated broker's state: what survives a crash (its log) and what does not."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.dataplane.progress import LeaderProgress
from broker.dataplane.sim.log import SimLog
from broker.dataplane.sim.producer import ProducerBatch, SimProducer
from metadata.image import MetadataImage, PartitionImage
from raft.common.uuid import Uuid

TOPIC_ID = Uuid(0x5EED)  # the one simulated topic


@dataclass(slots=True)
class Pending:
    """An acks=all produce appended by a leader (or found stored: a retry), waiting for
    its verdict on the records from `first_offset` to `offset`."""

    producer: SimProducer
    batch: ProducerBatch
    attempt: int
    leader_epoch: int
    first_offset: int
    offset: int
    deadline: int


@dataclass(slots=True)
class Broker:
    broker_id: int
    log: SimLog = field(default_factory=SimLog)  # survives a crash (the page cache)
    alive: bool = True
    incarnation: int = 0
    broker_epoch: int = -1  # -1: not registered (yet)
    image: MetadataImage = field(default_factory=MetadataImage.empty)
    progress: LeaderProgress | None = None  # lost at a crash, as the process's memory
    fetch_id: int = 0  # the fetch in flight (answers to older ones are dropped)
    fetch_sent: int = -(1 << 40)  # when it was sent
    pending: list[Pending] = field(default_factory=list)
    alter_sent: int = -(1 << 40)  # when the AlterPartition in flight was sent
    slow_until: int = 0  # fault: its fetches answered late until then
    metadata_lag_until: int = 0  # fault: images reach it late until then

    def partition(self) -> PartitionImage | None:
        topic = self.image.topic(TOPIC_ID)
        return None if topic is None else topic.partitions[0]
