"""raft.node quorums in process for the shell tests: real RaftCore, MemoryLog, loopback
sockets; each member records what it committed."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from raft.core import RaftConfig
from raft.log import MemoryLog
from raft.types import Batch, ElectionState
from tests.support.polling import eventually
from tests.support.tcp_node import tcp_node

FAST = {"election_timeout_ms": 150, "fetch_timeout_ms": 300, "election_backoff_max_ms": 100,
        "request_timeout_ms": 200, "fetch_max_wait_ms": 100}


class Member:
    """One node plus what a test wants to observe about it."""

    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]],
                 listeners: list[trio.SocketListener], timing: dict[str, int],
                 log: MemoryLog | None = None, election: ElectionState | None = None,
                 observer_flushes: bool = True) -> None:
        self.listeners = listeners
        self.scope = trio.CancelScope()
        self.stopped = trio.Event()
        self.log = log or MemoryLog()
        self.persisted: list[ElectionState] = [election] if election else []
        self.committed: list[Batch] = []
        self.node, self.rpc, _ = tcp_node(
            node_id=node_id, cluster_id="cluster-a", voters=voters,
            config=RaftConfig(voters=tuple(voters), **timing), log=self.log,
            election=election, write_election=self.persisted.append,
            listeners=listeners, rng=random.Random(node_id), observer_flushes=observer_flushes)
        self.node.add_commit_listener(self.committed.append)

    @property
    def committed_end(self) -> int:
        return self.committed[-1].next_offset if self.committed else 0

    async def run(self, *, task_status: trio.TaskStatus[int | None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        try:
            with self.scope:
                await self.node.run(task_status=task_status)
        finally:
            self.stopped.set()

    async def kill(self) -> None:
        """As SIGKILL: the node stops at once, without resigning; its connections close
        and its port refuses connections."""
        self.scope.cancel()
        await self.stopped.wait()
        for listener in self.listeners:
            await listener.aclose()


@asynccontextmanager
async def quorum(count: int = 3, timing: dict[str, int] | None = None,
                 setup: Callable[[Member], None] | None = None) -> AsyncIterator[list[Member]]:
    listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1") for _ in range(count)]
    voters = {i + 1: ("127.0.0.1", ls[0].socket.getsockname()[1])
              for i, ls in enumerate(listeners)}
    members = [Member(i + 1, voters, listeners[i], timing or FAST) for i in range(count)]
    async with trio.open_nursery() as nursery:
        for member in members:
            if setup:
                setup(member)
            await nursery.start(member.run)
        yield members
        nursery.cancel_scope.cancel()


async def leader_of(members: list[Member]) -> Member:
    return await eventually(lambda: next((m for m in members if m.node.is_leader), None))


async def follower_of(members: list[Member], leader: Member) -> Member:
    """A member that follows `leader` (knows it as the leader and is not it)."""
    return await eventually(lambda: next(
        (m for m in members if m.node.leader_id == leader.node.node_id
         and not m.node.is_leader), None))
