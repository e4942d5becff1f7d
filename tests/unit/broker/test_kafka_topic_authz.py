"""Topic holes on the broker's Kafka listener, in process, for the anonymous principal
(no listener binds a session here): the internal `__consumer_offsets` is nobody's to
produce to, create, delete or grow; Metadata v10-v12 by an unknown topic ID answers
UNKNOWN_TOPIC_ID; a Fetch without READ says nothing of an ordered topic's partition
count; a DeleteTopics by an ID this broker's image lacks goes to the controller with the
client's principal; ConsumerGroupPosition asks a member for no partition of a topic it
may not READ."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import trio

from broker.kafka.groups.offsets_records import OFFSETS_TOPIC
from metadata import admin
from metadata.authorizer import AclOperation, AclPermissionType, AuthorizerSettings, ResourceType
from metadata.image import MetadataImage
from raft.common.kafka.codec import build, request_schema
from raft.common.uuid import Uuid
from tests.support.kafka_support import TOPIC_ID, image_with_topic
from tests.unit.broker.test_kafka_authz import ON, dispatcher_for, with_acls
from tests.unit.broker.test_kafka_listener import produce_request
from tests.unit.broker.test_ordered_wire import (
    GROUP,
    KAFKA_ID,
    coordinating,
    fetch,
    make_dispatcher,
    position_answer,
    position_request,
    roundtrip,
    shrunk_image,
)

INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID = 17, 29, 100
EVERYTHING = (ResourceType.TOPIC, "*", AclOperation.ALL, AclPermissionType.ALLOW)
CREATE_ON_CLUSTER = (ResourceType.CLUSTER, "kafka-cluster", AclOperation.CREATE,
                     AclPermissionType.ALLOW)
FRESH_ID = Uuid(0xDDDD << 64 | 1)


def offsets_image() -> MetadataImage:
    return image_with_topic(OFFSETS_TOPIC)


async def test_client_produce_to_the_offsets_topic_is_refused_when_it_may_write_everything(
        tmp_path: Path) -> None:
    """A client with WRITE on every topic must not forge offset commits: Kafka's
    "Cannot append to internal topic" (INVALID_TOPIC_EXCEPTION), nothing stored."""
    for settings, image in ((ON, with_acls(offsets_image(), EVERYTHING)),
                            (AuthorizerSettings(), offsets_image())):
        dispatcher = dispatcher_for(tmp_path, image, settings)
        response = await roundtrip(dispatcher, produce_request([b"999999"],
                                                               name=OFFSETS_TOPIC))
        (part,) = response.responses[0].partition_responses
        assert (int(part.error_code), part.error_message) == (
            INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {OFFSETS_TOPIC}")
        assert not dispatcher.context.replicas.open_partitions
    # without WRITE the caller learns only that it may not write
    dispatcher = dispatcher_for(tmp_path, offsets_image())
    response = await roundtrip(dispatcher, produce_request([b"x"], name=OFFSETS_TOPIC))
    assert response.responses[0].partition_responses[0].error_code == TOPIC_AUTHORIZATION_FAILED


async def test_metadata_marks_only_the_offsets_topic_internal(tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    response = await roundtrip(dispatcher, build(request_schema(3, 12), {
        "topics": None, "allow_auto_topic_creation": False}))
    assert {t.name: t.is_internal for t in response.topics} == {"A": False,
                                                                OFFSETS_TOPIC: True}


async def test_metadata_by_an_unknown_topic_id_answers_unknown_topic_id_at_each_version(
        tmp_path: Path) -> None:
    """v10 and v11 carry topic IDs but a non-nullable name: the answer must still encode."""
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    for version in (10, 11, 12):
        response = await roundtrip(dispatcher, build(request_schema(3, version), {
            "topics": [{"name": None, "topic_id": uuid.UUID(bytes=FRESH_ID.to_bytes())}],
            "allow_auto_topic_creation": False}))
        (topic,) = response.topics
        assert (int(topic.error_code), topic.partitions) == (UNKNOWN_TOPIC_ID, ()), version
        assert topic.name in (None, ""), version


async def test_fetch_without_read_says_nothing_of_an_ordered_topics_count(
        tmp_path: Path) -> None:
    dispatcher = make_dispatcher(tmp_path, shrunk_image())
    dispatcher.context.authorizer = ON
    for count in (3, 2, None):  # stale, current, absent: all the same answer
        part = (await roundtrip(dispatcher, fetch(count))).responses[0].partitions[0]
        assert (int(part.error_code), part.records) == (TOPIC_AUTHORIZATION_FAILED, b"")


class AnsweringController:
    """Records what it is asked and deletes every topic it is asked to."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def call(self, request: Any, timeout_s: float) -> Any:
        self.requests.append(request)
        return admin.DeleteTopicsResponse(responses=tuple(
            admin.DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=29)
            for t in request.topics))


