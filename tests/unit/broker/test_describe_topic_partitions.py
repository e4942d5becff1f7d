"""broker.kafka.admin.topic_partitions_api: DescribeTopicPartitions (KIP-966) from the
image, paginated as Kafka's handler: following `next_cursor` from any limit yields every
partition once, in order; the cursor's rules, unknown and unauthorized topics."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.static.primitive import i32

from broker.kafka.admin.topic_partitions_api import MAX_PARTITIONS, describe_topic_partitions
from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, response_class
from raft.common.uuid import Uuid


def image_of(counts: dict[str, int]) -> MetadataImage:
    entries: list[rec.Record] = [
        rec.RegisterBroker(broker_id=1, incarnation_id=Uuid(101), broker_epoch=0,
                           endpoints=("PLAINTEXT://127.0.0.1:9001",)),
        rec.UnfenceBroker(broker_id=1, broker_epoch=0)]
    for n, (name, count) in enumerate(sorted(counts.items()), start=1):
        entries.append(rec.Topic(name=name, topic_id=Uuid(n << 64 | 1)))
        entries += [rec.Partition(topic_id=Uuid(n << 64 | 1), partition=p, replicas=(1,),
                                  isr=(1,), leader=1) for p in range(count)]
    return replay(enumerate(entries))


def ask(image: MetadataImage, names: list[str], limit: int, cursor: Any = None,
        described: Any = lambda name: True) -> Any:
    request = DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=n) for n in names), response_partition_limit=i32(limit),
        cursor=cursor)
    answer = describe_topic_partitions(image, request, described=described,
                                       operations=lambda name: 8)
    build(response_class(75, 0), answer)  # a valid v0 body
    return answer


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 7), min_size=1),
       st.integers(1, 9), st.booleans())
def test_following_the_cursor_yields_every_partition_once_in_order(
        counts: dict[str, int], limit: int, named: bool) -> None:
    image = image_of(counts)
    names = sorted(counts) if named else []
    seen: list[tuple[str, int]] = []
    cursor = None
    for _ in range(sum(counts.values()) + len(counts) + 1):  # bounded: one page at least each
        answer = ask(image, names, limit, cursor)
        page = [(t["name"], p["partition_index"]) for t in answer["topics"]
                for p in t["partitions"]]
        assert len(page) <= limit
        assert all(t["error_code"] == 0 for t in answer["topics"])
        seen += page
        if answer["next_cursor"] is None:
            break
        cursor = Cursor(topic_name=answer["next_cursor"]["topic_name"],
                        partition_index=i32(answer["next_cursor"]["partition_index"]))
    assert seen == [(name, p) for name in sorted(counts) for p in range(counts[name])]


def test_the_limit_is_at_least_one_and_at_most_kafkas_default() -> None:
    image = image_of({"big": MAX_PARTITIONS + 5})
    assert len(ask(image, [], 0)["topics"][0]["partitions"]) == 1
    answer = ask(image, [], 1 << 30)
    assert len(answer["topics"][0]["partitions"]) == MAX_PARTITIONS
    assert answer["next_cursor"] == {"topic_name": "big", "partition_index": MAX_PARTITIONS}


def test_a_cursor_outside_the_topics_asked_or_negative_is_an_invalid_request() -> None:
    image = image_of({"a": 1, "b": 1})
    for cursor in (Cursor(topic_name="zzz", partition_index=i32(0)),
                   Cursor(topic_name="a", partition_index=i32(-1))):
        answer = ask(image, ["a"], 10, cursor)
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [
            ("a", ErrorCode.INVALID_REQUEST)]


def test_unknown_and_undescribable_topics_named_are_answered_and_left_out_of_all_topics(
) -> None:
    image = image_of({"a": 2, "secret": 1})
    hidden = lambda name: name != "secret"  # noqa: E731
    named = ask(image, ["a", "nope", "secret"], 10, described=hidden)
    assert [(t["name"], t["error_code"]) for t in named["topics"]] == [
        ("a", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    assert named["topics"][2]["topic_id"].int == 0
    assert named["topics"][0]["topic_authorized_operations"] == 8
    every = ask(image, [], 10, described=hidden)
    assert [t["name"] for t in every["topics"]] == ["a"]
