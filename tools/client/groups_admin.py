"""Consumer groups as an operator sees them (what kafka-consumer-groups.sh asks): the
groups of every broker (ListGroups), one group's members and assignments
(DescribeGroups at its coordinator), its committed offsets (OffsetFetch) beside the log
ends, and the writes: offsets reset by a simple commit (generation -1, no member id: the
coordinator takes one only while the group is Empty), a group deleted (DeleteGroups) or
its offsets of one topic (OffsetDelete).

Where the new offsets of a reset come from is a pure rule (`reset_offsets`), Kafka's:
every target is clamped into [log start, log end], `--shift-by` needs a committed offset,
`--to-current` keeps it (the log end where there is none)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema

from raft.common.kafka.codec import build
from tools.client import errors
from tools.client.connection import ClientError, ConnectionLost, KafkaClient
from tools.client.group_protocol import PROTOCOL_TYPE, ProtocolError, decode_assignment
from tools.client.offsets import EARLIEST, LATEST, list_offsets

METADATA, OFFSET_COMMIT, OFFSET_FETCH = 3, 8, 9
FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = \
    10, 15, 16, 42, 47
INACTIVE = ("Empty", "Dead")  # the states in which offsets may be reset

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: dict[str, list[int]]  # topic -> partitions ({} when not a consumer's)


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # Kafka's names; "Dead" for a group the coordinator does not know
    protocol: str
    coordinator: tuple[int, str]  # (broker id, host:port)
    members: list[Member] = field(default_factory=list)


@dataclass(frozen=True)
class ResetSpec:
    """One of kafka-consumer-groups.sh's --to-* / --shift-by choices."""
    kind: str  # earliest | latest | current | offset | shift | datetime
    value: int = 0  # the offset, the shift, or the time in ms


class ResetError(ValueError):
    """A reset that cannot be computed (a shift with no committed offset to shift)."""


def reset_offsets(spec: ResetSpec, partitions: Iterable[TopicPartition],
                  committed: Mapping[TopicPartition, int],
                  starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
                  by_time: Mapping[TopicPartition, int] | None = None
                  ) -> dict[TopicPartition, int]:
    """The new committed offset of each partition: the spec's target clamped into the
    partition's [log start, log end]. `by_time` (for "datetime") holds the first offset
    at or after the time, absent where no record is that late (then the log end)."""
    out = {}
    for tp in partitions:
        start, end = starts[tp], ends[tp]
        if spec.kind == "earliest":
            target = start
        elif spec.kind == "latest":
            target = end
        elif spec.kind == "current":
            target = committed.get(tp, end)
        elif spec.kind == "offset":
            target = spec.value
        elif spec.kind == "shift":
            if tp not in committed:
                raise ResetError(f"cannot shift the offset of {tp[0]}-{tp[1]}: the group "
                                 "has no committed offset there")
            target = committed[tp] + spec.value
        elif spec.kind == "datetime":
            target = (by_time or {}).get(tp, end)
        else:
            raise ValueError(f"unknown reset kind {spec.kind!r}")
        out[tp] = min(max(target, start), end)
    return out


