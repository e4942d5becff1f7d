"""Offset look-ups at partition leaders: ListOffsets (earliest, latest) and
OffsetForLeaderEpoch (the end of a leader epoch: the first offset after it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from kio.index import load_request_schema

from raft.common.kafka.codec import build
from tools.client import errors
from tools.client.connection import ConnectionLost, KafkaClient
from tools.client.metadata import TopicMetadata

LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 2, 23
EARLIEST, LATEST = -2, -1


def _by_leader(metadata: TopicMetadata, partitions: Iterable[int]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for partition in partitions:
        leader = metadata.leader_address(partition)
        if leader is None:
            raise ConnectionLost(f"{metadata.name}-{partition} has no leader")
        out[leader].append(partition)
    return out


async def list_offsets(client: KafkaClient, metadata: TopicMetadata,
                       partitions: Iterable[int], timestamp: int) -> dict[int, int]:
    """partition -> earliest (EARLIEST) or latest (LATEST: the high watermark) offset."""
    out: dict[int, int] = {}
    for leader, wanted in _by_leader(metadata, partitions).items():
        response = await client.call(leader, build(load_request_schema(LIST_OFFSETS, 7), {
            "replica_id": -1, "isolation_level": 0, "topics": [{
                "name": metadata.name, "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                    for p in wanted]}]}))
        for part in response.topics[0].partitions:
            if int(part.error_code) != errors.NONE:
                raise ConnectionLost(f"ListOffsets {metadata.name}-{part.partition_index}: "
                                     f"{errors.name(int(part.error_code))}")
            out[int(part.partition_index)] = int(part.offset)
    return out


async def epoch_end_offsets(client: KafkaClient, metadata: TopicMetadata,
                            epochs: dict[int, int]) -> dict[int, int]:
    """partition -> the first offset after its leader epoch `epochs[partition]` (-1 when
    the leader knows no such epoch)."""
    out: dict[int, int] = {}
    for leader, wanted in _by_leader(metadata, epochs).items():
        response = await client.call(leader, build(
            load_request_schema(OFFSET_FOR_LEADER_EPOCH, 4), {
                "replica_id": -1, "topics": [{"topic": metadata.name, "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "leader_epoch": epochs[p]}
                    for p in wanted]}]}))
        for part in response.topics[0].partitions:
            code = int(part.error_code)
            if code in errors.METADATA_RETRIABLE:
                raise ConnectionLost(f"OffsetForLeaderEpoch {metadata.name}-"
                                     f"{part.partition}: {errors.name(code)}")
            out[int(part.partition)] = int(part.end_offset) if code == errors.NONE else -1
    return out
