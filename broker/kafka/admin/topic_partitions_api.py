"""DescribeTopicPartitions (API 75, v0, KIP-966; Kafka 3.9's `describeTopics` in its Java
AdminClient) from this broker's image, paginated as Kafka's
DescribeTopicPartitionsRequestHandler does:
- the topics named, or every topic when none is; sorted by name; those before the
  cursor's topic left out, and that topic started at the cursor's partition;
- at most `response_partition_limit` partitions in all (never fewer than 1, never more
  than MAX_PARTITIONS, Kafka's `max.request.partition.size.limit` default); when the
  limit falls inside a topic, `next_cursor` names the first partition left out; when it
  is reached at a topic's end and topics remain, the next topic's partition 0;
- a cursor whose topic is not among those asked, or a negative cursor partition, is
  INVALID_REQUEST for every topic named;
- a topic named but unknown: UNKNOWN_TOPIC_OR_PARTITION (left out of an all-topics
  answer). Partitions as Metadata's (`metadata_api.topic_metadata`), with empty
  eligible-leader-replica lists (no ELR here).
Authorization as Metadata's: DESCRIBE on each topic; a named topic the caller may not
describe answers TOPIC_AUTHORIZATION_FAILED without its ID (after the others, as Kafka),
and is left out of an all-topics answer. Each described topic carries the caller's
authorized operations on it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.metadata_api import topic_metadata
from broker.kafka.context import BrokerContext
from metadata.authorizer import ResourceType
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode

MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default
NO_ID = uuid.UUID(int=0)


def _topic_error(name: str, code: ErrorCode) -> shapes.DescribedTopic:
    return {"error_code": int(code), "name": name, "topic_id": NO_ID, "is_internal": False,
            "partitions": []}


def describe_topic_partitions(image: MetadataImage, request: Any, *,
                              described: Callable[[str], bool],
                              operations: Callable[[str], int]
                              ) -> shapes.DescribeTopicPartitionsResponse:
    """The answer (pure): `described` says whether the caller may DESCRIBE a topic,
    `operations` gives its authorized operations on one."""
    named = sorted({t.name for t in request.topics})
    every = not named
    names = sorted(image.topic_ids_by_name) if every else named
    cursor = request.cursor
    if cursor is not None and (cursor.topic_name not in names or cursor.partition_index < 0):
        return {"throttle_time": 0, "next_cursor": None, "topics": [
            _topic_error(t.name, ErrorCode.INVALID_REQUEST) for t in request.topics]}
    refused = [_topic_error(n, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in names
               if not every and not described(n)
               and (cursor is None or n >= cursor.topic_name)]
    remaining = max(1, min(MAX_PARTITIONS, int(request.response_partition_limit)))
    topics: list[shapes.DescribedTopic] = []
    next_cursor: shapes.TopicPartitionsCursor | None = None
    for name in names:
        if (cursor is not None and name < cursor.topic_name) or not described(name):
            continue
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = image.topic_by_name(name)
        if topic is None:
            if not every:
                topics.append(_topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        first = cursor.partition_index if cursor is not None and cursor.topic_name == name \
            else 0
        metadata = topic_metadata(topic, image)
        partitions = metadata["partitions"][first:first + remaining]
        topics.append({
            "error_code": 0, "name": name, "topic_id": metadata["topic_id"],
            "is_internal": metadata.get("is_internal", False),
            "topic_authorized_operations": operations(name),
            "partitions": [{**p, "eligible_leader_replicas": [], "last_known_elr": []}
                           for p in partitions]})
        remaining -= len(partitions)
        if first + len(partitions) < len(topic.partitions):
            next_cursor = {"topic_name": name, "partition_index": first + len(partitions)}
            break
    return {"throttle_time": 0, "topics": topics + refused, "next_cursor": next_cursor}


async def handle_describe_topic_partitions_request(
        context: BrokerContext, request: Any, version: int
        ) -> shapes.DescribeTopicPartitionsResponse:
    return describe_topic_partitions(
        context.image, request,
        described=lambda name: authz.topic_allowed(context, authz.Op.DESCRIBE, name),
        operations=lambda name: authz.authorized_operations(context, ResourceType.TOPIC,
                                                            name))
