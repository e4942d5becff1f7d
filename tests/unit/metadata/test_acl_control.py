"""metadata.acl_control through the pure Controller: CreateAcls, DeleteAcls and
DescribeAcls decisions and records, and who may call the controller's admin API."""

from __future__ import annotations

import random

from metadata import records as rec
from metadata.acl_control import admin_refusal, describe_acls
from metadata.admin import (
    AdminErrorResponse,
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateAclsRequest,
    CreateAclsResponse,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DeleteTopicState,
    DescribeAclsRequest,
)
from metadata.authorizer import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
)
from metadata.controller import Controller
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.session import ANONYMOUS, KafkaPrincipal
from raft.common.uuid import Uuid

ON = AuthorizerSettings(enabled=True)
ALICE = KafkaPrincipal("User", "alice")


def read_acl(name: str = "orders", principal: str = "User:alice", **kw: int) -> AclBinding:
    fields = dict(resource_type=int(ResourceType.TOPIC), pattern_type=int(PatternType.LITERAL),
                  operation=int(AclOperation.READ),
                  permission_type=int(AclPermissionType.ALLOW))
    fields.update(kw)
    return AclBinding(resource_name=name, principal=principal, host="*", **fields)


def decide(controller: Controller, request: object) -> object:
    decision = controller.handle(request, now_ms=0, rng=random.Random(1))  # type: ignore[arg-type]
    controller.on_committed((decision.base_offset + i, r)
                            for i, r in enumerate(decision.records))
    return decision


def test_create_writes_one_record_per_new_acl_when_some_repeat() -> None:
    controller = Controller(MetadataImage.empty(), now_ms=0)
    decision = decide(controller, CreateAclsRequest(creations=(read_acl(), read_acl(),
                                                               read_acl("pay"))))
    assert [type(r) for r in decision.records] == [rec.AccessControlEntry] * 2  # type: ignore[attr-defined]
    assert decision.response == CreateAclsResponse(  # type: ignore[attr-defined]
        results=(decision.response.results[0],) * 3)  # type: ignore[attr-defined]
    assert len(controller.committed.acls) == 2
    again = decide(controller, CreateAclsRequest(creations=(read_acl(),)))
    assert again.records == ()  # type: ignore[attr-defined]


def test_create_is_invalid_request_when_the_acl_is_not_concrete() -> None:
    controller = Controller(MetadataImage.empty(), now_ms=0)
    decision = decide(controller, CreateAclsRequest(creations=(
        read_acl(operation=int(AclOperation.ANY)), read_acl(principal="alice"))))
    assert decision.records == ()  # type: ignore[attr-defined]
    assert [r.error_code for r in decision.response.results] == [42, 42]  # type: ignore[attr-defined]


def test_delete_removes_what_a_match_filter_matches_and_lists_it() -> None:
    controller = Controller(MetadataImage.empty(), now_ms=0)
    decide(controller, CreateAclsRequest(creations=(
        read_acl("orders"), read_acl("ord", pattern_type=int(PatternType.PREFIXED)),
        read_acl("payments"))))
    decision = decide(controller, DeleteAclsRequest(filters=(AclFilter(
        resource_type=int(ResourceType.TOPIC), resource_name="orders",
        pattern_type=int(PatternType.MATCH)),)))
    response = decision.response  # type: ignore[attr-defined]
    assert isinstance(response, DeleteAclsResponse)
    assert sorted(b.resource_name for b in response.filter_results[0].matching_acls) == [
        "ord", "orders"]
    assert [b.binding.resource_name for b in controller.committed.acls] == ["payments"]


