"""Snapshots of a running node in process (metadata.snapshot_writer and the start-up of
metadata.snapshot_loader on a RaftNode over a DiskLog in a temp dir, wired as
tools/server/build.py wires them): written at committed offsets every interval of
committed bytes, off the Trio loop and one at a time; a failure is one ERROR naming the
file while the node keeps committing; a restarted node replays only the records after
its snapshot and reaches the image of a full replay."""

from __future__ import annotations

import errno
import logging
import random
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from metadata import records as rec
from metadata import snapshot_writer
from metadata.admin import (
    BrokerHeartbeatRequest,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    RegisterBrokerRequest,
    RegisterBrokerResponse,
    api_of,
    decode_response,
    encode_body,
)
from metadata.controller import ControllerConfig
from metadata.controller_shell import ControllerShell
from metadata.delta import replay_bytes
from metadata.image import MetadataImage
from metadata.snapshot_loader import StartImage, load_start_image
from metadata.snapshot_policy import Retention
from metadata.snapshot_writer import WRITE_SNAPSHOT_API, ImageSnapshotter, write_image_snapshot
from raft.common.errors import ErrorCode
from raft.common.uuid import Uuid
from raft.log import DiskLog
from raft.node import RaftNode
from raft.rpc_host import RpcHost
from raft.snapshot import SnapshotId, list_snapshots, read_snapshot
from raft.snapshot_store import DiskSnapshotStore
from raft.storage import read_high_watermark_checkpoint, read_quorum_state, write_quorum_state
from raft.transport import TcpTransport
from raft.types import Batch
from raft.voters import VoterHistory, VoterSet
from tests.support.single_node import FAST, eventually
from tests.support.snapshot_support import corrupt, image_of, log_records, replayed
from tests.support.tcp_node import tcp_node

NO_AUTOMATIC_SNAPSHOTS = 1 << 40
NOOP = rec.NoOp().encode()


@dataclass
class Running:
    node: RaftNode
    rpc: RpcHost
    shell: ControllerShell
    snapshotter: ImageSnapshotter
    directory: Path
    published: list[Batch]  # every batch handed to the commit listeners since start
    # per high-watermark notification: (the high watermark, the published end then)
    high_watermarks: list[tuple[int, int]]


