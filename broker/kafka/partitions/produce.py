"""Produce (v3-v13; v13 addresses topics by ID, KIP-516), InitProducerId.

Produce: each partition's records must be complete magic v2 batches with a valid
CRC32C (else CORRUPT_MESSAGE / INVALID_RECORD); the leader stores them intact with
offsets assigned from its log end, fsyncs, and answers acks=1 then; acks=all waits
until the high watermark (which follows the ISR) passes the last offset, or times out
with REQUEST_TIMED_OUT (the ISR shrinks through the controller: broker.kafka.replication.isr).
acks=all honours the topic's `min.insync.replicas` (metadata.topic_configs): an ISR
smaller than that before the append -> NOT_ENOUGH_REPLICAS, nothing stored; one that
shrank below it while waiting -> NOT_ENOUGH_REPLICAS_AFTER_APPEND (stored, not acked).
acks=0 gets no response; if any partition failed, the connection is closed instead (as
Kafka does), so the client notices and refreshes its metadata. By topic ID (v13): an ID
absent from the image -> UNKNOWN_TOPIC_ID; the partition directory's partition.metadata
must hold the same ID (INCONSISTENT_TOPIC_ID), as for Fetch.

A client's Produce to an internal topic (`metadata.topic_names`: `__consumer_offsets`)
is refused on each of its partitions with INVALID_TOPIC_EXCEPTION, "Cannot append to
internal topic", as Kafka's ReplicaManager refuses it (after the WRITE check, so a caller
without WRITE learns nothing more). The group coordinator writes it with
`produce_partition`, below this check.

Idempotent producers: the batches are checked against the partition's producer state
(broker.kafka.partitions.producer_state, kept by the log, replicated to followers with the
batches, rebuilt when a log opens) under the partition lock: a retry of one of the
producer's last 5 batches is answered with its original offsets and not stored again;
a stale epoch -> INVALID_PRODUCER_EPOCH; a sequence gap -> OUT_OF_ORDER_SEQUENCE_NUMBER.

Ordered delivery (`broker.kafka.ordered.rules`): a topic entry carrying an undeleted partition
count that differs from the image's gets INVALID_PARTITION_METADATA (253, retriable for
the project's producer; Kafka's clients never send the count, and would report an
unknown server error) on each of its partitions; a partition marked for deletion refuses
every produce with it. Both are checked under the partition lock right before the
append, against the image the leader epoch stamped on the batch comes from: so a log
that was empty once the mark reached this broker stays empty, and a record routed by
one count is stored in a leader epoch of that count (a resize bumps every staying
partition's epoch), below where consumers' gates find that epoch's end.

InitProducerId hands out producer IDs unique cluster-wide without a round trip to the
controller (`producer_id_block`): this broker incarnation's broker epoch is the offset
of its RegisterBroker record in the metadata log, which no other registration shares,
and each incarnation draws its IDs from the block `broker_epoch * 2**24 + n`. An
incarnation that used up its 16,777,216 IDs answers UNKNOWN_SERVER_ERROR; one not yet
registered answers COORDINATOR_NOT_AVAILABLE (retriable). Transactions are not
supported: a transactional producer is refused at once with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (fatal to Kafka clients, instead of a retriable
error they retry until max.block.ms), in InitProducerId, FindCoordinator for a
transaction coordinator (`refuse_transaction_coordinator`) and a Produce naming a
transactional id.

A record without a key on a topic whose `cleanup.policy` holds `compact` gets
INVALID_RECORD, as in Kafka (compaction keeps one record per key), with each such
record's index in `record_errors`.

With the authorizer on (`broker.kafka.authz`): Produce needs WRITE on the topic (else
TOPIC_AUTHORIZATION_FAILED on each of its partitions); InitProducerId for an idempotent
producer needs IDEMPOTENT_WRITE on the cluster or, as Kafka 3 allows, WRITE on some topic
(else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import trio

from broker.dataplane.acks import ACKED, acks_all_verdict, leadership_lost
from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.admin.metadata_api import from_kafka_uuid
from broker.kafka.context import BrokerContext
from broker.kafka.group_shapes import FindCoordinatorResponse
from broker.kafka.ordered.rules import produce_refusal
from broker.kafka.partitions import record_policy
from broker.kafka.partitions.batch_rewrite import keyless_record_indexes
from broker.kafka.partitions.partition_log import InvalidBatchError, split_batches
from broker.kafka.partitions.producer_state import (
    Accept,
    BatchHeader,
    Duplicate,
    Reject,
    Verdict,
    read_header,
)
from broker.kafka.replication.replica import PartitionState, Resolved, check_partition
from metadata.image import TopicImage
from metadata.topic_configs import cleanup_policies, min_insync_replicas
from metadata.topic_names import is_internal_topic
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import ConnectionClosed

log = logging.getLogger(__name__)

ACKS_ALL, ACKS_NONE, ACKS_LEADER = -1, 0, 1
ISR_CHECK_S = 1.0
PRODUCER_ID_BLOCK_BITS = 24
TRANSACTION_KEY_TYPE = 1
NO_TRANSACTIONS = "transactions are not supported by this cluster"


def producer_id_block(broker_epoch: int) -> range:
    """The producer IDs of the broker incarnation registered at `broker_epoch` (an
    offset of the metadata log, so disjoint from every other incarnation's block)."""
    size = 1 << PRODUCER_ID_BLOCK_BITS
    if not 0 <= broker_epoch < 1 << (63 - PRODUCER_ID_BLOCK_BITS):
        return range(0)
    return range(broker_epoch * size, (broker_epoch + 1) * size)


def _failed(index: int, error: ErrorCode, message: str | None = None
            ) -> shapes.PartitionProduceResponse:
    return {"index": index, "error_code": int(error), "base_offset": -1,
            "log_start_offset": -1, "error_message": message}


def _batch_refusal(index: int, topic: TopicImage | None, batches: list[bytes],
                   headers: list[BatchHeader], now_ms: int
                   ) -> shapes.PartitionProduceResponse | None:
    """The answer to a client's batches refused whatever the partition's state, if they
    are."""
    if any(h.is_control or h.is_transactional for h in headers):
        return _failed(index, ErrorCode.INVALID_RECORD if any(h.is_control for h in headers)
                       else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                       "control or transactional batches are not accepted from clients")
    if topic is not None and "compact" in cleanup_policies(topic.configs):
        refused = _keyless_records(index, batches, headers)
        if refused is not None:
            return refused
    refusal = None if topic is None else record_policy.refusal(topic.configs, batches, now_ms)
    return None if refusal is None else _failed(index, *refusal)


def _keyless_records(index: int, batches: list[bytes], headers: list[BatchHeader]
                     ) -> shapes.PartitionProduceResponse | None:
    """INVALID_RECORD naming each record without a key by its index among the batches'
    records (Kafka's record_errors: librdkafka fails those with INVALID_RECORD and the
    others of the batch with _INVALID_DIFFERENT_RECORD), or None when every record has
    one."""
    keyless, first = [], 0
    for batch, header in zip(batches, headers, strict=True):
        keyless += [first + i for i in keyless_record_indexes(batch)]
        first += header.last_offset_delta + 1
    if not keyless:
        return None
    message = "a compacted topic cannot accept a record without a key"
    return {**_failed(index, ErrorCode.INVALID_RECORD,
                      f"{message} ({len(keyless)} such record(s))"),
            "record_errors": [{"batch_index": i, "batch_index_error_message": message}
                              for i in keyless]}


def _as_appended(topic: TopicImage | None, batches: list[bytes]) -> tuple[list[bytes], int]:
    """The batches as the log stores them (in the topic's `compression.type`) and the
    append time stamped on them (-1: none, the topic keeps its producers' CreateTime)."""
    if topic is None:
        return batches, -1
    batches = record_policy.in_topic_codec(topic.configs, batches)
    if not record_policy.uses_log_append_time(topic.configs):
        return batches, -1
    now_ms = _wall_clock_ms()
    return [record_policy.stamp_log_append_time(b, now_ms) for b in batches], now_ms


async def produce_partition(context: BrokerContext, *, name: str | None,
                            topic_id: Any, index: int, records: bytes | None, acks: int,
                            timeout_s: float, client_count: int | None = None
                            ) -> shapes.PartitionProduceResponse:
    """`client_count`: the undeleted partition count the client partitioned by (None:
    it sent none); a stale one refuses the batch unless it is a retry of one already
    stored (it was stored under the right count, and the client must learn its offset
    rather than re-route it)."""
    resolved = check_partition(context.image, context.broker_id, partition=index,
                               name=name, topic_id=topic_id)
    if resolved.error != ErrorCode.NONE:
        return _failed(index, resolved.error)
    error, state = await context.replicas.open(resolved)
    if state is None:
        return _failed(index, error)
    try:
        batches = split_batches(records or b"")
    except InvalidBatchError as exc:
        log.info("produce rejected", extra={"topic": name, "partition": index,
                                            "reason": str(exc)})
        return _failed(index, ErrorCode.CORRUPT_MESSAGE if exc.corrupt
                       else ErrorCode.INVALID_RECORD, str(exc))
    assert resolved.partition is not None
    partition = resolved.partition
    headers = [read_header(b) for b in batches]
    topic = context.image.topic(state.topic_id)
    refused = _batch_refusal(index, topic, batches, headers, _wall_clock_ms())
    if refused is not None:
        return refused
    append_time_ms = -1
    min_isr = _min_insync_replicas(context, state.topic_id) if acks == ACKS_ALL else 0
    if len(partition.isr) < min_isr:
        return _failed(index, ErrorCode.NOT_ENOUGH_REPLICAS,
                       f"the ISR {list(partition.isr)} is smaller than "
                       f"min.insync.replicas={min_isr}")
    async with state.lock:
        # under the lock: the heartbeat reads a marked partition's emptiness under it,
        # and OffsetForLeaderEpoch an epoch's end; one image read for the count, the
        # mark and the epoch stamped (a resize may have been applied since the above)
        current = check_partition(context.image, context.broker_id, partition=index,
                                  topic_id=state.topic_id)
        verdict = state.log.producers.check(headers, state.log.log_end_offset)
        answer = _locked_refusal(current, verdict, index, client_count)
        if answer is not None:
            return answer
        assert current.partition is not None
        partition = current.partition
        if isinstance(verdict, Duplicate):  # an idempotent producer's retry: already stored
            base, last = verdict.first_offset, verdict.last_offset
        else:
            assert isinstance(verdict, Accept)
            batches, append_time_ms = _as_appended(topic, batches)
            try:
                base, last = await trio.to_thread.run_sync(state.log.append, batches,
                                                           partition.leader_epoch)
            except (OSError, ValueError) as exc:  # ValueError: closed, the topic is gone
                gone = context.image.topic(state.topic_id) is None
                log.log(logging.INFO if gone else logging.ERROR, "append failed", extra={
                    "topic_id": str(state.topic_id), "partition": index,
                    "reason": str(exc)})
                return _failed(index, ErrorCode.UNKNOWN_TOPIC_ID if gone
                               else ErrorCode.KAFKA_STORAGE_ERROR, str(exc))
    state.maybe_advance_high_watermark(partition, context.broker_id)
    context.replicas.notify_data()
    if acks == ACKS_ALL:
        failure = await _wait_replicated(context, state, partition.leader_epoch, last,
                                         deadline=trio.current_time() + timeout_s,
                                         min_isr=min_isr)
        if failure is not None:
            return _failed(index, *failure)
    return {"index": index, "error_code": 0, "base_offset": base, "log_start_offset": 0,
            "log_append_time": None if append_time_ms < 0 else datetime.fromtimestamp(
                append_time_ms / 1000, tz=UTC)}


def _locked_refusal(current: Resolved, verdict: Verdict, index: int,
                    client_count: int | None) -> shapes.PartitionProduceResponse | None:
    """The answer to a batch refused under the partition lock, by the image read there
    (`current`) and the producer state's `verdict`; None: it is stored or answered as
    the retry it is."""
    if current.error != ErrorCode.NONE:
        return _failed(index, current.error)
    refusal = produce_refusal(current.topic, index, client_count)
    if refusal is not None and not isinstance(verdict, Duplicate):
        return _failed(index, ErrorCode.INVALID_PARTITION_METADATA, refusal)
    if isinstance(verdict, Reject):
        assert current.topic is not None
        log.info("produce refused by the producer state", extra={
            "topic_id": str(current.topic.topic_id), "partition": index,
            "error": verdict.error.name, "reason": verdict.message})
        return _failed(index, verdict.error, verdict.message)
    return None


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _min_insync_replicas(context: BrokerContext, topic_id: Any) -> int:
    topic = context.image.topic(topic_id)
    return 1 if topic is None else min_insync_replicas(topic.configs)


async def _wait_replicated(context: BrokerContext, state: PartitionState, leader_epoch: int,
                           last: int, *, deadline: float, min_isr: int = 1
                           ) -> tuple[ErrorCode, str] | None:
    """acks=all: wait until this leader's high watermark passes `last` (None), or
    `acks_all_verdict` refuses, at every wake-up."""
    while True:
        current = context.replicas.partition_image(state)
        still_in_log = _still_in_log(state, leader_epoch, last)
        if not leadership_lost(current, context.broker_id, leader_epoch, still_in_log):
            assert current is not None
            # re-evaluated against the image: the controller may have shrunk the ISR
            if state.maybe_advance_high_watermark(current, context.broker_id):
                context.replicas.notify_data()
        verdict = acks_all_verdict(current, context.broker_id, leader_epoch=leader_epoch,
                                   still_in_log=still_in_log,
                                   high_watermark=state.high_watermark, last_offset=last,
                                   min_isr=min_isr)
        if verdict is not None:
            return None if verdict == ACKED else verdict
        if trio.current_time() >= deadline:
            return ErrorCode.REQUEST_TIMED_OUT, "not replicated to the ISR in time"
        with trio.move_on_at(min(deadline, trio.current_time() + ISR_CHECK_S)):
            await state.changed.wait()


def _still_in_log(state: PartitionState, leader_epoch: int, last: int) -> bool:
    """Whether this leader's log still holds the records appended in `leader_epoch` up
    to `last`: true across an epoch bump that kept the leader (a resize bumps every
    partition's epoch), false once another leader's records replaced them (a log
    truncated and refilled in between ends `leader_epoch` at or before `last`)."""
    found, end = state.log.end_offset_for_epoch(leader_epoch)
    return found == leader_epoch and end > last


def _topic_error(context: BrokerContext, refusal: ErrorCode | None, name: str | None,
                 topic_id: Any) -> tuple[ErrorCode, str | None] | None:
    """The error (and message) every partition of a topic entry gets, or None."""
    if refusal is not None:
        return refusal, None
    if name is None:
        topic = None if topic_id is None else context.image.topic(topic_id)
        if topic is None:  # v13: a zero, missing or unknown topic ID
            return ErrorCode.UNKNOWN_TOPIC_ID, None
        name = topic.name
    if not authz.topic_allowed(context, authz.Op.WRITE, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    if is_internal_topic(name):  # after WRITE, as Kafka: its coordinator writes it, no client
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {name}"
    return None


async def handle_produce_request(context: BrokerContext, request: Any, version: int
                                 ) -> shapes.ProduceResponse | None:
    """Partitions are appended and (acks=all) replicated concurrently; the response keeps
    the request's order. acks=0 with a failed partition closes the connection."""
    acks = int(request.acks)
    timeout_s = max(0.0, request.timeout.total_seconds())
    responses: list[shapes.TopicProduceResponse] = []
    refusal = None
    if getattr(request, "transactional_id", None) is not None:
        refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif acks not in (ACKS_ALL, ACKS_NONE, ACKS_LEADER):
        refusal = ErrorCode.INVALID_REQUIRED_ACKS

    async def one(parts: list[shapes.PartitionProduceResponse], position: int, name: str | None,
                  topic_id: Any, data: Any, client_count: int | None) -> None:
        parts[position] = await produce_partition(
            context, name=name, topic_id=topic_id, index=int(data.index),
            records=data.records, acks=acks, timeout_s=timeout_s,
            client_count=client_count)

    async with trio.open_nursery() as nursery:
        for topic in request.topic_data:
            name = getattr(topic, "name", None)
            topic_id = from_kafka_uuid(getattr(topic, "topic_id", None))
            failure = _topic_error(context, refusal, name, topic_id)
            client_count = getattr(topic, "undeleted_partition_count", None)
            parts: list[shapes.PartitionProduceResponse] = [
                _failed(int(data.index), *(failure or (ErrorCode.NONE,)))
                for data in topic.partition_data]
            if failure is None:
                for position, data in enumerate(topic.partition_data):
                    nursery.start_soon(one, parts, position, name, topic_id, data,
                                       client_count)
            responses.append({"name": name, "topic_id": getattr(topic, "topic_id", None),
                              "partition_responses": parts})
    if acks == ACKS_NONE:
        failed = [(t["name"] or str(t["topic_id"]), p["index"], ErrorCode(p["error_code"]).name)
                  for t in responses for p in t["partition_responses"] if p["error_code"]]
        if failed:  # Kafka: no response to acks=0, so the closed connection is the signal
            raise ConnectionClosed(f"acks=0 produce failed: {failed[:5]}")
        return None
    return {"throttle_time": 0, "responses": responses}


def next_producer_id(context: BrokerContext) -> tuple[ErrorCode, int]:
    """(error, producer id) from this incarnation's block (`producer_id_block`)."""
    epoch = context.broker_epoch()
    if epoch is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
    issued_epoch, issued = context.producer_ids_issued
    if issued_epoch != epoch:
        issued = 0
    block = producer_id_block(epoch)
    if issued >= len(block):
        return ErrorCode.UNKNOWN_SERVER_ERROR, -1
    context.producer_ids_issued = (epoch, issued + 1)
    return ErrorCode.NONE, block[issued]


async def handle_init_producer_id_request(context: BrokerContext, request: Any,
                                          version: int) -> shapes.InitProducerIdResponse:
    """An idempotent producer gets a new producer ID at epoch 0 (as Kafka answers a
    request without a transactional id, whatever producer id and epoch it names)."""
    if request.transactional_id is not None:
        error, producer_id, message = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1,
                                       NO_TRANSACTIONS)
    elif not (authz.cluster_allowed(context, authz.Op.IDEMPOTENT_WRITE)
              or authz.any_topic_allowed(context, authz.Op.WRITE)):
        # Kafka 3: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
        error, producer_id, message = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1,
                                       "IDEMPOTENT_WRITE on the cluster or WRITE on a "
                                       "topic is needed")
    else:
        error, producer_id = next_producer_id(context)
        message = None
    if error != ErrorCode.NONE:
        log.info("InitProducerId refused", extra={
            "transactional_id": request.transactional_id, "error": error.name,
            "reason": message})
    return {"throttle_time": 0, "error_code": int(error), "producer_id": producer_id,
            "producer_epoch": 0 if producer_id >= 0 else -1}


def refuse_transaction_coordinator(request: Any) -> FindCoordinatorResponse | None:
    """FindCoordinator for a transaction coordinator: refused at once (no transactions
    here); None for any other key type (group coordinators: broker.kafka.groups.group)."""
    if int(getattr(request, "key_type", 0)) != TRANSACTION_KEY_TYPE:
        return None
    return {"throttle_time": 0,
            "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            "error_message": NO_TRANSACTIONS, "node_id": -1, "host": "", "port": -1}