def test_describe_lists_acls_sorted_when_the_filter_is_any() -> None:
    image = replay([(0, rec.AccessControlEntry(
        id=Uuid(2), resource_type=2, resource_name="b", pattern_type=3, principal="User:x",
        host="*", operation=3, permission_type=3)), (1, rec.AccessControlEntry(
            id=Uuid(1), resource_type=2, resource_name="a", pattern_type=3,
            principal="User:x", host="*", operation=3, permission_type=3))])
    response = describe_acls(image, DescribeAclsRequest(filter=AclFilter()))
    assert [b.resource_name for b in response.acls] == ["a", "b"]
    bad = describe_acls(image, DescribeAclsRequest(filter=AclFilter(operation=0)))
    assert bad.error_code == 42


def _image_with(*bindings: AclBinding) -> MetadataImage:
    return replay([(i, rec.AccessControlEntry(
        id=Uuid(i + 1), resource_type=b.resource_type, resource_name=b.resource_name,
        pattern_type=b.pattern_type, principal=b.principal, host=b.host,
        operation=b.operation, permission_type=b.permission_type))
        for i, b in enumerate(bindings)])


def test_admin_call_is_allowed_when_the_authorizer_is_off() -> None:
    request = BrokerHeartbeatRequest(broker_id=1, broker_epoch=1, current_metadata_offset=0)
    assert admin_refusal(MetadataImage.empty(), ANONYMOUS, "", request,
                         AuthorizerSettings()) is None


def test_broker_rpc_needs_cluster_action_when_the_authorizer_is_on() -> None:
    request = BrokerHeartbeatRequest(broker_id=1, broker_epoch=1, current_metadata_offset=0)
    refusal = admin_refusal(MetadataImage.empty(), ANONYMOUS, "", request, ON)
    assert isinstance(refusal, AdminErrorResponse)
    assert refusal.top_level_error == 31
    image = _image_with(read_acl("kafka-cluster", principal="User:ANONYMOUS",
                                 resource_type=int(ResourceType.CLUSTER),
                                 operation=int(AclOperation.CLUSTER_ACTION)))
    assert admin_refusal(image, ANONYMOUS, "", request, ON) is None
    # and CLUSTER_ACTION lets a broker forward anything it authorized itself
    delete = DeleteTopicsRequest(topics=(DeleteTopicState(name="orders"),))
    assert admin_refusal(image, ANONYMOUS, "", delete, ON) is None


def test_delete_topics_needs_delete_on_each_topic_when_a_client_calls() -> None:
    image = _image_with(read_acl("orders", operation=int(AclOperation.DELETE)))
    ok = DeleteTopicsRequest(topics=(DeleteTopicState(name="orders"),))
    assert admin_refusal(image, ALICE, "", ok, ON) is None
    both = DeleteTopicsRequest(topics=(DeleteTopicState(name="orders"),
                                       DeleteTopicState(name="payments")))
    refusal = admin_refusal(image, ALICE, "", both, ON)
    assert isinstance(refusal, AdminErrorResponse)
    assert refusal.top_level_error == 29
    assert "payments" in (refusal.error_message or "")


def test_create_topics_is_allowed_by_create_on_the_cluster() -> None:
    image = _image_with(read_acl("kafka-cluster", resource_type=int(ResourceType.CLUSTER),
                                 operation=int(AclOperation.CREATE)))
    request = CreateTopicsRequest(topics=(CreatableTopic(name="any"),))
    assert admin_refusal(image, ALICE, "", request, ON) is None
    assert admin_refusal(MetadataImage.empty(), ALICE, "", request, ON) is not None


def test_acl_rpcs_need_alter_or_describe_on_the_cluster() -> None:
    image = _image_with(read_acl("kafka-cluster", resource_type=int(ResourceType.CLUSTER),
                                 operation=int(AclOperation.DESCRIBE)))
    assert admin_refusal(image, ALICE, "", DescribeAclsRequest(filter=AclFilter()), ON) is None
    create = CreateAclsRequest(creations=(read_acl(),))
    assert admin_refusal(image, ALICE, "", create, ON) is not None
    super_user = AuthorizerSettings(enabled=True, super_users=frozenset({"User:alice"}))
    assert admin_refusal(image, ALICE, "", create, super_user) is None
