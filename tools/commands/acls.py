"""`kraft acls`: add, remove and list ACLs (like kafka-acls.sh).

    kraft acls (--cluster DIR | --bootstrap-server HOST:PORT[,...]
                | --bootstrap-controller HOST:PORT[,...])
        (--add | --remove | --list)
        [--allow-principal P ...] [--deny-principal P ...]
        [--allow-host H ...] [--deny-host H ...] [--principal P]
        [--operation OP ... | --producer | --consumer] (--topic T | --group G | --cluster) ...
        [--resource-pattern-type literal|prefixed|any|match] [--force] [--json]
        [--command-config FILE]

`--cluster DIR` names a local cluster (its controllers); `--cluster` alone, as in
kafka-acls.sh, names the cluster resource. `--bootstrap-server` speaks Kafka's
CreateAcls, DeleteAcls and DescribeAcls to a broker (which forwards writes to the
controller); `--bootstrap-controller` and `--cluster DIR` the controllers' admin RPCs.
As kafka-acls.sh: `--add` creates, for each resource, an ACL per principal, host
(default `*`) and operation, ALLOW for the `--allow-*` options and DENY for the
`--deny-*` ones (LITERAL or PREFIXED; `--producer` stands for WRITE, DESCRIBE and CREATE
on the topics, `--consumer` for READ and DESCRIBE on them and READ on the groups; each
resource type takes only kafka-acls.sh's operations for it); `--remove` with principals
and operations removes exactly those ACLs, without them every ACL of the resource (any
pattern type given), asking first on a terminal unless `--force` (without a terminal
`--force` is required); `--list` shows the ACLs of the resources named (by the pattern
type: default LITERAL, `any`, or `match`: every ACL that applies to the name), or all,
optionally of one `--principal`. The output is kafka-acls.sh's (`Current ACLs for
resource ...`); `--json` gives `{"acls": [...]}`. A refusal exits 1 with the Kafka error
(e.g. CLUSTER_AUTHORIZATION_FAILED); bad usage exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

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
from metadata.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from raft.common.session import KafkaPrincipal
from tools.addresses import broker_addresses
from tools.admin_client import AdminClient, describe_error, fail_on_error
from tools.cluster import Cluster, ClusterError
from tools.commands.quorum import controller_addresses
from tools.errors import CommandError, usage_error

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ACL_VERSIONS = (1, 3)  # what this client speaks (kio's schemas)
# kafka-acls.sh's operation names (any case): Read, Write, ..., All
OPERATIONS = {op.name.replace("_", "").lower(): op for op in AclOperation
              if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}
Op = AclOperation
# kafka-acls.sh's check: the operations each resource type has
VALID_OPERATIONS: dict[int, frozenset[int]] = {
    ResourceType.TOPIC: frozenset({Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE,
                                   Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL}),
    ResourceType.GROUP: frozenset({Op.READ, Op.DESCRIBE, Op.DELETE, Op.ALL}),
    ResourceType.CLUSTER: frozenset({Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS,
                                     Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
                                     Op.DESCRIBE, Op.ALL}),
}
PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED,
            "any": PatternType.ANY, "match": PatternType.MATCH}


class _ClusterOption(argparse.Action):
    """`--cluster DIR`: the local cluster to talk to; `--cluster` alone: the resource."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if values is None:
            namespace.cluster_resource = True
        elif namespace.cluster is not None:
            parser.error("--cluster DIR given twice")
        else:
            namespace.cluster = values


def configure(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument("--cluster", nargs="?", action=_ClusterOption, default=None,
                        metavar="DIR", help="a local cluster's controllers; alone: the "
                        "cluster resource (as kafka-acls.sh's --cluster)")
    parser.set_defaults(cluster_resource=False)
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                        help="broker addresses (their Kafka listeners)")
    parser.add_argument("--bootstrap-controller", metavar="HOST:PORT[,...]",
                        help="controller addresses")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for option, text in (("--allow-principal", "principal allowed (User:NAME)"),
                         ("--deny-principal", "principal denied (User:NAME)"),
                         ("--allow-host", "host the allow ACLs apply to (default *)"),
                         ("--deny-host", "host the deny ACLs apply to (default *)"),
                         ("--operation", "Read, Write, Create, Delete, Alter, Describe, "
                          "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, "
                          "All"),
                         ("--topic", "a topic (or a prefix, * for all)"),
                         ("--group", "a consumer group (or a prefix, * for all)")):
        parser.add_argument(option, action="append", default=[], help=text)
    parser.add_argument("--producer", action="store_true",
                        help="--add/--remove: WRITE, DESCRIBE and CREATE on the topics")
    parser.add_argument("--consumer", action="store_true",
                        help="--add/--remove: READ and DESCRIBE on the topics, READ on the "
                        "groups")
    parser.add_argument("--principal", help="--list: only this principal's ACLs")
    parser.add_argument("--resource-pattern-type", default="literal",
                        choices=tuple(PATTERNS), type=str.lower,
                        help="how the resource name matches (default literal)")
    parser.add_argument("--force", action="store_true", help="--remove without asking")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS")