@asynccontextmanager
async def controller(data: Path, max_bytes_between: int,
                     **snapshotter_options: Any) -> AsyncIterator[Running]:
    """One voter, built like tools/server/build.py builds it, running."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    voters = {1: ("127.0.0.1", listeners[0].socket.getsockname()[1])}
    with DiskLog.open_metadata_log(data) as disk_log:
        start = load_start_image(disk_log.directory, log_end_offset=disk_log.end_offset)
        node, rpc, checkpoint_high_watermark = tcp_node(
            node_id=1, cluster_id="cluster-s", voters=voters, config=FAST, log=disk_log,
            election=read_quorum_state(data),
            write_election=lambda s: write_quorum_state(data, s), listeners=listeners,
            rng=random.Random(1), publish_from=start.replay_from,
            snapshots=DiskSnapshotStore(disk_log.directory))
        shell = ControllerShell(node, config=ControllerConfig(broker_session_timeout_ms=60_000),
                                rng=random.Random(2), initial_image=start.image).install(rpc)
        published: list[Batch] = []
        node.add_commit_listener(published.append)
        high_watermarks: list[tuple[int, int]] = []
        node.add_high_watermark_listener(lambda hw: high_watermarks.append(
            (hw, published[-1].next_offset if published else start.replay_from)))
        snapshotter = ImageSnapshotter(node, disk_log.directory, lambda: shell.image,
                                       start=start, max_bytes_between=max_bytes_between,
                                       checkpoint_high_watermark=checkpoint_high_watermark,
                                       **snapshotter_options).install(rpc)
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await eventually(lambda: shell.is_active)
            yield Running(node, rpc, shell, snapshotter, disk_log.directory, published,
                          high_watermarks)
            nursery.cancel_scope.cancel()


async def call(shell: ControllerShell, request: Any) -> Any:
    api = api_of(request)
    return decode_response(api, await shell.handle_api(api, encode_body(request)))


async def unfenced_broker(shell: ControllerShell, broker_id: int = 4) -> None:
    registered = await call(shell, RegisterBrokerRequest(broker_id=broker_id,
                                                         incarnation_id=Uuid.random()))
    assert isinstance(registered, RegisterBrokerResponse)
    # A single voter answers once its high watermark passes the record, which it may
    # publish a turn later: the broker heartbeats until its image holds it.
    while True:
        beat = await call(shell, BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=registered.broker_epoch,
            current_metadata_offset=shell.image.last_applied_offset))
        assert beat.error_code == 0
        if not beat.is_fenced:
            return
        await trio.sleep(0.01)


async def create_topics(shell: ControllerShell, names: list[str]) -> None:
    for name in names:
        response = await call(shell, CreateTopicsRequest(topics=(CreatableTopic(
            name=name, num_partitions=2, replication_factor=1),)))
        assert isinstance(response, CreateTopicsResponse)
        assert response.topics[0].error_code == 0


async def test_snapshots_are_written_at_committed_offsets_every_interval_of_bytes(
        tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with controller(tmp_path, max_bytes_between=400) as running:
            await unfenced_broker(running.shell)
            # A slow disk lets one write cover several intervals: create until 3 exist.
            topic = 0
            while len(list_snapshots(running.directory)) < 3:
                await create_topics(running.shell, [f"t{topic}"])
                topic += 1
            high_watermark = running.node.high_watermark
    epochs = {o: e for o, e, _ in log_records(tmp_path / "__cluster_metadata-0")}
    checkpoint = read_high_watermark_checkpoint(running.directory)
    assert checkpoint is not None
    for snapshot_file in list_snapshots(running.directory):
        snapshot = read_snapshot(snapshot_file.path)  # whole: every CRC, header, footer
        end = snapshot.snapshot_id.end_offset
        assert end <= checkpoint <= high_watermark  # committed, and provably so on disk
        assert snapshot.snapshot_id.epoch == epochs[end - 1]
        start = load_start_image(running.directory, log_end_offset=end)
        assert start.image.content_hash() == replayed(running.directory, end).content_hash()
        snapshot_file.path.rename(snapshot_file.path.with_suffix(".seen"))  # next: older


async def test_a_node_replaying_a_long_log_writes_no_snapshot_before_it_caught_up(
        tmp_path: Path) -> None:
    """The automatic snapshots wait for the image to reach the leader's high watermark
    first heard after start: the restart's replay (spread over the loop's turns) is due
    for one every 400 bytes, yet the only snapshots end at the log's end or later."""
    with trio.fail_after(60):
        async with controller(tmp_path, max_bytes_between=NO_AUTOMATIC_SNAPSHOTS) as running:
            await unfenced_broker(running.shell)
            for index in range(30):  # ~8 KB a topic: several turns of publication
                response = await call(running.shell, CreateTopicsRequest(topics=(
                    CreatableTopic(name=f"t{index}", num_partitions=100,
                                   replication_factor=1),)))
                assert response.topics[0].error_code == 0
            log_end = running.node.log.end_offset
        assert not list_snapshots(running.directory)
        async with controller(tmp_path, max_bytes_between=400) as running:
            await eventually(lambda: list_snapshots(running.directory))
    ends = [s.snapshot_id.end_offset for s in list_snapshots(running.directory)]
    assert ends
    assert min(ends) >= log_end


async def test_a_quiet_log_is_snapshotted_every_interval_and_aged_segments_let_go(
        tmp_path: Path) -> None:
    """metadata.log.max.snapshot.interval.ms: far below the byte interval, a commit gets
    a snapshot within the time interval; metadata.max.retention.ms: a log whose oldest
    segment is past it starts at that snapshot."""
    old_log = lambda: snapshot_writer.LogSize(total_bytes=0, oldest_age_ms=10**9)  # noqa: E731
    with trio.fail_after(20):
        async with controller(tmp_path, NO_AUTOMATIC_SNAPSHOTS, max_interval_ms=200,
                              log_size=old_log,
                              retention=Retention(max_bytes=-1, max_ms=60_000)) as running:
            await unfenced_broker(running.shell)
            await eventually(lambda: list_snapshots(running.directory) != [])
            [first] = list_snapshots(running.directory)
            await eventually(lambda: running.node.core.log.start_offset
                             == first.snapshot_id.end_offset)
            await create_topics(running.shell, ["later"])
            await eventually(lambda: max(list_snapshots(running.directory)).snapshot_id
                             .end_offset == running.shell.image.last_applied_offset + 1)


