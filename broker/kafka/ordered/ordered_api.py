"""The two APIs ordered delivery adds (`raft.common.kafka.ordered_schemas`, v0 only).

- PartitionLeaderEpochs: any broker answers from its metadata image
  (`broker.kafka.ordered.rules.leader_epochs_topic`).
- ConsumerGroupPosition: the group's coordinator only (NOT_COORDINATOR elsewhere,
  COORDINATOR_LOAD_IN_PROGRESS while loading), for a member of the current generation
  (Heartbeat's UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS until the
  generation's assignment is out); the exchange itself is
  `broker.kafka.groups.group_positions`'.

With the authorizer on (`broker.kafka.authz`): PartitionLeaderEpochs needs DESCRIBE on
each topic (else TOPIC_AUTHORIZATION_FAILED for it), ConsumerGroupPosition READ on the
group (as the other member APIs; else GROUP_AUTHORIZATION_FAILED) and the positions it
exchanges are of topics the member may READ (others are left out), both ways: its
reports, its asks, and the partitions some other member waits on that the answer lists.
"""

from __future__ import annotations

from typing import Any

from broker.kafka import authz
from broker.kafka import group_shapes as shapes
from broker.kafka.admin.metadata_api import from_kafka_uuid
from broker.kafka.groups.group_positions import PositionEntry
from broker.kafka.handler_context import HandlerContext
from broker.kafka.ordered.rules import leader_epochs_topic
from raft.common.errors import ErrorCode


def _leader_epochs(context: HandlerContext, topic: Any) -> shapes.LeaderEpochsTopic:
    image, topic_id = context.image, from_kafka_uuid(topic.topic_id)
    if topic_id is None or image.topic(topic_id) is None \
            or authz.topic_allowed(context, authz.Op.DESCRIBE, None, topic_id):
        # an unknown topic: UNKNOWN_TOPIC_ID, whoever asks
        return leader_epochs_topic(image, topic_id,
                                   tuple(int(p) for p in topic.partitions))
    return {"error_code": authz.TOPIC_AUTHORIZATION_FAILED, "partitions": []}


async def handle_partition_leader_epochs_request(
        context: HandlerContext, request: Any, version: int
) -> shapes.PartitionLeaderEpochsResponse:
    return {"throttle_time": 0, "topics": [
        {"topic_id": topic.topic_id, **_leader_epochs(context, topic)}
        for topic in request.topics]}


def position_topics(entries: list[PositionEntry]) -> list[shapes.PositionTopic]:
    """Answer entries keyed (topic ID, partition) -> the response's topics, each topic
    once, in the order first seen."""
    by_topic: dict[Any, list[shapes.PositionPartition]] = {}
    for entry in entries:
        topic_id, partition = entry.key
        by_topic.setdefault(topic_id, []).append({
            "partition": partition, "need_position": entry.need_position,
            "position": entry.position})
    return [{"topic_id": t, "partitions": parts} for t, parts in by_topic.items()]


async def handle_consumer_group_position_request(
        context: HandlerContext, request: Any, version: int
) -> shapes.ConsumerGroupPositionResponse:
    coord = context.groups
    error, part = coord.lookup(request.group_id)
    if not authz.group_allowed(context, authz.Op.READ, request.group_id):
        error, part = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    group = part.groups.get(request.group_id) if part is not None else None
    if part is not None:
        error = ErrorCode.UNKNOWN_MEMBER_ID if group is None else group.position_error(
            member_id=request.member_id, generation=int(request.generation_id),
            now=coord.clock())
    topics: list[shapes.PositionTopic] = []
    if error == ErrorCode.NONE:
        assert group is not None
        allowed: dict[Any, bool] = {}

        def readable(topic_id: Any) -> bool:
            if topic_id not in allowed:
                allowed[topic_id] = authz.topic_allowed(context, authz.Op.READ, None,
                                                        from_kafka_uuid(topic_id))
            return allowed[topic_id]

        asked = [t for t in request.topics if readable(t.topic_id)]
        reports = [((t.topic_id, int(p.partition)), int(p.position))
                   for t in asked for p in t.partitions if not p.need_position]
        asks = [(t.topic_id, int(p.partition))
                for t in asked for p in t.partitions if p.need_position]
        # what others wait on may be of topics this member may not read: not told
        topics = position_topics([e for e in group.positions.exchange(
            generation=group.generation, member_id=request.member_id, reports=reports,
            asks=asks) if readable(e.key[0])])
    return {"throttle_time": 0, "error_code": int(error), "topics": topics}
