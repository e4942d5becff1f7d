"""FindCoordinator, OffsetCommit and OffsetFetch of the group coordinator (membership:
`broker.kafka.membership`). Committed offsets are not checked against the generation.

The coordinator of a group is chosen from the image (the unfenced brokers, by a stable
hash of the group id), so every broker names the same one. Committed offsets live in
that broker's memory only: they are lost when it restarts (a documented gap).
"""

from __future__ import annotations

import zlib
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.codec import build, response_class
from broker.kafka.context import BrokerContext
from broker.kafka.metadata_api import broker_endpoints

FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH = 10, 8, 9
GROUP_KEY_TYPE = 0


def coordinator_for(group_id: str, brokers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The broker (from `broker_endpoints`) that coordinates `group_id`; pure."""
    if not brokers:
        return None
    return brokers[zlib.crc32(group_id.encode()) % len(brokers)]


async def handle_find_coordinator_request(context: BrokerContext, request: Any,
                                          version: int) -> Any:
    chosen = coordinator_for(request.key, broker_endpoints(context.image))
    if int(getattr(request, "key_type", GROUP_KEY_TYPE)) != GROUP_KEY_TYPE or chosen is None:
        body: dict[str, Any] = {
            "error_code": int(ErrorCode.coordinator_not_available),
            "error_message": "no transaction coordinator" if chosen else "no broker",
            "node_id": -1, "host": "", "port": -1}
    else:
        body = {"error_code": 0, "error_message": None, "node_id": chosen["node_id"],
                "host": chosen["host"], "port": chosen["port"]}
    return build(response_class(FIND_COORDINATOR, version), {"throttle_time": 0, **body})


def is_coordinator(context: BrokerContext, group_id: str) -> bool:
    chosen = coordinator_for(group_id, broker_endpoints(context.image))
    return chosen is not None and chosen["node_id"] == context.broker_id


async def handle_offset_commit_request(context: BrokerContext, request: Any,
                                       version: int) -> Any:
    group_id = request.group_id
    ours = is_coordinator(context, group_id)
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            index = int(part.partition_index)
            if not ours:
                error = ErrorCode.not_coordinator
            elif context.image.topic_by_name(topic.name) is None:
                error = ErrorCode.unknown_topic_or_partition
            else:
                context.committed_offsets[(group_id, topic.name, index)] = (
                    int(part.committed_offset), part.committed_metadata)
                error = ErrorCode.none
            partitions.append({"partition_index": index, "error_code": int(error)})
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class(OFFSET_COMMIT, version), {"throttle_time": 0, "topics": topics})


async def handle_offset_fetch_request(context: BrokerContext, request: Any,
                                      version: int) -> Any:
    group_id = request.group_id
    if not is_coordinator(context, group_id):
        return build(response_class(OFFSET_FETCH, version), {
            "throttle_time": 0, "topics": [], "error_code": int(ErrorCode.not_coordinator)})
    wanted: dict[str, list[int]] = {}
    if request.topics is None:  # every partition the group has committed
        for (group, name, index) in context.committed_offsets:
            if group == group_id:
                wanted.setdefault(name, []).append(index)
    else:
        wanted = {t.name: [int(i) for i in t.partition_indexes] for t in request.topics}
    topics = []
    for name, indexes in wanted.items():
        partitions = []
        for index in indexes:
            offset, metadata = context.committed_offsets.get((group_id, name, index), (-1, ""))
            partitions.append({"partition_index": index, "committed_offset": offset,
                               "metadata": metadata, "error_code": 0})
        topics.append({"name": name, "partitions": partitions})
    return build(response_class(OFFSET_FETCH, version),
                 {"throttle_time": 0, "topics": topics, "error_code": 0})