# --- the two ways to the ACLs -----------------------------------------------------------


class _BrokerAcls:
    """CreateAcls, DeleteAcls and DescribeAcls to a broker, as `metadata.admin` messages."""

    def __init__(self, args: argparse.Namespace) -> None:
        from tools.client.admin import BrokerAdminClient  # kio and trio: only when used
        self.client = BrokerAdminClient(broker_addresses(None, args.bootstrap_server),
                                        ssl_context=args.client_ssl, sasl=args.client_sasl,
                                        timeout_s=args.timeout)

    def call(self, request: Any) -> Any:
        return self.client.run(lambda admin: self._call(admin, request))

    @staticmethod
    async def _call(admin: Any, request: Any) -> Any:
        from tools.client.admin import UnsupportedByBroker
        api_key = (DESCRIBE_ACLS if isinstance(request, DescribeAclsRequest) else
                   CREATE_ACLS if isinstance(request, CreateAclsRequest) else DELETE_ACLS)
        theirs = (await admin.negotiate()).get(api_key)
        if theirs is None or theirs[1] < ACL_VERSIONS[0]:
            raise UnsupportedByBroker(f"the broker does not serve API key {api_key} "
                                      f"v{ACL_VERSIONS[0]}+")
        version = min(theirs[1], ACL_VERSIONS[1])
        if isinstance(request, DescribeAclsRequest):
            response = await admin.send(api_key, _filter_values(request.filter),
                                        version=version)
            if int(response.error_code):
                raise CommandError("DescribeAcls failed: " + _error(
                    int(response.error_code), response.error_message))
            return DescribeAclsResponse(acls=tuple(
                AclBinding(resource_type=int(r.resource_type), resource_name=r.resource_name,
                           pattern_type=int(r.pattern_type), principal=a.principal,
                           host=a.host, operation=int(a.operation),
                           permission_type=int(a.permission_type))
                for r in response.resources for a in r.acls))
        if isinstance(request, CreateAclsRequest):
            response = await admin.send(api_key, {"creations": [
                {"resource_type": b.resource_type, "resource_name": b.resource_name,
                 "resource_pattern_type": b.pattern_type, "principal": b.principal,
                 "host": b.host, "operation": b.operation,
                 "permission_type": b.permission_type} for b in request.creations]},
                version=version)
            return CreateAclsResponse(results=tuple(
                AclCreationResult(error_code=int(r.error_code), error_message=r.error_message)
                for r in response.results))
        response = await admin.send(api_key, {"filters": [
            _filter_values(f) for f in request.filters]}, version=version)
        return DeleteAclsResponse(filter_results=tuple(
            DeleteAclsFilterResult(
                error_code=int(r.error_code), error_message=r.error_message,
                matching_acls=tuple(AclBinding(
                    resource_type=int(m.resource_type), resource_name=m.resource_name,
                    pattern_type=int(m.pattern_type), principal=m.principal, host=m.host,
                    operation=int(m.operation), permission_type=int(m.permission_type))
                    for m in r.matching_acls))
            for r in response.filter_results))


def _filter_values(f: AclFilter) -> dict[str, Any]:
    return {"resource_type_filter": f.resource_type, "resource_name_filter": f.resource_name,
            "pattern_type_filter": f.pattern_type, "principal_filter": f.principal,
            "host_filter": f.host, "operation": f.operation,
            "permission_type": f.permission_type}


def _client(args: argparse.Namespace) -> Any:
    targets = [t for t in (args.cluster, args.bootstrap_server, args.bootstrap_controller)
               if t is not None]
    if len(targets) != 1:
        raise usage_error("give one of --cluster DIR, --bootstrap-server, "
                          "--bootstrap-controller")
    if args.bootstrap_server is not None:
        return _BrokerAcls(args)
    if args.cluster is not None:
        try:
            cluster = Cluster.load(args.cluster)
        except (ClusterError, OSError) as exc:
            raise usage_error(f"--cluster {args.cluster}: {exc}") from None
        return AdminClient(cluster.controller_addresses(), cluster_id=cluster.cluster_id,
                           timeout_s=args.timeout, ssl_context=args.client_ssl)
    return AdminClient(controller_addresses(args), timeout_s=args.timeout,
                       ssl_context=args.client_ssl)


