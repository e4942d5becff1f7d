"""DeleteRecords (API 21, v0-v2), as Kafka's: each partition's leader moves its log start
up to the requested offset (-1: the high watermark), deleting the segments wholly below
it, and answers once every replica of the ISR reports a log start at or past it (its
low watermark; followers follow the leader's start: broker.kafka.replication.follower),
or REQUEST_TIMED_OUT at the request's timeout. An offset above the high watermark, or
negative but -1, is OFFSET_OUT_OF_RANGE; the start never moves back.

A start inside a segment is made durable in the log dir's log-start-offset-checkpoint
(broker.kafka.partitions.log_start_checkpoint) before the answer. Authorized as Kafka's:
DELETE on the topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

import trio

from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.context import BrokerContext
from broker.kafka.replication.replica import PartitionState, check_partition
from raft.common.errors import ErrorCode

HIGH_WATERMARK = -1  # the requested offset meaning "up to the high watermark"
LOW_WATERMARK_CHECK_S = 0.5  # also re-read the image this often while waiting


def target_offset(requested: int, high_watermark: int) -> int | None:
    """Where the log start moves for a requested offset; None: OFFSET_OUT_OF_RANGE."""
    if requested == HIGH_WATERMARK:
        return high_watermark
    if requested < 0 or requested > high_watermark:
        return None
    return requested


async def _delete_partition(context: BrokerContext, name: str, index: int, requested: int,
                            deadline: float) -> shapes.DeleteRecordsPartitionResult:
    def answer(error: ErrorCode, low_watermark: int = -1
               ) -> shapes.DeleteRecordsPartitionResult:
        return {"partition_index": index, "low_watermark": low_watermark,
                "error_code": int(error)}

    resolved = check_partition(context.image, context.broker_id, partition=index, name=name)
    if resolved.error != ErrorCode.NONE:
        return answer(resolved.error)
    assert resolved.partition is not None
    error, state = await context.replicas.open(resolved)
    if state is None:
        return answer(error)
    async with state.lock:
        target = target_offset(requested, state.high_watermark)
        if target is None:
            return answer(ErrorCode.OFFSET_OUT_OF_RANGE)
        try:
            moved = await trio.to_thread.run_sync(state.log.advance_log_start, target)
        except OSError:  # staged for deletion under us
            return answer(ErrorCode.KAFKA_STORAGE_ERROR)
    if moved:
        await context.replicas.checkpoint_log_starts()
        context.replicas.notify_data()  # parked follower fetches answer with the new start
    return answer(*await _wait_low_watermark(context, state, resolved.partition.leader_epoch,
                                             target, deadline))


async def _wait_low_watermark(context: BrokerContext, state: PartitionState,
                              leader_epoch: int, target: int, deadline: float
                              ) -> tuple[ErrorCode, int]:
    while True:
        current = context.replicas.partition_image(state)
        if current is None or current.leader != context.broker_id or \
                current.leader_epoch != leader_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        low_watermark = state.low_watermark(current, context.broker_id)
        if low_watermark >= target:
            return ErrorCode.NONE, low_watermark
        if trio.current_time() >= deadline:
            return ErrorCode.REQUEST_TIMED_OUT, low_watermark
        with trio.move_on_at(min(deadline, trio.current_time() + LOW_WATERMARK_CHECK_S)):
            await state.changed.wait()


async def handle_delete_records_request(context: BrokerContext, request: Any, version: int
                                        ) -> shapes.DeleteRecordsResponse:
    deadline = trio.current_time() + max(0.0, request.timeout.total_seconds())
    topics: list[shapes.DeleteRecordsTopicResult] = []
    for topic in request.topics:
        name = str(topic.name)
        partitions: list[shapes.DeleteRecordsPartitionResult] = []
        allowed = authz.topic_allowed(context, authz.Op.DELETE, name)
        for part in topic.partitions:
            index = int(part.partition_index)
            if not allowed:
                partitions.append({"partition_index": index, "low_watermark": -1,
                                   "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)})
                continue
            partitions.append(await _delete_partition(context, name, index, int(part.offset),
                                                      deadline))
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
