"""A consumer group member on the classic protocol: FindCoordinator, JoinGroup (the
"consumer" protocol, so Kafka's consumers can share the group), SyncGroup with the
ordered leader's assignment, Heartbeat, OffsetFetch/OffsetCommit, LeaveGroup, and
ConsumerGroupPosition (members' positions, exchanged through the coordinator)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema

from broker.kafka.ordered.assignment import assign
from raft.common.kafka.codec import build
from raft.common.kafka.ordered_schemas import ConsumerGroupPositionRequest
from tools.client import errors
from tools.client.connection import ClientError, ConnectionLost, KafkaClient
from tools.client.group_protocol import (
    ASSIGNOR,
    PROTOCOL_TYPE,
    ProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from tools.client.metadata import TopicMetadata

FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = 10, 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH = 8, 9


class Rejoin(Exception):
    """The group moved on (a rebalance, a new coordinator): join again."""


@dataclass(frozen=True, slots=True)
class Generation:
    generation_id: int
    member_id: str
    partitions: tuple[int, ...]


class GroupMember:
    def __init__(self, client: KafkaClient, group: str, topic: str, *,
                 session_timeout_ms: int, rebalance_timeout_ms: int) -> None:
        self.client, self.group, self.topic = client, group, topic
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.coordinator: str | None = None
        self.generation: Generation | None = None

    async def _call(self, body: Any, timeout_s: float | None = None) -> Any:
        if self.coordinator is None:
            self.coordinator = await self._find_coordinator()
        try:
            return await self.client.call(self.coordinator, body, timeout_s)
        except ConnectionLost:
            self.coordinator = None
            raise

    async def _find_coordinator(self) -> str:
        _, response = await self.client.call_any(build(
            load_request_schema(FIND_COORDINATOR, 3), {"key": self.group, "key_type": 0}))
        code = int(response.error_code)
        if code in errors.COORDINATOR_MOVED:  # not elected or not loaded yet: ask again
            raise ConnectionLost(f"FindCoordinator {self.group}: {errors.name(code)}")
        if code != errors.NONE:  # a refusal (GROUP_AUTHORIZATION_FAILED) stays one
            raise ClientError(f"FindCoordinator {self.group}: {errors.name(code)}")
        return f"{response.host}:{response.port}"

    def _check(self, what: str, code: int) -> None:
        if code == errors.NONE:
            return
        if code in errors.REJOIN:
            if code == errors.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            raise Rejoin(f"{what}: {errors.name(code)}")
        if code in errors.COORDINATOR_MOVED:
            self.coordinator = None
            raise ConnectionLost(f"{what}: {errors.name(code)}")
        raise ClientError(f"{what} in group {self.group}: {errors.name(code)}")

    async def join(self, refresh: Callable[[], Awaitable[TopicMetadata]]) -> Generation:
        """Join and sync; the leader assigns with the metadata `refresh()` returns."""
        self.generation = None
        request = build(load_request_schema(JOIN_GROUP, 7), {
            "group_id": self.group, "session_timeout": self.session_timeout_ms,
            "rebalance_timeout": self.rebalance_timeout_ms, "member_id": self.member_id,
            "group_instance_id": None, "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": ASSIGNOR, "metadata": encode_subscription([self.topic])}]})
        timeout_s = self.rebalance_timeout_ms / 1000 + 5
        response = await self._call(request, timeout_s)
        code = int(response.error_code)
        if code == errors.MEMBER_ID_REQUIRED:
            self.member_id = str(response.member_id)
            raise Rejoin("the coordinator gave a member id")
        self._check("JoinGroup", code)
        self.member_id = str(response.member_id)
        generation_id = int(response.generation_id)
        assignments: dict[str, list[int]] = {}
        if response.leader == self.member_id:
            metadata = await refresh()
            assignments = self.leader_assignment(
                {str(m.member_id): bytes(m.metadata)
                 for m in response.members},
                metadata)
        sync = await self._call(build(load_request_schema(SYNC_GROUP, 5), {
            "group_id": self.group, "generation_id": generation_id,
            "member_id": self.member_id, "group_instance_id": None,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": str(response.protocol_name),
            "assignments": [{"member_id": m, "assignment": encode_assignment({self.topic: ps})}
                            for m, ps in assignments.items()]}), timeout_s)
        self._check("SyncGroup", int(sync.error_code))
        try:
            mine = decode_assignment(bytes(sync.assignment))
        except ProtocolError as exc:
            raise ClientError(f"unreadable assignment: {exc}") from None
        self.generation = Generation(generation_id, self.member_id,
                                     tuple(sorted(mine.get(self.topic, []))))
        return self.generation

    def leader_assignment(self, subscriptions: Mapping[str, bytes], metadata: TopicMetadata
                          ) -> dict[str, list[int]]:
        """Every member gets an entry; the topic goes to those subscribed to it."""
        subscribed = []
        for member, data in subscriptions.items():
            try:
                topics, _ = decode_subscription(data)
            except ProtocolError:
                continue
            if self.topic in topics:
                subscribed.append(member)
        out: dict[str, list[int]] = {m: [] for m in subscriptions}
        out.update(assign(subscribed, metadata.partitions, metadata.marked))
        return out

    def _generation(self) -> Generation:
        if self.generation is None:
            raise Rejoin("not in a generation")
        return self.generation

    async def heartbeat(self) -> None:
        generation = self._generation()
        response = await self._call(build(load_request_schema(HEARTBEAT, 4), {
            "group_id": self.group, "generation_id": generation.generation_id,
            "member_id": generation.member_id, "group_instance_id": None}))
        self._check("Heartbeat", int(response.error_code))

    async def committed(self, partitions: Iterable[int]) -> dict[int, tuple[int, str]]:
        """partition -> (committed offset, its metadata) (absent: none committed)."""
        response = await self._call(build(load_request_schema(OFFSET_FETCH, 7), {
            "group_id": self.group, "require_stable": False,
            "topics": [{"name": self.topic, "partition_indexes": list(partitions)}]}))
        self._check("OffsetFetch", int(response.error_code))
        out = {}
        for topic in response.topics:
            for part in topic.partitions:
                self._check("OffsetFetch", int(part.error_code))
                if int(part.committed_offset) >= 0:
                    out[int(part.partition_index)] = (int(part.committed_offset),
                                                      part.metadata or "")
        return out

    async def commit(self, positions: Mapping[int, tuple[int, int, str]]) -> None:
        """Commit partition -> (offset, leader epoch, metadata) in the current
        generation."""
        if not positions:
            return
        generation = self._generation()
        response = await self._call(build(load_request_schema(OFFSET_COMMIT, 8), {
            "group_id": self.group, "generation_id_or_member_epoch":
                generation.generation_id, "member_id": generation.member_id,
            "group_instance_id": None, "topics": [{"name": self.topic, "partitions": [
                {"partition_index": p, "committed_offset": offset,
                 "committed_leader_epoch": epoch, "committed_metadata": metadata}
                for p, (offset, epoch, metadata) in sorted(positions.items())]}]}))
        for topic in response.topics:
            for part in topic.partitions:
                self._check("OffsetCommit", int(part.error_code))

    async def leave(self) -> None:
        if not self.member_id:
            return
        response = await self._call(build(load_request_schema(LEAVE_GROUP, 4), {
            "group_id": self.group,
            "members": [{"member_id": self.member_id, "group_instance_id": None}]}))
        self.member_id, self.generation = "", None
        code = int(response.error_code)
        if code not in (errors.NONE, *errors.REJOIN):
            raise ClientError(f"LeaveGroup {self.group}: {errors.name(code)}")

    async def exchange_positions(self, metadata: TopicMetadata, report: Mapping[int, int],
                                 ask: Iterable[int]) -> tuple[dict[int, int], set[int]]:
        """Report `report` (partition -> position), ask the group's position of `ask`:
        (the positions asked for, -1 when nobody reported one; the partitions of this
        member whose positions others wait on)."""
        generation = self._generation()
        asked = sorted(set(ask) - set(report))
        parts = [{"partition": p, "need_position": False, "position": position}
                 for p, position in sorted(report.items())]
        parts += [{"partition": p, "need_position": True, "position": -1} for p in asked]
        response = await self._call(build(ConsumerGroupPositionRequest, {
            "group_id": self.group, "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "topics": [{"topic_id": metadata.topic_id, "partitions": parts}]}))
        self._check("ConsumerGroupPosition", int(response.error_code))
        positions: dict[int, int] = {}
        wanted: set[int] = set()
        mine = set(generation.partitions)
        for topic in response.topics:
            for part in topic.partitions:
                partition = int(part.partition)
                if partition in asked:
                    positions[partition] = int(part.position)
                if part.need_position and partition in mine:
                    wanted.add(partition)
        return positions, wanted