def _error(code: int, message: str | None) -> str:
    return describe_error(code, message)


# --- what the options say ---------------------------------------------------------------


def _resources(args: argparse.Namespace) -> list[tuple[int, str]]:
    resources = [(int(ResourceType.TOPIC), t) for t in args.topic]
    resources += [(int(ResourceType.GROUP), g) for g in args.group]
    if args.cluster_resource:
        resources.append((int(ResourceType.CLUSTER), CLUSTER_NAME))
    return resources


def _principals(values: Sequence[str], option: str) -> list[str]:
    for value in values:
        try:
            KafkaPrincipal.parse(value)
        except ValueError as exc:
            raise usage_error(f"{option}: {exc}") from None
    return list(values)


def _operations(values: Sequence[str]) -> list[int]:
    ops = []
    for value in values:
        op = OPERATIONS.get(value.replace("_", "").replace("-", "").lower())
        if op is None:
            raise usage_error(f"--operation: {value!r} is not one of "
                              f"{', '.join(sorted(o.name for o in OPERATIONS.values()))}")
        ops.append(int(op))
    return ops


def _operations_for(args: argparse.Namespace, resource_type: int) -> list[int]:
    """--operation, or what --producer / --consumer give this resource type."""
    if not (args.producer or args.consumer):
        return _operations(args.operation)
    ops: list[int] = []
    if resource_type == ResourceType.TOPIC:
        if args.producer:
            ops += [Op.WRITE, Op.DESCRIBE, Op.CREATE]
        if args.consumer:
            ops += [Op.READ, Op.DESCRIBE]
    elif resource_type == ResourceType.GROUP and args.consumer:
        ops.append(Op.READ)
    return [int(op) for op in dict.fromkeys(ops)]


def _entries(args: argparse.Namespace, resource_type: int = ResourceType.TOPIC
             ) -> list[tuple[str, str, int, int]]:
    """(principal, host, operation, permission) for --add / an exact --remove."""
    allow = _principals(args.allow_principal, "--allow-principal")
    deny = _principals(args.deny_principal, "--deny-principal")
    operations = _operations_for(args, resource_type)
    entries = []
    for principals, hosts, permission in (
            (allow, args.allow_host or ["*"], AclPermissionType.ALLOW),
            (deny, args.deny_host or ["*"], AclPermissionType.DENY)):
        entries += [(p, h, op, int(permission)) for p in principals for h in hosts
                    for op in operations]
    return entries


# --- output ---------------------------------------------------------------------------


def _pattern_text(resource_type: int, name: str, pattern: int) -> str:
    return (f"ResourcePattern(resourceType={ResourceType(resource_type).name}, name={name}, "
            f"patternType={PatternType(pattern).name})")


def _entry_text(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, "
            f"operation={AclOperation(b.operation).name}, "
            f"permissionType={AclPermissionType(b.permission_type).name})")


def _binding_json(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": ResourceType(b.resource_type).name,
            "resource_name": b.resource_name,
            "pattern_type": PatternType(b.pattern_type).name, "principal": b.principal,
            "host": b.host, "operation": AclOperation(b.operation).name,
            "permission_type": AclPermissionType(b.permission_type).name}


def _print_grouped(heading: str, bindings: Sequence[AclBinding]) -> None:
    """kafka-acls.sh's layout: per resource pattern, a heading and a tab per ACL."""
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in bindings:
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    for (rt, name, pattern), acls in grouped.items():
        lines = "\n".join(f"\t{_entry_text(b)}" for b in acls)
        print(f"{heading} `{_pattern_text(rt, name, pattern)}`: \n {lines} \n")


# --- actions --------------------------------------------------------------------------


def _describe(client: Any, acl_filter: AclFilter) -> list[AclBinding]:
    response = client.call(DescribeAclsRequest(filter=acl_filter))
    assert isinstance(response, DescribeAclsResponse)
    fail_on_error("describing ACLs", response.error_code, response.error_message)
    return list(response.acls)


def _add(client: Any, args: argparse.Namespace, pattern: int) -> int:
    bindings = [AclBinding(resource_type=rt, resource_name=name, pattern_type=pattern,
                           principal=p, host=h, operation=op, permission_type=perm)
                for rt, name in _resources(args) for p, h, op, perm in _entries(args, rt)]
    response = client.call(CreateAclsRequest(creations=tuple(bindings)))
    assert isinstance(response, CreateAclsResponse)
    for b, result in zip(bindings, response.results, strict=False):
        fail_on_error(f"adding {_entry_text(b)}", result.error_code, result.error_message)
    current = [b for rt, name in _resources(args) for b in _describe(client, AclFilter(
        resource_type=rt, resource_name=name, pattern_type=pattern))]
    if args.json:
        print(json.dumps({"added": [_binding_json(b) for b in bindings],
                          "acls": [_binding_json(b) for b in current]}))
    else:
        _print_grouped("Adding ACLs for resource", bindings)
        _print_grouped("Current ACLs for resource", current)
    return 0


