"""The ordered consumer: a group member that delivers each partition's records in offset
order, holding back those the gates (broker/kafka/ordered/gates.py) say must wait until the
group has consumed other partitions up to a point.

One generation: join (tools/client/group.py); start positions from the committed
offsets of each partition's current life (gates.committed_position; else the earliest,
or the latest when `reset` says so); gates from the resize epoch maps; then fetch and
deliver, while a background loop heartbeats, exchanges positions with the group and
watches the topic's counts every heartbeat interval. A rebalance, a changed partition
count or INVALID_PARTITION_METADATA on Fetch ends the generation: positions are
committed synchronously and the member joins again, so a clean rebalance redelivers
nothing.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from broker.kafka.groups.offsets_records import RecordFormatError, decode_records_with_headers
from broker.kafka.ordered import gates
from broker.kafka.ordered.partitioner import deletion_blockers
from broker.kafka.ordered.split_tombstones import is_split_tombstone
from broker.kafka.partitions.partition_log import (
    InvalidBatchError,
    last_offset_delta,
    split_batches,
)
from raft.common.kafka.codec import build
from raft.common.kafka.ordered_schemas import EXTENDED_REQUESTS, FETCH
from tools.client import errors
from tools.client.connection import ClientError, ConnectionLost, KafkaClient
from tools.client.group import GroupMember, Rejoin
from tools.client.metadata import TopicMetadata
from tools.client.offsets import EARLIEST, LATEST, NO_EPOCH, epoch_end_offsets, list_offsets

log = logging.getLogger(__name__)
FETCH_VERSION = 13
_EPOCH = struct.Struct(">i")  # a batch's partition leader epoch, at byte 12


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    ts_ms: int  # when it was delivered


class PartitionKeyListener(Protocol):
    async def on_partition_key_maybe_revoked(self, partitions: list[int]) -> None: ...
    async def on_partition_key_assigned(self, partitions: list[int]) -> None: ...


class NoListener:
    async def on_partition_key_maybe_revoked(self, partitions: list[int]) -> None:
        pass

    async def on_partition_key_assigned(self, partitions: list[int]) -> None:
        pass


@dataclass(slots=True)
class Owned:
    """An assigned partition: where delivery stands and what holds it back."""
    position: int
    epoch: int = -1  # leader epoch of the last delivered record's batch
    high_watermark: int = -1
    gates: gates.PartitionGates = field(default_factory=gates.PartitionGates)
    key_assigned: bool = False  # on_partition_key_assigned called for the open gates
    incarnation: str = ""  # committed with the position (gates.incarnation)


class EndGeneration(Exception):
    """Leave this generation (commit, then join again)."""


class OrderedConsumer:
    def __init__(self, client: KafkaClient, topic: str, group: str, *, use_gates: bool = True,
                 listener: PartitionKeyListener | None = None,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 10_000,
                 heartbeat_interval_s: float = 1.0, fetch_max_wait_ms: int = 200,
                 wall_clock: Callable[[], float] = time.time,
                 reset: int = EARLIEST) -> None:
        self.client, self.topic, self.use_gates = client, topic, use_gates
        self.reset = reset  # where a partition without a committed offset starts
        self.listener: PartitionKeyListener = listener or NoListener()
        self.member = GroupMember(client, group, topic, session_timeout_ms=session_timeout_ms,
                                  rebalance_timeout_ms=rebalance_timeout_ms)
        self.heartbeat_interval_s = heartbeat_interval_s
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.wall_clock = wall_clock
        self.metadata: TopicMetadata | None = None
        self.owned: dict[int, Owned] = {}
        self.group_positions: dict[int, int] = {}
        self.reports: dict[int, gates.ReportState] = {}
        self.wanted: set[int] = set()  # our partitions others wait on
        self._changed = trio.Event()  # positions or gates moved: look again

    # -- the outer loop -------------------------------------------------------------

    async def run(self, deliver: Callable[[ConsumedRecord], Awaitable[None]], *,
                  retry_backoff_s: float = 0.2) -> None:
        """Consume until cancelled (a deadline, a signal); then commit and leave the
        group. Raises ClientError when the group or the topic refuses for good."""
        try:
            while True:
                try:
                    await self._one_generation(deliver)
                except (Rejoin, ConnectionLost, EndGeneration) as exc:
                    log.info("joining again", extra={"reason": str(exc)})
                    await self._commit_quietly()
                    self.owned.clear()
                    await trio.sleep(retry_backoff_s)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await self._commit_quietly()
                try:
                    await self.member.leave()
                except (ClientError, Rejoin) as exc:
                    log.info("leave failed", extra={"reason": str(exc)})

    async def _refresh(self) -> TopicMetadata:
        metadata = await self.client.topic_metadata(self.topic)
        if metadata.error_code != errors.NONE:
            raise ConnectionLost(f"metadata of {self.topic}: "
                                 f"{errors.name(metadata.error_code)}")
        self.metadata = metadata
        return metadata

    async def _one_generation(self, deliver: Callable[[ConsumedRecord], Awaitable[None]]
                              ) -> None:
        generation = await self.member.join(self._refresh)
        metadata = await self._refresh()
        await self._start_positions(metadata, generation.partitions)
        ended: list[Exception] = []

        async def until_ended(task: Callable[[], Awaitable[None]]) -> None:
            # the first task to end the generation cancels the other: its exception is
            # re-raised alone (a nursery would wrap it in an ExceptionGroup)
            try:
                await task()
            except (ClientError, Rejoin, EndGeneration) as exc:
                ended.append(exc)
            nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(until_ended, lambda: self._background(metadata))
            nursery.start_soon(until_ended, lambda: self._fetch_loop(deliver))
        if ended:
            raise ended[0]

    async def _commit_quietly(self) -> None:
        try:
            await self.member.commit({p: (o.position, o.epoch, o.incarnation)
                                      for p, o in self.owned.items()})
        except (ClientError, Rejoin) as exc:
            log.info("commit failed", extra={"reason": str(exc)})

    # -- a generation's start: positions and gates ----------------------------------

    async def _start_positions(self, metadata: TopicMetadata, partitions: Iterable[int]
                               ) -> None:
        wanted = list(partitions)
        lives = {p: gates.incarnation(metadata.topic_id, metadata.after_creation.get(p, {}))
                 for p in wanted}
        fetched = await self.member.committed(wanted)
        committed = {p: offset for p in wanted if (offset := gates.committed_position(
            fetched.get(p), lives[p])) is not None}
        earliest = await list_offsets(self.client, metadata, wanted, EARLIEST)
        fresh = earliest if self.reset == EARLIEST else \
            await list_offsets(self.client, metadata, wanted, self.reset)
        self.owned = {p: Owned(position=max(committed[p], earliest[p]) if p in committed
                               else fresh[p], incarnation=lives[p]) for p in wanted}
        self.reports = {p: gates.ReportState() for p in wanted}
        self.group_positions, self.wanted = {}, set()
        if self.use_gates and metadata.ordered:
            for p in wanted:
                self.owned[p].gates = await self._gates_for(
                    metadata, p, committed.get(p), earliest[p])
        opened = [p for p, o in self.owned.items() if not o.gates.watched()]
        for p in opened:
            self.owned[p].key_assigned = True
        if opened:
            await self.listener.on_partition_key_assigned(sorted(opened))

    async def _gates_for(self, metadata: TopicMetadata, p1: int, start: int | None,
                         earliest: int) -> gates.PartitionGates:
        creation = None
        created_after = metadata.after_creation.get(p1, {})
        if gates.needs_creation_gate(p1, metadata.initial, start, earliest) and created_after:
            source = gates.creation_source(p1, metadata.initial, created_after)
            if source in metadata.leaders and source in created_after:
                ends = await epoch_end_offsets(self.client, metadata,
                                               {source: created_after[source]})
                creation = gates.CreationGate(source, max(0, ends[source]))
        blockers = deletion_blockers(p1, metadata.marked, metadata.initial,
                                     metadata.undeleted)
        deletions = []
        if blockers:
            log_ends = await list_offsets(self.client, metadata, blockers, LATEST)
            for p3 in blockers:
                epoch = metadata.before_deletion[p3].get(p1)
                upper = -1
                if epoch is not None:
                    ends = await epoch_end_offsets(self.client, metadata, {p1: epoch})
                    upper = gates.epoch_end_gate(ends[p1])
                deletions.append(gates.DeletionGate(p3, upper, log_ends[p3]))
        return gates.PartitionGates(creation, tuple(deletions))

    # -- the background loop: heartbeat, positions, counts ----------------------------

    async def _background(self, metadata: TopicMetadata) -> None:
        layout = _layout(metadata)
        while True:
            if self.use_gates and metadata.ordered:
                await self._exchange_positions(metadata)
            await trio.sleep(self.heartbeat_interval_s)
            await self.member.heartbeat()
            await self._commit_quietly()
            fresh = await self._refresh()
            if _layout(fresh) != layout:
                raise EndGeneration(f"{self.topic} changed: {_layout(fresh)}")

    async def _exchange_positions(self, metadata: TopicMetadata) -> None:
        report = {}
        known = self._known_positions()
        for p in self.wanted & set(self.owned) & set(known):
            owned = self.owned[p]
            if gates.should_report(self.reports[p], position=owned.position,
                                   high_watermark=owned.high_watermark,
                                   epoch_before_position=owned.epoch):
                report[p] = owned.position
        if report:
            await self.listener.on_partition_key_maybe_revoked(sorted(report))
        ask = set().union(*(o.gates.watched() for o in self.owned.values())) - set(self.owned)
        positions, self.wanted = await self.member.exchange_positions(metadata, report, ask)
        for p, position in report.items():
            self.reports[p] = gates.ReportState(position, self.owned[p].epoch, True)
        self.group_positions.update(positions)
        self._changed.set()

    # -- fetching and delivery ----------------------------------------------------------

    def _known_positions(self) -> dict[int, int]:
        return gates.known_positions({p: (o.position, o.gates) for p, o in self.owned.items()},
                                     self.group_positions)

    def _limit(self, owned: Owned) -> int | None:
        if not self.use_gates:
            return None
        return gates.delivery_limit(owned.gates, self._known_positions())

    async def _open_gates(self) -> None:
        opened = [p for p, o in self.owned.items()
                  if not o.key_assigned and self._limit(o) is None]
        for p in opened:
            self.owned[p].key_assigned = True
        if opened:
            await self.listener.on_partition_key_assigned(sorted(opened))

    async def _fetch_loop(self, deliver: Callable[[ConsumedRecord], Awaitable[None]]
                          ) -> None:
        while True:
            await self._open_gates()
            fetchable = {p: o for p, o in self.owned.items()
                         if gates.deliverable(o.position, self._limit(o))}
            if not fetchable:
                self._changed = trio.Event()
                with trio.move_on_after(self.heartbeat_interval_s):
                    await self._changed.wait()
                continue
            assert self.metadata is not None
            by_leader: dict[str, list[int]] = {}
            for p in fetchable:
                leader = self.metadata.leader_address(p)
                if leader is None:
                    raise ConnectionLost(f"{self.topic}-{p} has no leader")
                by_leader.setdefault(leader, []).append(p)
            for leader, partitions in by_leader.items():
                response = await self.client.call(leader, self._fetch_request(partitions))
                await self._take(response, deliver)

    def _fetch_request(self, partitions: list[int]) -> Any:
        assert self.metadata is not None
        metadata = self.metadata
        return build(EXTENDED_REQUESTS[(FETCH, FETCH_VERSION)], {
            "replica_id": -1, "max_wait": self.fetch_max_wait_ms, "min_bytes": 1,
            "max_bytes": 4 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "rack_id": "", "topics": [{
                "topic_id": metadata.topic_id,
                "undeleted_partition_count": metadata.undeleted if metadata.ordered else None,
                # fenced by the epochs of the image the gates come from (as ListOffsets and
                # OffsetForLeaderEpoch are, tools/client/offsets.py): a member holding an
                # older layout with the same count is refused, not served by it
                "partitions": [{"partition": p, "current_leader_epoch":
                                metadata.leader_epochs.get(p, NO_EPOCH) if metadata.ordered
                                else NO_EPOCH,
                                "fetch_offset": self.owned[p].position,
                                "last_fetched_epoch": -1, "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20} for p in partitions]}]})

    async def _take(self, response: Any, deliver: Callable[[ConsumedRecord], Awaitable[None]]
                    ) -> None:
        if int(response.error_code) != errors.NONE:
            raise ConnectionLost(f"Fetch: {errors.name(int(response.error_code))}")
        for topic in response.responses:
            for part in topic.partitions:
                p, code = int(part.partition_index), int(part.error_code)
                if code == errors.INVALID_PARTITION_METADATA:
                    raise EndGeneration(f"Fetch {self.topic}-{p}: {errors.name(code)}")
                if code == int(errors.OFFSET_OUT_OF_RANGE):
                    assert self.metadata is not None
                    earliest = await list_offsets(self.client, self.metadata, [p], EARLIEST)
                    self.owned[p].position = earliest[p]
                    continue
                if code != errors.NONE:
                    raise ConnectionLost(f"Fetch {self.topic}-{p}: {errors.name(code)}")
                self.owned[p].high_watermark = int(part.high_watermark)
                await self._deliver_records(p, bytes(part.records or b""), deliver)

    async def _deliver_records(self, p: int, data: bytes,
                               deliver: Callable[[ConsumedRecord], Awaitable[None]]) -> None:
        owned = self.owned[p]
        try:
            batches = split_batches(data) if data else []
        except InvalidBatchError:  # a partial last batch: take the whole ones before it
            batches = _whole_batches(data)
        for batch in batches:
            (epoch,) = _EPOCH.unpack_from(batch, 12)
            base = int(struct.unpack_from(">q", batch, 0)[0])
            last = base + last_offset_delta(batch)
            try:
                records = list(decode_records_with_headers(batch))
            except RecordFormatError as exc:
                raise ClientError(f"{self.topic}-{p} at {base}: {exc}") from None
            for offset, key, value, headers in records:
                if offset < owned.position:
                    continue
                if not gates.deliverable(offset, self._limit(owned)):
                    return
                if not is_split_tombstone(value, headers):  # for compaction, not for readers
                    await deliver(ConsumedRecord(key, value, p, offset,
                                                 int(self.wall_clock() * 1000)))
                owned.position, owned.epoch = offset + 1, epoch
            if gates.deliverable(last, self._limit(owned)) and last >= owned.position:
                owned.position, owned.epoch = last + 1, epoch  # control or compressed batches


def _whole_batches(data: bytes) -> list[bytes]:
    out, position = [], 0
    while position + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        end = position + 12 + length
        if end > len(data):
            break
        out += split_batches(data[position:end])
        position = end
    return out


def _layout(metadata: TopicMetadata) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """What a member's assignment and gates depend on."""
    return metadata.undeleted, tuple(metadata.partitions), tuple(sorted(metadata.marked))
