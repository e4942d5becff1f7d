"""KIP-253 schedules at the leader of a partition, with the real handlers and logs
(`tests/support/resize_images.py`): each test drives one schedule under which a record
routed by the old partition count could land after the gate a consumer computes for the
new count (docs/kip-253.md, "Schedules")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing
from kio.index import load_request_schema

from broker.kafka.listener import Dispatcher
from broker.kafka.replication.replica import PartitionState, check_partition
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tests.support.kafka_support import record_batch
from tests.support.resize_images import NAME, MovingImage, ResizedTopic, broker
from tests.unit.broker.test_ordered_wire import produce, roundtrip

OFFSET_FOR_LEADER_EPOCH = 23
LEADER = 1  # of every partition: the harness's only broker


def epoch_end(epoch: int, current_leader_epoch: int = -1) -> Any:
    return build(load_request_schema(OFFSET_FOR_LEADER_EPOCH, 4), {
        "replica_id": -1, "topics": [{"topic": NAME, "partitions": [
            {"partition": 0, "current_leader_epoch": current_leader_epoch,
             "leader_epoch": epoch}]}]})


def answer(response: Any) -> tuple[int, int]:
    part = response.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


async def partition_zero(dispatcher: Dispatcher) -> PartitionState:
    context = dispatcher.context
    resolved = check_partition(context.image, LEADER, partition=0, name=NAME)
    _, state = await context.replicas.open(resolved)
    assert state is not None
    return state


def epoch_ends(state: PartitionState) -> list[tuple[int, int]]:
    """(epoch, end offset) of epochs 0 and 1 as OffsetForLeaderEpoch finds them."""
    return [state.log.end_offset_for_epoch(epoch) for epoch in (0, 1)]


async def test_a_resize_applied_after_the_count_check_never_stores_the_old_count(
        tmp_path: Path) -> None:
    """Schedule a: a Produce with count 2 passes the count check against the image of
    one moment; the 2 -> 4 growth (which bumps partition 0's leader epoch) is applied
    right after that read. The record must not be stored in the new epoch: that would
    put a record routed by count 2 after the threshold of partition 2's creation gate
    (the end of epoch 0 in partition 0). It is refused, and the producer re-routes it."""
    topic = ResizedTopic()
    images = MovingImage(topic.image)
    dispatcher = broker(tmp_path, images, LEADER, partitions=[0])
    assert answer(await roundtrip(dispatcher, produce(2))) == (0, 0)

    images.move_after(1, topic.resize(4))
    code, offset = answer(await roundtrip(dispatcher, produce(2)))
    state = await partition_zero(dispatcher)
    assert (code, state.log.log_end_offset) == (ErrorCode.INVALID_PARTITION_METADATA, 1), \
        f"a count-2 record stored at {offset}; epoch ends {epoch_ends(state)}"
    assert answer(await roundtrip(dispatcher, produce(4))) == (0, 1)
    assert epoch_ends(state) == [(0, 1), (1, 2)]


async def test_a_gate_query_waits_for_an_old_count_append_in_flight(tmp_path: Path) -> None:
    """Schedule a, the append side: a count-2 Produce checked its count and is appending
    (it holds the partition lock) when the growth is applied, and a consumer asks where
    epoch 0 ends (partition 2's creation gate). The answer must come after that append,
    so above the record; a count-2 Produce queued behind it is refused."""
    topic = ResizedTopic()
    images = MovingImage(topic.image)
    dispatcher = broker(tmp_path, images, LEADER, partitions=[0])
    assert answer(await roundtrip(dispatcher, produce(2))) == (0, 0)
    state = await partition_zero(dispatcher)
    answers: dict[str, Any] = {}

    async def send(name: str, body: Any) -> None:
        answers[name] = await roundtrip(dispatcher, body)

    async with trio.open_nursery() as nursery:
        async with state.lock:  # the count-2 Produce whose append is in flight
            nursery.start_soon(send, "queued", produce(2))
            await trio.testing.wait_all_tasks_blocked()
            images.current = topic.resize(4)
            nursery.start_soon(send, "gate", epoch_end(0))
            await trio.testing.wait_all_tasks_blocked()
            in_flight, _ = await trio.to_thread.run_sync(
                state.log.append, [record_batch([b"v1"])], 0)
    (topic,) = answers["gate"].topics
    (gate,) = topic.partitions
    queued_code, queued_offset = answer(answers["queued"])
    count_two = [in_flight, *([queued_offset] if queued_code == 0 else [])]
    assert int(gate.error_code) == 0
    assert max(count_two) < int(gate.end_offset), \
        f"the gate opens at {int(gate.end_offset)}, count-2 records at {count_two}"
    assert queued_code == ErrorCode.INVALID_PARTITION_METADATA, \
        f"a count-2 record stored at {queued_offset} after the growth"
