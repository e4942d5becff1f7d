"""A topic as the ordered client sees it: leaders and broker addresses (Metadata v12),
and the partition counts and resize leader-epoch maps (PartitionLeaderEpochs)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from broker.kafka.ordered.partitioner import partition_for

NO_ERROR = 0


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    error_code: int = NO_ERROR  # the topic's, from Metadata or PartitionLeaderEpochs
    initial: int = 0
    undeleted: int = 0
    ordered: bool = True
    compacted: bool = False  # cleanup.policy has `compact`
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> node id
    leader_epochs: dict[int, int] = field(default_factory=dict)
    brokers: dict[int, str] = field(default_factory=dict)  # node id -> HOST:PORT
    after_creation: dict[int, dict[int, int]] = field(default_factory=dict)
    before_deletion: dict[int, dict[int, int]] = field(default_factory=dict)

    @property
    def partitions(self) -> list[int]:
        """Every partition that exists, marked ones included."""
        return sorted(self.leaders)

    @property
    def marked(self) -> set[int]:
        return {p for p, epochs in self.before_deletion.items() if epochs}

    def leader_address(self, partition: int) -> str | None:
        return self.brokers.get(self.leaders.get(partition, -1))

    def partition_for(self, key: bytes) -> int:
        return partition_for(key, self.initial, self.undeleted)


def _epoch_map(entries: Any) -> dict[int, int]:
    return {int(e.partition): int(e.leader_epoch) for e in entries}


def topic_metadata(name: str, metadata_topic: Any, brokers: dict[int, str],
                   epochs_response: Any | None) -> TopicMetadata:
    """From a Metadata v12 topic entry and a PartitionLeaderEpochs response (None when
    the topic had an error in Metadata)."""
    error = int(metadata_topic.error_code)
    leaders = {int(p.partition_index): int(p.leader_id) for p in metadata_topic.partitions}
    leader_epochs = {int(p.partition_index): int(p.leader_epoch)
                     for p in metadata_topic.partitions}
    base = {"name": name, "topic_id": metadata_topic.topic_id, "leaders": leaders,
            "leader_epochs": leader_epochs, "brokers": brokers}
    if error != NO_ERROR or epochs_response is None:
        return TopicMetadata(error_code=error or -1, **base)
    (topic,) = epochs_response.topics
    if int(topic.error_code) != NO_ERROR:
        return TopicMetadata(error_code=int(topic.error_code), **base)
    # the leader epochs of the image the epoch maps come from: the gates' queries are
    # fenced by them (tools/client/offsets.py), the Metadata answer may be older
    base["leader_epochs"] = {**leader_epochs, **{
        int(p.partition): int(p.leader_epoch) for p in topic.partitions
        if int(p.error_code) == NO_ERROR}}
    return TopicMetadata(
        initial=int(topic.initial_partition_count),
        undeleted=int(topic.undeleted_partition_count), ordered=bool(topic.ordered_delivery),
        compacted=bool(topic.compacted),
        after_creation={int(p.partition): _epoch_map(p.after_creation)
                        for p in topic.partitions if p.after_creation},
        before_deletion={int(p.partition): _epoch_map(p.before_deletion)
                         for p in topic.partitions if p.before_deletion},
        **base)