async def test_snapshot_is_written_off_the_loop_and_one_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a write blocks in its thread the node still commits, and a second request
    waits for the first instead of writing beside it."""
    release, writing = threading.Event(), threading.Semaphore(0)
    concurrent: list[int] = [0, 0]  # now, most
    real_write = snapshot_writer.write_image_snapshot

    def blocking_write(*args: Any) -> Path:
        concurrent[0] += 1
        concurrent[1] = max(concurrent)
        writing.release()
        release.wait(10)
        concurrent[0] -= 1
        return real_write(*args)

    monkeypatch.setattr(snapshot_writer, "write_image_snapshot", blocking_write)
    with trio.fail_after(20):
        async with controller(tmp_path, NO_AUTOMATIC_SNAPSHOTS) as running:
            answers: list[Any] = []

            async def request() -> None:
                answers.append(await running.rpc.serve_api(WRITE_SNAPSHOT_API, {}, ""))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(request)
                await trio.to_thread.run_sync(writing.acquire)
                _, last = await running.node.propose_and_wait([NOOP])  # the loop serves
                await eventually(lambda: running.shell.image.last_applied_offset == last)
                nursery.start_soon(request)
                lock = running.snapshotter._one_at_a_time  # the second queues behind it
                await eventually(lambda: lock.statistics().tasks_waiting == 1)
                assert concurrent == [1, 1]
                release.set()
            assert concurrent[1] == 1
            assert [a["error_code"] for a in answers] == [0, 0]
            assert answers[0]["end_offset"] < answers[1]["end_offset"]  # the NoOp too
            for answer in answers:
                read_snapshot(answer["path"])


async def test_failed_snapshot_is_one_error_naming_the_file_and_the_node_keeps_committing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    def full_disk(*args: Any) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(snapshot_writer, "write_image_snapshot", full_disk)
    with trio.fail_after(20), caplog.at_level(logging.ERROR):
        async with controller(tmp_path, NO_AUTOMATIC_SNAPSHOTS) as running:
            answer = await running.rpc.serve_api(WRITE_SNAPSHOT_API, {}, "")
            errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
            assert len(errors) == 1
            expected = running.directory / (
                f"{running.shell.image.last_applied_offset + 1:020d}-"
                f"{running.node.epoch:010d}.checkpoint")
            assert getattr(errors[0], "file", None) == str(expected)
            assert answer["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
            assert str(expected) in answer["error_message"]
            assert "No space left" in answer["error_message"]
            _, last = await running.node.propose_and_wait([NOOP])  # still committing
            monkeypatch.undo()
            await eventually(lambda: running.shell.image.last_applied_offset == last)
            answer = await running.rpc.serve_api(WRITE_SNAPSHOT_API, {}, "")
            assert (answer["error_code"], answer["end_offset"]) == (0, last + 1)
            assert [f.path.name for f in list_snapshots(running.directory)] == [answer["file"]]
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1


async def test_restarted_node_replays_only_the_records_after_its_snapshot(
        tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with controller(tmp_path, NO_AUTOMATIC_SNAPSHOTS) as running:
            await unfenced_broker(running.shell)
            await create_topics(running.shell, ["before-1", "before-2"])
            taken = await running.rpc.serve_api(WRITE_SNAPSHOT_API, {}, "")
            await create_topics(running.shell, ["after-1"])
        async with controller(tmp_path, NO_AUTOMATIC_SNAPSHOTS) as restarted:
            assert restarted.node.first_published_offset == taken["end_offset"]
            end = restarted.node.high_watermark
            await eventually(lambda: restarted.shell.image.last_applied_offset == end - 1)
            image = restarted.shell.image
            assert restarted.published[0].base_offset == taken["end_offset"]
            # every high watermark is told once the batches below it are published
            assert restarted.high_watermarks
            assert all(hw == end for hw, end in restarted.high_watermarks)
            again = await restarted.rpc.serve_api(WRITE_SNAPSHOT_API, {}, "")
    assert image.topic_by_name("after-1") is not None
    assert image.content_hash() == replayed(restarted.directory, end).content_hash()
    assert again["end_offset"] == end


async def test_node_refuses_to_publish_from_beyond_its_log(tmp_path: Path) -> None:
    with DiskLog.open_metadata_log(tmp_path) as disk_log, \
            pytest.raises(ValueError, match="publish_from 1 outside the log"):
        RaftNode(node_id=1, cluster_id="c", voters={1: ("127.0.0.1", 0)}, config=FAST,
                 log=disk_log, election=None, write_election=lambda s: None,
                 transport=TcpTransport(node_id=1, peers={}), publish_from=1)


class RecordingNode:
    """What ImageSnapshotter uses of a RaftNode, recording the order of the I/O; its
    epoch is ahead of the records', as on a node that has just seen a new leader."""

    node_id, epoch = 1, 7

    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    async def checkpoint_high_watermark(self) -> None:
        self.steps.append("checkpoint")

    def snapshot_control_records(self, end_offset: int) -> list[bytes]:
        return []  # a static quorum's: no voter set to carry


