"""A tiny deterministic driver for unit tests of `RaftCore`: zero-latency FIFO delivery,
a manual clock, cut links, and the shell's side of the Ready contract (persist, flush,
send, advance). Not the simulator: just enough to put a few cores through a rule."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable

from raft.core import RaftConfig, RaftCore
from raft.log import MemoryLog
from raft.messages import VoteRequest, VoteResponse
from raft.types import ElectionState, Envelope, Ready

CLUSTER_ID = "test-cluster"


def make_core(node_id: int, voters: tuple[int, ...] = (1, 2, 3), *, seed: int = 0,
              log: MemoryLog | None = None, election: ElectionState | None = None,
              now_ms: int = 0, core_class: type[RaftCore] = RaftCore,
              **config: object) -> RaftCore:
    """`core_class`: the real core, or one with a planted bug (raft.sim.planted)."""
    return core_class(node_id=node_id, config=RaftConfig(voters=voters, **config),  # type: ignore[arg-type]
                      log=log if log is not None else MemoryLog(), election=election,
                      cluster_id=CLUSTER_ID, rng=random.Random(seed * 1000 + node_id),
                      now_ms=now_ms)


def drain(core: RaftCore) -> Ready:
    """The shell's loop body for one core: flush, then acknowledge; returns the Ready."""
    ready = core.ready()
    if ready.needs_flush:
        core.log.flush()
    core.advance(ready)
    return ready


class Cluster:
    def __init__(self, voters: tuple[int, ...] = (1, 2, 3), observers: Iterable[int] = (),
                 *, seed: int = 0, **config: object) -> None:
        self.now_ms = 0
        self.voters = voters
        self.config = config
        self.seed = seed
        self.logs: dict[int, MemoryLog] = {}
        self.elections: dict[int, ElectionState | None] = {}
        self.cores: dict[int, RaftCore] = {}
        self.down: set[int] = set()
        self.cut: set[frozenset[int]] = set()
        self.queue: deque[Envelope] = deque()
        self.sent: list[Envelope] = []
        for node in (*voters, *observers):
            self.logs[node] = MemoryLog()
            self.elections[node] = None
            self.cores[node] = make_core(node, voters, seed=seed, log=self.logs[node],
                                         **config)
        for node in self.cores:
            self.flush(node)

    def flush(self, node: int) -> None:
        core = self.cores[node]
        ready = core.ready()
        if ready.election is not None:
            self.elections[node] = ready.election
        if ready.needs_flush:
            self.logs[node].flush()
        self.queue.extend(ready.messages)
        self.sent.extend(ready.messages)
        core.advance(ready)

    def can_reach(self, src: int, dst: int) -> bool:
        return (dst in self.cores and src not in self.down and dst not in self.down
                and frozenset((src, dst)) not in self.cut)

    def deliver(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            if not self.queue:
                return
            envelope = self.queue.popleft()
            if self.can_reach(envelope.src, envelope.dst):
                self.cores[envelope.dst].step(envelope, self.now_ms)
                self.flush(envelope.dst)
        raise AssertionError("messages kept flowing: livelock in the harness")

    def run(self, duration_ms: int, step_ms: int = 10) -> None:
        end = self.now_ms + duration_ms
        while self.now_ms < end:
            self.now_ms += step_ms
            for node, core in self.cores.items():
                if node not in self.down:
                    core.tick(self.now_ms)
                    self.flush(node)
            self.deliver()

    def leaders(self) -> list[int]:
        return [n for n, c in self.cores.items() if c.is_leader and n not in self.down]

    def leader(self) -> RaftCore:
        leaders = self.leaders()
        assert len(leaders) == 1, f"expected one leader, got {leaders}"
        return self.cores[leaders[0]]

    def elect(self, max_ms: int = 20_000) -> RaftCore:
        waited = 0
        while not self.leaders() and waited < max_ms:
            self.run(100)
            waited += 100
        self.run(200)
        return self.leader()

    def crash(self, node: int) -> None:
        self.down.add(node)
        self.logs[node].crash()

    def restart(self, node: int) -> None:
        self.down.discard(node)
        self.cores[node] = make_core(node, self.voters, seed=self.seed + 7, log=self.logs[node],
                                     election=self.elections[node], now_ms=self.now_ms,
                                     **self.config)
        self.flush(node)


def deliver(core: RaftCore, src: int, message: object, now_ms: int,
            correlation_id: int = 1000) -> list[object]:
    """Step one message into `core`, drain its Ready, return the messages it sent to `src`."""
    core.step(Envelope(src=src, dst=core.node_id, correlation_id=correlation_id,
                       message=message), now_ms)
    ready = drain(core)
    return [e.message for e in ready.messages if e.dst == src]


def sent(ready: Ready, message_type: type) -> list[Envelope]:
    return [e for e in ready.messages if isinstance(e.message, message_type)]


def log_with(*epochs: int) -> MemoryLog:
    """A flushed log with one single-record batch per listed epoch."""
    log = MemoryLog()
    for epoch in epochs:
        log.append(epoch, [f"e{epoch}@{log.end_offset}".encode()])
    log.flush()
    return log


def make_leader(node_id: int = 1, voters: tuple[int, ...] = (1, 2, 3), *,
                log: MemoryLog | None = None, epoch: int = 0,
                outbox: list[Envelope] | None = None, **config: object) -> RaftCore:
    """A core that has just won an election in `epoch + 1` (votes granted by all); what
    it sent on the way is appended to `outbox`."""
    core = make_core(node_id, voters, log=log,
                     election=ElectionState(epoch=epoch, voters=voters), **config)
    core.tick(10_000)  # election timeout: prospective
    sent_out = outbox if outbox is not None else []
    for _ in range(2):  # pre-votes, then votes
        ready = drain(core)
        sent_out.extend(ready.messages)
        for request in ready.messages:
            if isinstance(request.message, VoteRequest):
                core.step(Envelope(src=request.dst, dst=node_id,
                                   correlation_id=request.correlation_id,
                                   message=VoteResponse(leader_epoch=core.epoch,
                                                        vote_granted=True)), 10_000)
    sent_out.extend(drain(core).messages)
    assert core.is_leader, core.role
    return core


def envelope(src: int, message: object, correlation_id: int = 1000, dst: int = 1) -> Envelope:
    return Envelope(src=src, dst=dst, correlation_id=correlation_id, message=message)


def reply(core: RaftCore, request: Envelope, message: object, now_ms: int) -> Ready:
    """Answer one of `core`'s requests as its destination would; returns the next Ready."""
    core.step(Envelope(src=request.dst, dst=request.src,
                       correlation_id=request.correlation_id, message=message), now_ms)
    return drain(core)
