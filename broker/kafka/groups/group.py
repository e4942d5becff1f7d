"""FindCoordinator, OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups
and DeleteGroups, on top of the group coordinator (`broker.kafka.groups.coordinator`; the
membership APIs are `broker.kafka.groups.membership`'s).

FindCoordinator names the leader of the group's `__consumer_offsets` partition (the
topic is created on first use; COORDINATOR_NOT_AVAILABLE until it has a leader). Every
other request is served only by that leader, once it has loaded the partition
(NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS otherwise). Offset commits are checked
against the member and generation (`Group.commit_error`), written to the partition and
acknowledged once the ISR has them; deletions write tombstones the same way.

With the authorizer on (`broker.kafka.authz`), as in Kafka: FindCoordinator needs DESCRIBE
on the group; OffsetCommit READ on the group (else GROUP_AUTHORIZATION_FAILED on every
partition) and READ on each topic (TOPIC_AUTHORIZATION_FAILED on its partitions);
OffsetFetch DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED at the top, on each partition
asked before v2) and on each topic
(named: TOPIC_AUTHORIZATION_FAILED; all of the group's: the others are left out);
OffsetDelete DELETE on the group and READ on each topic; DescribeGroups DESCRIBE and
DeleteGroups DELETE on each group; ListGroups lists the groups the caller may DESCRIBE
(all with DESCRIBE on the cluster).
"""

from __future__ import annotations

import time
from typing import Any

import trio

from broker.kafka import authz
from broker.kafka import group_shapes as shapes
from broker.kafka.groups.coordinator import GroupCoordinator, OffsetsPartition
from broker.kafka.groups.group_state import (
    DEAD,
    EMPTY,
    CommittedOffset,
    Group,
    commit_error_for,
    subscribed_topics,
)
from broker.kafka.handler_context import HandlerContext
from metadata.authorizer import ResourceType
from raft.common.errors import ErrorCode

GROUP_KEY_TYPE = 0
CLASSIC = "classic"  # the one group type here (KIP-848's consumer groups are not)
MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes


async def handle_find_coordinator_request(context: HandlerContext, request: Any,
                                          version: int
                                          ) -> shapes.FindCoordinatorResponse:
    if int(getattr(request, "key_type", GROUP_KEY_TYPE)) != GROUP_KEY_TYPE:
        error, chosen = ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    elif not authz.group_allowed(context, authz.Op.DESCRIBE, request.key):
        error, chosen = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    else:
        error, chosen = context.groups.find(request.key)
    if chosen is None:
        return {"throttle_time": 0, "error_code": int(error), "error_message": error.name,
                "node_id": -1, "host": "", "port": -1}
    return {"throttle_time": 0, "error_code": 0, "error_message": None,
            "node_id": chosen["node_id"], "host": chosen["host"], "port": chosen["port"]}


def _generation(request: Any) -> int:
    for name in ("generation_id_or_member_epoch", "generation_id"):
        if hasattr(request, name):
            return int(getattr(request, name))
    return -1


def partition_errors(request: Any, errors: dict[tuple[str, int], ErrorCode]
                     ) -> list[shapes.TopicPartitionErrors]:
    """The request's topics and partitions, in its order, each with its error."""
    return [{"name": t.name, "partitions": [
        {"partition_index": int(p.partition_index),
         "error_code": int(errors[(t.name, int(p.partition_index))])}
        for p in t.partitions]} for t in request.topics]


def _commit_response(request: Any, errors: dict[tuple[str, int], ErrorCode]
                     ) -> shapes.OffsetCommitResponse:
    return {"throttle_time": 0, "topics": partition_errors(request, errors)}


