"""The group coordinator's shell on a broker: which groups this broker coordinates, their
state loaded from `__consumer_offsets`, their writes, and the requests parked on them.

- The coordinator of a group is the leader of `__consumer_offsets` partition
  `partition_for(group)` (`broker.kafka.groups.offsets_records`). The topic is created on first
  use (a FindCoordinator) through the controller like any topic, with
  `offsets.topic.num.partitions` partitions and replication factor min(3, unfenced
  brokers); until it has a leader FindCoordinator answers COORDINATOR_NOT_AVAILABLE.
  As Kafka's, it is compacted (`cleanup.policy=compact`, `offsets.topic.segment.bytes`
  segments; broker.kafka.partitions.compaction): a load replays only each key's latest
  record, which is all it keeps anyway. Ordered delivery is off for it (it never
  resizes, and compaction excludes it).
- `run` (a background task of the broker) follows the image: on becoming leader of an
  offsets partition (or of a new leader epoch of it) the partition's groups and offsets
  are replayed from its log, from its start to its end (requests for them get
  COORDINATOR_LOAD_IN_PROGRESS meanwhile); on losing leadership they are dropped and
  the requests parked on them answered NOT_COORDINATOR. The same loop ticks every
  loaded group every `TICK_S` (session and rebalance timeouts), and not at all while
  this broker leads no offsets partition (an idle cluster without groups).
- Writes (offset commits, group metadata after a rebalance, tombstones) are appended to
  the partition as one batch and acknowledged once the ISR holds them: an acks=all
  produce of this broker's own (`broker.kafka.partitions.produce.produce_partition`). Only then
  do they change the in-memory state; the leader epoch must still be the one loaded.

The group logic itself is pure (`broker.kafka.groups.group_state`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from broker.kafka.admin.metadata_api import broker_endpoints
from broker.kafka.context import BrokerContext
from broker.kafka.groups.group_state import Answer, CommittedOffset, Group, Outcome
from broker.kafka.groups.offsets_records import (
    OFFSETS_TOPIC,
    GroupKey,
    GroupValue,
    Key,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    Value,
    decode_batches,
    decode_key,
    decode_value,
    encode_batch,
    encode_key,
    encode_value,
    partition_for,
)
from broker.kafka.partitions.produce import produce_partition
from broker.kafka.replication.replica import check_partition
from broker.kafka.response_shapes import BrokerEndpoint
from metadata.admin import (
    AdminErrorResponse,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from metadata.controller_client import ControllerUnavailable
from metadata.image import NO_LEADER, MetadataImage
from metadata.topic_configs import CLEANUP_POLICY, ORDERED_DELIVERY, SEGMENT_BYTES
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)

TICK_S = 0.1  # how often session and rebalance deadlines are checked
COMMIT_TIMEOUT_S = 5.0  # Kafka's offsets.commit.timeout.ms
LOAD_READ_BYTES = 1 << 20
LOAD_RETRY_S = 0.2
CREATE_RETRY_S = 1.0
# produce errors of an offsets write -> what the group client is told (as Kafka maps them)
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.UNKNOWN_TOPIC_ID: ErrorCode.NOT_COORDINATOR,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


@dataclass(eq=False)
class _Waiter:
    done: trio.Event = field(default_factory=trio.Event)
    answer: Answer | None = None


@dataclass(eq=False, kw_only=True)
class OffsetsPartition:
    """One `__consumer_offsets` partition this broker leads (in `leader_epoch`)."""

    index: int
    leader_epoch: int
    loaded: bool = False
    groups: dict[str, Group] = field(default_factory=dict)
    waiters: dict[tuple[str, str], _Waiter] = field(default_factory=dict)
    dropped: bool = False


def load_groups(records: list[tuple[int, Key, Value | None]], now: float) -> dict[str, Group]:
    """The groups a partition's records (offset, key, value) leave behind; pure."""
    metadata: dict[str, GroupValue | None] = {}
    offsets: dict[str, dict[tuple[str, int], CommittedOffset | None]] = {}
    for offset, key, value in records:
        if isinstance(key, GroupKey):
            metadata[key.group_id] = value if isinstance(value, GroupValue) else None
        else:
            group_offsets = offsets.setdefault(key.group_id, {})
            group_offsets[(key.topic, key.partition)] = None if not isinstance(
                value, OffsetValue) else CommittedOffset(
                offset=value.offset, leader_epoch=value.leader_epoch,
                metadata=value.metadata, commit_timestamp=value.commit_timestamp,
                record_offset=offset)
    groups: dict[str, Group] = {}
    for group_id in set(metadata) | set(offsets):
        group = Group(group_id=group_id)
        group.restore(metadata.get(group_id), now)
        group.offsets = {k: v for k, v in offsets.get(group_id, {}).items() if v is not None}
        if not group.is_empty:
            groups[group_id] = group
    return groups


