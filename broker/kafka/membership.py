"""Group membership on the group's coordinator: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, so consumers can `subscribe()` (the classic rebalance protocol, in memory).

A rebalance round starts when a member joins, leaves or expires; it completes when
every current member has (re)joined, or at the round's deadline (the largest rebalance
timeout), dropping members that did not. Completion bumps the generation, picks a
leader and a protocol all members support; the leader gets the member list, computes
the assignment and hands it over with SyncGroup; the others wait for it. Heartbeats
answer REBALANCE_IN_PROGRESS during a round, which makes members rejoin. Members that
miss their session timeout are dropped the next time the group is touched. Groups
are lost when the coordinator restarts; static membership is not supported. The group
state and its rounds are `broker.kafka.group_state`'s.
"""

from __future__ import annotations

import uuid
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from broker.kafka.codec import build, response_class
from broker.kafka.context import BrokerContext
from broker.kafka.group import is_coordinator
from broker.kafka.group_state import EMPTY, PREPARING, STABLE, Group, Member

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14


def _groups(context: BrokerContext) -> dict[str, Group]:
    return context.groups


def _seconds(value: Any, default: float) -> float:
    return value.total_seconds() if value is not None and value.total_seconds() > 0 \
        else default


async def handle_join_group_request(context: BrokerContext, request: Any, version: int
                                    ) -> Any:
    cls = response_class(JOIN_GROUP, version)
    if not is_coordinator(context, request.group_id):
        return build(cls, {"error_code": int(ErrorCode.not_coordinator), "member_id": ""})
    now = trio.current_time()
    group = _groups(context).setdefault(request.group_id, Group(group_id=request.group_id))
    group.expire(now)
    member_id = request.member_id or f"consumer-{uuid.uuid4()}"
    if request.member_id and request.member_id not in group.members:
        return build(cls, {"error_code": int(ErrorCode.unknown_member_id),
                           "member_id": request.member_id})
    if group.members and request.protocol_type != group.protocol_type:
        return build(cls, {"error_code": int(ErrorCode.inconsistent_group_protocol),
                           "member_id": member_id})
    session_s = _seconds(request.session_timeout, 10.0)
    rebalance_s = _seconds(getattr(request, "rebalance_timeout", None), session_s)
    group.protocol_type = request.protocol_type
    group.members[member_id] = Member(
        member_id=member_id, session_timeout_s=session_s, rebalance_timeout_s=rebalance_s,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        last_seen=now)
    group.start_rebalance(now)
    group.round_deadline = max(group.round_deadline, now + rebalance_s)
    group.joined.add(member_id)
    done = group.round_done
    group.maybe_complete_join(now)
    with trio.move_on_at(group.round_deadline):
        await done.wait()
    if not done.is_set():
        group.maybe_complete_join(trio.current_time())
    if member_id not in group.members:  # dropped at the deadline
        return build(cls, {"error_code": int(ErrorCode.unknown_member_id),
                           "member_id": member_id})
    members = [{"member_id": m.member_id, "metadata": dict(m.protocols).get(
        group.protocol or "", b"")} for m in group.members.values()] \
        if member_id == group.leader else []
    return build(cls, {"throttle_time": 0, "error_code": 0,
                       "generation_id": group.generation,
                       "protocol_type": group.protocol_type,
                       "protocol_name": group.protocol, "leader": group.leader or "",
                       "member_id": member_id, "members": members})


def _check_member(group: Group | None, member_id: str, generation: int) -> ErrorCode:
    if group is None or member_id not in group.members:
        return ErrorCode.unknown_member_id
    if group.state == PREPARING:
        return ErrorCode.rebalance_in_progress
    if generation != group.generation:
        return ErrorCode.illegal_generation
    return ErrorCode.none


async def handle_sync_group_request(context: BrokerContext, request: Any, version: int
                                    ) -> Any:
    cls = response_class(SYNC_GROUP, version)
    group = _groups(context).get(request.group_id)
    error = _check_member(group, request.member_id, int(request.generation_id))
    if not is_coordinator(context, request.group_id):
        error = ErrorCode.not_coordinator
    if error != ErrorCode.none or group is None:
        return build(cls, {"error_code": int(error), "assignment": b""})
    member = group.members[request.member_id]
    member.last_seen = trio.current_time()
    if request.member_id == group.leader:
        for item in request.assignments:
            if item.member_id in group.members:
                group.members[item.member_id].assignment = bytes(item.assignment)
        group.state = STABLE
        group.sync_done.set()
    done = group.sync_done
    with trio.move_on_after(member.session_timeout_s):
        await done.wait()
    if not done.is_set() or request.member_id not in group.members:
        return build(cls, {"error_code": int(ErrorCode.rebalance_in_progress),
                           "assignment": b""})
    return build(cls, {"throttle_time": 0, "error_code": 0,
                       "protocol_type": group.protocol_type, "protocol_name": group.protocol,
                       "assignment": member.assignment})


async def handle_heartbeat_request(context: BrokerContext, request: Any, version: int
                                   ) -> Any:
    group = _groups(context).get(request.group_id)
    now = trio.current_time()
    if group is not None:
        group.expire(now)
    error = _check_member(group, request.member_id, int(request.generation_id))
    if not is_coordinator(context, request.group_id):
        error = ErrorCode.not_coordinator
    if group is not None and request.member_id in group.members:
        group.members[request.member_id].last_seen = now
    return build(response_class(HEARTBEAT, version),
                 {"throttle_time": 0, "error_code": int(error)})


async def handle_leave_group_request(context: BrokerContext, request: Any, version: int
                                     ) -> Any:
    group = _groups(context).get(request.group_id)
    leaving = [m.member_id for m in request.members] if hasattr(request, "members") \
        else [request.member_id]
    results = []
    now = trio.current_time()
    for member_id in leaving:
        known = group is not None and member_id in group.members
        if group is not None and known:
            del group.members[member_id]
            group.joined.discard(member_id)
        results.append({"member_id": member_id, "group_instance_id": None,
                        "error_code": 0 if known else int(ErrorCode.unknown_member_id)})
    if group is not None:
        if group.members:
            group.start_rebalance(now)
            group.maybe_complete_join(now)
        else:
            group.state, group.leader = EMPTY, None
    return build(response_class(LEAVE_GROUP, version), {
        "throttle_time": 0, "error_code": 0, "members": results})
