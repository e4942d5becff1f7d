"""broker.kafka.membership: the classic rebalance protocol on the coordinator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from broker.kafka.codec import build
from broker.kafka.context import BrokerContext
from broker.kafka.membership import (
    handle_heartbeat_request,
    handle_join_group_request,
    handle_leave_group_request,
    handle_sync_group_request,
)
from broker.kafka.replica import ReplicaManager
from tests.support.kafka_support import BROKER, image_with_topic

JOIN, HEARTBEAT, LEAVE, SYNC = 11, 12, 13, 14


def make_context(tmp_path: Path) -> BrokerContext:
    image = image_with_topic()
    return BrokerContext(broker_id=BROKER, cluster_id="c", image=lambda: image,
                         replicas=ReplicaManager(log_dir=tmp_path, broker_id=BROKER,
                                                 image=lambda: image), controller=None)


async def join(context: BrokerContext, member_id: str = "", rebalance_ms: int = 60_000
               ) -> Any:
    request = build(load_request_schema(JOIN, 7), {
        "group_id": "g", "session_timeout": 30_000, "rebalance_timeout": rebalance_ms,
        "member_id": member_id, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m-" + member_id.encode()}]})
    return await handle_join_group_request(context, request, 7)


async def sync(context: BrokerContext, member_id: str, generation: int,
               assignments: dict[str, bytes] | None = None) -> Any:
    request = build(load_request_schema(SYNC, 5), {
        "group_id": "g", "generation_id": generation, "member_id": member_id,
        "assignments": [{"member_id": m, "assignment": a}
                        for m, a in (assignments or {}).items()]})
    return await handle_sync_group_request(context, request, 5)


async def heartbeat(context: BrokerContext, member_id: str, generation: int) -> Any:
    request = build(load_request_schema(HEARTBEAT, 4), {
        "group_id": "g", "generation_id": generation, "member_id": member_id})
    return await handle_heartbeat_request(context, request, 4)


async def test_lone_member_leads_generation_one_when_it_joins(tmp_path: Path) -> None:
    """The first member's join completes at once: generation 1, it leads, and its own
    SyncGroup hands back the assignment it chose."""
    context = make_context(tmp_path)
    with trio.fail_after(5):
        joined = await join(context)
        assert (joined.error_code, joined.generation_id) == (ErrorCode.none, 1)
        assert joined.leader == joined.member_id
        assert [m.member_id for m in joined.members] == [joined.member_id]
        synced = await sync(context, joined.member_id, 1, {joined.member_id: b"all"})
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"all")


async def test_second_member_triggers_rebalance_and_gets_its_assignment_when_leader_syncs(
        tmp_path: Path) -> None:
    """A new member starts a round: the old member's heartbeat says
    REBALANCE_IN_PROGRESS, it rejoins, both get generation 2, the leader's SyncGroup
    assignment reaches the follower."""
    context = make_context(tmp_path)
    first = await join(context)
    await sync(context, first.member_id, 1, {first.member_id: b"all"})
    results: dict[str, Any] = {}

    async def second_member() -> None:
        joined = await join(context)
        results["join"] = joined
        results["sync"] = await sync(context, joined.member_id, joined.generation_id)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(second_member)
            await trio.testing.wait_all_tasks_blocked()
            beat = await heartbeat(context, first.member_id, 1)
            assert beat.error_code == ErrorCode.rebalance_in_progress
            rejoined = await join(context, first.member_id)
            assert rejoined.generation_id == 2
            assert rejoined.leader == first.member_id
            assert len(rejoined.members) == 2
            await trio.testing.wait_all_tasks_blocked()
            second_id = results["join"].member_id
            leader_sync = await sync(context, first.member_id, 2,
                                     {first.member_id: b"p0", second_id: b"p1"})
    assert leader_sync.assignment == b"p0"
    assert results["join"].members == ()  # only the leader sees the member list
    assert results["sync"].assignment == b"p1"


async def test_member_dropped_when_it_does_not_rejoin_before_the_deadline(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """A round completes at its deadline without members that did not rejoin; their
    heartbeats then get UNKNOWN_MEMBER_ID."""
    context = make_context(tmp_path)
    first = await join(context, rebalance_ms=1_000)
    await sync(context, first.member_id, 1, {first.member_id: b"all"})
    with trio.fail_after(30):
        second = await join(context, rebalance_ms=1_000)
    assert second.generation_id == 2
    assert [m.member_id for m in second.members] == [second.member_id]
    beat = await heartbeat(context, first.member_id, 1)
    assert beat.error_code == ErrorCode.unknown_member_id


async def test_group_empty_when_last_member_leaves(tmp_path: Path) -> None:
    """LeaveGroup removes the member; a later heartbeat from it is UNKNOWN_MEMBER_ID."""
    context = make_context(tmp_path)
    joined = await join(context)
    request = build(load_request_schema(LEAVE, 4), {
        "group_id": "g", "members": [{"member_id": joined.member_id}]})
    left = await handle_leave_group_request(context, request, 4)
    assert [m.error_code for m in left.members] == [ErrorCode.none]
    assert (await heartbeat(context, joined.member_id, 1)).error_code == \
        ErrorCode.unknown_member_id
