"""The ordered consumer's Fetch is fenced by the leader epochs of the metadata its gates
come from: a member holding an older layout with the same undeleted count (a topic grown
from 3 to 7 and shrunk back to 3) would otherwise be served by a leader that has moved
on and deliver without the newer layout's deletion gates (docs/kip-253.md: the
data-plane simulator's seed 45 with --metadata-freezes). Kafka's own topics keep -1."""

from __future__ import annotations

import uuid

from tools.client.consumer import OrderedConsumer, Owned
from tools.client.metadata import TopicMetadata


def fetch_epochs(ordered: bool) -> dict[int, int]:
    consumer = OrderedConsumer(object(), "t", "g")  # type: ignore[arg-type]
    consumer.metadata = TopicMetadata(name="t", topic_id=uuid.uuid4(), initial=2, undeleted=3,
                                      ordered=ordered, leaders={0: 1, 1: 2, 2: 3},
                                      leader_epochs={0: 4, 1: 5, 2: 7})
    consumer.owned = {0: Owned(position=10), 2: Owned(position=0)}
    request = consumer._fetch_request([0, 2])
    (topic,) = request.topics
    return {int(p.partition): int(p.current_leader_epoch) for p in topic.partitions}


def test_an_ordered_topics_fetch_carries_each_partitions_epoch_from_its_metadata() -> None:
    assert fetch_epochs(ordered=True) == {0: 4, 2: 7}


def test_a_kafka_topics_fetch_is_not_fenced() -> None:
    assert fetch_epochs(ordered=False) == {0: -1, 2: -1}
