"""Three RaftNodes in one trio run over the in-memory transport (tests/support/memory_transport.py)
and trio's MockClock: the loop as production runs it (RaftCore, RpcHost, the request
gate), with no socket (creating one fails the test) and no real clock (every bound
below is virtual time).

The clock jumps once the run has been idle for AUTOJUMP_S of real time, not at once: a
node writes quorum-state in a worker thread, and a jump while one runs would leap to an
unrelated deadline."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

from raft import messages
from raft.common.errors import ErrorCode
from raft.common.session import KafkaPrincipal, current_session
from raft.core import RaftConfig
from raft.log import MemoryLog
from raft.node import RaftNode
from raft.rpc_host import RpcHost
from raft.types import Batch
from tests.support.memory_transport import MemoryNetwork
from tests.support.polling import eventually

AUTOJUMP_S = 0.001
POLL_S = 0.05
VOTERS = (1, 2, 3)
ELECTION_TIMEOUT_MS = 300
FETCH_TIMEOUT_MS = 20_000  # far beyond every bound below: only a hand-over elects early
TIMING = {"election_timeout_ms": ELECTION_TIMEOUT_MS, "fetch_timeout_ms": FETCH_TIMEOUT_MS,
          "election_backoff_max_ms": 200, "request_timeout_ms": 500, "fetch_max_wait_ms": 200}
INTRUDER = KafkaPrincipal("User", "intruder")


@dataclass(eq=False)
class Member:
    node: RaftNode
    rpc: RpcHost
    committed: list[Batch] = field(default_factory=list)
    stopped: trio.Event = field(default_factory=trio.Event)

    @property
    def records(self) -> list[bytes]:
        return [record for batch in self.committed for record in batch.records]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        try:
            await self.node.run(task_status=task_status)
        finally:
            self.stopped.set()


@pytest.fixture(autouse=True)
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the in-memory loop opened a socket")
    monkeypatch.setattr(trio.socket, "socket", refuse)


@pytest.fixture(autouse=True)
def no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory log's flush and the election write run inline: under an autojumping
    clock a task waiting for a worker thread counts as idle, so on a loaded host virtual
    time jumped past election timeouts while a thread was merely waiting for a CPU."""
    async def inline(function: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args)
    monkeypatch.setattr(trio.to_thread, "run_sync", inline)


@pytest.fixture(autouse=True)
def virtual_time(mock_clock: trio.testing.MockClock) -> None:
    """Every test also takes `mock_clock` itself: only then does pytest-trio run it on
    that clock."""
    mock_clock.autojump_threshold = AUTOJUMP_S


@asynccontextmanager
async def memory_quorum(network: MemoryNetwork) -> AsyncIterator[list[Member]]:
    voters = {node_id: ("memory", node_id) for node_id in VOTERS}
    members = []
    for node_id in VOTERS:
        node = RaftNode(node_id=node_id, cluster_id="cluster-m", voters=voters,
                        config=RaftConfig(voters=VOTERS, **TIMING), log=MemoryLog(),
                        election=None, write_election=lambda state: None,
                        transport=network.endpoint(node_id, KafkaPrincipal("User", f"n{node_id}")),
                        rng=random.Random(node_id))
        member = Member(node, RpcHost(node))
        node.add_commit_listener(member.committed.append)
        members.append(member)
    async with trio.open_nursery() as nursery:
        for member in members:
            await nursery.start(member.run)
        yield members
        nursery.cancel_scope.cancel()


async def leader_of(members: list[Member], above_epoch: int = 0) -> Member:
    return await eventually(lambda: next(
        (m for m in members if m.node.is_leader and m.node.epoch > above_epoch), None), POLL_S)


