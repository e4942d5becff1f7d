"""Admin RPCs to the controller: request/response dataclasses and their msgpack bodies.

A frame's `api` names the RPC (`API_NAMES`) and its `body` is the map `encode_body`
makes with the shared codec (raft.common.codec): field name -> value, tuples as arrays,
Uuids as 16-byte bin, nested messages as maps, None fields omitted.
`decode_request`/`decode_response` check every field against the dataclass's types and
raise `AdminDecodeError` (one type, naming the field) on anything malformed, a key that
names no field included.

Any response may instead be an `AdminErrorResponse` (a map with `top_level_error`): the
request could not be handled at all, e.g. NOT_CONTROLLER (41) with the leader's id and
address, or INVALID_REQUEST for a body that did not decode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

import msgpack

from metadata.authorizer import AclBinding, AclFilter
from metadata.epoch_map import EpochMap
from raft.common.codec import Codec, CodecError
from raft.common.uuid import ZERO_UUID, Uuid, pack

DEFAULT = -1  # Kafka: -1 partitions or replication factor means "the controller's default"


class AdminDecodeError(ValueError):
    """An admin request or response body is malformed; the message says why."""


# --- CreateTopics ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...]  # the replicas, preferred leader first


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicConfig:
    name: str
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopic:
    """With `assignments`, num_partitions and replication_factor must stay DEFAULT (Kafka:
    INVALID_REQUEST otherwise); the assignment gives both."""

    name: str
    num_partitions: int = DEFAULT
    replication_factor: int = DEFAULT
    # None rather than () when absent: left off the wire, as before these fields existed
    assignments: tuple[CreatableReplicaAssignment, ...] | None = None
    configs: tuple[CreatableTopicConfig, ...] | None = None  # see metadata.topic_configs


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicResult:
    name: str
    topic_id: Uuid = ZERO_UUID
    error_code: int = 0
    error_message: str | None = None
    num_partitions: int = DEFAULT
    replication_factor: int = DEFAULT
    assignment: tuple[tuple[int, ...], ...] = ()  # replicas of each partition, leader first
    configs: tuple[CreatableTopicConfig, ...] | None = None  # the configs set (if any)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...]


# --- DeleteTopics (KIP-516: by ID or by name) -----------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicState:
    """The ID is checked first; ZERO_UUID means "use the name"."""

    name: str | None = None
    topic_id: Uuid = ZERO_UUID


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsRequest:
    """`forwarded_principal` ("User:alice") and `forwarded_host`: the client a broker
    forwards this for, as Kafka's Envelope; the controller authorizes that client, and
    honours them only from a sender with CLUSTER_ACTION (`metadata.acl_control`)."""

    topics: tuple[DeleteTopicState, ...]
    forwarded_principal: str | None = None
    forwarded_host: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableTopicResult:
    name: str | None = None
    topic_id: Uuid = ZERO_UUID
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicsResponse:
    responses: tuple[DeletableTopicResult, ...]


# --- DescribeTopics (KIP-516 TopicCollection: names or IDs, never both) ----------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicsRequest:
    """By `names` or by `topic_ids`; neither means every live topic."""

    names: tuple[str, ...] | None = None
    topic_ids: tuple[Uuid, ...] | None = None

    def __post_init__(self) -> None:
        if self.names is not None and self.topic_ids is not None:
            raise ValueError("describe by names or by topic_ids, never both")


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # KIP-253 leader-epoch maps ((partition, epoch) pairs); a non-empty before-deletion
    # map means the partition is marked for deletion
    leader_epoch_after_creation: EpochMap | None = None
    leader_epoch_before_deletion: EpochMap | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDescription:
    name: str | None = None
    topic_id: Uuid = ZERO_UUID
    error_code: int = 0
    error_message: str | None = None
    partitions: tuple[PartitionDescription, ...] = ()
    configs: tuple[CreatableTopicConfig, ...] | None = None  # those set (no defaults)
    # KIP-253: linear hashing starts from the initial count and spreads keys over the
    # undeleted ones; the partitions above them are marked for deletion
    initial_partition_count: int | None = None
    undeleted_partition_count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTopicsResponse:
    topics: tuple[TopicDescription, ...]
    error_code: int = 0
    error_message: str | None = None


# --- CreatePartitions (grow, or with ordered delivery shrink: KIP-253) ---------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopic:
    name: str
    count: int  # the new total of undeleted partitions (below the current: a shrink)
    # replicas of each new partition (count - current of them); None: the controller places
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopicResult:
    name: str
    topic_id: Uuid = ZERO_UUID
    error_code: int = 0
    error_message: str | None = None
    assignment: tuple[tuple[int, ...], ...] = ()  # replicas of the new partitions


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResponse:
    results: tuple[CreatePartitionsTopicResult, ...]


# --- RenameTopic (by ID: the ID and the data stay) ------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameTopicRequest:
    topic_id: Uuid
    new_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameTopicResponse:
    topic_id: Uuid
    new_name: str
    old_name: str | None = None
    error_code: int = 0
    error_message: str | None = None


# --- IncrementalAlterConfigs (KIP-339; topics only, by name as on Kafka's wire) --------

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # Kafka's ConfigResource.Type
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3  # Kafka's AlterConfigOp.OpType


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterableConfig:
    name: str
    config_operation: int = OP_SET
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsRequest:
    """`replace`: Kafka's legacy AlterConfigs (API 33): each resource's configs are its
    whole new set (every SET), and a key set now but not named goes back to its default,
    decided by the controller on its own image, so no alter in between is lost or kept."""

    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False
    replace: bool | None = None  # None, left off the wire: incremental


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResourceResult:
    resource_type: int
    resource_name: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsResponse:
    responses: tuple[AlterConfigsResourceResult, ...]


# --- ElectLeaders ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionTopic:
    topic: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersRequest:
    """Kafka's ElectLeaders (metadata.elections): `election_type` 0 PREFERRED, 1 UNCLEAN;
    `topic_partitions` None: every partition."""

    election_type: int = 0
    topic_partitions: tuple[ElectionTopic, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectionPartitionResult:
    partition_id: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaElectionResult:
    topic: str
    partition_result: tuple[ElectionPartitionResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersResponse:
    replica_election_results: tuple[ReplicaElectionResult, ...] = ()
    error_code: int = 0  # the whole request's (an unknown election type)
    error_message: str | None = None


# --- AlterPartitionReassignments --------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartition:
    """`replicas` the target replica list; None cancels the ongoing reassignment."""

    partition_index: int
    replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsRequest:
    """Kafka's AlterPartitionReassignments (KIP-455, metadata.reassignments)."""

    topics: tuple[ReassignableTopic, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartitionResult:
    partition_index: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignableTopicResult:
    name: str
    partitions: tuple[ReassignablePartitionResult, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsResponse:
    responses: tuple[ReassignableTopicResult, ...] = ()


# --- brokers --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRequest:
    broker_id: int
    incarnation_id: Uuid  # new on every start of the broker process
    endpoints: tuple[str, ...] = ()  # "NAME://host:port"
    rack: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerResponse:
    error_code: int = 0
    error_message: str | None = None
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class EmptyPartition:
    """A partition marked for deletion that the reporting broker leads, whose local log
    is empty (log start == log end) in `leader_epoch`: the controller may remove it."""

    topic_id: Uuid
    partition: int
    leader_epoch: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the last metadata offset the broker has applied
    empty_marked_partitions: tuple[EmptyPartition, ...] | None = None  # KIP-253
    # a controlled shutdown: move my leadership away (None, left off the wire: no)
    want_shut_down: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    is_caught_up: bool = False
    is_fenced: bool = True
    # the controlled shutdown's changes are committed (None, left off the wire: no)
    should_shut_down: bool | None = None


# --- AlterPartition (KIP-497; a partition leader proposes a new ISR) ----------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionData:
    partition: int
    leader_epoch: int
    partition_epoch: int  # of the state the leader saw: a stale request is refused
    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionTopic:
    topic_id: Uuid
    partitions: tuple[AlterPartitionData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionRequest:
    broker_id: int  # the leader of every partition in the request
    broker_epoch: int
    topics: tuple[AlterPartitionTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionPartitionResult:
    """The partition's state after the change (or as it is, on an error)."""

    partition: int
    error_code: int = 0
    error_message: str | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionTopicResult:
    topic_id: Uuid
    partitions: tuple[AlterPartitionPartitionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionResponse:
    topics: tuple[AlterPartitionTopicResult, ...]
    error_code: int = 0  # STALE_BROKER_EPOCH: the whole request was refused


# --- SCRAM credentials (KIP-554; the broker turns salted passwords into the two keys) --


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialUpsertion:
    """Set `name`'s credential for `mechanism` (SCRAM-SHA-256 or -512): the salted values
    (metadata.scram_credentials), never the password or the salted password."""

    name: str
    mechanism: str
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialDeletion:
    name: str
    mechanism: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterUserScramCredentialsRequest:
    deletions: tuple[ScramCredentialDeletion, ...] = ()
    upsertions: tuple[ScramCredentialUpsertion, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterUserScramCredentialsResult:
    user: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterUserScramCredentialsResponse:
    results: tuple[AlterUserScramCredentialsResult, ...]  # one per user, in request order


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeUserScramCredentialsRequest:
    users: tuple[str, ...] | None = None  # None or empty: every user with a credential


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialInfo:
    mechanism: str
    iterations: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeUserScramCredentialsResult:
    user: str
    error_code: int = 0
    error_message: str | None = None
    credential_infos: tuple[ScramCredentialInfo, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeUserScramCredentialsResponse:
    results: tuple[DescribeUserScramCredentialsResult, ...]
    error_code: int = 0
    error_message: str | None = None


# --- ACLs (Kafka's CreateAcls, DeleteAcls, DescribeAcls; metadata.acl_control) --------
# An ACL travels as metadata.authorizer.AclBinding (its Kafka codes and strings), a
# filter as metadata.authorizer.AclFilter.


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsRequest:
    creations: tuple[AclBinding, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AclCreationResult:
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsResponse:
    results: tuple[AclCreationResult, ...]  # one per creation, in order


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsRequest:
    filters: tuple[AclFilter, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsFilterResult:
    error_code: int = 0
    error_message: str | None = None
    matching_acls: tuple[AclBinding, ...] = ()  # the ACLs deleted


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsResponse:
    filter_results: tuple[DeleteAclsFilterResult, ...]  # one per filter, in order


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsRequest:
    filter: AclFilter


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeAclsResponse:
    acls: tuple[AclBinding, ...] = ()  # sorted by resource
    error_code: int = 0
    error_message: str | None = None


# --- features (Kafka's UpdateFeatures, and ApiVersions' feature fields; metadata.features)


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureUpdate:
    feature: str
    max_version_level: int
    upgrade_type: int = 1  # metadata.features.UpgradeType


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateFeaturesRequest:
    feature_updates: tuple[FeatureUpdate, ...] = ()
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdatableFeatureResult:
    feature: str
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateFeaturesResponse:
    results: tuple[UpdatableFeatureResult, ...] = ()  # one per update, in request order
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeFeaturesRequest:
    """The finalized features, as a controller's image holds them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRange:
    name: str
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeFeaturesResponse:
    supported: tuple[FeatureLevelRange, ...] = ()
    finalized: tuple[FeatureLevelRange, ...] = ()  # min == max == the finalized level
    epoch: int = -1  # the offset the finalized levels are read at (Kafka's features epoch)


# --- any API --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminErrorResponse:
    """The request was not handled: NOT_CONTROLLER names the leader when it is known."""

    top_level_error: int
    error_message: str | None = None
    leader_id: int | None = None
    leader_address: str | None = None  # "host:port"


AdminRequest = Union[CreateTopicsRequest, DeleteTopicsRequest, DescribeTopicsRequest,  # noqa: UP007
                     CreatePartitionsRequest, RenameTopicRequest, RegisterBrokerRequest,
                     BrokerHeartbeatRequest, AlterPartitionRequest,
                     IncrementalAlterConfigsRequest, AlterUserScramCredentialsRequest,
                     DescribeUserScramCredentialsRequest, CreateAclsRequest,
                     DeleteAclsRequest, DescribeAclsRequest, ElectLeadersRequest,
                     AlterPartitionReassignmentsRequest, UpdateFeaturesRequest,
                     DescribeFeaturesRequest]
AdminResponse = Union[CreateTopicsResponse, DeleteTopicsResponse,  # noqa: UP007
                      DescribeTopicsResponse, CreatePartitionsResponse, RenameTopicResponse,
                      RegisterBrokerResponse, BrokerHeartbeatResponse,
                      AlterPartitionResponse, IncrementalAlterConfigsResponse,
                      AlterUserScramCredentialsResponse,
                      DescribeUserScramCredentialsResponse,
                      CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse,
                      ElectLeadersResponse, AlterPartitionReassignmentsResponse,
                      UpdateFeaturesResponse, DescribeFeaturesResponse, AdminErrorResponse]

# api name -> (request type, response type)
API_NAMES: dict[str, tuple[type[Any], type[Any]]] = {
    "CreateTopics": (CreateTopicsRequest, CreateTopicsResponse),
    "DeleteTopics": (DeleteTopicsRequest, DeleteTopicsResponse),
    "DescribeTopics": (DescribeTopicsRequest, DescribeTopicsResponse),
    "CreatePartitions": (CreatePartitionsRequest, CreatePartitionsResponse),
    "RenameTopic": (RenameTopicRequest, RenameTopicResponse),
    "RegisterBroker": (RegisterBrokerRequest, RegisterBrokerResponse),
    "BrokerHeartbeat": (BrokerHeartbeatRequest, BrokerHeartbeatResponse),
    "AlterPartition": (AlterPartitionRequest, AlterPartitionResponse),
    "IncrementalAlterConfigs": (IncrementalAlterConfigsRequest,
                                IncrementalAlterConfigsResponse),
    "AlterUserScramCredentials": (AlterUserScramCredentialsRequest,
                                  AlterUserScramCredentialsResponse),
    "DescribeUserScramCredentials": (DescribeUserScramCredentialsRequest,
                                     DescribeUserScramCredentialsResponse),
    "CreateAcls": (CreateAclsRequest, CreateAclsResponse),
    "DeleteAcls": (DeleteAclsRequest, DeleteAclsResponse),
    "DescribeAcls": (DescribeAclsRequest, DescribeAclsResponse),
    "ElectLeaders": (ElectLeadersRequest, ElectLeadersResponse),
    "AlterPartitionReassignments": (AlterPartitionReassignmentsRequest,
                                    AlterPartitionReassignmentsResponse),
    "UpdateFeatures": (UpdateFeaturesRequest, UpdateFeaturesResponse),
    "DescribeFeatures": (DescribeFeaturesRequest, DescribeFeaturesResponse),
}
_API_OF_REQUEST = {req: api for api, (req, _) in API_NAMES.items()}
WRITE_APIS = frozenset(API_NAMES) - {"DescribeTopics", "DescribeUserScramCredentials",
                                     "DescribeAcls", "DescribeFeatures"}


def api_of(request: AdminRequest) -> str:
    return _API_OF_REQUEST[type(request)]


# --- codec ----------------------------------------------------------------------------

_CODEC = Codec(omit_none=True)
_CODEC.register(Uuid, wire=bytes, encode=Uuid.to_bytes, decode=Uuid.from_bytes,
                name="a 16-byte Uuid")


def encode_body(message: Any) -> dict[str, Any]:
    """A message as a plain msgpack-ready map (Uuids as 16 bytes), as it travels."""
    return _CODEC.encode(message)


def encode(message: Any) -> bytes:
    """The body alone as msgpack bytes (the framing packs `encode_body` itself)."""
    return pack(encode_body(message))


def decode_request(api: str, body: Any) -> AdminRequest:
    types_ = API_NAMES.get(api) if isinstance(api, str) else None
    if types_ is None:
        raise AdminDecodeError(f"unknown admin api {api!r}")
    result: AdminRequest = _decode(types_[0], _as_map(body))
    return result


def decode_response(api: str, body: Any) -> AdminResponse:
    types_ = API_NAMES.get(api) if isinstance(api, str) else None
    if types_ is None:
        raise AdminDecodeError(f"unknown admin api {api!r}")
    data = _as_map(body)
    cls = types_[1]
    if is_node_error(data) and any(
            f.name not in data for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING):
        # the node answered for the whole request (e.g. INCONSISTENT_CLUSTER_ID)
        data = {"top_level_error" if key == "error_code" else key: value
                for key, value in data.items()}
    if "top_level_error" in data:
        cls = AdminErrorResponse
    result: AdminResponse = _decode(cls, data)
    return result


def is_node_error(data: Mapping[str, Any]) -> bool:
    """An answer raft/node.py gives for a whole request: an error code, an optional
    message and, for NOT_LEADER, where the leader is; nothing else."""
    return "error_code" in data and data.keys() <= _NODE_ERROR_KEYS


_NODE_ERROR_KEYS = frozenset({"error_code", "error_message", "leader_id", "leader_address"})


def _as_map(body: Any) -> Mapping[str, Any]:
    if isinstance(body, bytes | bytearray):
        try:
            body = msgpack.unpackb(body, raw=False)
        except Exception as exc:  # msgpack raises several unrelated types on bad input
            raise AdminDecodeError(f"undecodable body: {exc}") from None
    if not isinstance(body, Mapping):
        raise AdminDecodeError(f"body is a {type(body).__name__}, not a map")
    return body


def _decode(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """The codec's error becomes the one this module's callers catch."""
    try:
        return _CODEC.decode(cls, data)
    except CodecError as exc:
        raise AdminDecodeError(str(exc)) from exc
