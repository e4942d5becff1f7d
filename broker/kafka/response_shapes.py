"""The handlers' answers as typed shapes: TypedDicts named after Kafka's response schemas,
with kio's field names. A handler returns one; the dispatcher (`broker.kafka.listener`)
builds the kio entity of the request's version from it (`raft.common.kafka.codec.build`:
a field the version lacks is dropped, one the answer leaves out gets its zero) and
encodes it, so kio's entities appear only at that edge. Error codes are ints
(`ErrorCode` members included). Every API answers with one (the group APIs' are in
`broker.kafka.group_shapes`).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import NotRequired, TypedDict

from broker.kafka.group_shapes import GroupResponse
from broker.kafka.partitions.file_region import FileRegion

# --- ApiVersions, SaslHandshake, SaslAuthenticate ---------------------------------------


class ApiVersionRange(TypedDict):
    api_key: int
    min_version: int
    max_version: int


class SupportedFeature(TypedDict):
    name: str
    min_version: int
    max_version: int


class FinalizedFeature(TypedDict):
    name: str
    min_version_level: int
    max_version_level: int


class ApiVersionsResponse(TypedDict):
    error_code: int
    api_keys: list[ApiVersionRange]
    throttle_time: NotRequired[int]
    supported_features: NotRequired[list[SupportedFeature]]
    finalized_features_epoch: NotRequired[int]
    finalized_features: NotRequired[list[FinalizedFeature]]


class SaslHandshakeResponse(TypedDict):
    error_code: int
    mechanisms: list[str]


class SaslAuthenticateResponse(TypedDict):
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime: NotRequired[int]


# --- CreateTopics, DeleteTopics, CreatePartitions -------------------------------------


class CreatedConfig(TypedDict):
    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool


class TopicResult(TypedDict):
    """One topic's outcome (CreateTopics' topics, DeleteTopics' responses,
    CreatePartitions' results)."""
    name: str | None
    error_code: int
    error_message: str | None
    topic_id: NotRequired[uuid.UUID]
    num_partitions: NotRequired[int]
    replication_factor: NotRequired[int]
    configs: NotRequired[list[CreatedConfig] | None]


class CreateTopicsResponse(TypedDict):
    throttle_time: int
    topics: list[TopicResult]


class DeleteTopicsResponse(TypedDict):
    throttle_time: int
    responses: list[TopicResult]


class CreatePartitionsResponse(TypedDict):
    throttle_time: int
    results: list[TopicResult]


# --- ElectLeaders ---------------------------------------------------------------------


class ElectionPartitionResult(TypedDict):
    partition_id: int
    error_code: int
    error_message: str | None


class ReplicaElectionResult(TypedDict):
    topic: str
    partition_result: list[ElectionPartitionResult]


class ElectLeadersResponse(TypedDict):
    throttle_time: int
    error_code: int  # v1+
    replica_election_results: list[ReplicaElectionResult]


# --- UpdateFeatures -------------------------------------------------------------------


class UpdatableFeatureResult(TypedDict):
    feature: str
    error_code: int
    error_message: str | None


class UpdateFeaturesResponse(TypedDict):
    throttle_time: int
    error_code: int
    error_message: str | None
    results: list[UpdatableFeatureResult]


# --- AlterPartitionReassignments, ListPartitionReassignments -------------------------------


class ReassignablePartitionResponse(TypedDict):
    partition_index: int
    error_code: int
    error_message: str | None


class ReassignableTopicResponse(TypedDict):
    name: str
    partitions: list[ReassignablePartitionResponse]


class AlterPartitionReassignmentsResponse(TypedDict):
    throttle_time: int
    error_code: int
    error_message: str | None
    responses: list[ReassignableTopicResponse]


class OngoingPartitionReassignment(TypedDict):
    partition_index: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class OngoingTopicReassignment(TypedDict):
    name: str
    partitions: list[OngoingPartitionReassignment]


class ListPartitionReassignmentsResponse(TypedDict):
    throttle_time: int
    error_code: int
    error_message: str | None
    topics: list[OngoingTopicReassignment]


# --- DescribeAcls, CreateAcls, DeleteAcls ------------------------------------------------


class AclDescription(TypedDict):
    principal: str
    host: str
    operation: int
    permission_type: int


class AclResource(TypedDict):
    resource_type: int
    resource_name: str
    pattern_type: int
    acls: list[AclDescription]


class DescribeAclsResponse(TypedDict):
    throttle_time: int
    error_code: int
    error_message: str | None
    resources: list[AclResource]


class AclResult(TypedDict):
    error_code: int
    error_message: str | None


class CreateAclsResponse(TypedDict):
    throttle_time: int
    results: list[AclResult]


class MatchingAcl(AclResult):
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class AclFilterResult(AclResult):
    matching_acls: list[MatchingAcl]


class DeleteAclsResponse(TypedDict):
    throttle_time: int
    filter_results: list[AclFilterResult]


# --- DescribeConfigs, IncrementalAlterConfigs ----------------------------------------


