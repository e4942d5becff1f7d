"""KIP-253 schedules at the leader a consumer's gates ask (ListOffsets for a deletion
gate, OffsetForLeaderEpoch for a creation gate), with the real handlers and logs
(`tests/support/resize_images.py`; docs/kip-253.md, "Schedules")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing
from kio.index import load_request_schema

from broker.kafka.listener import Dispatcher
from broker.kafka.ordered.marked_end import MARKED_END_WAIT_S
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tests.support.resize_images import NAME, MovingImage, ResizedTopic, broker
from tests.unit.broker.test_ordered_wire import produce, produce_errors, roundtrip

LIST_OFFSETS, FETCH = 2, 1
LATEST = -1


def latest(partition: int, current_leader_epoch: int = -1) -> Any:
    return build(load_request_schema(LIST_OFFSETS, 7), {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": NAME, "partitions": [
            {"partition_index": partition, "current_leader_epoch": current_leader_epoch,
             "timestamp": LATEST}]}]})


def follower_fetch(follower: int, partition: int, offset: int, last_fetched_epoch: int
                   ) -> Any:
    return build(load_request_schema(FETCH, 12), {
        "replica_id": follower, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic": NAME, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": last_fetched_epoch, "log_start_offset": 0,
            "partition_max_bytes": 1 << 20}]}]})


def follower_of(dispatcher: Dispatcher) -> int:
    """The other broker of the two the harness has."""
    return 3 - dispatcher.context.broker_id


def listed(response: Any) -> tuple[int, int]:
    (topic,) = response.topics
    (part,) = topic.partitions
    return int(part.error_code), int(part.offset)


async def marked_with_uncommitted_record(tmp_path: Path) -> Dispatcher:
    """Partition 3 of A (RF 2, grown 2 -> 4) holds records at 0 and 1, its follower has
    fetched only the first (high watermark 1), then the 4 -> 3 shrink marks it."""
    topic = ResizedTopic(brokers=2)
    images = MovingImage(topic.resize(4))
    leader = topic.topic.partitions[3].leader
    dispatcher = broker(tmp_path, images, leader, partitions=[3])
    assert produce_errors(await roundtrip(dispatcher, produce(4, partition=3))) == [0]
    await roundtrip(dispatcher, follower_fetch(follower_of(dispatcher), 3, 1, 0))
    assert produce_errors(await roundtrip(dispatcher, produce(4, partition=3))) == [0]
    images.current = topic.resize(3)
    return dispatcher


async def test_d_a_deletion_gate_waits_for_the_marked_partitions_uncommitted_record(
        tmp_path: Path) -> None:
    """Schedule d: the record at 1 of marked partition 3 waits for a slow in-sync
    follower. The deletion gate of partition 1 asks where 3 ends (ListOffsets LATEST):
    told 1 (the high watermark), it would open before the record at 1 is consumed, and
    the key's next record (now in 1) could go first. The leader answers the log end, 2,
    once that record is committed."""
    dispatcher = await marked_with_uncommitted_record(tmp_path)
    answers: dict[str, Any] = {}

    async def ask() -> None:
        answers["gate"] = listed(await roundtrip(dispatcher, latest(3)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        assert "gate" not in answers, \
            f"answered {answers['gate']} while the record at 1 is not committed"
        await roundtrip(dispatcher, follower_fetch(follower_of(dispatcher), 3, 2, 0))
    assert answers["gate"] == (0, 2)


async def test_d_the_wait_for_a_marked_partitions_end_is_bounded(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """A follower that never catches up (it leaves the ISR only later): the leader
    answers OFFSET_NOT_AVAILABLE after MARKED_END_WAIT_S, and the client asks again."""
    dispatcher = await marked_with_uncommitted_record(tmp_path)
    started = trio.current_time()
    assert listed(await roundtrip(dispatcher, latest(3)))[0] == ErrorCode.OFFSET_NOT_AVAILABLE
    assert trio.current_time() - started >= MARKED_END_WAIT_S
