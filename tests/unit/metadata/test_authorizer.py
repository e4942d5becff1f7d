"""metadata.authorizer: Kafka's StandardAuthorizer rules, one by one, and the filters of
DescribeAcls and DeleteAcls."""

from __future__ import annotations

import pytest

from metadata.authorizer import (
    OFF,
    AclBinding,
    AclFilter,
    AclImage,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
    StandardAcl,
    acl_image_of,
    authorize,
    authorizer_enabled,
    filter_matches,
    invalid_binding_reason,
    matching_acls,
    parse_super_users,
)
from raft.common.session import ANONYMOUS, KafkaPrincipal
from raft.common.uuid import Uuid

ON = AuthorizerSettings(enabled=True)
ALICE = KafkaPrincipal("User", "alice")
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def binding(name: str = "orders", *, rt: int = TOPIC, pattern: int = LITERAL,
            principal: str = "User:alice", host: str = "*", op: int = Op.READ,
            perm: int = ALLOW) -> AclBinding:
    return AclBinding(resource_type=rt, resource_name=name, pattern_type=pattern,
                      principal=principal, host=host, operation=op, permission_type=perm)


def acls(*bindings: AclBinding) -> AclImage:
    return acl_image_of({Uuid(i + 1): StandardAcl(id=Uuid(i + 1), binding=b)
                         for i, b in enumerate(bindings)})


def check(image: AclImage, op: int, name: str = "orders", *, rt: int = TOPIC,
          who: KafkaPrincipal = ALICE, host: str = "10.0.0.1",
          settings: AuthorizerSettings = ON) -> bool:
    return authorize(image, who, host, op, rt, name, settings)


def test_everything_is_allowed_when_the_authorizer_is_off() -> None:
    image = acls(binding(op=Op.ALL, perm=DENY))
    assert authorize(image, ALICE, "h", Op.DELETE, TOPIC, "orders", OFF)


def test_read_is_denied_when_no_acl_names_the_principal() -> None:
    assert not check(acls(binding(principal="User:bob")), Op.READ)


def test_read_is_allowed_when_a_literal_acl_allows_it() -> None:
    image = acls(binding())
    assert check(image, Op.READ)
    assert not check(image, Op.WRITE)
    assert not check(image, Op.READ, "orders2")


def test_prefixed_acl_matches_names_that_start_with_it() -> None:
    image = acls(binding("ord", pattern=PREFIXED))
    assert check(image, Op.READ, "orders")
    assert check(image, Op.READ, "ord")
    assert not check(image, Op.READ, "or")
    assert not check(image, Op.READ, "payments")


def test_wildcard_name_matches_every_resource_of_its_type() -> None:
    image = acls(binding("*"))
    assert check(image, Op.READ, "anything")
    assert not check(image, Op.READ, "anything", rt=GROUP)


def test_wildcard_principal_and_host_match_everyone() -> None:
    image = acls(binding(principal="User:*", host="*"))
    assert check(image, Op.READ, who=ANONYMOUS, host="1.2.3.4")


def test_host_acl_applies_only_to_that_host() -> None:
    image = acls(binding(host="10.0.0.1"))
    assert check(image, Op.READ, host="10.0.0.1")
    assert not check(image, Op.READ, host="10.0.0.2")


def test_deny_beats_allow_when_both_apply() -> None:
    image = acls(binding(op=Op.ALL), binding("ord", pattern=PREFIXED, op=Op.WRITE, perm=DENY))
    assert check(image, Op.READ)
    assert not check(image, Op.WRITE)


def test_all_implies_every_operation() -> None:
    image = acls(binding(op=Op.ALL))
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS):
        assert check(image, op)


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_allowed_when_an_implying_operation_is(op: int) -> None:
    assert check(acls(binding(op=op)), Op.DESCRIBE)


