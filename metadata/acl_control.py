"""The controller's ACL decisions and its admin-API authorization (pure).

CreateAcls, DeleteAcls and DescribeAcls, as Kafka's AclControlManager decides them:
- a creation is checked (`metadata.authorizer.invalid_binding_reason`: concrete codes,
  a TYPE:NAME principal, `kafka-cluster` for the cluster; INVALID_REQUEST otherwise);
  one whose binding an ACL already has succeeds without a record; any other gets a new
  random id (Kafka's ACL ids are Uuids) and an `AccessControlEntry` record;
- a deletion filter (ANY / MATCH patterns, `metadata.authorizer.AclFilter`) removes
  every ACL it matches, one `RemoveAccessControlEntry` each, and lists them; a
  malformed filter (UNKNOWN codes) is INVALID_REQUEST;
- a describe lists the ACLs the filter matches, from the committed image.

`admin_refusal` is the rule for callers of the controller's admin API (the msgpack RPCs
of `metadata.admin` on the controller listener) when the authorizer is on, with the
principal the transport's session holds (the client certificate's subject under mutual
TLS; ANONYMOUS without TLS):
- a caller with CLUSTER_ACTION on the cluster (a broker: super.users in practice) may
  make every RPC. Brokers register, heartbeat and send AlterPartition with it, and they
  forward CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs,
  CreateAcls and DeleteAcls only after authorizing their own client for them (as
  Kafka's forwarding through Envelope, whose sender needs CLUSTER_ACTION);
- any other caller (`kraft topics --bootstrap-controller`, `kraft acls
  --bootstrap-controller`, ...) needs what Kafka asks for the same request: CREATE on the
  cluster or the topic (CreateTopics), DELETE (DeleteTopics), ALTER (CreatePartitions;
  a rename: ALTER on the topic and CREATE on the new name), DESCRIBE (DescribeTopics),
  ALTER_CONFIGS / DESCRIBE_CONFIGS, ALTER on the cluster (CreateAcls, DeleteAcls,
  AlterUserScramCredentials), DESCRIBE on the cluster (DescribeAcls,
  DescribeUserScramCredentials); the broker RPCs need CLUSTER_ACTION. One resource
  refused refuses the whole request (one AdminErrorResponse naming it): these RPCs
  are decided whole. DescribeTopics of every topic lists those the caller may describe.
The raft RPCs on the same listener (Fetch, Vote, ...) are not authorized here.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from metadata import records as rec
from metadata.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AclCreationResult,
    AdminErrorResponse,
    AdminRequest,
    AlterPartitionRequest,
    AlterUserScramCredentialsRequest,
    BrokerHeartbeatRequest,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeTopicsRequest,
    DescribeUserScramCredentialsRequest,
    IncrementalAlterConfigsRequest,
    RegisterBrokerRequest,
    RenameTopicRequest,
)
from metadata.authorizer import (
    CLUSTER_NAME,
    AclImage,
    AclOperation,
    AuthorizerSettings,
    ResourceType,
    authorize,
    invalid_binding_reason,
    invalid_filter_reason,
    matching_acls,
)
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from raft.common.session import KafkaPrincipal
from raft.common.uuid import ZERO_UUID, Uuid

Op = AclOperation
TOPIC_AUTHORIZATION_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CLUSTER_AUTHORIZATION_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
Emit = Callable[[rec.Record], int]


# --- decisions ------------------------------------------------------------------------


def _new_acl_id(acls: AclImage, rng: random.Random) -> Uuid:
    while True:
        acl_id = Uuid.random(rng)
        if acls.get(acl_id) is None:
            return acl_id


def create_acls(delta: MetadataDelta, emit: Emit, request: CreateAclsRequest,
                rng: random.Random) -> CreateAclsResponse:
    results: list[AclCreationResult] = []
    for binding in request.creations:
        reason = invalid_binding_reason(binding)
        if reason is not None:
            results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST,
                                              error_message=reason))
            continue
        acls = delta.acls()
        if acls.find(binding) is None:  # an ACL already there: nothing to write
            emit(rec.AccessControlEntry(
                id=_new_acl_id(acls, rng), resource_type=binding.resource_type,
                resource_name=binding.resource_name, pattern_type=binding.pattern_type,
                principal=binding.principal, host=binding.host,
                operation=binding.operation, permission_type=binding.permission_type))
        results.append(AclCreationResult())
    return CreateAclsResponse(results=tuple(results))


def delete_acls(delta: MetadataDelta, emit: Emit, request: DeleteAclsRequest
                ) -> DeleteAclsResponse:
    results: list[DeleteAclsFilterResult] = []
    for acl_filter in request.filters:
        reason = invalid_filter_reason(acl_filter)
        if reason is not None:
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST,
                                                  error_message=reason))
            continue
        matched = matching_acls(delta.acls(), acl_filter)
        for acl in matched:
            emit(rec.RemoveAccessControlEntry(id=acl.id))
        results.append(DeleteAclsFilterResult(
            matching_acls=tuple(acl.binding for acl in matched)))
    return DeleteAclsResponse(filter_results=tuple(results))


def describe_acls(image: MetadataImage, request: DescribeAclsRequest) -> DescribeAclsResponse:
    reason = invalid_filter_reason(request.filter)
    if reason is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST,
                                    error_message=reason)
    return DescribeAclsResponse(acls=tuple(
        acl.binding for acl in matching_acls(image.acls, request.filter)))


# --- who may call the controller's admin API ------------------------------------------

_Check = tuple[int, int, str]  # (operation, resource type, resource name)
_CLUSTER_ONLY = (RegisterBrokerRequest, BrokerHeartbeatRequest, AlterPartitionRequest)


def _topic_name(image: MetadataImage, name: str | None, topic_id: Uuid) -> str | None:
    if topic_id != ZERO_UUID:
        topic = image.topic(topic_id)
        return None if topic is None else topic.name
    return name


def _checks(image: MetadataImage, request: AdminRequest) -> list[list[_Check]]:
    """What the request needs: each inner list is alternatives (one suffices), all of
    the outer list are needed. [[]] would need nothing; an empty inner list denies."""
    cluster = (int(ResourceType.CLUSTER), CLUSTER_NAME)
    topic = int(ResourceType.TOPIC)
    match request:
        case CreateTopicsRequest():
            return [[(Op.CREATE, *cluster), (Op.CREATE, topic, t.name)]
                    for t in request.topics]
        case DeleteTopicsRequest():
            return [[(Op.DELETE, topic, name)] for t in request.topics
                    if (name := _topic_name(image, t.name, t.topic_id)) is not None]
        case DescribeTopicsRequest():
            names = list(request.names or ())
            names += [n for i in request.topic_ids or ()
                      if (n := _topic_name(image, None, i)) is not None]
            return [[(Op.DESCRIBE, topic, n)] for n in names]
        case CreatePartitionsRequest():
            return [[(Op.ALTER, topic, t.name)] for t in request.topics]
        case RenameTopicRequest():
            old = _topic_name(image, None, request.topic_id)
            checks: list[list[_Check]] = [
                [(Op.CREATE, *cluster), (Op.CREATE, topic, request.new_name)]]
            if old is not None:
                checks.append([(Op.ALTER, topic, old)])
            return checks
        case IncrementalAlterConfigsRequest():
            return [[(Op.ALTER_CONFIGS, topic, r.resource_name)]
                    if r.resource_type == TOPIC_RESOURCE else [(Op.ALTER_CONFIGS, *cluster)]
                    if r.resource_type == BROKER_RESOURCE else []
                    for r in request.resources]
        case CreateAclsRequest() | DeleteAclsRequest() | AlterUserScramCredentialsRequest():
            return [[(Op.ALTER, *cluster)]]
        case DescribeAclsRequest() | DescribeUserScramCredentialsRequest():
            return [[(Op.DESCRIBE, *cluster)]]
    return [[]]  # the broker RPCs, and any RPC not listed: CLUSTER_ACTION only


def admin_refusal(image: MetadataImage, principal: KafkaPrincipal, host: str,
                  request: AdminRequest, settings: AuthorizerSettings
                  ) -> AdminErrorResponse | None:
    """Why this caller may not make `request` (the rule is in the module docstring),
    or None when it may."""
    if not settings.enabled:
        return None

    def allowed(check: _Check) -> bool:
        operation, resource_type, name = check
        return authorize(image.acls, principal, host, operation, resource_type, name,
                         settings)

    if allowed((Op.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)):
        return None
    if isinstance(request, _CLUSTER_ONLY):
        return AdminErrorResponse(top_level_error=CLUSTER_AUTHORIZATION_FAILED,
                                  error_message=f"{principal} lacks CLUSTER_ACTION on the "
                                                f"cluster")
    for alternatives in _checks(image, request):
        if not any(allowed(c) for c in alternatives):
            if not alternatives:
                return AdminErrorResponse(top_level_error=CLUSTER_AUTHORIZATION_FAILED,
                                          error_message=f"{principal} is not authorized")
            operation, resource_type, name = alternatives[-1]
            code = (TOPIC_AUTHORIZATION_FAILED if resource_type == ResourceType.TOPIC
                    else CLUSTER_AUTHORIZATION_FAILED)
            return AdminErrorResponse(
                top_level_error=code,
                error_message=f"{principal} is not allowed {Op(operation).name} on "
                              f"{ResourceType(resource_type).name} {name}")
    return None


def describable(image: MetadataImage, principal: KafkaPrincipal, host: str,
                settings: AuthorizerSettings) -> Callable[[str], bool]:
    """For DescribeTopics of every topic: may this caller DESCRIBE topic `name`?"""
    def check(name: str) -> bool:
        return authorize(image.acls, principal, host, Op.DESCRIBE, ResourceType.TOPIC,
                         name, settings) or authorize(
            image.acls, principal, host, Op.CLUSTER_ACTION, ResourceType.CLUSTER,
            CLUSTER_NAME, settings)
    return check