class ConfigEntry(TypedDict):
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    config_source: int
    is_sensitive: bool
    synonyms: list[object]
    config_type: int
    documentation: str | None


class ResourceResult(TypedDict):
    """One resource's outcome; DescribeConfigs' carry its `configs`."""
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: NotRequired[list[ConfigEntry]]


class DescribeConfigsResponse(TypedDict):
    throttle_time: int
    results: list[ResourceResult]


class IncrementalAlterConfigsResponse(TypedDict):
    throttle_time: int
    responses: list[ResourceResult]


# --- DescribeUserScramCredentials, AlterUserScramCredentials ------------------------------


class UserResult(TypedDict):
    user: str
    error_code: int
    error_message: str | None


class AlterUserScramCredentialsResponse(TypedDict):
    throttle_time: int
    results: list[UserResult]


class CredentialInfo(TypedDict):
    mechanism: int
    iterations: int


class DescribedUser(UserResult):
    credential_infos: list[CredentialInfo]


class DescribeUserScramCredentialsResponse(TypedDict):
    throttle_time: int
    error_code: int
    error_message: str | None
    results: list[DescribedUser]


# --- Metadata, DescribeCluster -------------------------------------------------------


class BrokerEndpoint(TypedDict):
    node_id: int
    host: str
    port: int
    rack: str | None


class PartitionMetadata(TypedDict):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: list[int]
    isr_nodes: list[int]
    offline_replicas: list[int]


class TopicMetadata(TypedDict):
    error_code: int
    name: str | None
    topic_id: uuid.UUID
    partitions: list[PartitionMetadata]
    is_internal: NotRequired[bool]
    topic_authorized_operations: NotRequired[int]


class TopicPartitionsCursor(TypedDict):
    topic_name: str
    partition_index: int


class DescribedPartition(PartitionMetadata):
    eligible_leader_replicas: list[int]
    last_known_elr: list[int]


class DescribedTopic(TypedDict):
    error_code: int
    name: str | None
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[DescribedPartition]
    topic_authorized_operations: NotRequired[int]


class DescribeTopicPartitionsResponse(TypedDict):
    throttle_time: int
    topics: list[DescribedTopic]
    next_cursor: TopicPartitionsCursor | None


class MetadataResponse(TypedDict):
    throttle_time: int
    brokers: list[BrokerEndpoint]
    cluster_id: str
    controller_id: int
    topics: list[TopicMetadata]
    cluster_authorized_operations: NotRequired[int]  # v8-v10, when asked


class ClusterBroker(TypedDict):
    broker_id: int
    host: str
    port: int
    rack: str | None


class DescribeClusterResponse(TypedDict):
    throttle_time: int
    error_code: int
    cluster_id: str
    controller_id: int
    brokers: list[ClusterBroker]
    error_message: NotRequired[str | None]
    cluster_authorized_operations: NotRequired[int]


# --- DescribeQuorum ---------------------------------------------------------------------


class QuorumReplica(TypedDict):
    replica_id: int
    replica_directory_id: uuid.UUID
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


class QuorumPartition(TypedDict):
    partition_index: int
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    error_message: NotRequired[str | None]
    current_voters: NotRequired[list[QuorumReplica]]
    observers: NotRequired[list[QuorumReplica]]


class QuorumTopic(TypedDict):
    topic_name: str
    partitions: list[QuorumPartition]


class QuorumListener(TypedDict):
    name: str
    host: str
    port: int


class QuorumNode(TypedDict):
    node_id: int
    listeners: list[QuorumListener]


class DescribeQuorumResponse(TypedDict):
    error_code: int
    error_message: NotRequired[str | None]
    topics: list[QuorumTopic]
    nodes: list[QuorumNode]


# --- Produce, InitProducerId ----------------------------------------------------------


class BatchIndexAndErrorMessage(TypedDict):
    batch_index: int
    batch_index_error_message: str | None


class PartitionProduceResponse(TypedDict):
    index: int
    error_code: int
    base_offset: int
    log_start_offset: int
    log_append_time: NotRequired[datetime | None]  # LogAppendTime topics: the stamp
    record_errors: NotRequired[list[BatchIndexAndErrorMessage]]  # the records refused
    error_message: NotRequired[str | None]


class TopicProduceResponse(TypedDict):
    name: str | None
    topic_id: uuid.UUID | None
    partition_responses: list[PartitionProduceResponse]


class ProduceResponse(TypedDict):
    throttle_time: int
    responses: list[TopicProduceResponse]


class InitProducerIdResponse(TypedDict):
    throttle_time: int
    error_code: int
    producer_id: int
    producer_epoch: int


# --- Fetch, ListOffsets, OffsetForLeaderEpoch ------------------------------------------


class LeaderIdAndEpoch(TypedDict):
    leader_id: int
    leader_epoch: int


class EpochEndOffset(TypedDict):
    epoch: int
    end_offset: int


