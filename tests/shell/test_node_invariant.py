"""A broken Raft invariant (`raft.core.RaftInvariantError`) stops the node at once: nothing
is sent or acknowledged after it, the node logs exactly one ERROR naming the invariant,
and `kraft node` exits with code 3, without a traceback and without the rebuild that
follows a failed log directory.

Driven for real, with no hook in the node: node 1 of a two-voter quorum follows voter 2,
played by the test (`FakeLeader`) over real TCP with the project's framing and messages.
The fake leader makes node 1 its follower (BeginQuorumEpoch), hands it three records with
high watermark 3, then answers its next Fetch with a diverging epoch that would cut the
log at offset 1, below that high watermark. The core refuses to lose committed records:
RaftInvariantError "truncation to 1 below the high watermark 3"."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from metadata.records import NoOp
from raft import messages
from raft.common.framing import FramedStream
from raft.core import RaftConfig, RaftInvariantError
from raft.log import DiskLog
from raft.storage import read_high_watermark_checkpoint, read_quorum_state, write_quorum_state
from raft.types import Batch, ElectionState
from tests.support.tcp_node import tcp_node
from tools.cluster import Cluster
from tools.commands.node import INVARIANT_EXIT_CODE
from tools.server.supervisor import find_exception, run_until_disk_failure

LEADER_ID, LEADER_EPOCH = 2, 1
COMMITTED = 3  # records the fake leader hands over, all committed (its high watermark)
CUT_AT = 1  # where its diverging epoch would truncate the follower's log
INVARIANT_TEXT = f"truncation to {CUT_AT} below the high watermark {COMMITTED}"
SETTINGS = {"quorum.election.timeout.ms": 300, "quorum.fetch.timeout.ms": 600,
            "quorum.election.backoff.max.ms": 200, "quorum.request.timeout.ms": 400,
            "quorum.fetch.max.wait.ms": 150}


@dataclass(eq=False)
class FakeLeader:
    """Voter 2: leads epoch 1 for node 1, then asks it to truncate below its high
    watermark; records every frame node 1 sends after that (there must be none)."""

    listener: trio.SocketListener  # voter 2's address, which node 1 dials
    node_address: tuple[str, int]
    cluster_id: str
    after_divergence: list[dict[str, Any]] = field(default_factory=list)

    async def run(self) -> None:
        from_node = FramedStream(await self.listener.accept())  # node 1 runs: it dialled
        to_node = FramedStream(await trio.open_tcp_stream(*self.node_address))
        await self._send(to_node, 1, messages.BeginQuorumEpochRequest(
            cluster_id=self.cluster_id, leader_id=LEADER_ID, leader_epoch=LEADER_EPOCH))
        begin = await to_node.receive()
        assert begin is not None
        assert (begin["api"], begin["body"]["error_code"]) == ("BeginQuorumEpochResponse", 0)
        leader = messages.CurrentLeader(leader_id=LEADER_ID, leader_epoch=LEADER_EPOCH)
        while True:
            frame = await from_node.receive()
            assert frame is not None, "node 1 closed its connection before the divergence"
            if frame["api"] != "FetchRequest":
                continue  # e.g. a pre-vote sent before it heard of this leader
            fetch = messages.decode_message(frame["api"], frame["body"])
            assert isinstance(fetch, messages.FetchRequest)
            if fetch.fetch_offset == 0:
                records = tuple(NoOp().encode() for _ in range(COMMITTED))
                await self._send(from_node, frame["correlation_id"], messages.FetchResponse(
                    topic_id=fetch.topic_id, high_watermark=COMMITTED, current_leader=leader,
                    records=(Batch(base_offset=0, epoch=LEADER_EPOCH, records=records),)))
                continue
            assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (COMMITTED, LEADER_EPOCH)
            await self._send(from_node, frame["correlation_id"], messages.FetchResponse(
                topic_id=fetch.topic_id, high_watermark=COMMITTED, current_leader=leader,
                diverging_epoch=messages.DivergingEpoch(epoch=LEADER_EPOCH,
                                                        end_offset=CUT_AT)))
            break
        async with trio.open_nursery() as nursery:  # until node 1 closes both connections
            nursery.start_soon(self._collect, from_node)
            nursery.start_soon(self._collect, to_node)

    async def _send(self, stream: FramedStream, correlation_id: int, message: Any) -> None:
        api, body = messages.encode_message(message)
        await stream.send({"api": api, "version": 0, "correlation_id": correlation_id,
                           "cluster_id": self.cluster_id, "body": body, "src": LEADER_ID})

    async def _collect(self, stream: FramedStream) -> None:
        try:
            while (frame := await stream.receive()) is not None:
                self.after_divergence.append(frame)
        except trio.BrokenResourceError:  # a reset is a close as well
            pass


def committed_records(data_dir: str | Path) -> list[bytes]:
    with DiskLog.open_metadata_log(data_dir) as disk_log:
        return [r for b in disk_log.read(0, 1 << 30) for r in b.records]


async def test_broken_invariant_stops_kraft_node_with_one_error_line_and_exit_code_3(
        tmp_path: Path) -> None:
    """A real `kraft node` process: exits 3 by itself (no rebuild), stderr holds log lines
    only, exactly one of them an ERROR naming the invariant, no traceback; node 1 sends
    nothing after the divergence and keeps every committed record."""
    cluster = Cluster.create(tmp_path / "cluster", voters=2, settings=SETTINGS)
    node, fake = cluster.node(1), cluster.node(LEADER_ID)
    assert node.controller_address is not None
    assert fake.controller_address is not None
    host, port = fake.controller_address.rsplit(":", 1)
    [listener] = await trio.open_tcp_listeners(int(port), host=host)
    node_host, node_port = node.controller_address.rsplit(":", 1)
    leader = FakeLeader(listener, (node_host, int(node_port)), cluster.cluster_id)
    stderr_path = tmp_path / "stderr"
    with stderr_path.open("w") as stderr:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "tools.cli", "--log-format", "json", "node",
             "--config", node.config], stdin=subprocess.DEVNULL, stdout=stderr,
            stderr=stderr)
    try:
        with trio.fail_after(30):
            await leader.run()
            returncode = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await listener.aclose()

    output = stderr_path.read_text()
    assert returncode == INVARIANT_EXIT_CODE == 3, output
    assert "Traceback" not in output
    events = [json.loads(line) for line in output.splitlines() if line.strip()]
    errors = [e for e in events if e["level"] in ("ERROR", "CRITICAL")]
    assert len(errors) == 1, output
    assert errors[0]["msg"] == f"raft invariant broken, node stopped: {INVARIANT_TEXT}"
    assert "exc" not in errors[0]  # no traceback inside the JSON line either
    assert leader.after_divergence == []
    assert committed_records(node.data_dir) == [NoOp().encode()] * COMMITTED
    assert read_quorum_state(node.data_dir) == ElectionState(
        epoch=LEADER_EPOCH, leader_id=LEADER_ID, voters=(1, 2))
    checkpoint = read_high_watermark_checkpoint(Path(node.data_dir) / "__cluster_metadata-0")
    assert checkpoint in (None, COMMITTED)


async def test_broken_invariant_stops_raft_node_with_one_error_record(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """In process: `run()` raises the RaftInvariantError (in an exception group) after one
    ERROR record and nothing else at ERROR; the commit listener saw the committed records
    and nothing after; node 1 sent nothing after the divergence."""
    caplog.set_level(logging.INFO)
    [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    [own] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    voters = {1: ("127.0.0.1", own.socket.getsockname()[1]),
              LEADER_ID: ("127.0.0.1", listener.socket.getsockname()[1])}
    committed: list[Batch] = []
    leader = FakeLeader(listener, voters[1], "cluster-a")
    with DiskLog.open_metadata_log(tmp_path) as disk_log:
        node = tcp_node(node_id=1, cluster_id="cluster-a", voters=voters,
                        config=RaftConfig(voters=(1, LEADER_ID), election_timeout_ms=300,
                                          fetch_timeout_ms=600, request_timeout_ms=400,
                                          fetch_max_wait_ms=150),
                        log=disk_log, election=None,
                        write_election=lambda state: write_quorum_state(tmp_path, state),
                        listeners=[own], rng=random.Random(1)).node
        node.add_commit_listener(committed.append)
        with trio.fail_after(30):
            async with trio.open_nursery() as outside:  # the fake outlives node 1
                outside.start_soon(leader.run)
                with pytest.raises(BaseExceptionGroup) as raised:
                    await node.run()
        await listener.aclose()

    invariant = find_exception(raised.value, RaftInvariantError)
    assert isinstance(invariant, RaftInvariantError)
    assert str(invariant) == INVARIANT_TEXT
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        f"raft invariant broken, node stopped: {INVARIANT_TEXT}"]
    assert errors[0].exc_info is None
    assert [r for b in committed for r in b.records] == [NoOp().encode()] * COMMITTED
    assert leader.after_divergence == []
    assert committed_records(tmp_path) == [NoOp().encode()] * COMMITTED


async def test_broken_invariant_in_a_call_stops_the_node_without_answering(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The core may raise inside `node.call` too (e.g. while proposing for an api
    handler): the error is not handed back to the caller as an answer, the node stops,
    and the client's request is never acknowledged (its connection just closes)."""
    caplog.set_level(logging.INFO)
    [own] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = own.socket.getsockname()[1]

    def broken(now_ms: int) -> None:
        raise RaftInvariantError("the core's state is broken")

    async def handler(body: Any, cluster_id: str) -> Any:
        await node.call(broken)
        return {"error_code": 0, "acknowledged": True}

    with DiskLog.open_metadata_log(tmp_path) as disk_log:
        node, rpc, _ = tcp_node(
            node_id=1, cluster_id="cluster-a", voters={1: ("127.0.0.1", port)},
            config=RaftConfig(voters=(1,), election_timeout_ms=150, fetch_timeout_ms=300),
            log=disk_log, election=None,
            write_election=lambda state: write_quorum_state(tmp_path, state),
            listeners=[own], rng=random.Random(1))
        rpc.add_api_handler("Breaks", handler)
        replies: list[dict[str, Any] | None] = []

        async def client() -> None:
            stream = FramedStream(await trio.open_tcp_stream("127.0.0.1", port))
            await stream.send({"api": "Breaks", "version": 0, "correlation_id": 1,
                               "cluster_id": "cluster-a", "body": {}})
            replies.append(await stream.receive())

        async def run_node(outside: trio.Nursery) -> None:
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run)
                outside.start_soon(client)
                await trio.sleep_forever()  # until the node fails

        with trio.fail_after(30):
            async with trio.open_nursery() as outside:  # the client outlives the node
                with pytest.raises(BaseExceptionGroup) as raised:
                    await run_node(outside)

    assert replies == [None]  # closed, never answered
    invariant = find_exception(raised.value, RaftInvariantError)
    assert str(invariant) == "the core's state is broken"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "raft invariant broken, node stopped: the core's state is broken"]


class _BrokenNode:
    """Stands in for a RaftNode whose run() failed on a broken invariant."""

    node_id = 1

    def __init__(self, *also: Exception) -> None:
        self.also = also

    async def run(self) -> None:
        raise ExceptionGroup("node", [RaftInvariantError("broken"), *self.also])


@pytest.mark.parametrize("also", [(), (OSError(28, "No space left on device"),)])
async def test_disk_failure_supervisor_does_not_rebuild_after_a_broken_invariant(
        tmp_path: Path, also: tuple[Exception, ...]) -> None:
    """Only a failed log directory is waited out and rebuilt: a broken invariant, even
    one beside a full disk, propagates out of the supervisor, so `kraft node` exits."""
    node: Any = _BrokenNode(*also)
    with pytest.raises(ExceptionGroup) as raised:
        await run_until_disk_failure(node, tmp_path)
    assert isinstance(find_exception(raised.value, RaftInvariantError), RaftInvariantError)
