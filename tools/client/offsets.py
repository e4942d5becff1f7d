"""Offset look-ups at partition leaders: ListOffsets (earliest, latest) and
OffsetForLeaderEpoch (the end of a leader epoch: the first offset after it).

Both are fenced by leader epoch: each partition's request carries the epoch the client's
metadata gives it (`TopicMetadata.leader_epochs`, from the same image as the resize epoch
maps), so a leader that has not applied that image yet answers UNKNOWN_LEADER_EPOCH, and
one that moved past it FENCED_LEADER_EPOCH, instead of an offset; the caller refreshes
its metadata and asks again (ConnectionLost). A lagging leader would otherwise answer a
gate's query with its log end and then take a record from a producer on the old count,
above where the gate opens (docs/kip-253.md, "Schedules")."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from kio.index import load_request_schema

from raft.common.kafka.codec import build
from tools.client import errors
from tools.client.connection import ConnectionLost, KafkaClient
from tools.client.metadata import TopicMetadata

LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 2, 23
EARLIEST, LATEST = -2, -1
NO_EPOCH = -1


def _by_leader(metadata: TopicMetadata, partitions: Iterable[int]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for partition in partitions:
        leader = metadata.leader_address(partition)
        if leader is None:
            raise ConnectionLost(f"{metadata.name}-{partition} has no leader")
        out[leader].append(partition)
    return out


def list_offsets_request(metadata: TopicMetadata, partitions: Iterable[int],
                         timestamp: int) -> Any:
    return build(load_request_schema(LIST_OFFSETS, 7), {
        "replica_id": -1, "isolation_level": 0, "topics": [{
            "name": metadata.name, "partitions": [
                {"partition_index": p,
                 "current_leader_epoch": metadata.leader_epochs.get(p, NO_EPOCH),
                 "timestamp": timestamp} for p in partitions]}]})


def listed_offsets(name: str, response: Any) -> dict[int, int]:
    """partition -> offset of a ListOffsets answer; ConnectionLost on any error."""
    out: dict[int, int] = {}
    for part in response.topics[0].partitions:
        if int(part.error_code) != errors.NONE:
            raise ConnectionLost(f"ListOffsets {name}-{part.partition_index}: "
                                 f"{errors.name(int(part.error_code))}")
        out[int(part.partition_index)] = int(part.offset)
    return out


def epoch_end_request(metadata: TopicMetadata, epochs: Mapping[int, int]) -> Any:
    return build(load_request_schema(OFFSET_FOR_LEADER_EPOCH, 4), {
        "replica_id": -1, "topics": [{"topic": metadata.name, "partitions": [
            {"partition": p, "current_leader_epoch": metadata.leader_epochs.get(p, NO_EPOCH),
             "leader_epoch": epoch} for p, epoch in epochs.items()]}]})


def epoch_ends(name: str, response: Any) -> dict[int, int]:
    """partition -> end offset of an OffsetForLeaderEpoch answer (-1 for an epoch the
    leader does not know); ConnectionLost when the metadata must be refreshed."""
    out: dict[int, int] = {}
    for part in response.topics[0].partitions:
        code = int(part.error_code)
        if code in errors.METADATA_RETRIABLE:
            raise ConnectionLost(f"OffsetForLeaderEpoch {name}-{part.partition}: "
                                 f"{errors.name(code)}")
        out[int(part.partition)] = int(part.end_offset) if code == errors.NONE else -1
    return out


async def list_offsets(client: KafkaClient, metadata: TopicMetadata,
                       partitions: Iterable[int], timestamp: int) -> dict[int, int]:
    """partition -> earliest (EARLIEST) or latest (LATEST: the high watermark; the
    committed log end of a partition marked for deletion) offset."""
    out: dict[int, int] = {}
    for leader, wanted in _by_leader(metadata, partitions).items():
        response = await client.call(leader, list_offsets_request(metadata, wanted,
                                                                   timestamp))
        out.update(listed_offsets(metadata.name, response))
    return out


async def epoch_end_offsets(client: KafkaClient, metadata: TopicMetadata,
                            epochs: dict[int, int]) -> dict[int, int]:
    """partition -> the first offset after its leader epoch `epochs[partition]` (-1 when
    the leader knows no such epoch)."""
    out: dict[int, int] = {}
    for leader, wanted in _by_leader(metadata, epochs).items():
        response = await client.call(leader, epoch_end_request(
            metadata, {p: epochs[p] for p in wanted}))
        out.update(epoch_ends(metadata.name, response))
    return out
