"""Which partition a Kafka request may touch, and the state of the ones this broker holds.

`check_partition` is pure (KIP-516 "stale reads"): a topic ID absent from the broker's
image -> UNKNOWN_TOPIC_ID; an unknown name or partition -> UNKNOWN_TOPIC_OR_PARTITION; a
client's leader epoch older than the image's -> FENCED_LEADER_EPOCH (newer ->
UNKNOWN_LEADER_EPOCH); not the leader -> NOT_LEADER_OR_FOLLOWER. `ReplicaManager` then
opens the partition directory and compares its partition.metadata with the topic ID:
a mismatch -> INCONSISTENT_TOPIC_ID, so a replica of a deleted topic never serves data
as the recreated one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from broker import partition_dir
from broker.dataplane.progress import LeaderProgress
from broker.hosting import is_hosted
from broker.kafka.partitions import log_start_checkpoint
from broker.kafka.partitions.partition_log import PartitionLog
from broker.kafka.partitions.segments import LogDefaults, RollLimits, topic_defaults
from broker.reconcile import parse_partition_dir_name, partition_dir_name
from metadata.image import MetadataImage, PartitionImage, TopicImage
from metadata.topic_configs import SEGMENT_BYTES, SEGMENT_MS, effective
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid

log = logging.getLogger(__name__)

RECONCILE_WAIT_S = 2.0  # a just-created partition's directory appears within this


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    error: ErrorCode
    topic: TopicImage | None = None
    partition: PartitionImage | None = None


def check_partition(image: MetadataImage, broker_id: int, *, partition: int,
                    topic_id: Uuid | None = None, name: str | None = None,
                    current_leader_epoch: int = -1, require_leader: bool = True) -> Resolved:
    """Resolve a (topic ID or name, partition) against the image; pure."""
    if topic_id is not None:
        topic = image.topic(topic_id)
        if topic is None:
            return Resolved(error=ErrorCode.UNKNOWN_TOPIC_ID)
    else:
        topic = image.topic_by_name(name or "")
        if topic is None:
            return Resolved(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not 0 <= partition < len(topic.partitions):
        return Resolved(error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic=topic)
    part = topic.partitions[partition]
    if current_leader_epoch >= 0 and current_leader_epoch < part.leader_epoch:
        return Resolved(error=ErrorCode.FENCED_LEADER_EPOCH, topic=topic, partition=part)
    if current_leader_epoch > part.leader_epoch:
        return Resolved(error=ErrorCode.UNKNOWN_LEADER_EPOCH, topic=topic, partition=part)
    if require_leader and part.leader != broker_id:
        return Resolved(error=ErrorCode.NOT_LEADER_OR_FOLLOWER, topic=topic, partition=part)
    if not require_leader and broker_id not in part.replicas:
        return Resolved(error=ErrorCode.NOT_LEADER_OR_FOLLOWER, topic=topic, partition=part)
    return Resolved(error=ErrorCode.NONE, topic=topic, partition=part)


def check_local_topic_id(local: Uuid | None, expected: Uuid) -> ErrorCode:
    """The partition directory's partition.metadata against the image's topic ID."""
    if local is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER  # not created yet (reconciliation pending)
    return ErrorCode.NONE if local == expected else ErrorCode.INCONSISTENT_TOPIC_ID


@dataclass(slots=True, kw_only=True, eq=False)
class PartitionState(LeaderProgress):
    """A hosted partition: its log, and the leader's progress rules over it
    (`broker.dataplane.progress`), with what the handlers wait on."""

    topic_id: Uuid
    partition: int
    log: PartitionLog
    lock: trio.Lock = field(default_factory=trio.Lock)
    changed: trio.Event = field(default_factory=trio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


class ReplicaManager:
    """Partition logs of this broker, opened on first use and closed once their topic ID
    leaves the image, their partition leaves the topic, or this broker its replicas."""

    def __init__(self, *, log_dir: Path, broker_id: int, image: Callable[[], MetadataImage],
                 wait_reconciled: Callable[[int], Awaitable[None]] | None = None,
                 log_defaults: LogDefaults | None = None) -> None:
        self.log_dir = log_dir
        self.broker_id = broker_id
        # the topics' retention and segment.ms unless they set them
        self.log_defaults = log_defaults or LogDefaults()
        self._image = image
        self._wait_reconciled = wait_reconciled
        self._states: dict[tuple[Uuid, int], PartitionState] = {}
        self._pruned_image: MetadataImage | None = None
        self._data_changed = trio.Event()
        self.data_version = 0  # how many times notify_data was called
        self._isr_check = trio.Event()
        self._log_starts = log_start_checkpoint.read(log_dir)
        self._checkpoint_lock = trio.Lock()

    def request_isr_check(self) -> None:
        """A follower reached the high watermark: check the ISRs now (it may rejoin)."""
        self._isr_check.set()

    async def wait_isr_check(self, timeout_s: float) -> None:
        with trio.move_on_after(timeout_s):
            await self._isr_check.wait()
        self._isr_check = trio.Event()

    def partition_image(self, state: PartitionState) -> PartitionImage | None:
        """The image's current state of `state`'s partition (None: gone)."""
        topic = self.image.topic(state.topic_id)
        if topic is None or state.partition >= len(topic.partitions):
            return None
        return topic.partitions[state.partition]

    def led_partitions(self) -> list[tuple[PartitionState, PartitionImage]]:
        """The open partitions this broker leads in the image, with their image state."""
        led = []
        for state in self._states.values():
            partition = self.partition_image(state)
            if partition is not None and partition.leader == self.broker_id:
                led.append((state, partition))
        return led

    def notify_data(self) -> None:
        """A log end or high watermark moved: wake parked fetches."""
        self.data_version += 1
        self._data_changed.set()
        self._data_changed = trio.Event()

    async def wait_data(self) -> None:
        await self._data_changed.wait()

    @property
    def image(self) -> MetadataImage:
        return self._image()

    @property
    def open_partitions(self) -> tuple[tuple[Uuid, int], ...]:
        return tuple(self._states)

    def _maybe_prune(self, image: MetadataImage) -> None:
        if image is self._pruned_image:
            return
        self._pruned_image = image
        for key in [k for k in self._states if not is_hosted(image, self.broker_id, *k)]:
            state = self._states.pop(key)
            state.log.close()
            state.notify()
            log.info("closed the log of a partition no longer hosted here", extra={
                "topic_id": str(key[0]), "partition": key[1]})

    async def open(self, resolved: Resolved) -> tuple[ErrorCode, PartitionState | None]:
        """The state of a partition `check_partition` accepted, checking the directory's
        topic ID on first use (INCONSISTENT_TOPIC_ID on a mismatch)."""
        assert resolved.topic is not None
        assert resolved.partition is not None
        topic, number = resolved.topic, resolved.partition.partition
        image = self.image
        self._maybe_prune(image)
        key = (topic.topic_id, number)
        directory = self.log_dir / partition_dir_name(topic.name, number)
        state = self._states.get(key)
        if state is not None and state.log.directory == directory:
            state.log.limits = roll_limits(topic, self.log_defaults)  # altered: at once
            return ErrorCode.NONE, state
        if state is not None:  # renamed topic: reconciliation moves the directory
            del self._states[key]
            state.log.close()
            state.notify()
        local = partition_dir.read_partition_metadata(directory)
        if local is None and self._wait_reconciled is not None:
            with trio.move_on_after(RECONCILE_WAIT_S):
                await self._wait_reconciled(image.last_applied_offset)
            local = partition_dir.read_partition_metadata(directory)
        error = check_local_topic_id(local, topic.topic_id)
        if error != ErrorCode.NONE:
            if error == ErrorCode.INCONSISTENT_TOPIC_ID:
                log.warning("partition directory holds another topic ID", extra={
                    "directory": str(directory), "local_topic_id": str(local),
                    "topic_id": str(topic.topic_id)})
            return error, None
        state = self._states.get(key)  # another task may have opened it meanwhile
        if state is None:
            try:
                plog = await trio.to_thread.run_sync(
                    open_partition_log, directory, roll_limits(topic, self.log_defaults),
                    self._log_starts.get((topic.name, number), 0))
            except FileNotFoundError:
                # reconciliation moved the directory since its partition.metadata was read:
                # staged (the partition removed, the topic deleted) or renamed. Retriable,
                # or gone: the client asks again with a newer image.
                gone = not is_hosted(self.image, self.broker_id, topic.topic_id, number)
                log.info("partition directory moved away while opening it", extra={
                    "directory": str(directory), "partition_gone": gone})
                return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if gone
                        else ErrorCode.NOT_LEADER_OR_FOLLOWER), None
            state = self._states.setdefault(key, PartitionState(
                topic_id=topic.topic_id, partition=number, log=plog,
                opened_at=trio.current_time(),
                high_watermark=plog.log_end_offset if len(resolved.partition.replicas) == 1
                else 0))
        return ErrorCode.NONE, state

    def open_states(self) -> list[PartitionState]:
        return list(self._states.values())

    async def checkpoint_log_starts(self) -> None:
        """Write the log dir's log-start-offset-checkpoint with every open log's start
        (and the entries read at start-up of logs not opened since, while their
        directory is there), durably: DeleteRecords answers after it."""
        async with self._checkpoint_lock:
            for state in self._states.values():
                key = parse_partition_dir_name(state.log.directory.name)
                if key is not None:
                    self._log_starts[key] = state.log.log_start_offset
            await trio.to_thread.run_sync(_write_log_starts, self.log_dir,
                                          dict(self._log_starts))

    def close_all(self) -> None:
        for state in self._states.values():
            state.log.close()
        self._states.clear()


def _write_log_starts(log_dir: Path, starts: dict[tuple[str, int], int]) -> None:
    log_start_checkpoint.write(log_dir, {
        key: offset for key, offset in starts.items()
        if offset > 0 and (log_dir / partition_dir_name(*key)).is_dir()})


def roll_limits(topic: TopicImage, defaults: LogDefaults) -> RollLimits:
    """The topic's `segment.bytes` (its own or Kafka's default) and `segment.ms` (its
    own or the broker's `log.roll.*`)."""
    values = {**topic_defaults(defaults), **dict(topic.configs)}
    return RollLimits(segment_bytes=int(effective(values, SEGMENT_BYTES)),
                      segment_ms=int(values[SEGMENT_MS]))


def open_partition_log(directory: Path, limits: RollLimits, log_start: int = 0
                       ) -> PartitionLog:
    """The partition's log, its partition.metadata made durable first (reconciliation
    writes it without fsync: see `broker.partition_dir`), so no data is ever durable in
    a directory whose topic ID is not."""
    partition_dir.sync_partition_metadata(directory)
    return PartitionLog(directory, limits, log_start=log_start)
