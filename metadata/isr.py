"""AlterPartition decisions (pure): a partition leader proposes a new ISR and the
controller accepts it or says why not (KIP-497, with KIP-841's eligibility rule; Kafka's
ReplicationControlManager.alterPartition, reduced).

Checked in this order, each with Kafka's error code:
- the request's broker epoch is not the registered one -> STALE_BROKER_EPOCH (77) for the
  whole request (a previous incarnation of the leader must not change any ISR);
- unknown topic ID -> UNKNOWN_TOPIC_ID (100); unknown partition or one named twice ->
  UNKNOWN_TOPIC_OR_PARTITION (3) / INVALID_REQUEST (42);
- leader epoch older than the partition's -> FENCED_LEADER_EPOCH (74) (newer: the
  request is ahead of this controller, INVALID_REQUEST);
- the broker is not the partition's leader -> NOT_LEADER_OR_FOLLOWER (6);
- partition epoch differs -> INVALID_UPDATE_VERSION (95): the leader decided on stale
  state and waits for the newer one in its image;
- the new ISR is empty, repeats a broker, names a non-replica or leaves out the leader ->
  INVALID_REQUEST; it adds a broker that is fenced or not registered ->
  INELIGIBLE_REPLICA (107). Removing a fenced broker is always allowed.
Otherwise a PartitionChange(isr=new_isr) is emitted (replay bumps the partition epoch)
and the answer carries the state after it; an unchanged ISR writes nothing. An ISR that
takes in a reassignment's last adding replica completes it in the same record
(`metadata.reassignments.isr_change`).
"""

from __future__ import annotations

from collections.abc import Callable

from metadata import records as rec
from metadata.admin import (
    AlterPartitionData,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
)
from metadata.delta import MetadataDelta
from metadata.image import PartitionImage
from metadata.reassignments import isr_change
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

Emit = Callable[[rec.Record], int]  # applies a record to the batch, returns its offset


def alter_partition(delta: MetadataDelta, emit: Emit, request: AlterPartitionRequest
                    ) -> AlterPartitionResponse:
    broker = delta.broker(request.broker_id)
    if broker is None or broker.broker_epoch != request.broker_epoch:
        message = (f"broker {request.broker_id} is not registered" if broker is None else
                   f"broker {request.broker_id} has epoch {broker.broker_epoch}, "
                   f"not {request.broker_epoch}")
        return AlterPartitionResponse(
            error_code=ErrorCode.STALE_BROKER_EPOCH,
            topics=tuple(AlterPartitionTopicResult(topic_id=topic.topic_id, partitions=tuple(
                AlterPartitionPartitionResult(partition=data.partition,
                                              error_code=ErrorCode.STALE_BROKER_EPOCH,
                                              error_message=message)
                for data in topic.partitions)) for topic in request.topics))
    results = []
    seen: set[tuple[Uuid, int]] = set()
    for topic in request.topics:
        partitions = []
        for data in topic.partitions:
            key = (topic.topic_id, data.partition)
            if key in seen:
                partitions.append(AlterPartitionPartitionResult(
                    partition=data.partition, error_code=ErrorCode.INVALID_REQUEST,
                    error_message="partition appears more than once"))
                continue
            seen.add(key)
            partitions.append(_alter_one(delta, emit, request.broker_id, topic.topic_id, data))
        results.append(AlterPartitionTopicResult(topic_id=topic.topic_id,
                                                 partitions=tuple(partitions)))
    return AlterPartitionResponse(topics=tuple(results))


def _alter_one(delta: MetadataDelta, emit: Emit, broker_id: int, topic_id: Uuid,
               data: AlterPartitionData) -> AlterPartitionPartitionResult:
    topic = delta.topic(topic_id)
    if topic is None:
        return AlterPartitionPartitionResult(partition=data.partition,
                                             error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                             error_message=f"no topic with id {topic_id}")
    if not 0 <= data.partition < len(topic.partitions):
        return AlterPartitionPartitionResult(
            partition=data.partition, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            error_message=f"no partition {data.partition} in topic {topic.name!r}")
    part = topic.partitions[data.partition]
    code, message = _refusal(delta, broker_id, part, data)
    if code != ErrorCode.NONE:
        return _result(part, code, message)
    if data.new_isr != part.isr:
        emit(isr_change(topic_id, part, data.new_isr, delta.unfenced_broker_ids()))
        changed = delta.topic(topic_id)
        assert changed is not None
        part = changed.partitions[data.partition]
    return _result(part, ErrorCode.NONE, None)


def _refusal(delta: MetadataDelta, broker_id: int, part: PartitionImage,
             data: AlterPartitionData) -> tuple[ErrorCode, str | None]:
    if data.leader_epoch < part.leader_epoch:
        return (ErrorCode.FENCED_LEADER_EPOCH,
                f"leader epoch {data.leader_epoch} is older than {part.leader_epoch}")
    if data.leader_epoch > part.leader_epoch:
        return (ErrorCode.INVALID_REQUEST,
                f"leader epoch {data.leader_epoch} is newer than {part.leader_epoch}")
    if part.leader != broker_id:
        return (ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {broker_id} does not lead the partition (leader {part.leader})")
    if data.partition_epoch != part.partition_epoch:
        return (ErrorCode.INVALID_UPDATE_VERSION,
                f"partition epoch {data.partition_epoch} is not {part.partition_epoch}")
    new_isr = data.new_isr
    if not new_isr or len(set(new_isr)) != len(new_isr):
        return ErrorCode.INVALID_REQUEST, f"invalid ISR {list(new_isr)}"
    strangers = [r for r in new_isr if r not in part.replicas]
    if strangers:
        return ErrorCode.INVALID_REQUEST, f"brokers {strangers} are not replicas"
    if broker_id not in new_isr:
        return ErrorCode.INVALID_REQUEST, "the ISR must contain the leader"
    ineligible = [r for r in new_isr if r not in part.isr and _is_ineligible(delta, r)]
    if ineligible:
        return ErrorCode.INELIGIBLE_REPLICA, f"brokers {ineligible} are fenced or unregistered"
    return ErrorCode.NONE, None


def _is_ineligible(delta: MetadataDelta, broker_id: int) -> bool:
    broker = delta.broker(broker_id)
    return broker is None or broker.fenced


def _result(part: PartitionImage, code: ErrorCode, message: str | None
            ) -> AlterPartitionPartitionResult:
    return AlterPartitionPartitionResult(
        partition=part.partition, error_code=code, error_message=message,
        leader_id=part.leader, leader_epoch=part.leader_epoch,
        partition_epoch=part.partition_epoch, isr=part.isr)
