"""The group APIs' answers as typed shapes, as `broker.kafka.response_shapes` describes
them (kio's field names, error codes as ints, the dispatcher builds the entity of the
request's version): the group coordinator's (`broker.kafka.groups.group`), the classic
membership protocol's (`broker.kafka.groups.membership`) and ordered delivery's two
APIs (`broker.kafka.ordered.ordered_api`).
"""

from __future__ import annotations

import uuid
from typing import NotRequired, TypedDict

# --- FindCoordinator ------------------------------------------------------------------


class FindCoordinatorResponse(TypedDict):
    throttle_time: int
    error_code: int
    error_message: str | None
    node_id: int
    host: str
    port: int


# --- OffsetCommit, OffsetFetch, OffsetDelete --------------------------------------------


class PartitionError(TypedDict):
    partition_index: int
    error_code: int


class TopicPartitionErrors(TypedDict):
    """One topic's partitions and their outcome (OffsetCommit, OffsetDelete)."""
    name: str
    partitions: list[PartitionError]


class OffsetCommitResponse(TypedDict):
    throttle_time: int
    topics: list[TopicPartitionErrors]


class OffsetDeleteResponse(TypedDict):
    throttle_time: int
    error_code: int
    topics: list[TopicPartitionErrors]


class FetchedOffset(TypedDict):
    partition_index: int
    error_code: int
    committed_offset: int
    committed_leader_epoch: NotRequired[int]
    metadata: NotRequired[str | None]


class FetchedTopic(TypedDict):
    name: str
    partitions: list[FetchedOffset]


class OffsetFetchResponse(TypedDict):
    throttle_time: int
    error_code: int
    topics: list[FetchedTopic]


# --- DescribeGroups, ListGroups, DeleteGroups -------------------------------------------


class DescribedMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class DescribedGroup(TypedDict):
    error_code: int
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedMember]
    authorized_operations: int


class DescribeGroupsResponse(TypedDict):
    throttle_time: int
    groups: list[DescribedGroup]


class ListedGroup(TypedDict):
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str  # v5


class ListGroupsResponse(TypedDict):
    throttle_time: int
    error_code: int
    groups: list[ListedGroup]


class DeletedGroup(TypedDict):
    group_id: str
    error_code: int


class DeleteGroupsResponse(TypedDict):
    throttle_time: int
    results: list[DeletedGroup]


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------


class JoinedMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinGroupResponse(TypedDict):
    throttle_time: int
    error_code: int
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[JoinedMember]


class SyncGroupResponse(TypedDict):
    throttle_time: int
    error_code: int
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


class HeartbeatResponse(TypedDict):
    throttle_time: int
    error_code: int


class LeavingMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    error_code: int


class LeaveGroupResponse(TypedDict):
    throttle_time: int
    error_code: int
    members: list[LeavingMember]


# --- ConsumerGroupPosition, PartitionLeaderEpochs (raft.common.kafka.ordered_schemas) ---


class PositionPartition(TypedDict):
    partition: int
    need_position: bool
    position: int


class PositionTopic(TypedDict):
    topic_id: uuid.UUID
    partitions: list[PositionPartition]


class ConsumerGroupPositionResponse(TypedDict):
    throttle_time: int
    error_code: int
    topics: list[PositionTopic]


class EpochEntry(TypedDict):
    partition: int
    leader_epoch: int


class LeaderEpochsPartition(TypedDict):
    partition: int
    error_code: int
    leader_epoch: NotRequired[int]
    after_creation: NotRequired[list[EpochEntry]]
    before_deletion: NotRequired[list[EpochEntry]]


class LeaderEpochsTopic(TypedDict):
    """One topic's counts and epochs, without its ID (`broker.kafka.ordered.rules`)."""
    error_code: int
    partitions: list[LeaderEpochsPartition]
    name: NotRequired[str]
    initial_partition_count: NotRequired[int]
    undeleted_partition_count: NotRequired[int]
    ordered_delivery: NotRequired[bool]
    compacted: NotRequired[bool]


class LeaderEpochsTopicResult(LeaderEpochsTopic):
    topic_id: uuid.UUID


class PartitionLeaderEpochsResponse(TypedDict):
    throttle_time: int
    topics: list[LeaderEpochsTopicResult]


GroupResponse = (FindCoordinatorResponse | OffsetCommitResponse | OffsetFetchResponse
                 | OffsetDeleteResponse | DescribeGroupsResponse | ListGroupsResponse
                 | DeleteGroupsResponse | JoinGroupResponse | SyncGroupResponse
                 | HeartbeatResponse | LeaveGroupResponse | ConsumerGroupPositionResponse
                 | PartitionLeaderEpochsResponse)
