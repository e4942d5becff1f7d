"""broker.kafka.ordered.rules (pure): the count check, the marked-partition refusal, the
PartitionLeaderEpochs answer; and broker.kafka.groups.group_positions' exchange."""

from __future__ import annotations

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode

from broker.kafka.groups.group_positions import GroupPositions, PositionEntry
from broker.kafka.ordered.rules import (
    MarkedLedPartitions,
    count_mismatch,
    leader_epochs_topic,
    marked_led_partitions,
    produce_refusal,
)
from metadata import records as rec
from metadata.delta import MetadataDelta, replay
from metadata.image import MetadataImage, TopicImage
from metadata.persistent import FrozenMap
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, encode_response
from raft.common.kafka.framing import SIZE
from raft.common.kafka.ordered_schemas import PRODUCE
from raft.common.kafka.wire_client import decode_response
from raft.common.uuid import Uuid

TOPIC = Uuid(0x5151 << 64)
MISSING = Uuid(0x7777 << 64)


def shrunk_image(*, ordered: bool = True) -> MetadataImage:
    """Topic A created with 2 partitions, grown to 3, then shrunk back to 2: partition
    2 is marked (its before-deletion map holds 0 and 1 at their epochs then)."""
    entries: list[rec.Record] = [rec.Topic(name="A", topic_id=TOPIC,
                                           initial_partition_count=2)]
    if ordered:  # asked for: without the key a topic is not ordered
        entries.append(rec.TopicConfig(topic_id=TOPIC, key="enable.ordered.delivery",
                                       value="true"))
    entries += [rec.Partition(topic_id=TOPIC, partition=p, replicas=(1,), isr=(1,), leader=1,
                              leader_epoch=3) for p in range(2)]
    entries.append(rec.Partition(topic_id=TOPIC, partition=2, replicas=(1,), isr=(1,),
                                 leader=1, leader_epoch=4,
                                 leader_epoch_after_creation=((0, 2), (1, 2))))
    entries.append(rec.PartitionCount(topic_id=TOPIC, undeleted_partition_count=2))
    entries.append(rec.PartitionChange(topic_id=TOPIC, partition=2,
                                       leader_epoch_before_deletion=((0, 3), (1, 3))))
    return replay(enumerate(entries))


def test_count_checked_only_when_sent_and_ordered() -> None:
    """A stale or ahead count is a mismatch; no count (Kafka's clients) or a topic
    without ordered delivery is never one."""
    topic = shrunk_image().topic(TOPIC)
    assert count_mismatch(topic, 3)
    assert count_mismatch(topic, 1)
    assert not count_mismatch(topic, 2)
    assert not count_mismatch(topic, None)
    assert not count_mismatch(None, 3)
    assert not count_mismatch(shrunk_image(ordered=False).topic(TOPIC), 3)


def test_marked_partition_refused_and_others_taken() -> None:
    topic = shrunk_image().topic(TOPIC)
    reason = produce_refusal(topic, 2)
    assert reason is not None
    assert "marked for deletion" in reason
    assert produce_refusal(topic, 0) is None
    assert produce_refusal(topic, 1) is None


def test_marked_led_partitions_only_those_this_broker_leads() -> None:
    image = shrunk_image()
    assert [(t.topic_id, p.partition) for t, p in marked_led_partitions(image, 1)] == \
        [(TOPIC, 2)]
    assert marked_led_partitions(image, 2) == []


def test_marked_led_partitions_walks_only_the_topic_shards_an_image_changed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The heartbeat's memo answers as the walk of every topic does, but looks at a
    topic again only when a record wrote to its shard of the topic map."""
    looked: list[Uuid] = []
    count = TopicImage.undeleted_count
    monkeypatch.setattr(TopicImage, "undeleted_count", property(
        lambda topic: looked.append(topic.topic_id) or count.__get__(topic)))
    image = shrunk_image()
    delta = MetadataDelta(image)
    delta.apply(rec.Topic(name="B", topic_id=MISSING), image.last_applied_offset + 1)
    grown = delta.build()
    assert hash(TOPIC) % 256 != hash(MISSING) % 256  # in two shards
    marked = MarkedLedPartitions(1)
    assert [(t.topic_id, p.partition) for t, p in marked(image)] == [(TOPIC, 2)]
    assert looked == [TOPIC]
    looked.clear()
    assert [(t.topic_id, p.partition) for t, p in marked(grown)] == [(TOPIC, 2)]
    assert looked == [MISSING]  # A's shard is shared with the previous image
    looked.clear()
    assert marked(grown) == marked_led_partitions(grown, 1)
    assert looked == [TOPIC, MISSING]  # the one-off walk of every topic, not the memo's


def test_marked_led_partitions_answers_an_image_of_the_same_topic_map_without_a_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle cluster's next image (here a broker registered: no topic touched) shares
    the topic map: the memo answers without looking at a single shard."""
    image = shrunk_image()
    marked = MarkedLedPartitions(1)
    first = marked(image)
    delta = MetadataDelta(image)
    delta.apply(rec.RegisterBroker(broker_id=7, incarnation_id=MISSING, broker_epoch=9),
                image.last_applied_offset + 1)
    registered = delta.build()
    assert registered is not image
    assert registered.topics is image.topics

    def no_walk(_: object) -> None:
        raise AssertionError("the topic map's shards were walked")
    monkeypatch.setattr(FrozenMap, "shards", no_walk)
    assert marked(registered) == first == [(image.topics[TOPIC], image.topics[TOPIC]
                                            .partitions[2])]