class PartitionData(TypedDict):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | FileRegion | None  # a region: sent from its file
    aborted_transactions: NotRequired[list[object]]
    current_leader: NotRequired[LeaderIdAndEpoch]
    diverging_epoch: NotRequired[EpochEndOffset]


class FetchableTopicResponse(TypedDict):
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[PartitionData]


class FetchResponse(TypedDict):
    throttle_time: int
    error_code: int
    session_id: int
    responses: list[FetchableTopicResponse]


class ListOffsetsPartitionResponse(TypedDict):
    partition_index: int
    error_code: int
    timestamp: NotRequired[int]
    offset: NotRequired[int]
    leader_epoch: NotRequired[int]
    old_style_offsets: NotRequired[list[int]]


class ListOffsetsTopicResponse(TypedDict):
    name: str
    partitions: list[ListOffsetsPartitionResponse]


class ListOffsetsResponse(TypedDict):
    throttle_time: int
    topics: list[ListOffsetsTopicResponse]


# --- DeleteRecords ---------------------------------------------------------------------


class DeleteRecordsPartitionResult(TypedDict):
    partition_index: int
    low_watermark: int
    error_code: int


class DeleteRecordsTopicResult(TypedDict):
    name: str
    partitions: list[DeleteRecordsPartitionResult]


class DeleteRecordsResponse(TypedDict):
    throttle_time: int
    topics: list[DeleteRecordsTopicResult]


class EpochEndOffsetResult(TypedDict):
    partition: int
    error_code: int
    leader_epoch: NotRequired[int]
    end_offset: NotRequired[int]


class OffsetForLeaderTopicResult(TypedDict):
    topic: str
    partitions: list[EpochEndOffsetResult]


class OffsetForLeaderEpochResponse(TypedDict):
    throttle_time: int
    topics: list[OffsetForLeaderTopicResult]


# --- DescribeLogDirs, DescribeProducers ------------------------------------------------


class LogDirPartition(TypedDict):
    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool


class LogDirTopic(TypedDict):
    name: str
    partitions: list[LogDirPartition]


class LogDirResult(TypedDict):
    error_code: int
    log_dir: str
    topics: list[LogDirTopic]
    total_bytes: int
    usable_bytes: int


class DescribeLogDirsResponse(TypedDict):
    throttle_time: int
    error_code: int
    results: list[LogDirResult]


class ActiveProducer(TypedDict):
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class ProducersPartition(TypedDict):
    partition_index: int
    error_code: int
    error_message: str | None
    active_producers: list[ActiveProducer]


class ProducersTopic(TypedDict):
    name: str
    partitions: list[ProducersPartition]


class DescribeProducersResponse(TypedDict):
    throttle_time: int
    topics: list[ProducersTopic]


class TxnMarkerPartitionResult(TypedDict):
    partition_index: int
    error_code: int


class TxnMarkerTopicResult(TypedDict):
    name: str
    partitions: list[TxnMarkerPartitionResult]


class TxnMarkerResult(TypedDict):
    producer_id: int
    topics: list[TxnMarkerTopicResult]


class WriteTxnMarkersResponse(TypedDict):
    markers: list[TxnMarkerResult]


class ListTransactionsResponse(TypedDict):
    throttle_time: int
    error_code: int
    unknown_state_filters: list[str]
    transaction_states: list[dict[str, object]]


class ListConfigResourcesResponse(TypedDict):
    throttle_time: int
    error_code: int
    config_resources: list[dict[str, str]]


class ReplicaLogDirPartitionResult(TypedDict):
    partition_index: int
    error_code: int


class ReplicaLogDirTopicResult(TypedDict):
    topic_name: str
    partitions: list[ReplicaLogDirPartitionResult]


class AlterReplicaLogDirsResponse(TypedDict):
    throttle_time: int
    results: list[ReplicaLogDirTopicResult]


TypedResponse = (ApiVersionsResponse | SaslHandshakeResponse | SaslAuthenticateResponse
                 | CreateTopicsResponse | DeleteTopicsResponse | CreatePartitionsResponse
                 | DescribeAclsResponse | CreateAclsResponse | DeleteAclsResponse
                 | DescribeConfigsResponse | IncrementalAlterConfigsResponse
                 | AlterUserScramCredentialsResponse | DescribeUserScramCredentialsResponse
                 | MetadataResponse | DescribeClusterResponse | DescribeQuorumResponse
                 | ProduceResponse
                 | InitProducerIdResponse | FetchResponse | ListOffsetsResponse
                 | OffsetForLeaderEpochResponse | DeleteRecordsResponse | GroupResponse
                 | DescribeLogDirsResponse | DescribeProducersResponse
                 | ElectLeadersResponse | DescribeTopicPartitionsResponse
                 | AlterPartitionReassignmentsResponse | ListPartitionReassignmentsResponse
                 | WriteTxnMarkersResponse | ListTransactionsResponse
                 | ListConfigResourcesResponse | AlterReplicaLogDirsResponse
                 | UpdateFeaturesResponse)
