"""The group APIs on a broker that leads `__consumer_offsets` (one partition, replication
factor 1, a real partition log in tmp_path): the coordinator's background task loads
the partition, expires members, and what it writes is what a restarted coordinator
loads."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.index import load_request_schema

from broker import partition_dir
from broker.kafka.group_shapes import JoinGroupResponse, SyncGroupResponse
from broker.kafka.groups import group as group_api
from broker.kafka.groups.membership import (
    handle_heartbeat_request,
    handle_join_group_request,
    handle_leave_group_request,
    handle_sync_group_request,
)
from broker.kafka.groups.offsets_records import OFFSETS_TOPIC
from broker.kafka.handler_context import REQUEST_CLIENT_ID, HandlerContext
from broker.kafka.replication.replica import ReplicaManager
from metadata import records as rec
from metadata.delta import replay
from metadata.image import MetadataImage
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from raft.common.uuid import Uuid
from tests.support.kafka_support import BROKER
from tests.support.polling import eventually

JOIN, HEARTBEAT, LEAVE, SYNC = 11, 12, 13, 14
OFFSETS_ID, DATA_ID = Uuid(0xC0FF << 64 | 1), Uuid(0xDA7A << 64 | 1)


def image(leader: int = BROKER) -> MetadataImage:
    entries: list[rec.Record] = [
        rec.RegisterBroker(broker_id=b, incarnation_id=Uuid(b + 100), broker_epoch=b,
                           endpoints=(f"PLAINTEXT://127.0.0.1:{9000 + b}",))
        for b in (BROKER, BROKER + 1)]
    entries += [rec.UnfenceBroker(broker_id=b, broker_epoch=b) for b in (BROKER, BROKER + 1)]
    for name, topic_id in ((OFFSETS_TOPIC, OFFSETS_ID), ("data", DATA_ID)):
        entries.append(rec.Topic(name=name, topic_id=topic_id))
        entries.append(rec.Partition(topic_id=topic_id, partition=0, replicas=(leader,),
                                     isr=(leader,), leader=leader, leader_epoch=0))
    return replay(enumerate(entries))


class Broker:
    """A context whose image can be swapped, with its coordinator running."""

    def __init__(self, log_dir: Path, current: MetadataImage,
                 initial_rebalance_delay_ms: int = 0,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self.current = current
        self.context = HandlerContext(
            broker_id=BROKER, cluster_id="c", image=lambda: self.current,
            replicas=ReplicaManager(log_dir=log_dir, broker_id=BROKER,
                                    image=lambda: self.current), controller=None,
            offsets_topic_num_partitions=1,
            group_initial_rebalance_delay_ms=initial_rebalance_delay_ms, clock=clock)
        self.coordinator = self.context.groups

    def set_image(self, new: MetadataImage) -> None:
        self.current = new
        self.context.on_image_changed()

    async def loaded(self) -> None:
        await eventually(lambda: (p := self.coordinator.partitions.get(0)) and p.loaded)


@pytest.fixture
async def nursery_broker(tmp_path: Path) -> AsyncIterator[Any]:
    for name, topic_id in ((OFFSETS_TOPIC, OFFSETS_ID), ("data", DATA_ID)):
        (tmp_path / f"{name}-0").mkdir()
        partition_dir.write_partition_metadata(tmp_path / f"{name}-0", topic_id)
    brokers: list[Broker] = []

    async with trio.open_nursery() as nursery:
        async def start(initial_rebalance_delay_ms: int = 0,
                        clock: Callable[[], float] = trio.current_time) -> Broker:
            broker = Broker(tmp_path, image(), initial_rebalance_delay_ms, clock)
            nursery.start_soon(broker.coordinator.run)
            with trio.fail_after(5):
                await broker.loaded()
            brokers.append(broker)
            return broker

        yield start
        nursery.cancel_scope.cancel()
    for broker in brokers:
        broker.context.replicas.close_all()


def request(api: int, version: int, **values: Any) -> Any:
    return build(load_request_schema(api, version), {"group_id": "g", **values})


async def join(broker: Broker, member_id: str = "", *, session_ms: int = 30_000,
               rebalance_ms: int = 60_000, instance_id: str | None = None
               ) -> JoinGroupResponse:
    return await handle_join_group_request(broker.context, request(
        JOIN, 7, session_timeout=session_ms, rebalance_timeout=rebalance_ms,
        member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x01\x00\x04data"}]),
        7)


async def sync(broker: Broker, member_id: str, generation: int,
               assignments: dict[str, bytes] | None = None) -> SyncGroupResponse:
    return await handle_sync_group_request(broker.context, request(
        SYNC, 5, generation_id=generation, member_id=member_id,
        assignments=[{"member_id": m, "assignment": a}
                     for m, a in (assignments or {}).items()]), 5)


async def commit(broker: Broker, member_id: str, generation: int, offset: int) -> ErrorCode:
    response = await group_api.handle_offset_commit_request(broker.context, request(
        8, 8, generation_id_or_member_epoch=generation, member_id=member_id,
        topics=[{"name": "data", "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_metadata": "m"}]}]),
        8)
    return ErrorCode(response["topics"][0]["partitions"][0]["error_code"])


async def fetched(broker: Broker) -> int:
    response = await group_api.handle_offset_fetch_request(
        broker.context, request(9, 7, topics=None), 7)
    assert response["error_code"] == ErrorCode.NONE
    offsets = [p["committed_offset"] for t in response["topics"] for p in t["partitions"]]
    return offsets[0] if offsets else -1


async def test_assignment_and_offsets_survive_when_coordinator_restarts(
        nursery_broker: Any) -> None:
    """A lone member joins, syncs and commits; a second coordinator over the same
    partition log (a restarted broker) loads the generation, the assignment and the
    offset."""
    broker = await nursery_broker()
    with trio.fail_after(10):
        joined = await join(broker)
        member = joined["member_id"]
        assert (joined["error_code"], joined["generation_id"], joined["leader"]) == \
            (0, 1, member)
        synced = await sync(broker, member, 1, {member: b"all"})
        assert (synced["error_code"], synced["assignment"]) == (0, b"all")
        assert await commit(broker, member, 1, 42) == ErrorCode.NONE
        assert await fetched(broker) == 42
        restarted = await nursery_broker()
        group = restarted.coordinator.partitions[0].groups["g"]
        assert (group.generation, group.leader) == (1, member)
        assert group.members[member].assignment == b"all"
        assert await fetched(restarted) == 42


async def test_two_consumers_joining_together_share_the_first_round_when_it_is_delayed(
        nursery_broker: Any) -> None:
    """group.initial.rebalance.delay.ms reaches the coordinator: two JoinGroups sent
    together both get generation 1, where without the delay the first would get a round
    of its own and the second would wait for it to rejoin."""
    broker = await nursery_broker(initial_rebalance_delay_ms=300)
    answers: list[JoinGroupResponse] = []

    async def joined() -> None:
        answers.append(await join(broker))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(joined)
            nursery.start_soon(joined)
    assert [(a["error_code"], a["generation_id"]) for a in answers] == [(0, 1), (0, 1)]
    assert sorted(len(a["members"]) for a in answers) == [0, 2]  # the leader sees both


async def test_a_new_member_id_is_the_client_id_and_a_uuid_as_kafkas(
        nursery_broker: Any) -> None:
    """CLIENT_ID-UUID: the range assignor hands partitions out in member-id order, so
    librdkafka's 0132_strategy_ordering expects consumer c0 to get partition 0 before c1."""
    broker = await nursery_broker()
    REQUEST_CLIENT_ID.set("c0")
    with trio.fail_after(10):
        member_id = (await join(broker))["member_id"]
    prefix, _, rest = member_id.partition("-")
    assert prefix == "c0"
    assert uuid.UUID(rest).version == 4