class GroupsAdmin:
    """The group calls over one `KafkaClient`; ClientError names what failed."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    async def brokers(self) -> dict[int, str]:
        """Broker id -> host:port, from the cluster's metadata."""
        _, metadata = await self.client.call_any(build(
            load_request_schema(METADATA, 12),
            {"topics": [], "allow_auto_topic_creation": False,
             "include_topic_authorized_operations": False}))
        return {int(b.node_id): f"{b.host}:{b.port}" for b in metadata.brokers}

    async def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(group id, state) of every group on every broker, sorted; only those in
        `states` when given (ListGroups v4's filter)."""
        request = build(load_request_schema(LIST_GROUPS, 4),
                        {"states_filter": list(states)})
        found: set[tuple[str, str]] = set()
        for broker, address in sorted((await self.brokers()).items()):
            answer = await self.client.call(address, request)
            _raise_for(f"ListGroups at broker {broker}", int(answer.error_code))
            found.update((str(g.group_id), str(g.group_state)) for g in answer.groups)
        return sorted(found)

    async def coordinator(self, group: str) -> tuple[int, str]:
        _, answer = await self.client.call_any(build(
            load_request_schema(FIND_COORDINATOR, 3), {"key": group, "key_type": 0}))
        _raise_for(f"FindCoordinator {group}", int(answer.error_code))
        return int(answer.node_id), f"{answer.host}:{answer.port}"

    async def describe(self, group: str) -> GroupDescription:
        coordinator = await self.coordinator(group)
        answer = await self.client.call(coordinator[1], build(
            load_request_schema(DESCRIBE_GROUPS, 5),
            {"groups": [group], "include_authorized_operations": False}))
        (described,) = answer.groups
        _raise_for(f"DescribeGroups {group}", int(described.error_code))
        consumer = str(described.protocol_type) == PROTOCOL_TYPE
        return GroupDescription(
            group_id=group, state=str(described.group_state),
            protocol=str(described.protocol_data), coordinator=coordinator,
            members=[Member(member_id=str(m.member_id), client_id=str(m.client_id),
                            host=str(m.client_host),
                            assignment=_assignment(m.member_assignment) if consumer
                            else {})
                     for m in described.members])

    async def committed(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (OffsetFetch of all topics)."""
        _, address = await self.coordinator(group)
        answer = await self.client.call(address, build(
            load_request_schema(OFFSET_FETCH, 7),
            {"group_id": group, "require_stable": False, "topics": None}))
        _raise_for(f"OffsetFetch {group}", int(answer.error_code))
        out = {}
        for topic in answer.topics:
            for part in topic.partitions:
                _raise_for(f"OffsetFetch {group} {topic.name}-{part.partition_index}",
                           int(part.error_code))
                if int(part.committed_offset) >= 0:
                    out[(str(topic.name), int(part.partition_index))] = \
                        int(part.committed_offset)
        return out

    async def partitions(self, topic: str) -> list[int]:
        """The topic's partitions (ClientError when there is no such topic)."""
        metadata = await self.client.topic_metadata(topic)
        _raise_for(f"topic {topic!r}", metadata.error_code)
        return metadata.partitions

    async def offsets(self, partitions: Iterable[TopicPartition], timestamp: int
                      ) -> dict[TopicPartition, int]:
        """ListOffsets at each partition's leader: EARLIEST, LATEST or the first offset at
        or after a time in ms (absent when no record is that late)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        out = {}
        for topic, wanted in sorted(by_topic.items()):
            metadata = await self.client.topic_metadata(topic)
            _raise_for(f"topic {topic!r}", metadata.error_code)
            found = await list_offsets(self.client, metadata, wanted, timestamp)
            out.update({(topic, p): offset for p, offset in found.items() if offset >= 0})
        return out

    async def log_ends(self, partitions: Iterable[TopicPartition]
                       ) -> dict[TopicPartition, int]:
        return await self.offsets(partitions, LATEST)

    async def log_starts(self, partitions: Iterable[TopicPartition]
                         ) -> dict[TopicPartition, int]:
        return await self.offsets(partitions, EARLIEST)

    async def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """A simple commit of `offsets` (the coordinator refuses it unless the group is
        Empty: ClientError naming the partition and the error)."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        _, address = await self.coordinator(group)
        answer = await self.client.call(address, build(
            load_request_schema(OFFSET_COMMIT, 8),
            {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
             "group_instance_id": None, "topics": [
                 {"name": topic, "partitions": [
                     {"partition_index": p, "committed_offset": offset,
                      "committed_leader_epoch": -1, "committed_metadata": ""}
                     for p, offset in parts]}
                 for topic, parts in by_topic.items()]}))
        for topic in answer.topics:
            for part in topic.partitions:
                _raise_for(f"OffsetCommit {group} {topic.name}-{part.partition_index}",
                           int(part.error_code))

    async def delete(self, groups: Iterable[str]) -> dict[str, int]:
        """Group -> DeleteGroups' error code (0: deleted), each at its coordinator."""
        out = {}
        for group in groups:
            _, address = await self.coordinator(group)
            answer = await self.client.call(address, build(
                load_request_schema(DELETE_GROUPS, 2), {"groups_names": [group]}))
            (result,) = answer.results
            out[group] = int(result.error_code)
        return out

    async def delete_offsets(self, group: str, topic: str, partitions: Iterable[int]
                             ) -> dict[int, int]:
        """Partition -> OffsetDelete's error code (0: deleted); ClientError when the
        whole request is refused (GROUP_SUBSCRIBED_TO_TOPIC is per partition)."""
        _, address = await self.coordinator(group)
        answer = await self.client.call(address, build(
            load_request_schema(OFFSET_DELETE, 0),
            {"group_id": group, "topics": [
                {"name": topic, "partitions": [{"partition_index": p}
                                               for p in partitions]}]}))
        _raise_for(f"OffsetDelete {group}", int(answer.error_code))
        return {int(part.partition_index): int(part.error_code)
                for answered in answer.topics for part in answered.partitions}


def _assignment(data: Any) -> dict[str, list[int]]:
    if not data:
        return {}
    try:
        return decode_assignment(bytes(data))
    except ProtocolError:  # a member of another client's protocol: not ours to read
        return {}


def _raise_for(what: str, code: int) -> None:
    if code in errors.COORDINATOR_MOVED:
        raise ConnectionLost(f"{what}: {errors.name(code)}")
    if code != errors.NONE:
        raise ClientError(f"{what}: {errors.name(code)}")
