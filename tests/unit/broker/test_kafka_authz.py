"""The Kafka listener's checks (broker.kafka.authz) with the authorizer on, in process,
for the anonymous principal (no listener binds a session here: `current_session()` is
User:ANONYMOUS): what each API answers without an ACL, with one, and with the
authorizer off."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

import trio
from kio.index import load_request_schema
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from broker import partition_dir
from broker.kafka.handler_context import HandlerContext
from broker.kafka.listener import Dispatcher
from broker.kafka.replication.replica import ReplicaManager
from metadata import records as rec
from metadata.authorizer import (
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
)
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from raft.common.uuid import Uuid
from tests.support.kafka_support import BROKER, TOPIC_ID, image_with_topic
from tests.unit.broker.test_kafka_listener import produce_request, roundtrip

ON = AuthorizerSettings(enabled=True)
KAFKA_TOPIC_ID = uuid.UUID(bytes=TOPIC_ID.to_bytes())


class RecordingController:
    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def call(self, request: Any, timeout_s: float) -> Any:
        self.requests.append(request)
        raise AssertionError("a refused request must not be forwarded")


def with_acls(image: MetadataImage, *acls: tuple[int, str, int, int]) -> MetadataImage:
    """`image` plus ACLs for User:ANONYMOUS: (resource type, name, operation, permission)."""
    start = image.last_applied_offset + 1
    return replay([(start + i, rec.AccessControlEntry(
        id=Uuid(1000 + i),
        resource_type=rt, resource_name=name, pattern_type=PatternType.LITERAL,
        principal="User:ANONYMOUS", host="*", operation=op, permission_type=perm))
        for i, (rt, name, op, perm) in enumerate(acls)], base=image)


def dispatcher_for(tmp_path: Path, image: MetadataImage,
                   settings: AuthorizerSettings = ON) -> Dispatcher:
    (tmp_path / "A-0").mkdir(exist_ok=True)
    partition_dir.write_partition_metadata(tmp_path / "A-0", TOPIC_ID)
    replicas = ReplicaManager(log_dir=tmp_path, broker_id=BROKER, image=lambda: image)
    return Dispatcher(HandlerContext(broker_id=BROKER, cluster_id="c", image=lambda: image,
                                     replicas=replicas, controller=RecordingController(),
                                     authorizer=settings))


def metadata_all() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)


async def test_produce_is_refused_per_partition_when_write_is_missing(tmp_path: Path) -> None:
    image = with_acls(image_with_topic(), (ResourceType.TOPIC, "A", AclOperation.READ,
                                           AclPermissionType.ALLOW))
    response = await roundtrip(dispatcher_for(tmp_path, image), produce_request([b"x"]))
    part = response.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def test_produce_is_stored_when_write_is_allowed(tmp_path: Path) -> None:
    image = with_acls(image_with_topic(), (ResourceType.TOPIC, "A", AclOperation.WRITE,
                                           AclPermissionType.ALLOW))
    response = await roundtrip(dispatcher_for(tmp_path, image), produce_request([b"x"]))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


async def test_everything_is_served_when_the_authorizer_is_off(tmp_path: Path) -> None:
    dispatcher = dispatcher_for(tmp_path, image_with_topic(), AuthorizerSettings())
    response = await roundtrip(dispatcher, produce_request([b"x"]))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert [t.name for t in (await roundtrip(dispatcher, metadata_all())).topics] == ["A"]


async def test_metadata_hides_and_refuses_topics_when_describe_is_missing(
        tmp_path: Path) -> None:
    dispatcher = dispatcher_for(tmp_path, image_with_topic())
    assert (await roundtrip(dispatcher, metadata_all())).topics == ()
    named = await roundtrip(dispatcher, MetadataRequest(
        topics=(MetadataRequestTopic(name="A", topic_id=None),
                MetadataRequestTopic(name=None, topic_id=KAFKA_TOPIC_ID)),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert [t.error_code for t in named.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED] * 2


async def test_follower_fetch_needs_cluster_action(tmp_path: Path) -> None:
    def follower_fetch() -> FetchRequest:
        return FetchRequest(replica_id=5, max_wait=datetime.timedelta(0), min_bytes=0,
                            topics=(FetchTopic(topic_id=KAFKA_TOPIC_ID, partitions=(
                                FetchPartition(partition=0, fetch_offset=0,
                                               partition_max_bytes=1 << 20),)),),
                            forgotten_topics_data=())
    base = image_with_topic(replicas=(BROKER, 5))
    # READ on the topic is a consumer's right, not a follower's
    image = with_acls(base, (ResourceType.TOPIC, "A", AclOperation.READ,
                             AclPermissionType.ALLOW))
    refused = await roundtrip(dispatcher_for(tmp_path, image), follower_fetch())
    assert refused.responses[0].partitions[0].error_code == \
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    allowed = with_acls(base, (ResourceType.CLUSTER, "kafka-cluster",
                               AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW))
    served = await roundtrip(dispatcher_for(tmp_path, allowed), follower_fetch())
    assert served.responses[0].partitions[0].error_code == ErrorCode.NONE


async def test_delete_by_topic_id_is_refused_and_not_forwarded_without_delete(
        tmp_path: Path) -> None:
    image = with_acls(image_with_topic(), (ResourceType.TOPIC, "A", AclOperation.DELETE,
                                           AclPermissionType.DENY),
                      (ResourceType.TOPIC, "A", AclOperation.ALL, AclPermissionType.ALLOW))
    dispatcher = dispatcher_for(tmp_path, image)
    with trio.fail_after(10):
        response = await roundtrip(dispatcher, DeleteTopicsRequest(
            topics=(DeleteTopicState(name=None, topic_id=KAFKA_TOPIC_ID),),
            timeout=datetime.timedelta(seconds=5)))
    (result,) = response.responses
    assert result.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert dispatcher.context.controller.requests == []  # type: ignore[union-attr]


async def test_find_coordinator_is_refused_when_the_group_is_not_described(
        tmp_path: Path) -> None:
    response = await roundtrip(dispatcher_for(tmp_path, image_with_topic()),
                               FindCoordinatorRequest(key="g", key_type=0))
    assert response.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


async def test_offset_fetch_is_refused_on_every_partition_before_v2_and_at_the_top_after(
        tmp_path: Path) -> None:
    """v1 has no top-level error code: the refusal is on each partition asked, not an
    empty answer that reads as "no offsets"."""
    topics = [{"name": "A", "partition_indexes": [0, 1]}]
    dispatcher = dispatcher_for(tmp_path, image_with_topic())
    old = await roundtrip(dispatcher, build(load_request_schema(9, 1), {
        "group_id": "g", "topics": topics}))
    assert [(t.name, p.partition_index, p.committed_offset, p.error_code)
            for t in old.topics for p in t.partitions] == [
        ("A", 0, -1, ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ("A", 1, -1, ErrorCode.GROUP_AUTHORIZATION_FAILED)]
    new = await roundtrip(dispatcher, build(load_request_schema(9, 7), {
        "group_id": "g", "topics": topics}))
    assert new.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert new.topics == ()


async def test_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(
        tmp_path: Path) -> None:
    request = InitProducerIdRequest(transactional_id=None,
                                    transaction_timeout=datetime.timedelta(seconds=60),
                                    producer_id=-1, producer_epoch=-1)
    refused = await roundtrip(dispatcher_for(tmp_path, image_with_topic()), request)
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    writer = with_acls(image_with_topic(), (ResourceType.TOPIC, "A", AclOperation.WRITE,
                                            AclPermissionType.ALLOW))
    allowed = await roundtrip(dispatcher_for(tmp_path, writer), request)
    assert allowed.error_code != ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def test_describe_acls_needs_describe_on_the_cluster(tmp_path: Path) -> None:
    request = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                  pattern_type_filter=1, principal_filter=None,
                                  host_filter=None, operation=1, permission_type=1)
    refused = await roundtrip(dispatcher_for(tmp_path, image_with_topic()), request)
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    image = with_acls(image_with_topic(), (ResourceType.CLUSTER, "kafka-cluster",
                                           AclOperation.DESCRIBE, AclPermissionType.ALLOW))
    listed = await roundtrip(dispatcher_for(tmp_path, image), request)
    assert listed.error_code == ErrorCode.NONE
    assert [(r.resource_type, r.resource_name) for r in listed.resources] == [
        (ResourceType.CLUSTER, "kafka-cluster")]


async def test_scram_credentials_need_describe_on_the_cluster(tmp_path: Path) -> None:
    from kio.schema.describe_user_scram_credentials.v0.request import (
        DescribeUserScramCredentialsRequest,
    )
    dispatcher = dispatcher_for(tmp_path, image_with_topic())
    response = await roundtrip(dispatcher, DescribeUserScramCredentialsRequest(users=None))
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert dispatcher.context.controller.requests == []  # type: ignore[union-attr]


async def test_authorized_operations_answer_exactly_the_granted_ones(tmp_path: Path) -> None:
    """A caller granted DESCRIBE and WRITE on a topic and DESCRIBE on the cluster is told
    exactly those (Metadata's topic and cluster bit fields), and nothing when it did not
    ask."""
    image = with_acls(image_with_topic(),
                      (ResourceType.TOPIC, "A", AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                      (ResourceType.TOPIC, "A", AclOperation.WRITE, AclPermissionType.ALLOW),
                      (ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE,
                       AclPermissionType.ALLOW))
    dispatcher = dispatcher_for(tmp_path, image)

    def request(asked: bool) -> Any:
        return build(load_request_schema(3, 10), {
            "topics": [{"name": "A", "topic_id": None}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": asked,
            "include_topic_authorized_operations": asked})
    answer = await roundtrip(dispatcher, request(True))
    assert answer.topics[0].topic_authorized_operations == \
        (1 << AclOperation.DESCRIBE) | (1 << AclOperation.WRITE)
    assert answer.cluster_authorized_operations == 1 << AclOperation.DESCRIBE
    quiet = await roundtrip(dispatcher, request(False))
    assert quiet.topics[0].topic_authorized_operations == -(2**31)
    assert quiet.cluster_authorized_operations == -(2**31)
