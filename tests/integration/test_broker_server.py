"""broker.server in-process, with a stand-in for the raft node (its commit listener is
called by the test): the catch-up gate, the checkpoint and the status."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import trio
import trio.testing

from broker import partition_dir as pd
from broker.server import CHECKPOINT_FILE, BrokerServer
from broker.settings import BrokerSettings
from metadata import records as rec
from metadata.delta import replay
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.types import Batch

TOPIC_ID = Uuid(0x5555 << 64)
GONE_ID = Uuid(0x6666 << 64)
BROKER = 4


class StandInNode:
    """The hooks of `raft.node.RaftNode` and `raft.rpc_host.RpcHost` the broker uses."""

    cluster_id = "test-cluster"
    node_id = BROKER
    leader_id = 1
    high_watermark = 0

    def __init__(self) -> None:
        self.listeners: list[Callable[[Batch], None]] = []
        self.leader_hw_listeners: list[Callable[[int], None]] = []
        self.tasks: list[Callable[[], Any]] = []
        self.handlers: dict[str, Any] = {}

    def add_commit_listener(self, callback: Callable[[Batch], None]) -> None:
        self.listeners.append(callback)

    def add_leader_high_watermark_listener(self, callback: Callable[[int], None]) -> None:
        self.leader_hw_listeners.append(callback)

    def add_background_task(self, fn: Callable[[], Any]) -> None:
        self.tasks.append(fn)

    def add_api_handler(self, api: str, handler: Any) -> None:
        self.handlers[api] = handler

    def commit(self, base_offset: int, *records: rec.Record) -> None:
        batch = Batch(base_offset=base_offset, epoch=1,
                      records=tuple(r.encode() for r in records))
        for listener in self.listeners:
            listener(batch)

    def hear_leader_high_watermark(self, high_watermark: int) -> None:
        for listener in self.leader_hw_listeners:
            listener(high_watermark)


async def test_reconciles_only_after_catching_up_when_image_is_behind_start_hw(
        tmp_path: Path) -> None:
    """Deletion safety with topic IDs: before the image reaches the high watermark seen at
    start, a live topic created later in the log looks deleted; reconciling then would
    stage live data. The broker waits, then stages only the truly deleted topic."""
    for name, topic_id in (("live-0", TOPIC_ID), ("gone-0", GONE_ID)):
        (tmp_path / name).mkdir()
        pd.write_partition_metadata(tmp_path / name, topic_id)
        (tmp_path / name / "00000000000000000000.log").write_text(name)
    node = StandInNode()
    server = BrokerServer(cast(Any, node), BrokerSettings(
        broker_id=BROKER, log_dir=tmp_path, delete_topic_delay_ms=3_600_000, voters={},
        request_timeout_ms=2000, heartbeat_interval_ms=2000, replica_lag_time_max_ms=30_000,
        socket_request_max_bytes=1 << 20)).install(cast(Any, node))

    async with trio.open_nursery() as nursery:
        for task in node.tasks:
            nursery.start_soon(task)
        # The first fetch brought offsets 0-1: this observer's own high watermark stops at
        # its log end (2), the leader's is 5. Only the leader's says the image is partial.
        node.high_watermark = 2
        node.commit(0, rec.NoOp(), rec.NoOp())
        node.hear_leader_high_watermark(5)
        await trio.testing.wait_all_tasks_blocked()
        assert not server.caught_up.is_set()
        assert server.reconciled_offset == -1
        assert not (tmp_path / "deleting").exists()

        node.commit(2, rec.Topic(name="live", topic_id=TOPIC_ID),
                    rec.Partition(topic_id=TOPIC_ID, partition=0, replicas=(BROKER,),
                                  isr=(BROKER,), leader=BROKER),
                    rec.NoOp())
        with trio.fail_after(10):
            await server.wait_reconciled(4)
        nursery.cancel_scope.cancel()

    assert pd.read_partition_metadata(tmp_path / "live-0") == TOPIC_ID
    assert (tmp_path / "live-0" / "00000000000000000000.log").read_text() == "live-0"
    assert [p.name for p in (tmp_path / "deleting").iterdir()] == [f"{GONE_ID}_0"]
    checkpoint = json.loads((tmp_path / CHECKPOINT_FILE).read_text())
    assert checkpoint == {"applied_offset": 4, "image_hash": server.image.content_hash()}
    status = server.status()
    assert status["applied_offset"] == 4
    assert status["image_hash"] == server.image.content_hash()
    assert [(h["topic"], h["partition"]) for h in status["hosted"]] == [("live", 0)]
    assert [d["staged"] for d in status["pending_deletions"]] == [f"{GONE_ID}_0"]


async def test_reconciles_when_the_start_image_of_a_snapshot_already_holds_the_high_watermark(
        tmp_path: Path) -> None:
    """A broker started from a snapshot that ends at the high watermark gets no batch
    until something new commits (a broker's re-registration waits out its old session):
    the leader's high watermark alone tells it the image is caught up."""
    (tmp_path / "gone-0").mkdir()
    pd.write_partition_metadata(tmp_path / "gone-0", GONE_ID)
    image = replay([(0, rec.Topic(name="live", topic_id=TOPIC_ID)),
                    (1, rec.Partition(topic_id=TOPIC_ID, partition=0, replicas=(BROKER,),
                                      isr=(BROKER,), leader=BROKER))])
    node = StandInNode()
    server = BrokerServer(cast(Any, node), BrokerSettings(
        broker_id=BROKER, log_dir=tmp_path, delete_topic_delay_ms=3_600_000, voters={},
        request_timeout_ms=2000, heartbeat_interval_ms=2000, replica_lag_time_max_ms=30_000,
        socket_request_max_bytes=1 << 20), initial_image=image).install(cast(Any, node))
    async with trio.open_nursery() as nursery:
        for task in node.tasks:
            nursery.start_soon(task)
        await trio.testing.wait_all_tasks_blocked()
        assert not server.caught_up.is_set()  # the high watermark is not known yet
        node.hear_leader_high_watermark(2)
        with trio.fail_after(10):
            await server.wait_reconciled(1)
        nursery.cancel_scope.cancel()
    assert pd.read_partition_metadata(tmp_path / "live-0") == TOPIC_ID
    assert [p.name for p in (tmp_path / "deleting").iterdir()] == [f"{GONE_ID}_0"]


async def test_status_that_waits_for_an_offset_answers_once_it_is_applied(
        tmp_path: Path) -> None:
    """`wait_for_applied_offset`: answered when the image applies it, not before; at
    once when already applied; after `max_wait_ms` with the offset as it is when it never
    comes; a malformed wait is refused with INVALID_REQUEST."""
    node = StandInNode()
    server = BrokerServer(cast(Any, node), BrokerSettings(
        broker_id=BROKER, log_dir=tmp_path, delete_topic_delay_ms=3_600_000, voters={},
        request_timeout_ms=2000, heartbeat_interval_ms=2000, replica_lag_time_max_ms=30_000,
        socket_request_max_bytes=1 << 20)).install(cast(Any, node))
    answers: list[dict[str, Any]] = []

    async def ask(body: dict[str, Any]) -> None:
        answers.append(await server.answer_status(body))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, {"wait_for_applied_offset": 2, "max_wait_ms": 30_000})
            await trio.testing.wait_all_tasks_blocked()
            node.commit(0, rec.NoOp(), rec.NoOp())  # offsets 0-1: not yet
            await trio.testing.wait_all_tasks_blocked()
            assert answers == []
            node.commit(2, rec.NoOp())
        assert [a["applied_offset"] for a in answers] == [2]

        await ask({"wait_for_applied_offset": 1})
        assert answers[-1]["applied_offset"] == 2
        await ask({"wait_for_applied_offset": 9, "max_wait_ms": 1})
        assert answers[-1]["applied_offset"] == 2
    for bad in ({"wait_for_applied_offset": "2"}, {"wait_for_applied_offset": 2,
                                                   "max_wait_ms": 10 ** 9}):
        await ask(bad)
        assert answers[-1]["error_code"] == ErrorCode.INVALID_REQUEST