class GroupCoordinator:
    def __init__(self, context: BrokerContext) -> None:
        self.context = context
        self.num_partitions = context.offsets_topic_num_partitions
        self.initial_rebalance_delay_s = context.group_initial_rebalance_delay_ms / 1000
        self.clock = context.clock
        self.partitions: dict[int, OffsetsPartition] = {}
        self._create_wanted = trio.Event()
        self._nursery: trio.Nursery | None = None

    # --- which partition, which broker ---------------------------------------------

    def partition_of(self, group_id: str, image: MetadataImage | None = None) -> int | None:
        topic = (image or self.context.image).topic_by_name(OFFSETS_TOPIC)
        if topic is None or not topic.partitions:
            return None
        return partition_for(group_id, len(topic.partitions))

    def find(self, group_id: str) -> tuple[ErrorCode, BrokerEndpoint | None]:
        """FindCoordinator: the endpoint of the leader of the group's partition."""
        image = self.context.image
        index = self.partition_of(group_id, image)
        if index is None:
            self._create_wanted.set()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        topic = image.topic_by_name(OFFSETS_TOPIC)
        assert topic is not None
        leader = topic.partitions[index].leader
        for endpoint in broker_endpoints(image):
            if endpoint["node_id"] == leader and leader != NO_LEADER:
                return ErrorCode.NONE, endpoint
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None

    def lookup(self, group_id: str) -> tuple[ErrorCode, OffsetsPartition | None]:
        """The loaded partition coordinating `group_id` here, or why not."""
        index = self.partition_of(group_id)
        part = self.partitions.get(index) if index is not None else None
        if part is None:
            return ErrorCode.NOT_COORDINATOR, None
        if not part.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        return ErrorCode.NONE, part

    # --- parked requests ---------------------------------------------------------------

    def settle(self, part: OffsetsPartition, group: Group, outcome: Outcome,
               own: str | None = None) -> Answer | None:
        """Deliver `outcome`'s answers to parked requests, start the metadata write it
        asks for; returns the answer addressed to `own` (the caller)."""
        mine = outcome.take(own) if own is not None else None
        self.deliver(part, group.group_id, outcome.answers)
        if outcome.store and self._nursery is not None:
            self._nursery.start_soon(self.store_group, part, group)
        return mine

    def deliver(self, part: OffsetsPartition, group_id: str, answers: list[Answer]) -> None:
        for answer in answers:
            waiter = part.waiters.pop((group_id, answer.member_id), None)
            if waiter is not None:
                waiter.answer = answer
                waiter.done.set()

    async def wait_answer(self, part: OffsetsPartition, group_id: str, member_id: str,
                          timeout_s: float) -> Answer:
        """Park until an answer for `member_id` arrives (or `timeout_s`: then
        REBALANCE_IN_PROGRESS, the client rejoins)."""
        key = (group_id, member_id)
        old = part.waiters.pop(key, None)
        if old is not None:  # the member asked again on another connection
            old.answer = Answer(member_id=member_id, error=ErrorCode.REBALANCE_IN_PROGRESS)
            old.done.set()
        waiter = part.waiters[key] = _Waiter()
        with trio.move_on_after(timeout_s):
            await waiter.done.wait()
        if waiter.answer is None:
            if part.waiters.get(key) is waiter:
                del part.waiters[key]
            return Answer(member_id=member_id, error=ErrorCode.REBALANCE_IN_PROGRESS)
        return waiter.answer

    # --- writes ------------------------------------------------------------------------

    async def append(self, part: OffsetsPartition,
                     records: list[tuple[Key, Value | None]]) -> tuple[ErrorCode, int]:
        """Append `records` as one batch and wait for the ISR: (error, base offset)."""
        batch = encode_batch([(encode_key(k), encode_value(v)) for k, v in records],
                             timestamp_ms=int(time.time() * 1000))
        result = await produce_partition(
            self.context, name=OFFSETS_TOPIC, topic_id=None, index=part.index,
            records=batch, acks=-1, timeout_s=COMMIT_TIMEOUT_S)
        error = ErrorCode(int(result["error_code"]))
        if error == ErrorCode.NONE and self.partitions.get(part.index) is not part:
            error = ErrorCode.NOT_COORDINATOR  # leadership moved while replicating
        if error != ErrorCode.NONE:
            log.info("offsets write failed", extra={"partition": part.index,
                                                    "error": error.name})
            return _WRITE_ERRORS.get(error, error), -1
        return ErrorCode.NONE, int(result["base_offset"])

    async def store_group(self, part: OffsetsPartition, group: Group) -> ErrorCode:
        """Write the group's metadata (a tombstone for a group with nothing left, which
        is then forgotten)."""
        generation = group.generation
        gone = group.is_empty
        error, _ = await self.append(part, [(GroupKey(group_id=group.group_id),
                                             None if gone else group.metadata_value())])
        if error == ErrorCode.NONE and gone and group.is_empty and \
                part.groups.get(group.group_id) is group:
            del part.groups[group.group_id]
        if error != ErrorCode.NONE and not part.dropped:
            self.settle(part, group, group.store_failed(generation, self.clock()))
        return error

    async def commit(self, part: OffsetsPartition, group: Group,
                     offsets: dict[tuple[str, int], CommittedOffset | None]) -> ErrorCode:
        """Write offsets (None: a tombstone); once replicated they take effect."""
        keys = list(offsets)
        error, base = await self.append(part, [
            (OffsetKey(group_id=group.group_id, topic=t, partition=p),
             None if (c := offsets[(t, p)]) is None else c.value()) for t, p in keys])
        if error == ErrorCode.NONE:
            for position, (topic, index) in enumerate(keys):
                committed = offsets[(topic, index)]
                group.apply_offset(topic, index, None if committed is None else
                                   replace(committed, record_offset=base + position))
        return error

    # --- the background task ----------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._create_topic_when_wanted)
            image = None
            while True:
                current = self.context.image
                if current is not image:
                    image = current
                    self._follow_leadership(current, nursery)
                self._tick()
                # groups live in the offsets partitions this broker leads: with none,
                # nothing to tick until the image gives it one
                await self.context.wait_image(_changed_from(image),
                                              TICK_S if self.partitions else math.inf)

    def _tick(self) -> None:
        now = self.clock()
        for part in list(self.partitions.values()):
            if not part.loaded:
                continue
            for group in list(part.groups.values()):
                self.settle(part, group, group.tick(now))

    def _follow_leadership(self, image: MetadataImage, nursery: trio.Nursery) -> None:
        topic = image.topic_by_name(OFFSETS_TOPIC)
        led: dict[int, int] = {}
        if topic is not None:
            led = {p.partition: p.leader_epoch for p in topic.partitions
                   if p.leader == self.context.broker_id}
        for index, part in list(self.partitions.items()):
            if led.get(index) != part.leader_epoch:
                self._drop(part)
        for index, epoch in led.items():
            if index not in self.partitions:
                part = self.partitions[index] = OffsetsPartition(index=index,
                                                                 leader_epoch=epoch)
                nursery.start_soon(self._load, part)

    def _drop(self, part: OffsetsPartition) -> None:
        del self.partitions[part.index]
        part.dropped = True
        for waiter in part.waiters.values():
            waiter.answer = Answer(member_id="", error=ErrorCode.NOT_COORDINATOR)
            waiter.done.set()
        part.waiters.clear()
        log.info("no longer coordinating an offsets partition", extra={
            "partition": part.index, "groups": len(part.groups)})

    async def _load(self, part: OffsetsPartition) -> None:
        """Replay the partition's log into its groups (retrying until the partition is
        open here, or leadership moves on)."""
        started = trio.current_time()
        while self.partitions.get(part.index) is part:
            resolved = check_partition(self.context.image, self.context.broker_id,
                                       partition=part.index, name=OFFSETS_TOPIC)
            if resolved.error == ErrorCode.NONE:
                error, state = await self.context.replicas.open(resolved)
                if state is not None:
                    async with state.lock:
                        data = await trio.to_thread.run_sync(_read_all, state.log)
                    break
            await trio.sleep(LOAD_RETRY_S)
        else:
            return
        if self.partitions.get(part.index) is not part:
            return
        records = []
        for offset, raw_key, raw_value in data:
            try:
                key = decode_key(raw_key)
                if key is not None:
                    records.append((offset, key, decode_value(key, raw_value)))
            except RecordFormatError as exc:
                log.warning("skipping an unreadable offsets record", extra={
                    "partition": part.index, "offset": offset, "reason": str(exc)})
        part.groups = load_groups(records, self.clock())
        part.loaded = True
        log.info("coordinating an offsets partition", extra={
            "partition": part.index, "leader_epoch": part.leader_epoch,
            "groups": len(part.groups), "records": len(records),
            "load_ms": round((trio.current_time() - started) * 1000)})

    async def _create_topic_when_wanted(self) -> None:
        while True:
            await self._create_wanted.wait()
            if self.context.image.topic_by_name(OFFSETS_TOPIC) is None:
                await self._create_topic()
            self._create_wanted = trio.Event()
            await trio.sleep(CREATE_RETRY_S)  # at most one create request a second

    async def _create_topic(self) -> None:
        controller = self.context.controller
        if controller is None:
            return
        brokers = len(broker_endpoints(self.context.image))
        request = CreateTopicsRequest(topics=(CreatableTopic(
            name=OFFSETS_TOPIC, num_partitions=self.num_partitions,
            replication_factor=max(1, min(3, brokers)), configs=(
                CreatableTopicConfig(name=CLEANUP_POLICY, value="compact"),
                CreatableTopicConfig(name=ORDERED_DELIVERY, value="false"),
                CreatableTopicConfig(name=SEGMENT_BYTES, value=str(
                    self.context.offsets_topic_segment_bytes)))),))
        try:
            response = await controller.call(request, self.context.request_timeout_ms / 1000)
        except ControllerUnavailable as exc:
            log.info("could not create the offsets topic", extra={"reason": str(exc)})
            return
        if isinstance(response, AdminErrorResponse):
            log.info("could not create the offsets topic", extra={
                "error": response.top_level_error, "reason": response.error_message})
            return
        log.info("created the offsets topic", extra={"partitions": self.num_partitions,
                                                     "brokers": brokers})


def _changed_from(seen: MetadataImage) -> Callable[[MetadataImage], bool]:
    return lambda image: image is not seen


def _read_all(plog: Any) -> list[tuple[int, bytes, bytes | None]]:
    """Every (offset, key, value) of a partition log, start to end (worker thread)."""
    out: list[tuple[int, bytes, bytes | None]] = []
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        data = plog.read(offset, LOAD_READ_BYTES, end)
        if not data:
            break
        try:
            out.extend(decode_batches(data))
        except RecordFormatError as exc:
            log.warning("unreadable batch in an offsets partition", extra={
                "offset": offset, "reason": str(exc)})
            break
        offset = _next_offset(data)
    return out


def _next_offset(data: bytes) -> int:
    """The offset after the last batch of `data` (whole batches)."""
    position, last = 0, -1
    while position + 12 <= len(data):
        base = int.from_bytes(data[position:position + 8], "big", signed=True)
        length = int.from_bytes(data[position + 8:position + 12], "big", signed=True)
        last = base + int.from_bytes(data[position + 23:position + 27], "big", signed=True)
        position += 12 + length
    return last + 1