async def handle_offset_commit_request(context: HandlerContext, request: Any,
                                       version: int) -> shapes.OffsetCommitResponse:
    coord = context.groups
    wanted = [(t.name, p) for t in request.topics for p in t.partitions]
    if not authz.group_allowed(context, authz.Op.READ, request.group_id):
        return _commit_response(request, {
            (name, int(p.partition_index)): ErrorCode.GROUP_AUTHORIZATION_FAILED
            for name, p in wanted})
    error, part = coord.lookup(request.group_id)
    group = part.groups.get(request.group_id) if part is not None else None
    if part is not None:
        error = commit_error_for(group, member_id=request.member_id,
                                 instance_id=getattr(request, "group_instance_id", None),
                                 generation=_generation(request), now=coord.clock())
    errors = {(name, int(p.partition_index)): error for name, p in wanted}
    if error != ErrorCode.NONE or part is None:
        return _commit_response(request, errors)
    now_ms = int(time.time() * 1000)
    offsets: dict[tuple[str, int], CommittedOffset | None] = {}
    for name, p in wanted:
        key = (name, int(p.partition_index))
        if not authz.topic_allowed(context, authz.Op.READ, name):
            errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif context.image.topic_by_name(name) is None:
            errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif p.committed_metadata is not None and \
                len(p.committed_metadata.encode()) > MAX_METADATA_BYTES:
            errors[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            offsets[key] = CommittedOffset(
                offset=int(p.committed_offset), metadata=p.committed_metadata,
                leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                commit_timestamp=now_ms)
    if offsets:
        if group is None:  # a simple commit creates an Empty group
            group = part.groups.setdefault(request.group_id, Group(group_id=request.group_id))
        written = await coord.commit(part, group, offsets)
        errors.update({key: written for key in offsets})
    return _commit_response(request, errors)


def offset_fetch_error(request: Any, version: int, error: ErrorCode
                       ) -> shapes.OffsetFetchResponse:
    """OffsetFetch refused as a whole: the error at the top from v2 on; v0-v1 have no
    top-level error code, so it is on every partition asked (as Kafka's
    OffsetFetchRequest.getErrorResponse), never an answer a client takes for "no
    offsets"."""
    topics: list[shapes.FetchedTopic] = [] if version >= 2 or request.topics is None else [
        {"name": t.name, "partitions": [
            {"partition_index": int(i), "committed_offset": -1, "metadata": "",
             "error_code": int(error)} for i in t.partition_indexes]}
        for t in request.topics]
    return {"throttle_time": 0, "topics": topics, "error_code": int(error)}


async def handle_offset_fetch_request(context: HandlerContext, request: Any,
                                      version: int) -> shapes.OffsetFetchResponse:
    if not authz.group_allowed(context, authz.Op.DESCRIBE, request.group_id):
        return offset_fetch_error(request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error, part = context.groups.lookup(request.group_id)
    if part is None:
        return offset_fetch_error(request, version, error)
    group = part.groups.get(request.group_id)
    committed = group.offsets if group is not None else {}
    wanted: dict[str, list[int]] = {}
    if request.topics is None:  # every partition the group has committed
        for name, index in sorted(committed):
            if authz.topic_allowed(context, authz.Op.DESCRIBE, name):
                wanted.setdefault(name, []).append(index)
    else:
        wanted = {t.name: [int(i) for i in t.partition_indexes] for t in request.topics}
    topics: list[shapes.FetchedTopic] = []
    for name, indexes in wanted.items():
        partitions: list[shapes.FetchedOffset] = []
        described = authz.topic_allowed(context, authz.Op.DESCRIBE, name)
        for index in indexes:
            if not described:
                partitions.append({"partition_index": index, "committed_offset": -1,
                                   "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)})
                continue
            found = committed.get((name, index))
            partitions.append({
                "partition_index": index, "error_code": 0,
                "committed_offset": found.offset if found else -1,
                "committed_leader_epoch": found.leader_epoch if found else -1,
                "metadata": found.metadata if found else ""})
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics, "error_code": 0}


async def handle_offset_delete_request(context: HandlerContext, request: Any,
                                       version: int) -> shapes.OffsetDeleteResponse:
    """OffsetDelete: tombstones for the offsets of topics the group does not consume
    (GROUP_SUBSCRIBED_TO_TOPIC for those its members subscribe to)."""
    coord = context.groups
    error, part = coord.lookup(request.group_id)
    group = part.groups.get(request.group_id) if part is not None else None
    if error == ErrorCode.NONE and group is None:
        error = ErrorCode.GROUP_ID_NOT_FOUND
    if not authz.group_allowed(context, authz.Op.DELETE, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if error != ErrorCode.NONE or group is None or part is None:
        return {"error_code": int(error), "throttle_time": 0, "topics": []}
    subscribed = _subscriptions(group)
    errors: dict[tuple[str, int], ErrorCode] = {}
    deletions: dict[tuple[str, int], CommittedOffset | None] = {}
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, int(p.partition_index))
            if not authz.topic_allowed(context, authz.Op.READ, topic.name):
                errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif subscribed is None or topic.name in subscribed:
                errors[key] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                errors[key] = ErrorCode.NONE
                deletions[key] = None
    if deletions:
        written = await coord.commit(part, group, deletions)
        errors.update({key: written for key in deletions})
    return {"error_code": 0, "throttle_time": 0,
            "topics": partition_errors(request, errors)}


def _subscriptions(group: Group) -> set[str] | None:
    """Topics some member subscribes to (empty for a group without members; None: some
    subscription unreadable, so every topic counts as subscribed)."""
    topics: set[str] = set()
    if group.state == EMPTY:
        return topics
    for member in group.members.values():
        found = subscribed_topics(group.protocol_type, member.metadata(group.protocol))
        if found is None:
            return None
        topics |= found
    return topics


def _describe(context: HandlerContext, group_id: str, operations: bool
              ) -> shapes.DescribedGroup:
    """`operations`: answer the caller's authorized operations on the group (asked for
    from v3, `include_authorized_operations`)."""
    if not authz.group_allowed(context, authz.Op.DESCRIBE, group_id):
        return {"error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                "group_id": group_id, "group_state": "", "protocol_type": "",
                "protocol_data": "", "members": [], "authorized_operations": authz.NOT_ASKED}
    authorized = (authz.authorized_operations(context, ResourceType.GROUP, group_id)
                  if operations else authz.NOT_ASKED)
    error, part = context.groups.lookup(group_id)
    group = part.groups.get(group_id) if part is not None else None
    if group is None:
        return {"error_code": int(error), "group_id": group_id,
                "group_state": DEAD if error == ErrorCode.NONE else "",
                "protocol_type": "", "protocol_data": "", "members": [],
                "authorized_operations": authorized}
    return {"error_code": 0, "group_id": group_id, "group_state": group.state,
            "protocol_type": group.protocol_type or "", "protocol_data": group.protocol or "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                         "client_id": m.client_id, "client_host": m.client_host,
                         "member_metadata": m.metadata(group.protocol),
                         "member_assignment": m.assignment}
                        for m in group.members.values()],
            "authorized_operations": authorized}


async def handle_describe_groups_request(context: HandlerContext, request: Any,
                                         version: int) -> shapes.DescribeGroupsResponse:
    operations = bool(getattr(request, "include_authorized_operations", False))
    return {"throttle_time": 0,
            "groups": [_describe(context, g, operations) for g in request.groups]}


async def handle_list_groups_request(context: HandlerContext, request: Any,
                                     version: int) -> shapes.ListGroupsResponse:
    """The groups this broker coordinates (clients ask every broker), all of the
    classic type (v5's `types_filter`: a filter without it lists none)."""
    coord = context.groups
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    if types and CLASSIC not in types:
        return {"throttle_time": 0, "error_code": 0, "groups": []}
    states = {s.lower() for s in getattr(request, "states_filter", ()) or ()}
    every = authz.cluster_allowed(context, authz.Op.DESCRIBE)
    error = ErrorCode.NONE
    groups: list[shapes.ListedGroup] = []
    for part in list(coord.partitions.values()):
        if not part.loaded:
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            continue
        groups += [{"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                    "group_state": g.state, "group_type": CLASSIC}
                   for g in part.groups.values()
                   if (not states or g.state.lower() in states)
                   and (every or authz.group_allowed(context, authz.Op.DESCRIBE, g.group_id))]
    return {"throttle_time": 0, "error_code": int(error), "groups": groups}


async def _delete_group(coord: GroupCoordinator, group_id: str) -> ErrorCode:
    error, part = coord.lookup(group_id)
    if error != ErrorCode.NONE or part is None:
        return error
    group = part.groups.get(group_id)
    if group is None:
        return ErrorCode.GROUP_ID_NOT_FOUND
    error, expired = group.delete_error(coord.clock())
    coord.settle(part, group, expired)
    if error != ErrorCode.NONE:
        return error
    return await _write_tombstones(coord, part, group)


async def _write_tombstones(coord: GroupCoordinator, part: OffsetsPartition,
                            group: Group) -> ErrorCode:
    deletions: dict[tuple[str, int], CommittedOffset | None] = dict.fromkeys(group.offsets)
    if deletions:
        error = await coord.commit(part, group, deletions)
        if error != ErrorCode.NONE:
            return error
    group.offsets.clear()
    return await coord.store_group(part, group)  # an empty group: a tombstone


async def handle_delete_groups_request(context: HandlerContext, request: Any,
                                       version: int) -> shapes.DeleteGroupsResponse:
    coord = context.groups
    results: dict[str, ErrorCode] = {}

    async def one(group_id: str) -> None:
        if not authz.group_allowed(context, authz.Op.DELETE, group_id):
            results[group_id] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            return
        results[group_id] = await _delete_group(coord, group_id)

    async with trio.open_nursery() as nursery:
        for group_id in dict.fromkeys(request.groups_names):
            nursery.start_soon(one, group_id)
    return {"throttle_time": 0, "results": [{"group_id": g, "error_code": int(e)}
                                            for g, e in results.items()]}