def test_leader_epochs_answer_counts_and_maps_when_partitions_asked() -> None:
    """Counts of the topic; per partition its epoch and both maps; an unknown partition
    is refused alone."""
    answer = leader_epochs_topic(shrunk_image(), TOPIC, (2, 0, 9))
    assert (answer["error_code"], answer["name"], answer["initial_partition_count"],
            answer["undeleted_partition_count"], answer["ordered_delivery"]) == \
        (0, "A", 2, 2, True)
    marked, first, unknown = answer["partitions"]
    assert marked["after_creation"] == [{"partition": 0, "leader_epoch": 2},
                                        {"partition": 1, "leader_epoch": 2}]
    assert marked["before_deletion"] == [{"partition": 0, "leader_epoch": 3},
                                         {"partition": 1, "leader_epoch": 3}]
    assert (first["partition"], first["leader_epoch"], first["after_creation"],
            first["before_deletion"]) == (0, 3, [], [])
    assert unknown == {"partition": 9,
                       "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}


def test_leader_epochs_answer_all_partitions_when_none_asked_and_unknown_topic() -> None:
    image = shrunk_image()
    assert [p["partition"] for p in leader_epochs_topic(image, TOPIC, ())["partitions"]] == \
        [0, 1, 2]
    assert leader_epochs_topic(image, MISSING, (0,))["error_code"] == \
        int(ErrorCode.UNKNOWN_TOPIC_ID)
    assert leader_epochs_topic(image, None, ())["error_code"] == \
        int(ErrorCode.UNKNOWN_TOPIC_ID)


def test_invalid_partition_metadata_builds_as_error_code() -> None:
    """The broker builds and writes 253 as one of our error codes; kio's own enum, which
    lacks it, is left as kio made it."""
    response = build(load_response_schema(PRODUCE, 9), {"responses": [
        {"name": "t", "partition_responses": [
            {"index": 0, "error_code": ErrorCode.INVALID_PARTITION_METADATA}]}]})
    code = response.responses[0].partition_responses[0].error_code
    assert code is ErrorCode.INVALID_PARTITION_METADATA
    assert int(code) == 253
    assert 253 not in KioErrorCode._value2member_map_
    frame = encode_response(7, response)
    _, decoded = decode_response(frame[SIZE.size:], PRODUCE, 9, tolerant=True)
    assert int(decoded.responses[0].partition_responses[0].error_code) == 253


# --- positions ----------------------------------------------------------------------

P0, P1, P2 = ("t", 0), ("t", 1), ("t", 2)


def test_asker_gets_reported_position_and_owner_is_asked_to_report() -> None:
    """m2 waits on P0: it gets -1 until P0's owner (m1, told by its own answer that
    someone waits on P0) reports; then the position."""
    state = GroupPositions()
    assert state.exchange(generation=5, member_id="m2", reports=[], asks=[P0]) == [
        PositionEntry(P0, False, -1), PositionEntry(P0, True)]
    assert state.exchange(generation=5, member_id="m1", reports=[], asks=[]) == [
        PositionEntry(P0, True)]
    state.exchange(generation=5, member_id="m1", reports=[(P0, 40)], asks=[])
    assert state.exchange(generation=5, member_id="m2", reports=[], asks=[P0])[0] == \
        PositionEntry(P0, False, 40)


def test_position_keeps_largest_report_within_generation() -> None:
    state = GroupPositions()
    state.exchange(generation=1, member_id="m1", reports=[(P1, 50), (P1, 30), (P2, -1)],
                   asks=[])
    assert state.positions == {P1: 50}


def test_new_generation_forgets_positions_and_interest() -> None:
    """A new generation may have moved a partition: only its new owner's report counts."""
    state = GroupPositions()
    state.exchange(generation=1, member_id="m1", reports=[(P1, 50)], asks=[P2])
    assert state.exchange(generation=2, member_id="m1", reports=[], asks=[P1]) == [
        PositionEntry(P1, False, -1), PositionEntry(P1, True)]
    assert state.interested == {P1: {"m1"}}
