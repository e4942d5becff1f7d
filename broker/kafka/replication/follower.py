"""Follower replication: a broker fetches each partition it follows from the partition's
leader with Fetch v13 by topic ID (`replica_id` = its broker id), over the leader's Kafka
listener (or, in chaos tests, the proxy `fault.injection.replica.routes` names for that
leader), and appends the batches with the leader's offsets and epochs.

`followed_partitions` (pure) says which partitions to fetch from which leader
(`FollowedPartitions`: the same, image after image, walking only the shards of the topic
map that changed); the fetcher restarts its per-leader tasks whenever that plan changes
in the image. Each fetch offset also tells the leader how far this replica has got,
which is what moves the leader's high watermark (it follows the ISR). Each connection
to a leader holds a KIP-227 fetch session (`broker.kafka.partitions.fetch_sessions`):
after the first fetch, a fetch carries only the partitions whose fetch fields changed, so
an idle follower's fetch carries none. A follower's stale
or unknown topic ID gets an error from the leader, never data (KIP-516). A follower
whose last fetched epoch the leader does not have (up to that offset) gets
`diverging_epoch` and truncates (KIP-595 style). The leader shrinks and expands ISRs:
broker.kafka.replication.isr.

A throttled partition (`broker.kafka.partitions.replication_quota`) is left out of the
fetch while this broker's follower quota is exceeded, this broker is outside its ISR and
has not caught up to the leader's high watermark; leaving it out of the session forgets
it there, as Kafka's follower does, until the next fetch carries it again.

The follower's log applies the batches it stores to its idempotent-producer state
(`PartitionLog.append_replicated`, no checks: Kafka's replication origin) and rebuilds
it on a truncation, so once elected leader it decides a producer's retries, gaps and
stale epochs as the old leader would have.
"""

from __future__ import annotations

import logging
import math
import secrets
import ssl
import uuid
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any

import trio
from kio.schema.fetch.v13.request import FetchRequest

from broker.dataplane.divergence import truncation_offset
from broker.kafka.admin.metadata_api import broker_endpoints
from broker.kafka.context import BrokerContext
from broker.kafka.partitions.fetch_sessions import FetchFields, FollowerSession, PartitionKey
from broker.kafka.partitions.partition_log import InvalidBatchError, split_batches
from broker.kafka.partitions.replication_quota import follower_holds_back
from broker.kafka.replication.replica import PartitionState, check_partition
from broker.kafka.sasl.sasl_client import authenticate as sasl_authenticate
from broker.kafka.sasl.sasl_settings import SaslClientSettings
from metadata.image import MetadataImage, TopicImage
from raft.common import tls
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from raft.common.kafka.wire_client import exchange
from raft.common.uuid import Uuid

log = logging.getLogger(__name__)

MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 1 << 20
RETRY_BACKOFF_S = 0.2

# leader id -> ((topic id, partition, leader epoch), ...)
Plan = Mapping[int, tuple[tuple[Uuid, int, int], ...]]
# a followed partition by its wire key: its state and the leader epoch it is fetched in
Followed = dict[PartitionKey, tuple[PartitionState, int]]


def followed_partitions(image: MetadataImage, broker_id: int) -> Plan:
    """The partitions `broker_id` replicates but does not lead, by leader (pure)."""
    plan: dict[int, list[tuple[Uuid, int, int]]] = {}
    for topic in image.topics.values():
        for p in topic.partitions:
            if broker_id in p.replicas and p.leader not in (broker_id, -1):
                plan.setdefault(p.leader, []).append((topic.topic_id, p.partition,
                                                      p.leader_epoch))
    return {leader: tuple(sorted(parts)) for leader, parts in sorted(plan.items())}


# a shard's followed partitions: (topic ID value, leader, (topic ID, partition, epoch))
_Share = list[tuple[int, int, tuple[Uuid, int, int]]]


_FIRST = itemgetter(0)