def delete_by_ids(*topic_ids: Uuid) -> Any:
    return build(request_schema(20, 6), {"timeout": 5000, "topics": [
        {"name": None, "topic_id": uuid.UUID(bytes=t.to_bytes())} for t in topic_ids]})


async def test_delete_by_an_id_this_broker_lacks_goes_to_the_controller_with_the_client(
        tmp_path: Path) -> None:
    """A lagging image cannot authorize an ID it does not know: the controller decides,
    for the client's principal, not for this broker's."""
    dispatcher = dispatcher_for(tmp_path, image_with_topic())
    controller = AnsweringController()
    dispatcher.context.controller = controller  # type: ignore[assignment]
    with trio.fail_after(10):
        response = await roundtrip(dispatcher, delete_by_ids(FRESH_ID, TOPIC_ID))
    fresh, known = response.responses
    assert int(fresh.error_code) == TOPIC_AUTHORIZATION_FAILED  # the controller's answer
    # the known topic is refused here, without its name: the caller may not describe it
    assert (int(known.error_code), known.name) == (TOPIC_AUTHORIZATION_FAILED, None)
    (forwarded,) = controller.requests
    assert forwarded.topics == (admin.DeleteTopicState(topic_id=FRESH_ID),)
    assert forwarded.forwarded_principal == "User:ANONYMOUS"


async def test_clients_may_not_create_delete_or_grow_the_offsets_topic(
        tmp_path: Path) -> None:
    image = with_acls(offsets_image(), EVERYTHING, CREATE_ON_CLUSTER)
    dispatcher = dispatcher_for(tmp_path, image)  # its controller refuses to be called
    offsets_id = uuid.UUID(bytes=TOPIC_ID.to_bytes())
    requests = [
        build(request_schema(19, 7), {"timeout": 5000, "topics": [
            {"name": OFFSETS_TOPIC, "num_partitions": 1, "replication_factor": 1}]}),
        build(request_schema(37, 3), {"timeout": 5000, "topics": [
            {"name": OFFSETS_TOPIC, "count": 60, "assignments": None}]}),
        build(request_schema(20, 6), {"timeout": 5000, "topics": [
            {"name": OFFSETS_TOPIC, "topic_id": uuid.UUID(int=0)},
            {"name": None, "topic_id": offsets_id}]})]
    with trio.fail_after(10):
        create, grow, delete = [await roundtrip(dispatcher, r) for r in requests]
    assert [int(t.error_code) for t in create.topics] == [INVALID_TOPIC_EXCEPTION]
    assert [int(t.error_code) for t in grow.results] == [INVALID_TOPIC_EXCEPTION]
    assert [int(t.error_code) for t in delete.responses] == [INVALID_TOPIC_EXCEPTION] * 2
    assert dispatcher.context.controller.requests == []  # type: ignore[union-attr]


async def test_consumer_group_position_names_no_partition_of_a_topic_the_member_may_not_read(
        tmp_path: Path) -> None:
    """m2 waits on A-0. m1, with READ on the group but not on A, is not told of A-0 (its
    reports of A are dropped anyway); with READ on A it is asked for A-0's position."""
    answers = []
    for topic_read in ((), ((ResourceType.TOPIC, "A", AclOperation.READ,
                             AclPermissionType.ALLOW),)):
        image = with_acls(shrunk_image(), (ResourceType.GROUP, GROUP, AclOperation.READ,
                                           AclPermissionType.ALLOW), *topic_read)
        dispatcher = make_dispatcher(tmp_path, image)
        dispatcher.context.authorizer = ON
        group = coordinating(dispatcher)
        group.positions.exchange(generation=group.generation, member_id="m2", reports=(),
                                 asks=((KAFKA_ID, 0),))
        answer = await roundtrip(dispatcher, position_request("m1", group.generation))
        assert answer.error_code == 0
        answers.append(position_answer(answer))
    assert answers == [[], [(0, True, -1)]]