def test_describe_configs_is_allowed_when_alter_configs_is() -> None:
    assert check(acls(binding(op=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not check(acls(binding(op=Op.CREATE)), Op.DESCRIBE)


def test_deny_read_does_not_deny_describe_when_describe_is_allowed() -> None:
    image = acls(binding(op=Op.DESCRIBE), binding(op=Op.READ, perm=DENY))
    assert check(image, Op.DESCRIBE)
    assert not check(image, Op.READ)


def test_super_user_is_allowed_everything_when_denied() -> None:
    settings = AuthorizerSettings(enabled=True, super_users=parse_super_users("User:alice;User:b"))
    assert check(acls(binding(op=Op.ALL, perm=DENY)), Op.ALTER, settings=settings)


def test_no_acl_on_the_resource_follows_allow_everyone_if_no_acl_found() -> None:
    settings = AuthorizerSettings(enabled=True, allow_everyone_if_no_acl_found=True)
    image = acls(binding("payments", principal="User:bob"))
    assert check(image, Op.READ, "orders", settings=settings)
    assert not check(image, Op.READ, "orders")  # the default: false
    # an ACL on the resource for someone else: denied, whatever the setting
    assert not check(image, Op.READ, "payments", settings=settings)


def test_cluster_acl_allows_cluster_action() -> None:
    image = acls(binding("kafka-cluster", rt=CLUSTER, op=Op.CLUSTER_ACTION))
    assert check(image, Op.CLUSTER_ACTION, "kafka-cluster", rt=CLUSTER)
    assert not check(image, Op.CLUSTER_ACTION, "orders")


def test_authorizer_class_name_switches_it_on() -> None:
    assert not authorizer_enabled("")
    assert authorizer_enabled("org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert authorizer_enabled("standard")
    with pytest.raises(ValueError, match="authorizer.class.name"):
        authorizer_enabled("kafka.security.authorizer.AclAuthorizer")


def test_super_users_refuse_a_name_without_a_type() -> None:
    with pytest.raises(ValueError, match="TYPE:NAME"):
        parse_super_users("User:a;bob")


def test_invalid_binding_reason_names_the_bad_field() -> None:
    assert invalid_binding_reason(binding()) is None
    assert "operation" in (invalid_binding_reason(binding(op=Op.ANY)) or "")
    assert "pattern" in (invalid_binding_reason(binding(pattern=PatternType.MATCH)) or "")
    assert "cluster" in (invalid_binding_reason(binding("x", rt=CLUSTER)) or "")


def test_match_filter_finds_every_acl_that_applies_to_a_name() -> None:
    image = acls(binding("orders"), binding("*"), binding("ord", pattern=PREFIXED),
                 binding("orders-eu"), binding("x", pattern=PREFIXED))
    found = matching_acls(image, AclFilter(resource_type=TOPIC, resource_name="orders",
                                           pattern_type=PatternType.MATCH))
    assert sorted(a.binding.resource_name for a in found) == ["*", "ord", "orders"]


def test_literal_filter_matches_exactly_and_any_matches_every_pattern() -> None:
    lit = binding("orders")
    pre = binding("orders", pattern=PREFIXED)
    assert filter_matches(AclFilter(resource_name="orders", pattern_type=LITERAL), lit)
    assert not filter_matches(AclFilter(resource_name="orders", pattern_type=LITERAL), pre)
    assert filter_matches(AclFilter(resource_name="orders"), pre)
    assert not filter_matches(AclFilter(principal="User:bob"), lit)
    assert filter_matches(AclFilter(operation=Op.READ, permission_type=ALLOW), lit)
    assert not filter_matches(AclFilter(operation=Op.WRITE), lit)


def test_write_on_some_topic_counts_for_any_topic_unless_denied() -> None:
    from metadata.authorizer import authorize_any
    image = acls(binding("ord", pattern=PREFIXED, op=Op.WRITE))
    assert authorize_any(image, ALICE, "h", Op.WRITE, TOPIC, ON)
    assert not authorize_any(image, ALICE, "h", Op.WRITE, GROUP, ON)
    denied = acls(binding("ord", pattern=PREFIXED, op=Op.WRITE),
                  binding("*", op=Op.WRITE, perm=DENY))
    assert not authorize_any(denied, ALICE, "h", Op.WRITE, TOPIC, ON)
