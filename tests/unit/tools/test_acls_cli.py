"""kraft acls without a cluster: usage errors (exit 2, one line) and the ACLs --add and
--remove ask for, against a recording client; the real round trip is
tests/integration/test_acls.py."""

from __future__ import annotations

from typing import Any

import pytest

from metadata.admin import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from metadata.authorizer import AclBinding, AclOperation, PatternType, ResourceType
from tools.cli import build_parser, main
from tools.commands import acls


class Recording:
    def __init__(self) -> None:
        self.requests: list[Any] = []

    def call(self, request: Any) -> Any:
        self.requests.append(request)
        if isinstance(request, CreateAclsRequest):
            return CreateAclsResponse(results=tuple(AclCreationResult()
                                                    for _ in request.creations))
        if isinstance(request, DeleteAclsRequest):
            return DeleteAclsResponse(filter_results=tuple(DeleteAclsFilterResult()
                                                           for _ in request.filters))
        assert isinstance(request, DescribeAclsRequest)
        return DescribeAclsResponse(acls=(AclBinding(
            resource_type=2, resource_name="t", pattern_type=3, principal="User:a",
            host="*", operation=3, permission_type=3),))


def parsed(*argv: str) -> Any:
    return build_parser("acls").parse_args(["acls", "--cluster", "/nowhere", *argv])


@pytest.mark.parametrize(("argv", "message"), [
    (("--add", "--allow-principal", "User:a", "--operation", "Read"), "need a resource"),
    (("--add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"),
     "ResourceType CLUSTER only supports operations"),
    (("--add", "--allow-principal", "alice", "--operation", "Read", "--topic", "t"),
     "is not TYPE:NAME"),
    (("--add", "--allow-principal", "User:a", "--operation", "Frob", "--topic", "t"),
     "'Frob' is not one of"),
    (("--add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t",
      "--resource-pattern-type", "match"), "literal or prefixed"),
    (("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"),
     "--consumer needs --group"),
    (("--list", "--operation", "Read"), "--list takes --principal"),
])
def test_usage_error_exits_2_with_one_line_when_options_are_wrong(
        argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["acls", "--cluster", "/nowhere", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]


def test_add_asks_for_each_principal_host_and_operation_when_given() -> None:
    client = Recording()
    args = parsed("--add", "--allow-principal", "User:a", "--allow-principal", "User:b",
                  "--allow-host", "10.0.0.1", "--deny-principal", "User:c", "--operation",
                  "Read", "--operation", "describe", "--topic", "t", "--resource-pattern-type",
                  "prefixed")
    acls._add(client, args, int(PatternType.PREFIXED))
    (create,) = [r for r in client.requests if isinstance(r, CreateAclsRequest)]
    seen = {(b.principal, b.host, AclOperation(b.operation).name, b.permission_type)
            for b in create.creations}
    assert seen == {("User:a", "10.0.0.1", "READ", 3), ("User:a", "10.0.0.1", "DESCRIBE", 3),
                    ("User:b", "10.0.0.1", "READ", 3), ("User:b", "10.0.0.1", "DESCRIBE", 3),
                    ("User:c", "*", "READ", 2), ("User:c", "*", "DESCRIBE", 2)}
    assert {b.pattern_type for b in create.creations} == {PatternType.PREFIXED}


def test_consumer_and_producer_give_kafka_acls_operations(
        capsys: pytest.CaptureFixture[str]) -> None:
    client = Recording()
    args = parsed("--add", "--allow-principal", "User:a", "--producer", "--consumer",
                  "--topic", "t", "--group", "g")
    acls._add(client, args, int(PatternType.LITERAL))
    (create,) = [r for r in client.requests if isinstance(r, CreateAclsRequest)]
    by_type: dict[str, set[str]] = {}
    for b in create.creations:
        by_type.setdefault(ResourceType(b.resource_type).name, set()).add(
            AclOperation(b.operation).name)
    assert by_type == {"TOPIC": {"WRITE", "DESCRIBE", "CREATE", "READ"}, "GROUP": {"READ"}}
    out = capsys.readouterr().out
    assert "Adding ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, " \
           "patternType=LITERAL)`: \n \t(principal=User:a, host=*, operation=READ, " \
           "permissionType=ALLOW) \n" in out


def test_remove_without_principals_removes_every_acl_of_the_resource() -> None:
    client = Recording()
    acls._remove(client, parsed("--remove", "--topic", "t", "--force"),
                 int(PatternType.ANY))
    (delete,) = [r for r in client.requests if isinstance(r, DeleteAclsRequest)]
    (only,) = delete.filters
    assert (only.resource_type, only.resource_name, only.pattern_type, only.principal,
            only.operation) == (ResourceType.TOPIC, "t", PatternType.ANY, None,
                                AclOperation.ANY)
