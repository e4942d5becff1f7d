"""metadata.acl_control through the pure Controller: CreateAcls, DeleteAcls and
DescribeAcls decisions and records, and who may call the controller's admin API."""

from __future__ import annotations

import random

from metadata import records as rec
from metadata.acl_control import (
    admin_refusal,
    delete_topics_refusals,
    describe_acls,
    merge_delete_results,
)
from metadata.admin import (
    AdminErrorResponse,
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeletableTopicResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
    DescribeAclsRequest,
    DescribeTopicsRequest,
    RenameTopicRequest,
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


def test_rpcs_whose_one_right_is_on_the_cluster_are_left_to_the_table() -> None:
    """The broker, ACL and SCRAM RPCs: the listener's authorization table decides them
    before the request is read (tests/unit/broker/test_access_table.py); not twice."""
    for request in (BrokerHeartbeatRequest(broker_id=1, broker_epoch=1,
                                           current_metadata_offset=0),
                    CreateAclsRequest(creations=(read_acl(),)),
                    DescribeAclsRequest(filter=AclFilter())):
        assert admin_refusal(MetadataImage.empty(), ANONYMOUS, "", request, ON) is None


def test_cluster_action_lets_a_broker_forward_what_it_authorized_itself() -> None:
    image = _image_with(read_acl("kafka-cluster", principal="User:ANONYMOUS",
                                 resource_type=int(ResourceType.CLUSTER),
                                 operation=int(AclOperation.CLUSTER_ACTION)))
    create = CreateTopicsRequest(topics=(CreatableTopic(name="orders"),))
    assert admin_refusal(MetadataImage.empty(), ANONYMOUS, "", create, ON) is not None
    assert admin_refusal(image, ANONYMOUS, "", create, ON) is None


def test_delete_topics_needs_delete_on_each_topic_when_a_client_calls() -> None:
    image = _image_with(read_acl("orders", operation=int(AclOperation.DELETE)))
    both = DeleteTopicsRequest(topics=(DeleteTopicState(name="orders"),
                                       DeleteTopicState(name="payments")))
    assert admin_refusal(image, ALICE, "", both, ON) is None  # decided per topic
    allowed, refused = delete_topics_refusals(image, ALICE, "", both, ON)
    assert allowed is None
    assert refused is not None
    assert (refused.name, refused.error_code) == ("payments", 29)


def test_create_topics_is_allowed_by_create_on_the_cluster() -> None:
    image = _image_with(read_acl("kafka-cluster", resource_type=int(ResourceType.CLUSTER),
                                 operation=int(AclOperation.CREATE)))
    request = CreateTopicsRequest(topics=(CreatableTopic(name="any"),))
    assert admin_refusal(image, ALICE, "", request, ON) is None
    assert admin_refusal(MetadataImage.empty(), ALICE, "", request, ON) is not None


# --- topics named by ID, forwarded callers, renames, internal topics --------------------

PAYROLL_ID, MINE_ID, OFFSETS_ID, FRESH_ID = Uuid(501), Uuid(502), Uuid(503), Uuid(504)
BROKER_PRINCIPAL = KafkaPrincipal("User", "broker")
BROKER_IS_SUPER = AuthorizerSettings(enabled=True, super_users=frozenset({"User:broker"}))


def _image_with_topics(*bindings: AclBinding) -> MetadataImage:
    """secret-payroll, mine-1 and __consumer_offsets, then the ACLs."""
    topics = [(i, rec.Topic(name=name, topic_id=topic_id)) for i, (name, topic_id) in
              enumerate((("secret-payroll", PAYROLL_ID), ("mine-1", MINE_ID),
                         ("__consumer_offsets", OFFSETS_ID)))]
    return replay([*topics, *((len(topics) + i, rec.AccessControlEntry(
        id=Uuid(i + 1), resource_type=b.resource_type, resource_name=b.resource_name,
        pattern_type=b.pattern_type, principal=b.principal, host=b.host,
        operation=b.operation, permission_type=b.permission_type))
        for i, b in enumerate(bindings))])


def _by_id(*topic_ids: Uuid, forwarded_for: str | None = None) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(topics=tuple(DeleteTopicState(topic_id=t) for t in topic_ids),
                               forwarded_principal=forwarded_for,
                               forwarded_host=None if forwarded_for is None else "10.0.0.7")


def test_refusal_names_the_topic_id_not_the_name_when_described_by_id() -> None:
    request = DescribeTopicsRequest(topic_ids=(PAYROLL_ID,))
    refusal = admin_refusal(_image_with_topics(), ALICE, "", request, ON)
    assert isinstance(refusal, AdminErrorResponse)
    assert refusal.top_level_error == 29
    assert "secret-payroll" not in (refusal.error_message or "")
    assert str(PAYROLL_ID) in (refusal.error_message or "")


def test_delete_by_id_hides_the_name_unless_the_caller_may_describe_it() -> None:
    """Kafka's ControllerApis.deleteTopics: UNKNOWN_TOPIC_ID for an ID it does not know,
    TOPIC_AUTHORIZATION_FAILED without the name for one the caller may not describe."""
    image = _image_with_topics(read_acl("mine-1", operation=int(AclOperation.DESCRIBE)))
    secret, described, unknown = delete_topics_refusals(
        image, ALICE, "", _by_id(PAYROLL_ID, MINE_ID, FRESH_ID), ON)
    assert secret == DeletableTopicResult(
        topic_id=PAYROLL_ID, error_code=29,
        error_message=f"User:alice is not allowed DELETE on the topic with ID {PAYROLL_ID}")
    assert described is not None
    assert (described.name, described.error_code) == ("mine-1", 29)
    assert unknown is not None
    assert (unknown.name, unknown.error_code) == (None, 100)


def test_forwarded_principal_is_judged_when_a_broker_forwards_a_delete_by_id() -> None:
    """A lagging broker forwards an ID it does not know: the controller judges the
    client, not the broker, against its committed image."""
    image = _image_with_topics(read_acl("mine-1", operation=int(AclOperation.DELETE)))
    request = _by_id(PAYROLL_ID, MINE_ID, forwarded_for="User:alice")
    assert admin_refusal(image, BROKER_PRINCIPAL, "", request, BROKER_IS_SUPER) is None
    payroll, mine = delete_topics_refusals(image, BROKER_PRINCIPAL, "", request,
                                           BROKER_IS_SUPER)
    assert payroll is not None
    assert payroll.error_code == 29
    assert mine is None
    # the broker's own request (no forwarded principal) is still trusted
    assert delete_topics_refusals(image, BROKER_PRINCIPAL, "", _by_id(PAYROLL_ID),
                                  BROKER_IS_SUPER) == (None,)


def test_forwarded_principal_is_honoured_only_from_a_sender_with_cluster_action() -> None:
    image = _image_with_topics(read_acl("*", operation=int(AclOperation.ALL)))
    request = _by_id(PAYROLL_ID, forwarded_for="User:admin")
    refusal = admin_refusal(image, ALICE, "", request, ON)
    assert isinstance(refusal, AdminErrorResponse)
    assert refusal.top_level_error == 31
    (entry,) = delete_topics_refusals(image, ALICE, "", request, ON)
    assert entry is not None
    assert entry.error_code == 31
    malformed = _by_id(PAYROLL_ID, forwarded_for="alice")
    refusal = admin_refusal(image, BROKER_PRINCIPAL, "", malformed, BROKER_IS_SUPER)
    assert isinstance(refusal, AdminErrorResponse)
    assert refusal.top_level_error == 42


def test_forwarded_host_is_the_one_judged() -> None:
    image = _image_with_topics(AclBinding(
        resource_type=int(ResourceType.TOPIC), resource_name="secret-payroll",
        pattern_type=int(PatternType.LITERAL), principal="User:alice", host="10.0.0.7",
        operation=int(AclOperation.DELETE), permission_type=int(AclPermissionType.ALLOW)))
    request = _by_id(PAYROLL_ID, forwarded_for="User:alice")
    assert delete_topics_refusals(image, BROKER_PRINCIPAL, "127.0.0.1", request,
                                  BROKER_IS_SUPER) == (None,)
    direct = _by_id(PAYROLL_ID)
    (refused,) = delete_topics_refusals(image, ALICE, "127.0.0.1", direct, ON)
    assert refused is not None
    assert refused.error_code == 29


def test_merged_delete_answers_keep_the_request_order() -> None:
    refused = DeletableTopicResult(topic_id=PAYROLL_ID, error_code=29)
    done = DeleteTopicsResponse(responses=(DeletableTopicResult(name="a"),
                                           DeletableTopicResult(name="b")))
    merged = merge_delete_results((None, refused, None), done)
    assert [r.name for r in merged.responses] == ["a", None, "b"]
    assert merged.responses[1] is refused


def test_rename_needs_delete_on_the_old_name_when_create_on_the_new_one_is_held() -> None:
    """CREATE and READ on mine-* and ALTER on secret-payroll must not carry the topic
    away under a readable name."""
    prefixed = dict(pattern_type=int(PatternType.PREFIXED))
    grants = [read_acl("mine-", operation=int(AclOperation.CREATE), **prefixed),
              read_acl("mine-", **prefixed),
              read_acl("secret-payroll", operation=int(AclOperation.ALTER))]
    request = RenameTopicRequest(topic_id=PAYROLL_ID, new_name="mine-payroll")
    refusal = admin_refusal(_image_with_topics(*grants), ALICE, "", request, ON)
    assert isinstance(refusal, AdminErrorResponse)
    assert refusal.top_level_error == 29
    assert "DELETE" in (refusal.error_message or "")
    assert "secret-payroll" not in (refusal.error_message or "")
    deleter = read_acl("secret-payroll", operation=int(AclOperation.DELETE))
    assert admin_refusal(_image_with_topics(*grants, deleter), ALICE, "", request, ON) is None
    # CREATE on the cluster stands for CREATE on the new name, as for CreateTopics
    cluster_create = read_acl("kafka-cluster", resource_type=int(ResourceType.CLUSTER),
                              operation=int(AclOperation.CREATE))
    elsewhere = RenameTopicRequest(topic_id=PAYROLL_ID, new_name="other")
    assert admin_refusal(_image_with_topics(*grants[2:], deleter, cluster_create), ALICE, "",
                         elsewhere, ON) is None
    assert admin_refusal(_image_with_topics(*grants[2:], deleter), ALICE, "", elsewhere,
                         ON) is not None


def test_internal_topic_is_refused_to_clients_and_created_by_brokers() -> None:
    everything = read_acl("*", operation=int(AclOperation.ALL))
    cluster_create = read_acl("kafka-cluster", resource_type=int(ResourceType.CLUSTER),
                              operation=int(AclOperation.CREATE))
    image = _image_with_topics(everything, cluster_create)
    create = CreateTopicsRequest(topics=(CreatableTopic(name="__consumer_offsets"),))
    grow = CreatePartitionsRequest(topics=(CreatePartitionsTopic(name="__consumer_offsets",
                                                                 count=60),))
    rename_to = RenameTopicRequest(topic_id=MINE_ID, new_name="__consumer_offsets")
    rename_from = RenameTopicRequest(topic_id=OFFSETS_ID, new_name="mine-2")
    for request in (create, grow, rename_to, rename_from):
        refusal = admin_refusal(image, ALICE, "", request, ON)
        assert isinstance(refusal, AdminErrorResponse), request
        assert refusal.top_level_error == 17, request
    # the group coordinator's broker creates it with its own principal
    assert admin_refusal(image, BROKER_PRINCIPAL, "", create, BROKER_IS_SUPER) is None
    (deleted,) = delete_topics_refusals(image, ALICE, "", _by_id(OFFSETS_ID), ON)
    assert deleted is not None
    assert deleted.error_code == 17
    # forwarded for a client, even with the authorizer off
    (forwarded,) = delete_topics_refusals(image, BROKER_PRINCIPAL, "", DeleteTopicsRequest(
        topics=(DeleteTopicState(name="__consumer_offsets"),),
        forwarded_principal="User:ANONYMOUS"), AuthorizerSettings())
    assert forwarded is not None
    assert forwarded.error_code == 17
