"""Produce (v3-v9), InitProducerId and FindCoordinator.

Produce: each partition's records must be complete magic v2 batches with a valid
CRC32C (else CORRUPT_MESSAGE / INVALID_RECORD); the leader stores them intact with
offsets assigned from its log end, fsyncs, and answers acks=1 then; acks=all waits
until the high watermark (which follows the ISR) passes the last offset, or times out
with REQUEST_TIMED_OUT (the ISR shrinks through the controller: broker.kafka.isr);
acks=0 gets no response at all.

InitProducerId hands out producer IDs for idempotent producers (kafka-python's default):
unique per broker and process start. A retried batch (same producer ID and base
sequence as that producer's last batch on the partition, kept in memory) is answered
with its original offset instead of being stored twice; older duplicates and sequence
gaps are not checked. Transactions are not supported.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from broker.kafka.codec import build, response_class
from broker.kafka.context import BrokerContext
from broker.kafka.metadata_api import from_kafka_uuid
from broker.kafka.partition_log import InvalidBatchError, split_batches
from broker.kafka.replica import PartitionState, check_partition

log = logging.getLogger(__name__)

PRODUCE, INIT_PRODUCER_ID = 0, 22
ACKS_ALL, ACKS_NONE, ACKS_LEADER = -1, 0, 1
ISR_CHECK_S = 1.0


def _failed(index: int, error: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": int(error), "base_offset": -1,
            "log_start_offset": -1, "error_message": message}


async def produce_partition(context: BrokerContext, *, name: str | None,
                            topic_id: Any, index: int, records: bytes | None, acks: int,
                            timeout_s: float) -> dict[str, Any]:
    resolved = check_partition(context.image, context.broker_id, partition=index,
                               name=name, topic_id=topic_id)
    if resolved.error != ErrorCode.none:
        return _failed(index, resolved.error)
    error, state = await context.replicas.open(resolved)
    if state is None:
        return _failed(index, error)
    try:
        batches = split_batches(records or b"")
    except InvalidBatchError as exc:
        log.info("produce rejected", extra={"topic": name, "partition": index,
                                            "reason": str(exc)})
        return _failed(index, ErrorCode.corrupt_message if exc.corrupt
                       else ErrorCode.invalid_record, str(exc))
    assert resolved.partition is not None
    partition = resolved.partition
    async with state.lock:
        duplicate = state.duplicate_of(batches)
        if duplicate is not None:  # an idempotent producer's retry: already stored
            base, last = duplicate
        else:
            try:
                base, last = await trio.to_thread.run_sync(state.log.append, batches,
                                                           partition.leader_epoch)
            except (OSError, ValueError) as exc:  # ValueError: closed, the topic is gone
                gone = context.image.topic(state.topic_id) is None
                log.log(logging.INFO if gone else logging.ERROR, "append failed", extra={
                    "topic_id": str(state.topic_id), "partition": index,
                    "reason": str(exc)})
                return _failed(index, ErrorCode.unknown_topic_id if gone
                               else ErrorCode.kafka_storage_error, str(exc))
            state.remember_producers(batches, base)
    state.maybe_advance_high_watermark(partition, context.broker_id)
    context.replicas.notify_data()
    if acks == ACKS_ALL:
        failure = await _wait_replicated(context, state, partition.leader_epoch, last,
                                         deadline=trio.current_time() + timeout_s)
        if failure is not None:
            return _failed(index, *failure)
    return {"index": index, "error_code": 0, "base_offset": base, "log_start_offset": 0}


async def _wait_replicated(context: BrokerContext, state: PartitionState, leader_epoch: int,
                           last: int, *, deadline: float) -> tuple[ErrorCode, str] | None:
    """acks=all: wait until this leader's high watermark passes `last`; None once it
    does. Leadership is checked first at every wake-up: once the image shows another
    leader epoch, `state.high_watermark` is a follower's copy of the new leader's, whose
    log may hold other records at these offsets, so it proves nothing about ours."""
    while True:
        current = context.replicas.partition_image(state)
        if current is None or current.leader != context.broker_id or \
                current.leader_epoch != leader_epoch:
            return (ErrorCode.not_leader_or_follower,
                    "leadership moved before the records reached the ISR")
        # re-evaluated against the image: the controller may have shrunk the ISR
        if state.maybe_advance_high_watermark(current, context.broker_id):
            context.replicas.notify_data()
        if state.high_watermark > last:
            return None
        if trio.current_time() >= deadline:
            return ErrorCode.request_timed_out, "not replicated to the ISR in time"
        with trio.move_on_at(min(deadline, trio.current_time() + ISR_CHECK_S)):
            await state.changed.wait()


async def handle_produce_request(context: BrokerContext, request: Any, version: int) -> Any:
    """Partitions are appended and (acks=all) replicated concurrently; the response keeps
    the request's order."""
    acks = int(request.acks)
    timeout_s = max(0.0, request.timeout.total_seconds())
    responses: list[dict[str, Any]] = []

    async def one(parts: list[dict[str, Any]], position: int, name: str | None,
                  topic_id: Any, data: Any) -> None:
        parts[position] = await produce_partition(
            context, name=name, topic_id=topic_id, index=int(data.index),
            records=data.records, acks=acks, timeout_s=timeout_s)

    async with trio.open_nursery() as nursery:
        for topic in request.topic_data:
            name = getattr(topic, "name", None)
            topic_id = from_kafka_uuid(getattr(topic, "topic_id", None))
            parts: list[dict[str, Any]] = [
                _failed(int(data.index), ErrorCode.invalid_required_acks)
                for data in topic.partition_data]
            if acks in (ACKS_ALL, ACKS_NONE, ACKS_LEADER):
                for position, data in enumerate(topic.partition_data):
                    nursery.start_soon(one, parts, position, name, topic_id, data)
            responses.append({"name": name, "topic_id": getattr(topic, "topic_id", None),
                              "partition_responses": parts})
    if acks == ACKS_NONE:
        return None
    return build(response_class(PRODUCE, version),
                 {"throttle_time": 0, "responses": responses})


async def handle_init_producer_id_request(context: BrokerContext, request: Any,
                                          version: int) -> Any:
    if request.transactional_id is not None:
        body: dict[str, Any] = {"error_code": int(ErrorCode.coordinator_not_available),
                                "producer_id": -1, "producer_epoch": -1}
    else:
        # broker id in the high bits, randomness below: unique without coordination
        context.next_producer_id += 1
        random_part = int.from_bytes(os.urandom(4), "big") << 16
        producer_id = (context.broker_id << 48) | (random_part & ((1 << 48) - 1) & ~0xFFFF) \
            | (context.next_producer_id & 0xFFFF)
        body = {"error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
    return build(response_class(INIT_PRODUCER_ID, version), {"throttle_time": 0, **body})
