"""metadata.authorizer.authorize against a reference model: a scan of every ACL with the
rules of Kafka's StandardAuthorizer written out plainly, on random ACLs, principals,
hosts, operations and resources (names from a small alphabet so prefixes and wildcards
collide)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from metadata.authorizer import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AuthorizerSettings,
    PatternType,
    ResourceType,
    StandardAcl,
    acl_image_of,
    authorize,
)
from raft.common.session import KafkaPrincipal
from raft.common.uuid import Uuid

Op = AclOperation
OPS = [op for op in AclOperation if op not in (Op.UNKNOWN, Op.ANY)]
PRINCIPALS = ["User:alice", "User:bob", "User:*", "Group:alice"]
HOSTS = ["10.0.0.1", "10.0.0.2", "*"]
TYPES = [ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER]
names = st.text(alphabet="ab*", min_size=1, max_size=4)

bindings = st.builds(
    AclBinding, resource_type=st.sampled_from(TYPES), resource_name=names,
    pattern_type=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principal=st.sampled_from(PRINCIPALS), host=st.sampled_from(HOSTS),
    operation=st.sampled_from(OPS),
    permission_type=st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]))


def _on_resource(b: AclBinding, rt: int, name: str) -> bool:
    if b.resource_type != rt:
        return False
    if b.pattern_type == PatternType.LITERAL:
        return b.resource_name in (name, "*")
    return name.startswith(b.resource_name)


def _speaks_to(b: AclBinding, op: int) -> bool:
    if b.operation in (Op.ALL, op):
        return True
    if b.permission_type == AclPermissionType.DENY:
        return False
    if op == Op.DESCRIBE:
        return b.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    return op == Op.DESCRIBE_CONFIGS and b.operation == Op.ALTER_CONFIGS


def model(acls: list[AclBinding], principal: str, host: str, op: int, rt: int, name: str,
          s: AuthorizerSettings) -> bool:
    if not s.enabled or principal in s.super_users:
        return True
    on_resource = [b for b in acls if _on_resource(b, rt, name)]
    applying = [b for b in on_resource
                if b.principal in (principal, "User:*") and b.host in (host, "*")
                and _speaks_to(b, op)]
    if any(b.permission_type == AclPermissionType.DENY for b in applying):
        return False
    if any(b.permission_type == AclPermissionType.ALLOW for b in applying):
        return True
    return not on_resource and s.allow_everyone_if_no_acl_found


@settings(max_examples=400, deadline=None)
@given(acls=st.lists(bindings, max_size=12),
       principal=st.sampled_from(["User:alice", "User:bob", "Group:alice"]),
       host=st.sampled_from(["10.0.0.1", "10.0.0.2"]), op=st.sampled_from(OPS),
       rt=st.sampled_from(TYPES), name=st.text(alphabet="ab", min_size=1, max_size=5),
       allow_if_none=st.booleans(), super_alice=st.booleans())
def test_authorize_agrees_with_the_model_when_acls_are_random(
        acls: list[AclBinding], principal: str, host: str, op: int, rt: int, name: str,
        allow_if_none: bool, super_alice: bool) -> None:
    s = AuthorizerSettings(enabled=True, allow_everyone_if_no_acl_found=allow_if_none,
                           super_users=frozenset({"User:alice"} if super_alice else ()))
    image = acl_image_of({Uuid(i + 1): StandardAcl(id=Uuid(i + 1), binding=b)
                          for i, b in enumerate(acls)})
    got = authorize(image, KafkaPrincipal.parse(principal), host, op, rt, name, s)
    assert got == model(acls, principal, host, op, rt, name, s)


@settings(max_examples=100, deadline=None)
@given(acls=st.lists(bindings, max_size=12), rt=st.sampled_from(TYPES),
       name=st.text(alphabet="ab*", min_size=1, max_size=5))
def test_index_finds_exactly_the_acls_a_scan_finds(acls: list[AclBinding], rt: int,
                                                   name: str) -> None:
    image = acl_image_of({Uuid(i + 1): StandardAcl(id=Uuid(i + 1), binding=b)
                          for i, b in enumerate(acls)})
    scanned = {Uuid(i + 1) for i, b in enumerate(acls) if b.resource_type == rt and (
        b.resource_name in (name, "*") if b.pattern_type == PatternType.LITERAL
        else name.startswith(b.resource_name))}
    assert {a.id for a in image.matching(rt, name)} == scanned


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.integers(0, 7), bindings), max_size=30),
       rt=st.sampled_from(TYPES), name=st.text(alphabet="ab*", min_size=1, max_size=5))
def test_index_follows_adds_and_removes_when_replayed(
        steps: list[tuple[bool, int, AclBinding]], rt: int, name: str) -> None:
    """The index the delta keeps (AclImageBuilder) against a scan, after random
    AccessControlEntry and RemoveAccessControlEntry records (skipped ones included)."""
    from metadata import records as rec
    from metadata.delta import replay
    records: list[tuple[int, rec.Record]] = []
    for offset, (add, slot, b) in enumerate(steps):
        records.append((offset, rec.AccessControlEntry(
            id=Uuid(slot + 1), resource_type=b.resource_type, resource_name=b.resource_name,
            pattern_type=b.pattern_type, principal=b.principal, host=b.host,
            operation=b.operation, permission_type=b.permission_type) if add
            else rec.RemoveAccessControlEntry(id=Uuid(slot + 1))))
    image = replay(records[: len(records) // 2])
    image = replay(records[len(records) // 2:], base=image)  # two images: shared maps
    scanned = {a.id for a in image.acls if a.binding.resource_type == rt and (
        a.binding.resource_name in (name, "*")
        if a.binding.pattern_type == PatternType.LITERAL
        else name.startswith(a.binding.resource_name))}
    assert {a.id for a in image.acls.matching(rt, name)} == scanned
    for acl in image.acls:
        assert image.acls.find(acl.binding) is not None
