"""An ordered producer: each record goes to its key's partition by linear hashing over
the topic's current undeleted count, which the Produce request carries so that the
leader refuses it (INVALID_PARTITION_METADATA) when the count changed. Such a record is
partitioned again with the refreshed count and resent.

A record without a key goes round-robin over the partitions below that count
(`partitioner.unkeyed_partition`), never to one marked for deletion.

Per-key order: one record in flight, acknowledged before the next is sent. Records go
with a producer ID and per-partition sequences. A send whose outcome is unknown (no
answer, or an error the leader may give after appending: errors.MAYBE_STORED) is sent
again *unchanged* (same partition, sequence and count) until the answer is definite:
the leader answers a batch it stored with its offset, even once the count moved on.
Only a definite refusal re-partitions the record; re-routing a maybe-stored record
could store it twice, and its sequence number would swallow the partition's next one.
A definite refusal of a *resend* says nothing of the earlier sends, so the record is
then partitioned again under a new producer ID: an earlier send, if stored, is kept
(at least once) and takes no later record's sequence.

On a compacted topic, a keyed record acknowledged by a partition that growth added is
followed by a tombstone of its key (acks=0, best effort) to each partition the key lived
in before, while that one still holds records from then, so compaction can remove the
key's old values there (broker/kafka/ordered/split_tombstones.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio
from kio.index import load_request_schema

from broker.kafka.ordered.partitioner import unkeyed_partition
from broker.kafka.ordered.split_tombstones import (
    SPLIT_TOMBSTONE_HEADER,
    SentTombstones,
    needs_tombstone,
    tombstone_targets,
)
from raft.common.kafka import record_batch
from raft.common.kafka.codec import build
from raft.common.kafka.ordered_schemas import EXTENDED_REQUESTS, PRODUCE
from tools.client import errors
from tools.client.connection import ClientError, ConnectionLost, KafkaClient
from tools.client.metadata import TopicMetadata
from tools.client.offsets import EARLIEST, epoch_end_offsets, list_offsets

PRODUCE_VERSION = 13  # topics by ID (KIP-516)
INIT_PRODUCER_ID = 22


@dataclass(frozen=True, slots=True)
class Acknowledged:
    key: bytes | None
    value: bytes
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class _Attempt:
    """One record as sent: resent unchanged while its outcome is unknown."""

    key: bytes | None
    value: bytes
    partition: int
    batch: bytes
    count: int | None  # the undeleted count it was partitioned by (None: not ordered)


class OrderedProducer:
    def __init__(self, client: KafkaClient, topic: str, *, timeout_s: float = 30.0,
                 retry_backoff_s: float = 0.1,
                 clock: Callable[[], float] = trio.current_time) -> None:
        self.client, self.topic = client, topic
        self.timeout_s, self.retry_backoff_s, self.clock = timeout_s, retry_backoff_s, clock
        self.metadata: TopicMetadata | None = None
        self._producer: tuple[int, int] | None = None  # (id, epoch)
        self._sequences: dict[int, int] = {}
        self._unkeyed = 0  # records without a key partitioned so far (round-robin)
        self._tombstones = SentTombstones()
        self.resends = 0
        self.split_tombstones = 0  # sent (acks=0: whether stored is not known)

    async def send(self, key: bytes | None, value: bytes) -> Acknowledged:
        """Store one record (`key` None: none); returns once the leader acknowledged it
        (acks=all)."""
        deadline = self.clock() + self.timeout_s
        last_error = "no attempt"
        pending: _Attempt | None = None  # sent, outcome unknown: resend it as it is
        resent = False  # `pending` was sent before, with an outcome still unknown
        while self.clock() < deadline:
            try:
                metadata = await self._current_metadata()
                if pending is None:
                    pending, resent = await self._attempt(metadata, key, value), False
                answer = await self._send(metadata, pending)
            except ConnectionLost as exc:
                last_error = str(exc)
                self.metadata = None
            else:
                if isinstance(answer, Acknowledged):
                    if metadata.compacted and metadata.ordered and key is not None:
                        await self._leave_split_tombstones(metadata, answer.partition, key)
                    return answer
                last_error = errors.name(answer)
                if answer in errors.PRODUCER_RESET:
                    self._producer, pending = None, None
                elif answer not in errors.METADATA_RETRIABLE:
                    raise ClientError(f"produce to {self.topic}: {last_error}")
                elif answer not in errors.MAYBE_STORED:
                    # surely not stored, this send: partition it again. An earlier send
                    # may be, and its sequence would swallow the partition's next
                    # record: then under a new producer id
                    if resent:
                        self._producer = None
                    pending = None
                self.metadata = None
            resent = pending is not None
            self.resends += 1
            await trio.sleep(self.retry_backoff_s)
        raise ClientError(f"produce to {self.topic}: not acknowledged within "
                          f"{self.timeout_s} s (last: {last_error})")

    async def _current_metadata(self) -> TopicMetadata:
        if self.metadata is None:
            metadata = await self.client.topic_metadata(self.topic)
            if metadata.error_code != errors.NONE:
                raise ConnectionLost(f"metadata of {self.topic}: "
                                     f"{errors.name(metadata.error_code)}")
            self.metadata = metadata
        return self.metadata

    async def _attempt(self, metadata: TopicMetadata, key: bytes | None, value: bytes
                       ) -> _Attempt:
        if self._producer is None:
            self._producer = await self._init_producer_id()
            self._sequences.clear()
        if key is None:
            partition = unkeyed_partition(self._unkeyed, metadata.undeleted, metadata.marked)
            self._unkeyed += 1
        else:
            partition = metadata.partition_for(key)
        producer_id, epoch = self._producer
        batch = record_batch.encode_batch(
            [(key, value)], timestamps=[int(time.time() * 1000)], producer_id=producer_id,
            producer_epoch=epoch, base_sequence=self._sequences.get(partition, 0))
        return _Attempt(key=key, value=value, partition=partition, batch=batch,
                        count=metadata.undeleted if metadata.ordered else None)

    async def _send(self, metadata: TopicMetadata, attempt: _Attempt) -> Acknowledged | int:
        leader, request = self._produce(metadata, attempt.partition, attempt.batch,
                                        attempt.count, acks=-1)
        response = await self.client.call(leader, request)
        answer = response.responses[0].partition_responses[0]
        code = int(answer.error_code)
        if code != errors.NONE:
            return code
        self._sequences[attempt.partition] = self._sequences.get(attempt.partition, 0) + 1
        return Acknowledged(attempt.key, attempt.value, attempt.partition,
                            int(answer.base_offset))

    def _produce(self, metadata: TopicMetadata, partition: int, batch: bytes,
                 count: int | None, *, acks: int) -> tuple[str, Any]:
        """(the partition leader's address, a Produce request of `batch` to it)."""
        leader = metadata.leader_address(partition)
        if leader is None:
            raise ConnectionLost(f"{self.topic}-{partition} has no leader")
        schema = EXTENDED_REQUESTS.get((PRODUCE, PRODUCE_VERSION)) or \
            load_request_schema(PRODUCE, PRODUCE_VERSION)
        return leader, build(schema, {
            "acks": acks, "timeout": int(self.timeout_s * 1000),
            "topic_data": [{"topic_id": metadata.topic_id,
                            "undeleted_partition_count": count,
                            "partition_data": [{"index": partition, "records": batch}]}]})

    async def _leave_split_tombstones(self, metadata: TopicMetadata, partition: int,
                                      key: bytes) -> None:
        """Best effort, as the tombstones go with acks=0: a look-up that fails leaves
        them to the key's next record."""
        targets = self._tombstones.missing(
            tombstone_targets(partition, metadata.initial, metadata.after_creation), key)
        if not targets:
            return
        try:
            ends = await epoch_end_offsets(self.client, metadata, dict(targets))
            earliest = await list_offsets(self.client, metadata, [s for s, _ in targets],
                                          EARLIEST)
            for source, epoch in targets:
                needed = needs_tombstone(earliest[source], ends[source])
                if needed:
                    batch = record_batch.encode_batch(
                        [(key, None)], timestamps=[int(time.time() * 1000)],
                        headers=[(SPLIT_TOMBSTONE_HEADER, b"")])
                    await self.client.send(*self._produce(metadata, source, batch,
                                                          metadata.undeleted, acks=0))
                    self.split_tombstones += 1
                self._tombstones.settle(source, epoch, key, clean=not needed)
        except ConnectionLost:
            self.metadata = None

    async def _init_producer_id(self) -> tuple[int, int]:
        request = build(load_request_schema(INIT_PRODUCER_ID, 4), {
            "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
            "producer_epoch": -1})
        _, response = await self.client.call_any(request)
        if int(response.error_code) != errors.NONE:
            raise ConnectionLost(f"InitProducerId: {errors.name(int(response.error_code))}")
        return int(response.producer_id), int(response.producer_epoch)