async def test_what_the_catch_up_replay_keeps_is_frozen_until_caught_up(
        tmp_path: Path) -> None:
    """Until the image reaches the leader's high watermark heard at start, each committed
    batch's objects join the collector's permanent generation (`gc.freeze`): the walks of
    an image built over a million partitions stay out of the replay. Then no more."""
    node = StandInNode()
    server = BrokerServer(cast(Any, node), BrokerSettings(
        broker_id=BROKER, log_dir=tmp_path, delete_topic_delay_ms=3_600_000, voters={},
        request_timeout_ms=2000, heartbeat_interval_ms=2000, replica_lag_time_max_ms=30_000,
        socket_request_max_bytes=1 << 20)).install(cast(Any, node))
    try:
        node.hear_leader_high_watermark(4)
        frozen = gc.get_freeze_count()
        node.commit(0, rec.Topic(name="live", topic_id=TOPIC_ID),
                    rec.Partition(topic_id=TOPIC_ID, partition=0, replicas=(BROKER,),
                                  isr=(BROKER,), leader=BROKER))
        assert gc.get_freeze_count() > frozen
        node.commit(2, rec.NoOp(), rec.NoOp())
        assert server.caught_up.is_set()
        frozen = gc.get_freeze_count()
        node.commit(4, rec.NoOp())
        assert gc.get_freeze_count() <= frozen  # none added (a frozen object may be freed)
    finally:
        gc.unfreeze()  # this test's, and whatever else this process froze: collectable again
