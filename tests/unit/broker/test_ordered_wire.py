"""Ordered delivery through the broker's dispatcher: Produce and Fetch with the tagged
undeleted partition count, produce to a marked partition, PartitionLeaderEpochs and
ConsumerGroupPosition (on a coordinator with a loaded group), and the heartbeat's
report of empty marked partitions."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kio.static.primitive import i32, i64

from broker import partition_dir
from broker.kafka.groups.coordinator import OffsetsPartition
from broker.kafka.groups.group_state import Group
from broker.kafka.groups.offsets_records import OFFSETS_TOPIC, partition_for
from broker.kafka.handler_context import HandlerContext
from broker.kafka.listener import Dispatcher
from broker.kafka.ordered.empty_marked import empty_marked_partitions
from broker.kafka.replication.replica import ReplicaManager
from metadata import records as rec
from metadata.admin import EmptyPartition
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, request_schema
from raft.common.kafka.ordered_schemas import (
    ConsumerGroupPositionRequest,
    LeaderEpochsRequestTopic,
    PartitionLeaderEpochsRequest,
    PositionRequestPartition,
    PositionRequestTopic,
)
from raft.common.kafka.wire_client import decode_response, encode_request
from raft.common.uuid import Uuid
from tests.support.kafka_support import BROKER, TOPIC_ID, joined, record_batch

KAFKA_ID = uuid.UUID(bytes=TOPIC_ID.to_bytes())
OFFSETS_ID = Uuid(0xCCCC << 64 | 1)
GROUP = "g"


def shrunk_image() -> MetadataImage:
    """A: ordered, created with 2 partitions, grown to 3, shrunk back to 2 (partition 2
    marked), all led here; the offsets topic."""
    entries: list[rec.Record] = [
        rec.RegisterBroker(broker_id=BROKER, incarnation_id=Uuid(104), broker_epoch=1,
                           endpoints=("PLAINTEXT://127.0.0.1:9004",)),
        rec.UnfenceBroker(broker_id=BROKER, broker_epoch=1),
        rec.Topic(name="A", topic_id=TOPIC_ID, initial_partition_count=2),
        rec.TopicConfig(topic_id=TOPIC_ID, key="enable.ordered.delivery", value="true"),
        rec.Topic(name=OFFSETS_TOPIC, topic_id=OFFSETS_ID),
        rec.Partition(topic_id=OFFSETS_ID, partition=0, replicas=(BROKER,), isr=(BROKER,),
                      leader=BROKER)]
    entries += [rec.Partition(topic_id=TOPIC_ID, partition=p, replicas=(BROKER,),
                              isr=(BROKER,), leader=BROKER) for p in range(3)]
    entries += [rec.PartitionCount(topic_id=TOPIC_ID, undeleted_partition_count=2),
                rec.PartitionChange(topic_id=TOPIC_ID, partition=2,
                                    leader_epoch_before_deletion=((0, 0), (1, 0)))]
    return replay(enumerate(entries))


def make_dispatcher(tmp_path: Path, image: MetadataImage) -> Dispatcher:
    for index in range(3):
        (tmp_path / f"A-{index}").mkdir(exist_ok=True)
        partition_dir.write_partition_metadata(tmp_path / f"A-{index}", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: image)
    return Dispatcher(HandlerContext(broker_id=BROKER, cluster_id="test-cluster",
                                     image=lambda: image, replicas=replicas, controller=None,
                                     clock=lambda: 0.0))


async def roundtrip(dispatcher: Dispatcher, body: Any) -> Any:
    reply = joined(await dispatcher.handle_frame(encode_request(body, correlation_id=42)[4:]))
    assert reply is not None
    _, response = decode_response(reply[4:], body.__api_key__, body.__version__,
                                  tolerant=True)
    return response


def produce(count: int | None, partition: int = 0, version: int = 9) -> Any:
    topic = {"name": "A"} if version < 13 else {"topic_id": KAFKA_ID}
    return build(request_schema(0, version), {
        "acks": 1, "timeout": 5000, "transactional_id": None,
        "topic_data": [{**topic, "undeleted_partition_count": count, "partition_data": [
            {"index": partition, "records": record_batch([b"v"])}]}]})


def produce_errors(response: Any) -> list[int]:
    return [int(p.error_code) for t in response.responses for p in t.partition_responses]


async def test_produce_refused_when_count_differs_and_taken_when_equal_or_absent(
        tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    for version in (9, 13):
        assert produce_errors(await roundtrip(dispatcher, produce(3, version=version))) == \
            [ErrorCode.INVALID_PARTITION_METADATA]
        assert produce_errors(await roundtrip(dispatcher, produce(2, version=version))) == [0]
        assert produce_errors(await roundtrip(dispatcher, produce(None, version=version))) \
            == [0]
    log = dispatcher.context.replicas
    assert len(log.open_partitions) == 1  # the refused produces stored nothing


async def test_produce_to_marked_partition_refused_with_or_without_count(
        tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    assert produce_errors(await roundtrip(dispatcher, produce(None, partition=2))) == \
        [ErrorCode.INVALID_PARTITION_METADATA]
    assert produce_errors(await roundtrip(dispatcher, produce(2, partition=2))) == \
        [ErrorCode.INVALID_PARTITION_METADATA]


def fetch(count: int | None, replica_id: int = -1) -> Any:
    return build(request_schema(1, 13), {
        "replica_id": replica_id, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": KAFKA_ID, "undeleted_partition_count": count, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1, "last_fetched_epoch": -1,
             "log_start_offset": -1}]}]})


async def test_consumer_fetch_refused_when_count_differs_and_follower_never_checked(
        tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    assert produce_errors(await roundtrip(dispatcher, produce(None))) == [0]
    stale = (await roundtrip(dispatcher, fetch(3))).responses[0].partitions[0]
    assert (int(stale.error_code), stale.records) == (ErrorCode.INVALID_PARTITION_METADATA, b"")
    current = (await roundtrip(dispatcher, fetch(2))).responses[0].partitions[0]
    assert (int(current.error_code), bool(current.records)) == (0, True)
    absent = (await roundtrip(dispatcher, fetch(None))).responses[0].partitions[0]
    assert (int(absent.error_code), bool(absent.records)) == (0, True)


async def test_leader_epochs_answered_from_image(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    response = await roundtrip(dispatcher, PartitionLeaderEpochsRequest(topics=(
        LeaderEpochsRequestTopic(topic_id=KAFKA_ID, partitions=(i32(2),)),
        LeaderEpochsRequestTopic(topic_id=uuid.uuid4()))))
    known, unknown = response.topics
    assert (known.name, known.initial_partition_count, known.undeleted_partition_count,
            known.ordered_delivery) == ("A", 2, 2, True)
    (marked,) = known.partitions
    assert [(e.partition, e.leader_epoch) for e in marked.before_deletion] == [(0, 0), (1, 0)]
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def coordinating(dispatcher: Dispatcher) -> Group:
    """A stable group of m1 and m2 coordinated here."""
    coord = dispatcher.context.groups
    assert partition_for(GROUP, 1) == 0
    group = Group(group_id=GROUP)
    coord.partitions[0] = OffsetsPartition(index=0, leader_epoch=0, loaded=True,
                                           groups={GROUP: group})
    for known, member in (("", "m1"), ("", "m2"), ("m1", "m1")):  # m1 rejoins for m2
        group.join(member_id=known, instance_id=None, protocol_type="consumer",
                   protocols=(("range", b""),), session_timeout_s=10,
                   rebalance_timeout_s=10, now=0, new_member_id=member)
    group.sync(member_id=group.leader or "", instance_id=None, generation=group.generation,
               assignments={}, now=0)
    assert (group.state, set(group.members)) == ("Stable", {"m1", "m2"})
    return group


def position_request(member: str, generation: int, *entries: tuple[int, bool, int]) -> Any:
    return ConsumerGroupPositionRequest(
        group_id=GROUP, generation_id=i32(generation), member_id=member,
        topics=(PositionRequestTopic(topic_id=KAFKA_ID, partitions=tuple(
            PositionRequestPartition(partition=i32(p), need_position=n, position=i64(o))
            for p, n, o in entries)),))


def position_answer(response: Any) -> list[tuple[int, bool, int]]:
    return [(p.partition, p.need_position, p.position)
            for t in response.topics for p in t.partitions]


async def test_members_exchange_positions_through_coordinator(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    generation = coordinating(dispatcher).generation
    waiting = await roundtrip(dispatcher, position_request("m2", generation, (0, True, -1)))
    assert (waiting.error_code, position_answer(waiting)) == \
        (ErrorCode.NONE, [(0, False, -1), (0, True, -1)])
    await roundtrip(dispatcher, position_request("m1", generation, (0, False, 17)))
    answered = await roundtrip(dispatcher, position_request("m2", generation, (0, True, -1)))
    assert position_answer(answered)[0] == (0, False, 17)


async def test_position_refused_like_heartbeat(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    generation = coordinating(dispatcher).generation
    assert (await roundtrip(dispatcher, position_request("nobody", generation))
            ).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await roundtrip(dispatcher, position_request("m1", generation - 1))
            ).error_code == ErrorCode.ILLEGAL_GENERATION
    other = build(ConsumerGroupPositionRequest, {"group_id": "elsewhere-not-loaded",
                                                 "generation_id": 1, "member_id": "m1"})
    dispatcher.context.groups.partitions.clear()
    assert (await roundtrip(dispatcher, other)).error_code == ErrorCode.NOT_COORDINATOR


async def test_position_refused_while_rebalancing(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    group = coordinating(dispatcher)
    group.start_rebalance(1.0)
    assert (await roundtrip(dispatcher, position_request("m1", group.generation))
            ).error_code == ErrorCode.REBALANCE_IN_PROGRESS


async def test_empty_marked_partition_reported_while_its_log_start_is_its_end(
        tmp_path: Path) -> None:
    """Only the marked partition, only while its log is empty; a record that got in
    before the mark keeps it from being reported until its log start reaches its log
    end (DeleteRecords or retention)."""
    image = shrunk_image()
    dispatcher = make_dispatcher(tmp_path, image)
    replicas = dispatcher.context.replicas
    assert await empty_marked_partitions(replicas) == (EmptyPartition(
        topic_id=TOPIC_ID, partition=2, leader_epoch=image.topics[TOPIC_ID].partitions[2]
        .leader_epoch, log_start_offset=0, log_end_offset=0),)
    (state,) = [s for k, s in replicas._states.items() if k == (TOPIC_ID, 2)]
    state.log.append([record_batch([b"early"])], 0)
    assert await empty_marked_partitions(replicas) == ()
    state.log.advance_log_start(1)
    assert await empty_marked_partitions(replicas) == (EmptyPartition(
        topic_id=TOPIC_ID, partition=2, leader_epoch=image.topics[TOPIC_ID].partitions[2]
        .leader_epoch, log_start_offset=1, log_end_offset=1),)
