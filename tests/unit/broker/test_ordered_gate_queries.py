"""KIP-253 schedules at the leader a consumer's gates ask (ListOffsets for a deletion
gate, OffsetForLeaderEpoch for a creation gate), with the real handlers and logs
(`tests/support/resize_images.py`; docs/kip-253.md, "Schedules"). The gates' queries are
built and read by the ordered client's own functions (`tools.client.offsets`), from the
metadata it builds out of a broker's answers (`tools.client.metadata`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.index import load_request_schema

from broker.kafka.listener import Dispatcher
from broker.kafka.ordered.marked_end import MARKED_END_WAIT_S
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from raft.common.kafka.ordered_schemas import PartitionLeaderEpochsRequest
from tests.support.resize_images import NAME, MovingImage, ResizedTopic, broker
from tests.unit.broker.test_ordered_wire import produce, produce_errors, roundtrip
from tools.client.connection import ConnectionLost, metadata_request
from tools.client.metadata import TopicMetadata, topic_metadata
from tools.client.offsets import (
    epoch_end_request,
    epoch_ends,
    list_offsets_request,
    listed_offsets,
)

LIST_OFFSETS, FETCH = 2, 1
LATEST = -1


def latest(partition: int, current_leader_epoch: int = -1) -> Any:
    return build(load_request_schema(LIST_OFFSETS, 7), {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": NAME, "partitions": [
            {"partition_index": partition, "current_leader_epoch": current_leader_epoch,
             "timestamp": LATEST}]}]})


def follower_fetch(follower: int, partition: int, offset: int, last_fetched_epoch: int
                   ) -> Any:
    return build(load_request_schema(FETCH, 12), {
        "replica_id": follower, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic": NAME, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": last_fetched_epoch, "log_start_offset": 0,
            "partition_max_bytes": 1 << 20}]}]})


def follower_of(dispatcher: Dispatcher) -> int:
    """The other broker of the two the harness has."""
    return 3 - dispatcher.context.broker_id


def listed(response: Any) -> tuple[int, int]:
    (topic,) = response.topics
    (part,) = topic.partitions
    return int(part.error_code), int(part.offset)


async def marked_with_uncommitted_record(tmp_path: Path) -> Dispatcher:
    """Partition 3 of A (RF 2, grown 2 -> 4) holds records at 0 and 1, its follower has
    fetched only the first (high watermark 1), then the 4 -> 3 shrink marks it."""
    topic = ResizedTopic(brokers=2)
    images = MovingImage(topic.resize(4))
    leader = topic.topic.partitions[3].leader
    dispatcher = broker(tmp_path, images, leader, partitions=[3])
    assert produce_errors(await roundtrip(dispatcher, produce(4, partition=3))) == [0]
    await roundtrip(dispatcher, follower_fetch(follower_of(dispatcher), 3, 1, 0))
    assert produce_errors(await roundtrip(dispatcher, produce(4, partition=3))) == [0]
    images.current = topic.resize(3)
    return dispatcher


async def test_d_a_deletion_gate_waits_for_the_marked_partitions_uncommitted_record(
        tmp_path: Path) -> None:
    """Schedule d: the record at 1 of marked partition 3 waits for a slow in-sync
    follower. The deletion gate of partition 1 asks where 3 ends (ListOffsets LATEST):
    told 1 (the high watermark), it would open before the record at 1 is consumed, and
    the key's next record (now in 1) could go first. The leader answers the log end, 2,
    once that record is committed."""
    dispatcher = await marked_with_uncommitted_record(tmp_path)
    answers: dict[str, Any] = {}

    async def ask() -> None:
        answers["gate"] = listed(await roundtrip(dispatcher, latest(3)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        assert "gate" not in answers, \
            f"answered {answers['gate']} while the record at 1 is not committed"
        await roundtrip(dispatcher, follower_fetch(follower_of(dispatcher), 3, 2, 0))
    assert answers["gate"] == (0, 2)


async def test_d_the_wait_for_a_marked_partitions_end_is_bounded(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """A follower that never catches up (it leaves the ISR only later): the leader
    answers OFFSET_NOT_AVAILABLE after MARKED_END_WAIT_S, and the client asks again."""
    dispatcher = await marked_with_uncommitted_record(tmp_path)
    started = trio.current_time()
    assert listed(await roundtrip(dispatcher, latest(3)))[0] == ErrorCode.OFFSET_NOT_AVAILABLE
    assert trio.current_time() - started >= MARKED_END_WAIT_S


# --- schedule b: a leader that has not applied the resize -----------------------------


async def consumer_view(dispatcher: Dispatcher, image: MovingImage,
                        moved_to: MetadataImage | None = None) -> TopicMetadata:
    """The topic as the ordered client builds it from this broker's answers to Metadata
    and then PartitionLeaderEpochs (its image `moved_to` in between, if given)."""
    metadata = await roundtrip(dispatcher, metadata_request(NAME))
    if moved_to is not None:
        image.current = moved_to
    (found,) = metadata.topics
    epochs = await roundtrip(dispatcher, build(PartitionLeaderEpochsRequest, {
        "topics": [{"topic_id": found.topic_id, "partitions": []}]}))
    brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in metadata.brokers}
    return topic_metadata(NAME, found, brokers, epochs)


async def test_b_a_lagging_leader_answers_no_creation_gate_query(tmp_path: Path) -> None:
    """Schedule b, growth: the consumer knows 2 -> 4 (from a broker that applied it
    between its Metadata and PartitionLeaderEpochs answers: the epochs it fences with
    come from the latter) and asks partition 0's leader where epoch 0 ends, for
    partition 2's creation gate. That
    leader has not applied the growth: answering its log end, then taking a record from
    a producer still on count 2, would open the gate below that record. The query is
    fenced by the epoch the consumer knows (UNKNOWN_LEADER_EPOCH: refresh, ask again), a
    write with the count it has not applied is refused, and once it applies the growth
    it answers past every count-2 record."""
    topic = ResizedTopic()
    two = topic.image
    four = topic.resize(4)
    lagging_image = MovingImage(two)
    lagging = broker(tmp_path / "lagging", lagging_image, 1, partitions=[0])
    assert produce_errors(await roundtrip(lagging, produce(2))) == [0]
    current_image = MovingImage(two)  # the growth is applied between its two answers
    view = await consumer_view(broker(tmp_path / "current", current_image, 1, []),
                               current_image, moved_to=four)
    gate = epoch_end_request(view, {0: view.after_creation[2][0]})

    with pytest.raises(ConnectionLost, match="UNKNOWN_LEADER_EPOCH"):
        epoch_ends(NAME, await roundtrip(lagging, gate))
    assert produce_errors(await roundtrip(lagging, produce(4))) == \
        [ErrorCode.INVALID_PARTITION_METADATA]
    assert produce_errors(await roundtrip(lagging, produce(2))) == [0]  # still count 2 here
    lagging_image.current = four
    assert epoch_ends(NAME, await roundtrip(lagging, gate)) == {0: 2}
    assert produce_errors(await roundtrip(lagging, produce(2))) == \
        [ErrorCode.INVALID_PARTITION_METADATA]


async def test_b_a_lagging_leader_of_a_marked_partition_answers_no_deletion_gate_query(
        tmp_path: Path) -> None:
    """Schedule b, shrink: the consumer knows 4 -> 3 and asks partition 3's leader where
    it ends, for partition 1's deletion gate. That leader has not applied the mark:
    answering its end, then taking a record from a producer still on count 4, would
    open the gate below that record. The mark bumps partition 3's epoch too, so the
    query is fenced; once the leader applies the mark it refuses every write and
    answers its end."""
    topic = ResizedTopic()
    topic.resize(4)
    four = topic.image
    three = topic.resize(3)
    lagging_image = MovingImage(four)
    lagging = broker(tmp_path / "lagging", lagging_image, 1, partitions=[3])
    assert produce_errors(await roundtrip(lagging, produce(4, partition=3))) == [0]
    current_image = MovingImage(three)
    view = await consumer_view(broker(tmp_path / "current", current_image, 1, []),
                               current_image)
    assert view.marked == {3}
    gate = list_offsets_request(view, [3], LATEST)

    with pytest.raises(ConnectionLost, match="UNKNOWN_LEADER_EPOCH"):
        listed_offsets(NAME, await roundtrip(lagging, gate))
    assert produce_errors(await roundtrip(lagging, produce(3, partition=3))) == \
        [ErrorCode.INVALID_PARTITION_METADATA]
    assert produce_errors(await roundtrip(lagging, produce(4, partition=3))) == [0]
    lagging_image.current = three
    assert listed_offsets(NAME, await roundtrip(lagging, gate)) == {3: 2}
    assert produce_errors(await roundtrip(lagging, produce(4, partition=3))) == \
        [ErrorCode.INVALID_PARTITION_METADATA]