def _confirm(question: str, args: argparse.Namespace) -> bool:
    if args.force:
        return True
    if not sys.stdin.isatty():
        raise usage_error("--remove asks before removing ACLs: give --force when stdin "
                          "is not a terminal")
    return input(f"{question} (y/n)\n").strip().lower() in ("y", "yes")


def _remove(client: Any, args: argparse.Namespace, pattern: int) -> int:
    entries = [(rt, name, e) for rt, name in _resources(args) for e in _entries(args, rt)]
    filters = [AclFilter(resource_type=rt, resource_name=name, pattern_type=pattern,
                         principal=p, host=h, operation=op, permission_type=perm)
               for rt, name, (p, h, op, perm) in entries] or [
        AclFilter(resource_type=rt, resource_name=name, pattern_type=pattern)
        for rt, name in _resources(args)]
    what = "the ACLs given" if entries else "all ACLs"
    names = ", ".join(f"{ResourceType(rt).name} {name}" for rt, name in _resources(args))
    if not _confirm(f"Are you sure you want to remove {what} for {names}?", args):
        return 0
    response = client.call(DeleteAclsRequest(filters=tuple(filters)))
    assert isinstance(response, DeleteAclsResponse)
    removed: list[AclBinding] = []
    for result in response.filter_results:
        fail_on_error("removing ACLs", result.error_code, result.error_message)
        removed += result.matching_acls
    if args.json:
        print(json.dumps({"removed": [_binding_json(b) for b in removed]}))
    else:
        _print_grouped("Removed ACLs for resource", removed)
        for rt, name in _resources(args):
            current = _describe(client, AclFilter(resource_type=rt, resource_name=name,
                                                  pattern_type=pattern))
            _print_grouped("Current ACLs for resource", current)
    return 0


def _list(client: Any, args: argparse.Namespace, pattern: int) -> int:
    principal = _principals([args.principal], "--principal")[0] if args.principal else None
    filters = [AclFilter(resource_type=rt, resource_name=name, pattern_type=pattern,
                         principal=principal) for rt, name in _resources(args)] or [
        AclFilter(principal=principal)]
    found: list[AclBinding] = []
    for acl_filter in filters:
        found += [b for b in _describe(client, acl_filter) if b not in found]
    if args.json:
        print(json.dumps({"acls": [_binding_json(b) for b in found]}))
    else:
        _print_grouped("Current ACLs for resource", found)
    return 0


def _validate(args: argparse.Namespace, pattern: int) -> None:
    """Bad usage, found before anything is sent (exit 2), as kafka-acls.sh checks it."""
    if (args.add or args.remove) and not _resources(args):
        raise usage_error("--add and --remove need a resource: --topic, --group or --cluster")
    if args.list and (args.allow_principal or args.deny_principal or args.operation):
        raise usage_error("--list takes --principal, not --allow-/--deny-principal or "
                          "--operation")
    if (args.producer or args.consumer) and (args.operation or args.list):
        raise usage_error("--producer and --consumer go with --add or --remove, without "
                          "--operation")
    if args.consumer and not args.group:
        raise usage_error("--consumer needs --group")
    if args.add:
        if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise usage_error("--add takes --resource-pattern-type literal or prefixed")
        if not any(_entries(args, rt) for rt, _ in _resources(args)):
            raise usage_error("--add needs --allow-principal or --deny-principal and "
                              "--operation (or --producer / --consumer)")
    for resource_type, _ in _resources(args):
        operations = set(_operations_for(args, resource_type))
        allowed = VALID_OPERATIONS[resource_type]
        if not operations <= allowed:
            raise usage_error(
                f"ResourceType {ResourceType(resource_type).name} only supports operations "
                f"{', '.join(sorted(AclOperation(o).name for o in allowed))}")


def run(args: argparse.Namespace) -> int:
    pattern = int(PATTERNS[args.resource_pattern_type])
    _validate(args, pattern)
    client = _client(args)
    try:
        if args.add:
            return _add(client, args, pattern)
        if args.remove:
            return _remove(client, args, pattern)
        return _list(client, args, pattern)
    except CommandError:
        raise
    except Exception as exc:  # the Kafka client's errors (tools.client): one line, exit 1
        from tools.client.connection import ClientError
        if isinstance(exc, ClientError):
            raise CommandError(str(exc)) from None
        raise