async def test_snapshot_is_named_by_the_last_applied_batch_and_checkpointed_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[str] = []
    real_write = snapshot_writer.write_image_snapshot

    def recording_write(*args: Any) -> Path:
        steps.append("write")
        return real_write(*args)

    monkeypatch.setattr(snapshot_writer, "write_image_snapshot", recording_write)
    records = [rec.NoOp().encode(), rec.NoOp().encode()]
    node = RecordingNode(steps)
    snapshotter = ImageSnapshotter(
        node, tmp_path,  # type: ignore[arg-type]
        lambda: replay_bytes(enumerate(records)), start=load_start_image(
            tmp_path, log_end_offset=0), max_bytes_between=NO_AUTOMATIC_SNAPSHOTS,
        checkpoint_high_watermark=node.checkpoint_high_watermark)
    snapshotter._on_commit(Batch(base_offset=0, epoch=2, records=(records[0],)))
    snapshotter._on_commit(Batch(base_offset=1, epoch=3, records=(records[1],)))
    written = await snapshotter.snapshot_now()
    assert (written.snapshot_id.end_offset, written.snapshot_id.epoch) == (2, 3)
    assert steps == ["checkpoint", "write"]
    assert read_snapshot(written.path).snapshot_id == written.snapshot_id


class LoadingNode(RecordingNode):
    """A dynamic quorum's node (raft's records from a real `VoterHistory`, as the core
    answers them) that loads a fetched snapshot under other voters while the writer
    waits for the high-watermark checkpoint."""

    def __init__(self, steps: list[str]) -> None:
        super().__init__(steps)
        self.history = VoterHistory(VoterSet.from_ids((1, 2, 3)), kraft_version=1)

    async def checkpoint_high_watermark(self) -> None:
        await super().checkpoint_high_watermark()
        self.history.reset_to(100, [VoterSet.from_ids((1, 2, 4)).to_record().encode()])

    def snapshot_control_records(self, end_offset: int) -> list[bytes]:
        return [self.history.set_at(end_offset).to_record().encode()]


async def test_snapshot_holds_the_voters_at_its_offset_when_a_snapshot_loads_meanwhile(
        tmp_path: Path) -> None:
    """Raft's records are read with the image, before any await: a snapshot loaded
    while the file is written cannot put its voters into a snapshot of an older image
    (they used to be read after the checkpoint: the loaded snapshot's set)."""
    node = LoadingNode([])
    records = [rec.NoOp().encode()]
    snapshotter = ImageSnapshotter(
        node, tmp_path, lambda: replay_bytes(enumerate(records)),  # type: ignore[arg-type]
        start=StartImage(MetadataImage.empty()), max_bytes_between=NO_AUTOMATIC_SNAPSHOTS,
        checkpoint_high_watermark=node.checkpoint_high_watermark)
    snapshotter._on_commit(Batch(base_offset=0, epoch=2, records=tuple(records)))
    written = await snapshotter.snapshot_now()
    assert node.steps == ["checkpoint"]
    first = read_snapshot(written.path).records[0]
    assert first == VoterSet.from_ids((1, 2, 3)).to_record().encode()


async def test_corrupt_file_at_the_snapshot_name_is_replaced_not_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A follower restarted from an older snapshot can replay back to exactly the end of
    the corrupt one it passed over: that name then gets a whole file."""
    records = [rec.NoOp().encode()]
    image = replay_bytes(enumerate(records))
    corrupt_file = write_image_snapshot(tmp_path, SnapshotId(1, 2), image, 0)
    corrupt(corrupt_file)
    node = RecordingNode([])
    snapshotter = ImageSnapshotter(
        node, tmp_path, lambda: image,  # type: ignore[arg-type]
        start=StartImage(MetadataImage.empty()), max_bytes_between=NO_AUTOMATIC_SNAPSHOTS,
        checkpoint_high_watermark=node.checkpoint_high_watermark)
    snapshotter._on_commit(Batch(base_offset=0, epoch=2, records=tuple(records)))
    with caplog.at_level(logging.WARNING):
        written = await snapshotter.snapshot_now()
    assert (written.path, written.created) == (corrupt_file, True)
    assert image_of(written.path).content_hash() == image.content_hash()  # whole again
    assert [getattr(r, "file", None) for r in caplog.records] == [str(corrupt_file)]
    again = await snapshotter.snapshot_now()  # now known whole: not read again
    assert (again.path, again.created) == (corrupt_file, False)
