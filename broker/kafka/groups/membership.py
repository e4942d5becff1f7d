"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup (Kafka's classic group protocol) on
the group's coordinator.

Each handler looks the group up (`GroupCoordinator.lookup`: NOT_COORDINATOR or
COORDINATOR_LOAD_IN_PROGRESS when this broker does not serve it now), applies the
request to the pure group state (`broker.kafka.groups.group_state`), hands the answers the
step produced to the requests parked on the group, and either answers at once or parks
until its own answer arrives: a JoinGroup until the round completes, a follower's
SyncGroup until the leader's assignment has been written to `__consumer_offsets`. The
coordinator's background task completes rounds at their deadline and expires members.

With the authorizer on (`broker.kafka.authz`) each of them needs READ on the group, else
GROUP_AUTHORIZATION_FAILED, as in Kafka.
"""

from __future__ import annotations

import uuid
from typing import Any

from broker.kafka import authz
from broker.kafka import group_shapes as shapes
from broker.kafka.groups.group_state import Answer, Group
from broker.kafka.handler_context import REQUEST_CLIENT_ID, HandlerContext
from raft.common.errors import ErrorCode
from raft.common.session import current_session

DEFAULT_SESSION_S = 10.0
PARK_MARGIN_S = 5.0  # a parked request gives up this long after its own deadline


def _seconds(value: Any, default: float) -> float:
    return value.total_seconds() if value is not None and value.total_seconds() > 0 \
        else default


def _join_response(answer: Answer) -> shapes.JoinGroupResponse:
    return {"throttle_time": 0, "error_code": int(answer.error),
            "generation_id": answer.generation, "protocol_type": answer.protocol_type,
            "protocol_name": answer.protocol, "leader": answer.leader,
            "member_id": answer.member_id,
            "members": [{"member_id": m, "group_instance_id": i, "metadata": d}
                        for m, i, d in answer.members]}


async def handle_join_group_request(context: HandlerContext, request: Any, version: int
                                    ) -> shapes.JoinGroupResponse:
    coord = context.groups
    if not authz.group_allowed(context, authz.Op.READ, request.group_id):
        return _join_response(Answer(member_id=request.member_id,
                                     error=ErrorCode.GROUP_AUTHORIZATION_FAILED))
    error, part = coord.lookup(request.group_id)
    if part is None:
        return _join_response(Answer(member_id=request.member_id, error=error))
    group = part.groups.get(request.group_id)
    if group is None:
        group = part.groups[request.group_id] = Group(group_id=request.group_id)
    session_s = _seconds(request.session_timeout, DEFAULT_SESSION_S)
    rebalance_s = _seconds(getattr(request, "rebalance_timeout", None), session_s)
    client_id = REQUEST_CLIENT_ID.get()
    member_id, outcome = group.join(
        member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_s=session_s, rebalance_timeout_s=rebalance_s, now=coord.clock(),
        # Kafka's CLIENT_ID-UUID: the range assignor orders members by id, so consumers
        # named in order get partitions in that order, as clients expect
        new_member_id=f"{client_id}-{uuid.uuid4()}", client_id=client_id,
        client_host=f"/{current_session().client_host}",  # as Kafka shows an address
        initial_delay_s=coord.initial_rebalance_delay_s)
    answer = coord.settle(part, group, outcome, own=member_id)
    if answer is None:
        answer = await coord.wait_answer(part, group.group_id, member_id,
                                         rebalance_s + PARK_MARGIN_S)
    if answer.member_id != member_id:  # NOT_COORDINATOR after leadership moved
        answer = Answer(member_id=member_id, error=answer.error)
    return _join_response(answer)


def _sync_response(answer: Answer) -> shapes.SyncGroupResponse:
    return {"throttle_time": 0, "error_code": int(answer.error),
            "protocol_type": answer.protocol_type, "protocol_name": answer.protocol,
            "assignment": answer.assignment}


async def handle_sync_group_request(context: HandlerContext, request: Any, version: int
                                    ) -> shapes.SyncGroupResponse:
    coord = context.groups
    member_id = request.member_id
    if not authz.group_allowed(context, authz.Op.READ, request.group_id):
        return _sync_response(Answer(member_id=member_id,
                                     error=ErrorCode.GROUP_AUTHORIZATION_FAILED))
    error, part = coord.lookup(request.group_id)
    group = part.groups.get(request.group_id) if part is not None else None
    if part is None or group is None:
        return _sync_response(Answer(
            member_id=member_id, error=error if part is None else ErrorCode.UNKNOWN_MEMBER_ID))
    outcome = group.sync(
        member_id=member_id, instance_id=getattr(request, "group_instance_id", None),
        generation=int(request.generation_id),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
        now=coord.clock())
    if outcome.store:  # the leader's assignment: stored before anyone gets it
        generation = group.generation
        outcome.store = False
        stored = await coord.store_group(part, group)
        if stored != ErrorCode.NONE or group.generation != generation:
            failed = stored if stored != ErrorCode.NONE else ErrorCode.REBALANCE_IN_PROGRESS
            outcome.answers = [Answer(member_id=a.member_id, error=failed)
                               for a in outcome.answers]
    answer = coord.settle(part, group, outcome, own=member_id)
    if answer is None:
        session = group.members[member_id].session_timeout_s \
            if member_id in group.members else DEFAULT_SESSION_S
        rebalance = group.members[member_id].rebalance_timeout_s \
            if member_id in group.members else DEFAULT_SESSION_S
        answer = await coord.wait_answer(part, group.group_id, member_id,
                                         session + rebalance + PARK_MARGIN_S)
    return _sync_response(answer)


async def handle_heartbeat_request(context: HandlerContext, request: Any, version: int
                                   ) -> shapes.HeartbeatResponse:
    coord = context.groups
    if not authz.group_allowed(context, authz.Op.READ, request.group_id):
        return {"throttle_time": 0,
                "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    error, part = coord.lookup(request.group_id)
    group = part.groups.get(request.group_id) if part is not None else None
    if part is not None:
        error = ErrorCode.UNKNOWN_MEMBER_ID if group is None else group.heartbeat(
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            generation=int(request.generation_id), now=coord.clock())
    return {"throttle_time": 0, "error_code": int(error)}


async def handle_leave_group_request(context: HandlerContext, request: Any, version: int
                                     ) -> shapes.LeaveGroupResponse:
    coord = context.groups
    leaving: list[tuple[str, str | None]] = \
        [(m.member_id, m.group_instance_id) for m in request.members] \
        if hasattr(request, "members") else [(request.member_id, None)]
    error, part = coord.lookup(request.group_id)
    if not authz.group_allowed(context, authz.Op.READ, request.group_id):
        error, part = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    group = part.groups.get(request.group_id) if part is not None else None
    errors = [error] * len(leaving)
    if part is not None and group is not None:
        errors, outcome = group.leave(leaving, coord.clock())
        coord.settle(part, group, outcome)
    elif part is not None:
        errors = [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
    top = error if part is None else ErrorCode.NONE
    if not hasattr(request, "members") and errors:
        top = errors[0]  # v0-v2: one member, its error at the top
    return {"throttle_time": 0, "error_code": int(top),
            "members": [{"member_id": m, "group_instance_id": i, "error_code": int(e)}
                        for (m, i), e in zip(leaving, errors, strict=True)]}
