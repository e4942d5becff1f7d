"""ListPartitionReassignments' answer from a broker's image (broker/kafka/admin/
reassign_api.py): only partitions with a reassignment ongoing, of the topics and
partitions named (null: every topic), unknown names left out as Kafka's controller does."""

from __future__ import annotations

from broker.kafka.admin.reassign_api import list_reassignments
from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.uuid import Uuid

A, B = Uuid(value=1 << 100), Uuid(value=2 << 100)  # not a reserved ID


def _image() -> MetadataImage:
    records: list[rec.Record] = [rec.Topic(name="a", topic_id=A), rec.Topic(name="b", topic_id=B)]
    for topic_id in (A, B):
        records += [rec.Partition(topic_id=topic_id, partition=i, replicas=(1, 2), isr=(1, 2),
                                  leader=1) for i in range(2)]
    records.append(rec.PartitionChange(topic_id=A, partition=1, replicas=(3, 2, 1),
                                       adding_replicas=(3,), removing_replicas=(1,)))
    return replay(enumerate(records))


def test_only_ongoing_reassignments_of_the_named_partitions_are_listed() -> None:
    ongoing = [{"name": "a", "partitions": [{"partition_index": 1, "replicas": [3, 2, 1],
                                             "adding_replicas": [3],
                                             "removing_replicas": [1]}]}]
    image = _image()
    assert list_reassignments(image, None) == ongoing
    assert list_reassignments(image, {"a": frozenset({1}), "nope": frozenset({0})}) == ongoing
    assert list_reassignments(image, {"a": frozenset({0, 7}), "b": frozenset({1})}) == []
