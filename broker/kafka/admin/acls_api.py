"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v1-v3, on the Kafka listener.

As a Kafka broker does: DescribeAcls answers from this broker's image (its ACLs, by
the filter's ANY / MATCH rules), grouped by resource; CreateAcls and DeleteAcls are
forwarded to the active controller (`metadata.admin` CreateAcls / DeleteAcls, decided by
`metadata.acl_control`), and the answer is held until this broker's image shows the
change, so a describe on this broker right after sees it. Describing needs DESCRIBE on
the cluster, creating and deleting ALTER (else CLUSTER_AUTHORIZATION_FAILED); the
controller then takes the broker's word for it (see `metadata.acl_control`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.admin_api import forward_to_controller, kafka_error, request_timeout_s
from broker.kafka.context import BrokerContext
from metadata.admin import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from metadata.authorizer import (
    AclBinding,
    AclFilter,
    invalid_filter_reason,
    matching_acls,
)
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)

DENIED = "Authorization failed."


def _filter(entry: Any) -> AclFilter:
    return AclFilter(
        resource_type=int(entry.resource_type_filter),
        resource_name=entry.resource_name_filter,
        pattern_type=int(getattr(entry, "pattern_type_filter", 3)),
        principal=entry.principal_filter, host=entry.host_filter,
        operation=int(entry.operation), permission_type=int(entry.permission_type))


def _binding(entry: Any) -> AclBinding:
    return AclBinding(
        resource_type=int(entry.resource_type), resource_name=entry.resource_name,
        pattern_type=int(getattr(entry, "resource_pattern_type", 3)),
        principal=entry.principal, host=entry.host, operation=int(entry.operation),
        permission_type=int(entry.permission_type))


def _resources(bindings: Iterable[AclBinding]) -> list[shapes.AclResource]:
    """DescribeAcls' shape: one entry per resource pattern, its ACLs under it."""
    grouped: dict[tuple[int, str, int], list[shapes.AclDescription]] = {}
    for b in bindings:
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            {"principal": b.principal, "host": b.host, "operation": b.operation,
             "permission_type": b.permission_type})
    return [{"resource_type": rt, "resource_name": name, "pattern_type": pattern,
             "acls": acls} for (rt, name, pattern), acls in grouped.items()]


async def handle_describe_acls_request(context: BrokerContext, request: Any,
                                       version: int) -> shapes.DescribeAclsResponse:
    if not authz.cluster_allowed(context, authz.Op.DESCRIBE):
        return {"throttle_time": 0, "resources": [], "error_message": DENIED,
                "error_code": authz.CLUSTER_AUTHORIZATION_FAILED}
    acl_filter = _filter(request)
    reason = invalid_filter_reason(acl_filter)
    if reason is not None:
        return {"throttle_time": 0, "resources": [], "error_message": reason,
                "error_code": int(ErrorCode.INVALID_REQUEST)}
    found = matching_acls(context.image.acls, acl_filter)
    return {"throttle_time": 0, "error_code": 0, "error_message": None,
            "resources": _resources(a.binding for a in found)}


async def handle_create_acls_request(context: BrokerContext, request: Any,
                                     version: int) -> shapes.CreateAclsResponse:
    if not authz.cluster_allowed(context, authz.Op.ALTER):
        return {"throttle_time": 0, "results": [
            {"error_code": authz.CLUSTER_AUTHORIZATION_FAILED, "error_message": DENIED}
            for _ in request.creations]}
    timeout_s = request_timeout_s(request, context)
    admin = CreateAclsRequest(creations=tuple(_binding(c) for c in request.creations))
    response, error, message = await forward_to_controller(context, admin, timeout_s)
    results: list[shapes.AclResult]
    if response is None:
        results = [{"error_code": error, "error_message": message} for _ in admin.creations]
    else:
        assert isinstance(response, CreateAclsResponse)
        created = [b for b, r in zip(admin.creations, response.results, strict=False)
                   if r.error_code == 0]
        if created:
            await context.wait_image(
                lambda image: all(image.acls.find(b) is not None for b in created), timeout_s)
        results = [{"error_code": kafka_error(r.error_code), "error_message": r.error_message}
                   for r in response.results]
    log.info("create acls", extra={"count": len(admin.creations),
                                   "errors": [r["error_code"] for r in results]})
    return {"throttle_time": 0, "results": results}


async def handle_delete_acls_request(context: BrokerContext, request: Any,
                                     version: int) -> shapes.DeleteAclsResponse:
    if not authz.cluster_allowed(context, authz.Op.ALTER):
        return {"throttle_time": 0, "filter_results": [
            {"error_code": authz.CLUSTER_AUTHORIZATION_FAILED, "error_message": DENIED,
             "matching_acls": []} for _ in request.filters]}
    timeout_s = request_timeout_s(request, context)
    admin = DeleteAclsRequest(filters=tuple(_filter(f) for f in request.filters))
    response, error, message = await forward_to_controller(context, admin, timeout_s)
    results: list[shapes.AclFilterResult]
    if response is None:
        results = [{"error_code": error, "error_message": message, "matching_acls": []}
                   for _ in admin.filters]
    else:
        assert isinstance(response, DeleteAclsResponse)
        gone = [b for r in response.filter_results for b in r.matching_acls]
        if gone:
            await context.wait_image(
                lambda image: all(image.acls.find(b) is None for b in gone), timeout_s)
        results = [{"error_code": kafka_error(r.error_code), "error_message": r.error_message,
                    "matching_acls": [
                        {"error_code": 0, "error_message": None,
                         "resource_type": b.resource_type, "resource_name": b.resource_name,
                         "pattern_type": b.pattern_type, "principal": b.principal,
                         "host": b.host, "operation": b.operation,
                         "permission_type": b.permission_type} for b in r.matching_acls]}
                   for r in response.filter_results]
    log.info("delete acls", extra={"filters": len(admin.filters),
                                   "deleted": sum(len(r["matching_acls"]) for r in results)})
    return {"throttle_time": 0, "filter_results": results}
