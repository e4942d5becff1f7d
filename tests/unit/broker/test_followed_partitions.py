"""broker.kafka.replication.follower.FollowedPartitions: image after image (each sharing the
topics no record changed), the plan `followed_partitions` gives for each."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.replication.follower import FollowedPartitions, followed_partitions
from metadata import records as rec
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from raft.common.uuid import Uuid
from tests.support.metadata_strategies import BROKERS, metadata_logs


@settings(max_examples=200)
@given(metadata_logs(), st.sampled_from(BROKERS), st.data())
def test_plan_is_followed_partitions_when_images_follow_each_other(
        entries: list[tuple[int, bytes]], broker_id: int, data: st.DataObject) -> None:
    planner = FollowedPartitions(broker_id)
    delta = MetadataDelta(MetadataImage.empty())
    assert planner(MetadataImage.empty()) == {}
    for offset, record in entries:
        delta.apply_bytes(record, offset)
        if data.draw(st.booleans()):
            image = delta.build()
            assert planner(image) == followed_partitions(image, broker_id)
    image = delta.build()
    assert planner(image) == followed_partitions(image, broker_id)
    assert planner(image) == followed_partitions(image, broker_id)  # nothing changed


def test_plan_drops_a_topic_when_it_is_removed() -> None:
    topic_id = Uuid.from_bits(1, 2)
    delta = MetadataDelta(MetadataImage.empty())
    for offset, record in enumerate([
            rec.Topic(name="a", topic_id=topic_id),
            rec.Partition(topic_id=topic_id, partition=0, replicas=(1, 2), isr=(1, 2),
                          leader=1)]):
        delta.apply(record, offset)
    planner = FollowedPartitions(2)
    assert planner(delta.build()) == {1: ((topic_id, 0, 0),)}
    delta.apply(rec.RemoveTopic(topic_id=topic_id), 2)
    assert planner(delta.build()) == {}