async def test_three_nodes_elect_one_leader_that_the_others_follow(
        mock_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(ELECTION_TIMEOUT_MS * 10 / 1000):
        async with memory_quorum(MemoryNetwork()) as members:
            leader = await leader_of(members)
            epoch = leader.node.epoch
            await eventually(lambda: all(m.node.leader_id == leader.node.node_id
                                         for m in members), POLL_S)
            assert [m.node.is_leader for m in members].count(True) == 1
            assert {m.node.epoch for m in members} == {epoch}


async def test_proposals_replicate_and_commit_on_every_node_in_order(
        mock_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(10):
        async with memory_quorum(MemoryNetwork()) as members:
            leader = await leader_of(members)
            records = [b"r%d" % i for i in range(20)]
            for record in records:
                epoch, last = await leader.node.propose_and_wait([record])
            assert epoch == leader.node.epoch
            for member in members:  # the leader's LeaderChange record comes first
                await eventually(lambda m=member: m.node.high_watermark > last, POLL_S)
                await eventually(lambda m=member: m.records[-len(records):] == records,
                                 POLL_S)
                assert member.node.log.end_offset == last + 1


async def test_a_leader_that_stops_hands_over_before_any_fetch_timeout(
        mock_clock: trio.testing.MockClock) -> None:
    """On shutdown the leader resigns: every other voter gets its EndQuorumEpoch and
    answers it before the leader stops, a successor wins in a later epoch long before
    FETCH_TIMEOUT_MS of virtual time, and it holds what the old leader committed."""
    network = MemoryNetwork(record=True)
    with trio.fail_after(60):
        async with memory_quorum(network) as members:
            old = await leader_of(members)
            _, committed = await old.node.propose_and_wait([b"before the hand-over"])
            await eventually(lambda: all(m.node.high_watermark > committed
                                         for m in members), POLL_S)
            stopping_at, old_epoch = trio.current_time(), old.node.epoch
            await old.node.shutdown()
            await old.stopped.wait()
            others = [m for m in members if m is not old]
            assert network.delivered is not None
            for other in others:
                ids = (old.node.node_id, other.node.node_id)
                assert (*ids, "EndQuorumEpochRequest") in network.delivered
                assert (*reversed(ids), "EndQuorumEpochResponse") in network.delivered
            new = await leader_of(others, above_epoch=old_epoch)
            assert trio.current_time() - stopping_at < FETCH_TIMEOUT_MS / 1000 / 4
            _, last = await new.node.propose_and_wait([b"after the hand-over"])
            for member in others:
                await eventually(lambda m=member: m.node.high_watermark > last, POLL_S)
                written = [r for r in member.records if r.endswith(b"the hand-over")]
                assert written == [b"before the hand-over", b"after the hand-over"]


async def test_a_leader_cut_off_from_the_quorum_steps_down_and_follows_after_the_heal(
        mock_clock: trio.testing.MockClock) -> None:
    """A partition that refuses nothing: the cut-off leader steps down (check-quorum)
    while the others elect a successor after their fetch timeout; healed, the old leader
    follows the new one and gets what it commits."""
    network = MemoryNetwork()
    with trio.fail_after(FETCH_TIMEOUT_MS * 5 / 1000):
        async with memory_quorum(network) as members:
            old = await leader_of(members)
            old_epoch = old.node.epoch
            others = [m for m in members if m is not old]
            for other in others:
                network.cut(old.node.node_id, other.node.node_id)
            new = await leader_of(others, above_epoch=old_epoch)
            await eventually(lambda: not old.node.is_leader, POLL_S)
            for other in others:
                network.heal(old.node.node_id, other.node.node_id)
            _, last = await new.node.propose_and_wait([b"after the heal"])
            await eventually(lambda: old.node.high_watermark > last, POLL_S)
            assert (old.node.leader_id, old.node.epoch) == (new.node.node_id, new.node.epoch)
            assert old.records[-1] == b"after the heal"


async def test_the_request_gate_answers_a_refused_request_before_any_handler(
        mock_clock: trio.testing.MockClock) -> None:
    """The gate sees the caller's session (the endpoint's principal): the intruder's
    Echo and VoteRequest are refused with CLUSTER_AUTHORIZATION_FAILED (the vote in a
    VoteResponse's shape) and reach neither the handler nor the core; the same Echo
    from an admitted caller is served."""
    network = MemoryNetwork()
    served: list[Any] = []

    async def echo(body: Any, cluster_id: str) -> Any:
        served.append(body)
        return {"error_code": 0}

    def gate(api: str) -> tuple[ErrorCode, str] | None:
        if current_session().principal == INTRUDER:
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not allowed"
        return None

    with trio.fail_after(10):
        async with memory_quorum(network) as members, trio.open_nursery() as tools:
            target = members[0]
            target.rpc.add_api_handler("Echo", echo)
            target.rpc.set_request_gate(gate)
            epoch = (await leader_of(members)).node.epoch
            vote = messages.encode_message(messages.VoteRequest(
                cluster_id="cluster-m", candidate_epoch=epoch + 5, candidate_id=3,
                last_offset_epoch=epoch, last_offset=1 << 20))
            intruder = await client(tools, network, 98, INTRUDER)
            admitted = await client(tools, network, 99, KafkaPrincipal("User", "admin"))
            refused_echo = await intruder.ask(1, "Echo", {"text": "hi"})
            refused_vote = await intruder.ask(1, *vote)
            answered = await admitted.ask(1, "Echo", {"text": "hello"})
            tools.cancel_scope.cancel()
    assert refused_echo["api"] == "Echo"
    assert refused_echo["body"]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert refused_vote["api"] == "VoteResponse"
    assert refused_vote["body"]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert target.node.epoch < epoch + 5  # the vote never reached the core
    assert answered["body"] == {"error_code": 0}
    assert served == [{"text": "hello"}]


@dataclass(eq=False)
class Client:
    """A tool on the network: one request at a time, its answer."""

    transport: Any
    answers: trio.MemoryReceiveChannel[dict[str, Any]]
    correlation_id: int = 0

    async def ask(self, node_id: int, api: str, body: Any) -> dict[str, Any]:
        self.correlation_id += 1
        self.transport.send_to_peer(node_id, {
            "api": api, "version": 0, "correlation_id": self.correlation_id,
            "cluster_id": "cluster-m", "body": body})
        answer = await self.answers.receive()
        assert answer["correlation_id"] == self.correlation_id
        return answer


async def client(nursery: trio.Nursery, network: MemoryNetwork, node_id: int,
                 principal: KafkaPrincipal) -> Client:
    transport = network.endpoint(node_id, principal)
    send, receive = trio.open_memory_channel[dict[str, Any]](16)

    async def answer(conn: Any, frame: dict[str, Any]) -> None:
        await send.send(frame)
    transport.attach(handler=answer, on_close=lambda conn: None,
                     on_peer_down=lambda node_id, refused: None)
    await nursery.start(transport.serve)
    return Client(transport, receive)
