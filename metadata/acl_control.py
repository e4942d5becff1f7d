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

`admin_refusal` (and, per topic of a DeleteTopics, `delete_topics_refusals`) is the rule
for callers of the controller's admin API (the msgpack RPCs of `metadata.admin` on the
controller listener) when the authorizer is on, with the principal the transport's
session holds (the client certificate's subject under mutual TLS; ANONYMOUS without TLS):
- a caller with CLUSTER_ACTION on the cluster (a broker: super.users in practice) may
  make every RPC of its own. Brokers register, heartbeat, send AlterPartition and create
  `__consumer_offsets` with it, and they forward CreateTopics, CreatePartitions,
  IncrementalAlterConfigs, CreateAcls and DeleteAcls only after authorizing their own
  client for them (as Kafka's forwarding through Envelope, whose sender needs
  CLUSTER_ACTION);
- a request that carries `forwarded_principal` (DeleteTopics, the one forwarded RPC that
  can name a topic by ID, which a broker's lagging image may not know) is judged for
  that principal and `forwarded_host`, against this committed image; only a sender with
  CLUSTER_ACTION may forward (else CLUSTER_AUTHORIZATION_FAILED);
- any other caller (`kraft topics --bootstrap-controller`, `kraft acls
  --bootstrap-controller`, ...) needs what Kafka asks for the same request: CREATE on the
  cluster or the topic (CreateTopics), DELETE on each topic (DeleteTopics), ALTER
  (CreatePartitions), DESCRIBE (DescribeTopics), ALTER_CONFIGS / DESCRIBE_CONFIGS. The
  RPCs whose one right is on the cluster (ALTER for CreateAcls, DeleteAcls,
  AlterUserScramCredentials and UpdateFeatures, DESCRIBE for DescribeAcls and
  DescribeUserScramCredentials, CLUSTER_ACTION for the broker RPCs; none for
  DescribeFeatures, what ApiVersions tells anyone) are rows of the authorization table
  (broker/access_table.py), checked by the listener before the request is even read:
  not again here. A rename (RenameTopic, a project extension) needs ALTER and DELETE on
  the old name, since the topic disappears under it (CREATE alone on a new name must
  not carry away a topic the caller may only alter), and CREATE on the new name or the
  cluster, as a creation;
- a topic named by ID is looked up in the committed image. An unknown ID is left to the
  request (UNKNOWN_TOPIC_ID), and a refusal names the topic by its ID, never by its
  name. DeleteTopics is decided per topic as Kafka's ControllerApis: an unknown ID
  answers UNKNOWN_TOPIC_ID, a topic without DELETE TOPIC_AUTHORIZATION_FAILED, with its
  name only for a caller that may DESCRIBE it; DescribeTopics by ID answers
  TOPIC_AUTHORIZATION_FAILED naming the ID, as Kafka's Metadata by ID;
- none of these callers may create, delete, grow or rename an internal topic
  (`metadata.topic_names`): INVALID_TOPIC_EXCEPTION, once authorized.
Other than DeleteTopics, one resource refused refuses the whole request (one
AdminErrorResponse naming it): these RPCs are decided whole. DescribeTopics of every
topic lists those the caller may describe. With the authorizer off every caller may
make every RPC, except that a forwarded DeleteTopics of an internal topic is refused.
The raft RPCs on the same listener (Fetch, Vote, ...) are rows of the same table.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from metadata import records as rec
from metadata.admin import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    AclCreationResult,
    AdminErrorResponse,
    AdminRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterUserScramCredentialsRequest,
    BrokerHeartbeatRequest,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeletableTopicResult,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeFeaturesRequest,
    DescribeTopicsRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    RegisterBrokerRequest,
    RenameTopicRequest,
    UpdateFeaturesRequest,
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
from metadata.topic_names import is_internal_topic
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

_Check = tuple[int, int, str, str]  # (operation, resource type, name, how a refusal names it)
# their one right is on the cluster, a row of the authorization table
# (broker/access_table.py) that every listener checks before the request is read: the
# broker RPCs (CLUSTER_ACTION), the ACL and SCRAM RPCs (ALTER or DESCRIBE), ElectLeaders
# and AlterPartitionReassignments (ALTER)
_DECIDED_BY_THE_TABLE = (RegisterBrokerRequest, BrokerHeartbeatRequest, AlterPartitionRequest,
                         CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
                         AlterUserScramCredentialsRequest,
                         DescribeUserScramCredentialsRequest, ElectLeadersRequest,
                         AlterPartitionReassignmentsRequest, UpdateFeaturesRequest,
                         DescribeFeaturesRequest)


@dataclass(frozen=True, slots=True)
class _Caller:
    """Whom a request is judged for: the sender, or the client a broker forwards it for.
    `trusted`: the sender's own request with CLUSTER_ACTION (or the authorizer off),
    which may make every RPC."""

    principal: KafkaPrincipal
    host: str
    trusted: bool


def _caller(image: MetadataImage, principal: KafkaPrincipal, host: str,
            request: AdminRequest, settings: AuthorizerSettings
            ) -> _Caller | AdminErrorResponse:
    def cluster_action(who: KafkaPrincipal, where: str) -> bool:
        return authorize(image.acls, who, where, Op.CLUSTER_ACTION, ResourceType.CLUSTER,
                         CLUSTER_NAME, settings)

    forwarded = getattr(request, "forwarded_principal", None)
    if forwarded is None:
        return _Caller(principal, host, trusted=cluster_action(principal, host))
    if not cluster_action(principal, host):
        return AdminErrorResponse(
            top_level_error=CLUSTER_AUTHORIZATION_FAILED,
            error_message=f"{principal} lacks CLUSTER_ACTION on the cluster, which "
                          f"forwarding a request for {forwarded} needs")
    try:
        client = KafkaPrincipal.parse(forwarded)
    except ValueError as exc:
        return AdminErrorResponse(top_level_error=ErrorCode.INVALID_REQUEST,
                                  error_message=f"forwarded_principal: {exc}")
    return _Caller(client, getattr(request, "forwarded_host", None) or "", trusted=False)


def _named(operation: int, name: str) -> _Check:
    return (operation, int(ResourceType.TOPIC), name, f"TOPIC {name}")


def _by_id(operation: int, name: str, topic_id: Uuid) -> _Check:
    """A topic the caller named by ID: a refusal names the ID, never the name."""
    return (operation, int(ResourceType.TOPIC), name, f"the topic with ID {topic_id}")


def _checks(image: MetadataImage, request: AdminRequest) -> list[list[_Check]]:
    """What the request needs: each inner list is alternatives (one suffices), all of
    the outer list are needed; an empty inner list denies. A topic ID the committed
    image does not know needs nothing here: the request answers UNKNOWN_TOPIC_ID."""
    cluster = (int(ResourceType.CLUSTER), CLUSTER_NAME, f"CLUSTER {CLUSTER_NAME}")
    match request:
        case CreateTopicsRequest():
            return [[(Op.CREATE, *cluster), _named(Op.CREATE, t.name)] for t in request.topics]
        case DeleteTopicsRequest():
            return []  # per topic: delete_topics_refusals
        case DescribeTopicsRequest():
            checks = [[_named(Op.DESCRIBE, n)] for n in request.names or ()]
            return checks + [[_by_id(Op.DESCRIBE, t.name, i)] for i in request.topic_ids or ()
                             if (t := image.topic(i)) is not None]
        case CreatePartitionsRequest():
            return [[_named(Op.ALTER, t.name)] for t in request.topics]
        case RenameTopicRequest():
            checks = [[(Op.CREATE, *cluster), _named(Op.CREATE, request.new_name)]]
            old = image.topic(request.topic_id)
            if old is not None:  # it disappears under its old name: a deletion of that
                checks += [[_by_id(Op.ALTER, old.name, request.topic_id)],
                           [_by_id(Op.DELETE, old.name, request.topic_id)]]
            return checks
        case IncrementalAlterConfigsRequest():
            return [[_named(Op.ALTER_CONFIGS, r.resource_name)]
                    if r.resource_type == TOPIC_RESOURCE else [(Op.ALTER_CONFIGS, *cluster)]
                    if r.resource_type == BROKER_RESOURCE else []
                    for r in request.resources]
        case _ if isinstance(request, _DECIDED_BY_THE_TABLE):
            return []  # a right on the cluster, checked by the listener before this
    return [[]]  # any RPC not listed: CLUSTER_ACTION only


def _internal_topics_touched(image: MetadataImage, request: AdminRequest) -> list[str]:
    """The internal topics a client's CreateTopics, CreatePartitions or RenameTopic
    would create, grow, or rename from or to (DeleteTopics: per topic)."""
    match request:
        case CreateTopicsRequest() | CreatePartitionsRequest():
            names = [t.name for t in request.topics]
        case RenameTopicRequest():
            old = image.topic(request.topic_id)
            names = [request.new_name] + ([] if old is None else [old.name])
        case _:
            names = []
    return [n for n in names if is_internal_topic(n)]


def admin_refusal(image: MetadataImage, principal: KafkaPrincipal, host: str,
                  request: AdminRequest, settings: AuthorizerSettings
                  ) -> AdminErrorResponse | None:
    """Why this caller may not make `request` (the rule is in the module docstring),
    or None when it may. DeleteTopics is then decided per topic
    (`delete_topics_refusals`)."""
    caller = _caller(image, principal, host, request, settings)
    if isinstance(caller, AdminErrorResponse):
        return caller
    if caller.trusted:
        return None
    principal, host = caller.principal, caller.host

    def allowed(check: _Check) -> bool:
        operation, resource_type, name, _ = check
        return authorize(image.acls, principal, host, operation, resource_type, name,
                         settings)

    for alternatives in _checks(image, request):
        if not any(allowed(c) for c in alternatives):
            if not alternatives:
                return AdminErrorResponse(top_level_error=CLUSTER_AUTHORIZATION_FAILED,
                                          error_message=f"{principal} is not authorized")
            operation, resource_type, _, label = alternatives[-1]
            code = (TOPIC_AUTHORIZATION_FAILED if resource_type == ResourceType.TOPIC
                    else CLUSTER_AUTHORIZATION_FAILED)
            return AdminErrorResponse(
                top_level_error=code,
                error_message=f"{principal} is not allowed {Op(operation).name} on {label}")
    internal = _internal_topics_touched(image, request)
    if internal:
        return AdminErrorResponse(
            top_level_error=ErrorCode.INVALID_TOPIC_EXCEPTION,
            error_message=f"{internal[0]} is an internal topic: only the cluster creates "
                          f"it, and nobody grows or renames it")
    return None


def delete_topics_refusals(image: MetadataImage, principal: KafkaPrincipal, host: str,
                           request: DeleteTopicsRequest, settings: AuthorizerSettings
                           ) -> tuple[DeletableTopicResult | None, ...]:
    """Per topic of a DeleteTopics, the answer that refuses it, or None: the caller (the
    forwarded client, when a broker forwards it) needs DELETE on the topic; a topic
    named by ID is looked up in the committed image (UNKNOWN_TOPIC_ID if absent), and a
    refusal names it only to a caller that may DESCRIBE it (Kafka's ControllerApis);
    an internal topic is never a client's to delete (INVALID_TOPIC_EXCEPTION)."""
    caller = _caller(image, principal, host, request, settings)
    if isinstance(caller, AdminErrorResponse):
        return tuple(DeletableTopicResult(name=t.name, topic_id=t.topic_id,
                                          error_code=caller.top_level_error,
                                          error_message=caller.error_message)
                     for t in request.topics)
    if caller.trusted:
        return (None,) * len(request.topics)

    def allowed(operation: int, name: str) -> bool:
        return authorize(image.acls, caller.principal, caller.host, operation,
                         ResourceType.TOPIC, name, settings)

    def refusal(entry: DeleteTopicState) -> DeletableTopicResult | None:
        by_id = entry.topic_id != ZERO_UUID
        topic = image.topic(entry.topic_id) if by_id else None
        if by_id and topic is None:
            return DeletableTopicResult(topic_id=entry.topic_id,
                                        error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                        error_message=f"no topic with ID {entry.topic_id}")
        name = topic.name if topic is not None else entry.name
        if name is None:
            return None  # neither ID nor name: the controller's INVALID_REQUEST
        if not allowed(Op.DELETE, name):
            shown = name if not by_id or allowed(Op.DESCRIBE, name) else None
            return DeletableTopicResult(
                name=shown, topic_id=entry.topic_id, error_code=TOPIC_AUTHORIZATION_FAILED,
                error_message=f"{caller.principal} is not allowed DELETE on "
                              + (f"TOPIC {name}" if shown else
                                 f"the topic with ID {entry.topic_id}"))
        if is_internal_topic(name):
            return DeletableTopicResult(
                name=name, topic_id=entry.topic_id,
                error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                error_message=f"{name} is an internal topic: clients may not delete it")
        return None

    return tuple(refusal(t) for t in request.topics)


def merge_delete_results(refusals: tuple[DeletableTopicResult | None, ...],
                         response: DeleteTopicsResponse) -> DeleteTopicsResponse:
    """The request's order: each refused topic's answer, else the next one the
    controller gave for the topics it was asked to delete."""
    answers = iter(response.responses)
    missing = DeletableTopicResult(error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                   error_message="no answer from the controller")
    return DeleteTopicsResponse(responses=tuple(
        r if r is not None else next(answers, missing) for r in refusals))


def describable(image: MetadataImage, principal: KafkaPrincipal, host: str,
                settings: AuthorizerSettings) -> Callable[[str], bool]:
    """For DescribeTopics of every topic: may this caller DESCRIBE topic `name`?"""
    def check(name: str) -> bool:
        return authorize(image.acls, principal, host, Op.DESCRIBE, ResourceType.TOPIC,
                         name, settings) or authorize(
            image.acls, principal, host, Op.CLUSTER_ACTION, ResourceType.CLUSTER,
            CLUSTER_NAME, settings)
    return check
