"""`kraft topics --describe` of a resized topic: the counts, and marked partitions."""

from __future__ import annotations

import json

from metadata.controller import describe_topic
from metadata.delta import replay
from metadata.records import Partition, PartitionChange, PartitionCount, Topic
from raft.common.uuid import Uuid
from tools.commands.topics import _topic_json, _topic_text

T = Uuid(5)


def described() -> object:
    image = replay(enumerate([
        Topic(name="t", topic_id=T, initial_partition_count=1),
        Partition(topic_id=T, partition=0, replicas=(1,), isr=(1,), leader=1),
        PartitionCount(topic_id=T, undeleted_partition_count=2),
        PartitionChange(topic_id=T, partition=0, bump_leader_epoch=True),
        Partition(topic_id=T, partition=1, replicas=(1,), isr=(1,), leader=1,
                  leader_epoch_after_creation=((0, 0),)),
        PartitionCount(topic_id=T, undeleted_partition_count=1),
        PartitionChange(topic_id=T, partition=1, leader_epoch_before_deletion=((0, 1),)),
        PartitionChange(topic_id=T, partition=0, bump_leader_epoch=True)]))
    topic = image.topic(T)
    assert topic is not None
    return describe_topic(topic)


def test_text_shows_the_counts_and_marks_the_marked_partition() -> None:
    lines = _topic_text(described()).splitlines()  # type: ignore[arg-type]
    assert lines[0].endswith("PartitionCount: 2\tReplicationFactor: 1\t"
                             "InitialPartitionCount: 1\tUndeletedPartitionCount: 1")
    assert not lines[1].endswith("MarkedForDeletion: true")
    assert lines[2].endswith("\tMarkedForDeletion: true")


def test_json_has_counts_and_epoch_maps_keyed_by_partition() -> None:
    data = json.loads(json.dumps(_topic_json(described())))  # type: ignore[arg-type]
    assert (data["initial_partition_count"], data["undeleted_partition_count"]) == (1, 1)
    first, second = data["partitions"]
    assert first["marked_for_deletion"] is False
    assert first["leader_epoch_after_creation"] is None
    assert second["marked_for_deletion"] is True
    assert second["leader_epoch_after_creation"] == {"0": 0}
    assert second["leader_epoch_before_deletion"] == {"0": 1}