class FollowedPartitions:
    """`followed_partitions(image, broker_id)` for image after image, remembering each
    shard of `image.topics` and what this broker follows in it: the next image shares
    every shard that no record wrote to (`metadata.persistent.FrozenMap.shards`), so
    only those are walked again. The fetcher asks at every image change, and a walk of a
    million partitions took 0.46 s of the broker's event loop."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        # id(shard) -> (shard, its share): the shard is held so that its id stays its own
        self._shares: dict[int, tuple[Mapping[Uuid, TopicImage], _Share]] = {}

    def __call__(self, image: MetadataImage) -> Plan:
        known, shares = self._shares, {}
        followed: _Share = []
        for shard in image.topics.shards():
            key = id(shard)
            entry = known.get(key)
            if entry is None or entry[0] is not shard:
                entry = (shard, self._share(shard))
            shares[key] = entry
            followed.extend(entry[1])
        self._shares = shares
        # by topic ID, then (stable) by partition: every leader's list comes out sorted
        # as followed_partitions sorts it, without comparing Uuids in Python
        followed.sort(key=_FIRST)
        plan: dict[int, list[tuple[Uuid, int, int]]] = {}
        for _, leader, part in followed:
            plan.setdefault(leader, []).append(part)
        return {leader: tuple(parts) for leader, parts in sorted(plan.items())}

    def _share(self, shard: Mapping[Uuid, TopicImage]) -> _Share:
        broker_id = self.broker_id
        return [(topic.topic_id.value, p.leader,
                 (topic.topic_id, p.partition, p.leader_epoch))
                for topic in shard.values() for p in topic.partitions
                if broker_id in p.replicas and p.leader not in (broker_id, -1)]


def leader_fetch_address(image: MetadataImage, leader: int,
                         routes: Mapping[int, tuple[str, int]]) -> tuple[str, int] | None:
    """Where to fetch from `leader`: its advertised Kafka endpoint, or the test-only route
    for it (`fault.injection.replica.routes`: a chaos proxy in front of that endpoint).
    None while the leader advertises none (unknown or fenced), route or not."""
    endpoint = next((b for b in broker_endpoints(image) if b["node_id"] == leader), None)
    if endpoint is None:
        return None
    return routes.get(leader, (str(endpoint["host"]), int(endpoint["port"])))


def _fetch_topics(carried: Mapping[PartitionKey, FetchFields]) -> list[dict[str, object]]:
    by_topic: dict[uuid.UUID, list[dict[str, int]]] = {}
    for (topic_id, partition), (offset, last_epoch, log_start, epoch) in carried.items():
        by_topic.setdefault(topic_id, []).append({
            "partition": partition, "current_leader_epoch": epoch, "fetch_offset": offset,
            "last_fetched_epoch": last_epoch, "log_start_offset": log_start,
            "partition_max_bytes": PARTITION_MAX_BYTES})
    return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]


def _forgotten_topics(forgotten: list[PartitionKey]) -> list[dict[str, object]]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in forgotten:
        by_topic.setdefault(topic_id, []).append(partition)
    return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]


def _plan_differs(plan: Plan, planner: FollowedPartitions) -> Callable[[MetadataImage], bool]:
    return lambda image: planner(image) != plan


class ReplicaFetcher:
    def __init__(self, context: BrokerContext, *,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.context = context
        # the inter-broker listener's SASL login (None: it has none); set by
        # install_kafka_listener
        self.sasl: SaslClientSettings | None = None
        self._sasl_rng = secrets.SystemRandom()  # SCRAM nonces
        self.ssl_context = ssl_context  # the leaders' Kafka listeners are TLS (None: not)
        # the leader's certificate must bind the leader's id (nodes' mutual TLS); set by
        # install_kafka_listener
        self.bind_identity = False

    async def run(self) -> None:
        planner = FollowedPartitions(self.context.broker_id)
        while True:
            plan = planner(self.context.image)
            async with trio.open_nursery() as nursery:
                for leader, parts in plan.items():
                    nursery.start_soon(self._follow, leader, parts)
                await self.context.wait_image(_plan_differs(plan, planner), math.inf)
                nursery.cancel_scope.cancel()

    async def _follow(self, leader: int, parts: tuple[tuple[Uuid, int, int], ...]) -> None:
        while True:
            address = leader_fetch_address(self.context.image, leader,
                                           self.context.replica_routes)
            if address is not None:
                try:
                    stream = await tls.open_node_stream(
                        address[0], address[1], self.ssl_context, node_id=leader,
                        bind_identity=self.bind_identity)
                    async with stream:
                        if self.sasl is not None:  # SaslClientError is a ConnectionError
                            await sasl_authenticate(stream, self.sasl, rng=self._sasl_rng)
                        await self._fetch_loop(stream, leader, parts)
                except (OSError, trio.BrokenResourceError, ConnectionError) as exc:
                    log.info("replica fetch failed", extra={
                        "broker": self.context.broker_id, "leader": leader,
                        "reason": str(exc)})
            await trio.sleep(RETRY_BACKOFF_S)  # a backoff, not a synchronisation

    async def _states(self, parts: tuple[tuple[Uuid, int, int], ...]) -> Followed:
        states: Followed = {}
        for topic_id, partition, epoch in parts:
            resolved = check_partition(self.context.image, self.context.broker_id,
                                       topic_id=topic_id, partition=partition,
                                       require_leader=False)
            if resolved.error != ErrorCode.NONE:
                continue
            error, state = await self.context.replicas.open(resolved)
            if state is not None:
                states[(uuid.UUID(bytes=topic_id.to_bytes()), partition)] = (state, epoch)
        return states

    async def _fetch_loop(self, stream: trio.abc.Stream, leader: int,
                          parts: tuple[tuple[Uuid, int, int], ...]) -> None:
        correlation_id, buffer = 0, bytearray()
        session = FollowerSession()
        states: Followed = {}
        throttled: set[PartitionKey] = set()  # follower.replication.throttled.replicas'
        in_isr: set[PartitionKey] = set()  # the image's ISR holds this broker
        leader_hws: dict[PartitionKey, int] = {}  # the leader's, as its last answer said
        resolved_in: MetadataImage | None = None
        while True:
            if resolved_in is not self.context.image or len(states) < len(parts):
                resolved_in = self.context.image  # opened again only when it changes
                states = await self._states(parts)
                throttled, in_isr = self._throttled(states), self._in_isr(states)
            if not states:
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            carried, forgotten = session.to_send(
                self._fetched(states, throttled, in_isr, leader_hws))
            request = build(FetchRequest, {
                "replica_id": self.context.broker_id, "max_wait": MAX_WAIT_MS,
                "min_bytes": 1, "max_bytes": 0x7FFFFFFF, "session_id": session.session_id,
                "session_epoch": session.epoch, "topics": _fetch_topics(carried),
                "forgotten_topics_data": _forgotten_topics(forgotten)})
            session.sent_fetch(carried, forgotten)
            correlation_id += 1
            response = await exchange(stream, request, correlation_id, buffer=buffer,
                                      client_id=f"replica-{self.context.broker_id}")
            session.answered(ErrorCode(response.error_code), int(response.session_id))
            if response.error_code != ErrorCode.NONE:  # a full fetch next, at once
                log.info("leader refused the fetch session", extra={
                    "broker": self.context.broker_id, "leader": leader,
                    "error": ErrorCode(response.error_code).name})
                continue
            failed = False
            for topic in response.responses:
                for data in topic.partitions:
                    entry = states.get((topic.topic_id, int(data.partition_index)))
                    if entry is None:
                        continue
                    if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and \
                            data.log_start_offset > entry[0].log.log_end_offset:
                        await self._reset(entry[0], int(data.log_start_offset))
                        continue
                    if data.error_code != ErrorCode.NONE:
                        failed = True
                        log.info("leader refused a replica fetch", extra={
                            "broker": self.context.broker_id, "leader": leader,
                            "topic_id": str(entry[0].topic_id),
                            "partition": data.partition_index,
                            "error": data.error_code.name})
                        continue
                    diverging = data.diverging_epoch
                    if diverging.end_offset >= 0 or diverging.epoch >= 0:
                        await self._truncate(entry[0], (int(diverging.epoch),
                                                        int(diverging.end_offset)))
                        continue
                    key = (topic.topic_id, int(data.partition_index))
                    leader_hws[key] = int(data.high_watermark)
                    await self._receive(entry[0], data, throttled=key in throttled)
            if failed:
                await trio.sleep(RETRY_BACKOFF_S)

    async def _receive(self, state: PartitionState, data: Any, *, throttled: bool) -> None:
        """Store a partition's answer; a throttled one's bytes count against the quota."""
        records = data.records or b""
        if throttled:
            self.context.follower_quota.record(len(records), int(trio.current_time() * 1000))
        await self._append(state, records, int(data.high_watermark))
        await self._follow_log_start(state, int(data.log_start_offset))

    def _fetched(self, states: Followed, throttled: set[PartitionKey],
                 in_isr: set[PartitionKey], leader_hws: dict[PartitionKey, int]
                 ) -> dict[PartitionKey, FetchFields]:
        """The fetch fields of every followed partition the follower throttle does not
        hold back (`follower_holds_back`)."""
        exceeded = bool(throttled - in_isr) and self.context.follower_quota.exceeded(
            self.context.image, self.context.broker_id, int(trio.current_time() * 1000))
        return {key: (state.log.log_end_offset, state.log.last_epoch,
                      state.log.log_start_offset, epoch)
                for key, (state, epoch) in states.items()
                if not follower_holds_back(
                    throttled=key in throttled, in_isr=key in in_isr, exceeded=exceeded,
                    log_end=state.log.log_end_offset, leader_high_watermark=leader_hws.get(key))}

    def _in_isr(self, states: Followed) -> set[PartitionKey]:
        """The followed partitions whose ISR in the image holds this broker."""
        image, broker_id = self.context.image, self.context.broker_id
        return {key for key, (state, _) in states.items()
                if (topic := image.topic(state.topic_id)) is not None
                and state.partition < len(topic.partitions)
                and broker_id in topic.partitions[state.partition].isr}

    def _throttled(self, states: Followed) -> set[PartitionKey]:
        """The followed partitions this broker's follower throttle names."""
        image, quota = self.context.image, self.context.follower_quota
        return {key for key, (state, _) in states.items()
                if (topic := image.topic(state.topic_id)) is not None
                and quota.throttles(self.context.broker_id, topic, state.partition)}

    async def _truncate(self, state: PartitionState, diverging: tuple[int, int]) -> None:
        """The leader says our log diverged: keep only what its epochs and ours agree on
        (`truncation_offset`) and fetch again from there."""
        async with state.lock:
            end_offset = truncation_offset(diverging, state.log.end_offset_for_epoch,
                                           state.log.log_end_offset)
            await trio.to_thread.run_sync(state.log.truncate_to, end_offset)
        state.high_watermark = min(state.high_watermark, state.log.log_end_offset)

    async def _reset(self, state: PartitionState, leader_start: int) -> None:
        """Our log ends below the leader's start (it deleted what we lack): empty it and
        start at the leader's start, as Kafka's follower does."""
        async with state.lock:
            try:
                await trio.to_thread.run_sync(state.log.reset_to, leader_start)
            except OSError as exc:  # staged for deletion: the topic is gone
                log.info("replica reset failed", extra={
                    "topic_id": str(state.topic_id), "partition": state.partition,
                    "reason": str(exc)})
                return
        state.high_watermark = leader_start  # the leader's is at least its start
        await self.context.replicas.checkpoint_log_starts()

    async def _follow_log_start(self, state: PartitionState, leader_start: int) -> None:
        """Every replica's log start follows the leader's (retention, DeleteRecords),
        durably (the log dir's checkpoint) when it moved."""
        if leader_start <= state.log.log_start_offset:
            return
        async with state.lock:
            try:
                moved = await trio.to_thread.run_sync(state.log.advance_log_start,
                                                      leader_start)
            except OSError as exc:  # staged for deletion: the topic is gone
                log.info("replica log start not moved", extra={
                    "topic_id": str(state.topic_id), "partition": state.partition,
                    "reason": str(exc)})
                return
        if moved:
            await self.context.replicas.checkpoint_log_starts()

    async def _append(self, state: PartitionState, records: bytes, high_watermark: int
                      ) -> None:
        if records:
            try:
                batches = split_batches(records)
            except InvalidBatchError as exc:
                log.warning("corrupt batch from the leader", extra={
                    "topic_id": str(state.topic_id), "partition": state.partition,
                    "reason": str(exc)})
                return
            async with state.lock:
                try:
                    await trio.to_thread.run_sync(state.log.append_replicated, batches)
                except (OSError, ValueError) as exc:  # closed: the topic is gone
                    log.info("replica append failed", extra={
                        "topic_id": str(state.topic_id), "partition": state.partition,
                        "reason": str(exc)})
                    return
        new_hw = min(high_watermark, state.log.log_end_offset)
        if new_hw > state.high_watermark:
            state.high_watermark = new_hw
            state.notify()