async def test_zombie_commits_refused_when_generation_or_member_stale(
        nursery_broker: Any) -> None:
    broker = await nursery_broker()
    with trio.fail_after(10):
        first = await join(broker)
        await sync(broker, first["member_id"], 1, {first["member_id"]: b"all"})
        assert await commit(broker, "stranger", 1, 5) == ErrorCode.UNKNOWN_MEMBER_ID
        assert await commit(broker, first["member_id"], 0, 5) == ErrorCode.ILLEGAL_GENERATION
        assert await commit(broker, "", -1, 5) == ErrorCode.UNKNOWN_MEMBER_ID
        assert await fetched(broker) == -1


async def test_simple_commit_accepted_when_group_has_no_members(nursery_broker: Any) -> None:
    broker = await nursery_broker()
    with trio.fail_after(10):
        assert await commit(broker, "", -1, 9) == ErrorCode.NONE
        assert await fetched(broker) == 9


async def test_parked_sync_answered_when_a_new_member_starts_a_round(
        nursery_broker: Any) -> None:
    """The leader never syncs; the follower parked in SyncGroup hears
    REBALANCE_IN_PROGRESS as soon as a third member joins."""
    broker = await nursery_broker()
    results: dict[str, Any] = {}
    with trio.fail_after(10):
        first = await join(broker)
        async with trio.open_nursery() as nursery:
            async def second() -> None:
                results["second"] = await join(broker)
            nursery.start_soon(second)
            await eventually(lambda: "g" in broker.coordinator.partitions[0].groups and
                             len(broker.coordinator.partitions[0].groups["g"].members) == 2)
            results["first"] = await join(broker, first["member_id"])
        generation = results["first"]["generation_id"]
        follower = results["second"]["member_id"]
        if results["first"]["leader"] == follower:
            follower = first["member_id"]
        async with trio.open_nursery() as nursery:
            async def parked() -> None:
                results["sync"] = await sync(broker, follower, generation)
            nursery.start_soon(parked)
            await eventually(lambda: any(k[1] == follower for k in
                                         broker.coordinator.partitions[0].waiters))
            nursery.start_soon(join, broker)
            await eventually(lambda: "sync" in results)
            nursery.cancel_scope.cancel()
    assert results["sync"]["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS


async def test_silent_member_expires_without_any_request_when_session_times_out(
        nursery_broker: Any) -> None:
    """The background task alone removes a member that stopped heartbeating in a Stable
    group (the old coordinator only looked during requests)."""
    broker = await nursery_broker()
    with trio.fail_after(10):
        joined = await join(broker, session_ms=300, rebalance_ms=300)
        await sync(broker, joined["member_id"], 1, {joined["member_id"]: b"all"})
        groups = broker.coordinator.partitions[0].groups
        assert groups["g"].state == "Stable"
        await eventually(lambda: "g" not in groups or groups["g"].state == "Empty")
        beat = await handle_heartbeat_request(broker.context, request(
            HEARTBEAT, 4, generation_id=1, member_id=joined["member_id"]), 4)
    assert beat["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID


async def test_static_member_restart_keeps_generation_and_fences_old_id(
        nursery_broker: Any) -> None:
    broker = await nursery_broker()
    with trio.fail_after(10):
        old = await join(broker, instance_id="host-1")
        await sync(broker, old["member_id"], 1, {old["member_id"]: b"p0"})
        new = await join(broker, instance_id="host-1")
        assert (new["error_code"], new["generation_id"]) == (0, 1)
        assert new["member_id"] != old["member_id"]
        synced = await sync(broker, new["member_id"], 1)
        assert synced["assignment"] == b"p0"
        beat = await handle_heartbeat_request(broker.context, request(
            HEARTBEAT, 4, generation_id=1, member_id=old["member_id"],
            group_instance_id="host-1"), 4)
    assert beat["error_code"] == ErrorCode.FENCED_INSTANCE_ID


async def test_requests_refused_when_leadership_moves_away(nursery_broker: Any) -> None:
    """Another broker leads the offsets partition now: parked joins and new requests get
    NOT_COORDINATOR, FindCoordinator names the new leader."""
    broker = await nursery_broker()
    results: dict[str, Any] = {}
    with trio.fail_after(10):
        first = await join(broker)
        async with trio.open_nursery() as nursery:
            async def second() -> None:
                results["second"] = await join(broker)
            nursery.start_soon(second)
            await eventually(lambda: broker.coordinator.partitions[0].waiters)
            broker.set_image(image(leader=BROKER + 1))
        assert results["second"]["error_code"] == ErrorCode.NOT_COORDINATOR
        assert await commit(broker, first["member_id"], 1, 1) == ErrorCode.NOT_COORDINATOR
        found = await group_api.handle_find_coordinator_request(
            broker.context, build(load_request_schema(10, 3), {"key": "g"}), 3)
    assert (found["error_code"], found["node_id"]) == (ErrorCode.NONE, BROKER + 1)


async def test_group_deleted_only_when_empty_and_stays_deleted_after_reload(
        nursery_broker: Any) -> None:
    broker = await nursery_broker()
    delete = build(load_request_schema(42, 2), {"groups_names": ["g"]})
    with trio.fail_after(10):
        joined = await join(broker)
        await sync(broker, joined["member_id"], 1, {joined["member_id"]: b"all"})
        await commit(broker, joined["member_id"], 1, 3)
        offset_delete = await group_api.handle_offset_delete_request(
            broker.context, request(47, 0, topics=[{"name": "data",
                                                     "partitions": [{"partition_index": 0}]}]),
            0)
        assert offset_delete["topics"][0]["partitions"][0]["error_code"] == \
            ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        refused = await group_api.handle_delete_groups_request(broker.context, delete, 2)
        assert refused["results"][0]["error_code"] == ErrorCode.NON_EMPTY_GROUP
        left = await handle_leave_group_request(broker.context, request(
            LEAVE, 4, members=[{"member_id": joined["member_id"]}]), 4)
        assert left["members"][0]["error_code"] == ErrorCode.NONE
        deleted = await group_api.handle_delete_groups_request(broker.context, delete, 2)
        assert deleted["results"][0]["error_code"] == ErrorCode.NONE
        assert await fetched(broker) == -1
        restarted = await nursery_broker()
        assert "g" not in restarted.coordinator.partitions[0].groups
        described = await group_api.handle_describe_groups_request(
            restarted.context, build(load_request_schema(15, 5), {"groups": ["g"]}), 5)
    assert described["groups"][0]["group_state"] == "Dead"


async def test_group_deletable_the_moment_a_closed_static_members_session_ends(
        nursery_broker: Any) -> None:
    """librdkafka's 0081_admin: static members commit as they close (no LeaveGroup), the
    client sleeps out their session timeout (6 s) and deletes their groups at once. The
    coordinator ticks every 100 ms, so the DeleteGroups that arrives a millisecond after
    the session ended must find the member gone by itself (here the group clock jumps
    and the delete follows with no tick in between: the old check answered
    NON_EMPTY_GROUP)."""
    now = [0.0]
    broker = await nursery_broker(clock=lambda: now[0])
    delete = build(load_request_schema(42, 2), {"groups_names": ["g"]})
    with trio.fail_after(10):
        joined = await join(broker, session_ms=6000, instance_id="host-1")
        member = joined["member_id"]
        await sync(broker, member, 1, {member: b"all"})
        now[0] = 2.0
        assert await commit(broker, member, 1, 100) == ErrorCode.NONE  # last seen
        now[0] = 2.0 + 6.0 - 0.001
        refused = await group_api.handle_delete_groups_request(broker.context, delete, 2)
        assert refused["results"][0]["error_code"] == ErrorCode.NON_EMPTY_GROUP
        now[0] = 2.0 + 6.0 + 0.001
        deleted = await group_api.handle_delete_groups_request(broker.context, delete, 2)
        assert deleted["results"][0]["error_code"] == ErrorCode.NONE
        assert "g" not in broker.coordinator.partitions[0].groups
        assert await fetched(broker) == -1
