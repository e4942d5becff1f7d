"""tools.client.admin's pure translation: what a broker answers over the Kafka protocol
becomes what the controllers' admin protocol answers, so `kraft topics` and `kraft quorum
describe` print the same through either (the broker's own handlers build the inputs)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

import pytest
import trio
from kio.index import load_request_schema

from broker.kafka.admin import metadata_api, quorum_api
from broker.kafka.ordered.rules import leader_epochs_topic
from metadata.admin import (
    CreatableTopicResult,
    CreatePartitionsTopicResult,
    DeletableTopicResult,
    DescribeTopicsRequest,
)
from metadata.controller import describe_topic, describe_topics
from metadata.delta import replay
from metadata.image import MetadataImage
from metadata.records import Partition, PartitionChange, PartitionCount, Topic
from raft import messages
from raft.common.kafka.codec import build, response_class
from raft.common.kafka.ordered_schemas import PARTITION_LEADER_EPOCHS
from raft.common.uuid import ZERO_UUID, Uuid
from tools.client import admin
from tools.commands.quorum import replication_view, status_view

T = Uuid(5)


def resized_image() -> MetadataImage:
    """A topic grown from 1 to 2 partitions, then shrunk back to 1 (partition 1 marked)."""
    return replay(enumerate([
        Topic(name="t", topic_id=T, initial_partition_count=1),
        Partition(topic_id=T, partition=0, replicas=(1, 2), isr=(2, 1), leader=2),
        PartitionCount(topic_id=T, undeleted_partition_count=2),
        PartitionChange(topic_id=T, partition=0, bump_leader_epoch=True),
        Partition(topic_id=T, partition=1, replicas=(2, 1), isr=(2,), leader=2,
                  leader_epoch_after_creation=((0, 0),)),
        PartitionCount(topic_id=T, undeleted_partition_count=1),
        PartitionChange(topic_id=T, partition=1, leader_epoch_before_deletion=((0, 1),)),
        PartitionChange(topic_id=T, partition=0, bump_leader_epoch=True)]))


def metadata_response(image: MetadataImage, topics: list[dict[str, Any]] | None) -> Any:
    request = build(load_request_schema(admin.METADATA, 12), {"topics": topics})
    # built into kio's entity as the broker's dispatcher does, then read by the client
    return build(response_class(admin.METADATA, 12), metadata_api.handle_metadata_request(
        image, request, 12, broker_id=1, cluster_id="c"))


def epochs_response(image: MetadataImage, metadata: Any) -> Any:
    return build(response_class(PARTITION_LEADER_EPOCHS, 0), {"topics": [
        {"topic_id": t.topic_id, **leader_epochs_topic(
            image, metadata_api.from_kafka_uuid(t.topic_id), ())}
        for t in metadata.topics]})


def without_configs(response: Any) -> Any:
    return dataclasses.replace(response, topics=tuple(
        dataclasses.replace(t, configs=None) for t in response.topics))


@pytest.mark.parametrize("wanted", [
    None, [{"name": "t", "topic_id": None}],
    [{"name": None, "topic_id": uuid.UUID(bytes=T.to_bytes())}]])
def test_a_broker_describes_a_resized_topic_as_the_controller_does(
        wanted: list[dict[str, Any]] | None) -> None:
    """Metadata plus PartitionLeaderEpochs give the controller's description (counts,
    leaders, replicas, ISRs and both epoch maps), by name, by ID or all topics."""
    image = resized_image()
    metadata = metadata_response(image, wanted)
    translated = admin.describe_from_metadata(metadata, epochs_response(image, metadata))
    topic = image.topic(T)
    assert topic is not None
    assert translated.topics == (dataclasses.replace(describe_topic(topic), configs=None),)


def test_unknown_names_and_ids_get_the_controllers_error_and_message() -> None:
    image = resized_image()
    missing = Uuid(77)
    by_name = metadata_response(image, [{"name": "nope", "topic_id": None}])
    by_id = metadata_response(image, [{"name": None,
                                       "topic_id": admin.to_kafka_uuid(missing)}])
    expected_name = describe_topics(image, DescribeTopicsRequest(names=("nope",)))
    expected_id = describe_topics(image, DescribeTopicsRequest(topic_ids=(missing,)))
    assert admin.describe_from_metadata(by_name, None) == without_configs(expected_name)
    assert admin.describe_from_metadata(by_id, None) == without_configs(expected_id)


def test_a_broker_without_partition_leader_epochs_gives_no_counts_or_maps() -> None:
    """Kafka's brokers lack PartitionLeaderEpochs: the counts are unknown (None, which
    `kraft topics` shows as every partition undeleted) and no epoch maps."""
    image = resized_image()
    (topic,) = admin.describe_from_metadata(metadata_response(image, None), None).topics
    assert (topic.initial_partition_count, topic.undeleted_partition_count) == (None, None)
    assert [(p.leader_epoch_after_creation, p.leader_epoch_before_deletion)
            for p in topic.partitions] == [(None, None), (None, None)]
    assert [p.replicas for p in topic.partitions] == [(1, 2), (2, 1)]


def test_versions_are_the_highest_both_speak_or_a_clear_refusal() -> None:
    assert admin.pick_version(admin.DELETE_TOPICS, {admin.DELETE_TOPICS: (0, 9)}) == 6
    assert admin.pick_version(admin.METADATA, {admin.METADATA: (0, 11)}) == 11
    with pytest.raises(admin.UnsupportedByBroker, match="does not serve CreatePartitions"):
        admin.pick_version(admin.CREATE_PARTITIONS, {})
    with pytest.raises(admin.UnsupportedByBroker, match="v0-v9"):
        admin.pick_version(admin.METADATA, {admin.METADATA: (0, 9)})


def test_created_topic_gets_its_id_and_assignment_from_metadata() -> None:
    image = resized_image()
    kafka_id = uuid.UUID(bytes=T.to_bytes())
    created = build(response_class(admin.CREATE_TOPICS, 5), {"topics": [
        {"name": "t", "error_code": 0, "num_partitions": 2, "replication_factor": 2},
        {"name": "dup", "error_code": 36, "error_message": "topic 'dup' already exists"}]})
    response = admin.create_from_responses(
        created, metadata_response(image, [{"name": "t", "topic_id": None}]))
    assert response.topics == (
        CreatableTopicResult(name="t", topic_id=T, num_partitions=2, replication_factor=2,
                             assignment=((1, 2), (2, 1))),
        CreatableTopicResult(name="dup", error_code=36,
                             error_message="topic 'dup' already exists"))
    assert admin.to_kafka_uuid(T) == kafka_id


def test_deleted_and_grown_topics_translate_with_the_new_partitions_replicas() -> None:
    deleted = build(response_class(admin.DELETE_TOPICS, 6), {"responses": [
        {"name": "t", "topic_id": uuid.UUID(bytes=T.to_bytes()), "error_code": 0},
        {"name": None, "topic_id": uuid.UUID(int=0), "error_code": 100,
         "error_message": "no topic with id X"}]})
    assert admin.delete_from_response(deleted).responses == (
        DeletableTopicResult(name="t", topic_id=T),
        DeletableTopicResult(name=None, topic_id=ZERO_UUID, error_code=100,
                             error_message="no topic with id X"))
    one = replay(enumerate([
        Topic(name="t", topic_id=T, initial_partition_count=1),
        Partition(topic_id=T, partition=0, replicas=(1,), isr=(1,), leader=1)]))
    named = [{"name": "t", "topic_id": None}]
    grown = build(response_class(admin.CREATE_PARTITIONS, 3), {"results": [
        {"name": "t", "error_code": 0}]})
    assert admin.create_partitions_from_responses(
        grown, metadata_response(one, named), metadata_response(resized_image(), named)
    ).results == (CreatePartitionsTopicResult(name="t", topic_id=T, assignment=((2, 1),)),)


def controller_reply() -> dict[str, Any]:
    """What a raft leader answers to DescribeQuorumRequest (raft/node.py)."""
    replicas = (messages.ReplicaState(replica_id=1, log_end_offset=40,
                                      last_fetch_timestamp=900, last_caught_up_timestamp=900),
                messages.ReplicaState(replica_id=2, log_end_offset=38,
                                      last_fetch_timestamp=880, last_caught_up_timestamp=870))
    _, body = messages.encode_message(messages.DescribeQuorumResponse(
        leader_id=1, leader_epoch=4, high_watermark=39, current_voters=replicas,
        observers=(messages.ReplicaState(replica_id=7, log_end_offset=39),)))
    return {**body, "leader_address": "127.0.0.1:9001", "node_id": 2, "cluster_id": "c",
            "is_leader": False}


def quorum_entity(shape: Any, version: int) -> Any:
    """The broker's DescribeQuorum answer built as its dispatcher does, for the tool."""
    return build(response_class(admin.DESCRIBE_QUORUM, version), shape)


