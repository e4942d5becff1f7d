"""Proposals waiting for their commit, for `raft.node.RaftNode`'s core task.

A proposal's `on_done` gets `(epoch, last_offset)` once its records committed in the
epoch they were appended in, or the error that ended the wait: `NotLeaderError` when
this node is not (or stopped being) the leader before they committed (they may still
commit later: callers retry idempotently), `LogDirFailure` when the disk failed. Queued
proposals of one turn are appended as one batch up to `COALESCED_BATCH_BYTES`, as
Kafka's raft client accumulates them, so concurrent callers share a batch, its fsync and
its Fetch round.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio

from raft.core import RaftCore
from raft.types import RaftLog

COALESCED_BATCH_BYTES = 64 * 1024  # proposals of one turn share a batch until this size

ProposalCallback = Callable[[tuple[int, int] | Exception], None]


@dataclass(eq=False, slots=True)
class _Waiter:
    on_done: ProposalCallback
    epoch: int = 0
    last_offset: int = -1  # set once proposed

    def settle(self, error: Exception | None = None) -> None:
        self.on_done(error if error is not None else (self.epoch, self.last_offset))


class Outcome:
    """A `ProposalCallback` that a task can wait on."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._result: tuple[int, int] | Exception | None = None

    def __call__(self, result: tuple[int, int] | Exception) -> None:
        self._result = result
        self._done.set()

    async def wait(self) -> tuple[int, int]:
        await self._done.wait()
        assert self._result is not None
        if isinstance(self._result, Exception):
            raise self._result
        return self._result


class Proposals:
    """Queued proposals (appended at the end of the core task's turn) and proposed ones
    (in offset order) until they settle. Touched only in the core task, but `queue`."""

    def __init__(self) -> None:
        self._waiting: deque[_Waiter] = deque()  # proposed, in offset order
        self._queued: deque[tuple[list[bytes], _Waiter]] = deque()

    def queue(self, records: Sequence[bytes], on_done: ProposalCallback) -> bool:
        """Queue for the next `propose_queued`; True when the queue was empty (the core
        task needs a wake-up)."""
        if not records:
            raise ValueError("propose needs at least one record")
        self._queued.append((list(records), _Waiter(on_done)))
        return len(self._queued) == 1

    def propose_now(self, core: RaftCore, records: list[bytes], now: int,
                    on_done: ProposalCallback) -> bool:
        """Append `records` at once; False (nothing appended) when not the leader."""
        result = core.propose(records, now) if core.is_leader else None
        if result is not None:
            self._waiting.append(_Waiter(on_done, *result))
        return result is not None

    def propose_queued(self, core: RaftCore, now: int, not_leader: Callable[[], Exception]
                       ) -> None:
        """Append what was queued, consecutive proposals as one batch; a non-leader
        settles them all with `not_leader()`."""
        queued = self._queued
        if queued and not core.is_leader:
            self.fail_queued(not_leader())
        while queued:
            records: list[bytes] = []
            group: list[tuple[int, _Waiter]] = []  # (its record count, its waiter)
            size = 0
            while queued and size < COALESCED_BATCH_BYTES:
                more, waiter = queued.popleft()
                records.extend(more)
                size += sum(map(len, more))
                group.append((len(more), waiter))
            result = core.propose(records, now)
            assert result is not None  # a leader's
            epoch, last_offset = result
            offset = last_offset - len(records)
            for count, waiter in group:
                offset += count
                waiter.epoch, waiter.last_offset = epoch, offset
                self._waiting.append(waiter)

    def settle(self, core: RaftCore, log: RaftLog, not_leader: Callable[[], Exception]
               ) -> None:
        """Settle what committed (an error for records the log no longer holds in their
        epoch), and everything once this node stopped leading their epoch."""
        waiting = self._waiting
        while waiting and waiting[0].last_offset < core.high_watermark:
            waiter = waiting.popleft()
            if log.end_offset <= waiter.last_offset or \
                    log.epoch_at(waiter.last_offset) != waiter.epoch:
                waiter.settle(not_leader())
            else:
                waiter.settle()
        if waiting and (not core.is_leader or core.epoch != waiting[0].epoch):
            error = not_leader()
            for waiter in waiting:
                waiter.settle(error)
            waiting.clear()

    def fail_queued(self, error: Exception) -> None:
        for _, waiter in self._queued:
            waiter.settle(error)
        self._queued.clear()

    def fail_all(self, error: Exception) -> None:
        for waiter in self._waiting:
            waiter.settle(error)
        self._waiting.clear()
        self.fail_queued(error)