def test_quorum_through_a_broker_prints_what_the_controllers_give() -> None:
    """The broker's DescribeQuorum v2 (broker.kafka.admin.quorum_api), read back by the tool:
    the same --status and --replication views as the controllers' reply gives."""
    reply = controller_reply()
    voters = {1: ("127.0.0.1", 9001), 2: ("127.0.0.1", 9002)}
    response = quorum_entity(quorum_api.describe_quorum_response(reply, voters=voters), 2)
    state = admin.quorum_from_response(response, "c")
    endpoints = admin.endpoints_from_response(response)
    assert endpoints == {1: ["CONTROLLER://127.0.0.1:9001"], 2: ["CONTROLLER://127.0.0.1:9002"]}
    direct = messages.decode_message("DescribeQuorumResponse", reply)
    assert isinstance(direct, messages.DescribeQuorumResponse)
    controllers = {"leader_id": 1, "leader_epoch": 4, "high_watermark": 39, "cluster_id": "c",
                   "voters": [dataclasses.asdict(r) for r in direct.current_voters],
                   "observers": [dataclasses.asdict(r) for r in direct.observers]}
    assert status_view(state, "", 1000, endpoints) == status_view(controllers, "", 1000,
                                                                     endpoints)
    assert replication_view(state) == replication_view(controllers)


def test_quorum_errors_raise_with_the_code() -> None:
    refused = quorum_entity(quorum_api.error_response(7, "no controller answered"), 2)
    with pytest.raises(admin.KafkaRequestFailed,
                       match=r"REQUEST_TIMED_OUT \(7\): no controller answered"):
        admin.quorum_from_response(refused, "c")
    not_leader = {**controller_reply(), "error_code": 6}
    response = quorum_entity(quorum_api.describe_quorum_response(not_leader, voters={}), 1)
    with pytest.raises(admin.KafkaRequestFailed, match=r"NOT_LEADER_OR_FOLLOWER \(6\)"):
        admin.quorum_from_response(response, "c")
    assert admin.endpoints_from_response(response) == {}  # v1 has no nodes


async def test_an_address_that_only_closes_is_not_a_kafka_listener_at_once() -> None:
    """A controller (msgpack frames) closes on a Kafka request: no retrying until the
    deadline, and the error says which option names controllers."""
    async def close_after_reading(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, close_after_reading, 0)
        address = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        kafka = admin.KafkaAdmin(admin.KafkaClient([address], ssl_context=None, sasl=None),
                                 deadline=time.monotonic() + 30)
        with trio.fail_after(5), pytest.raises(admin.NotAKafkaListener,
                                               match="--bootstrap-controller"):
            await kafka.negotiate()
        await kafka.client.aclose()
        nursery.cancel_scope.cancel()
