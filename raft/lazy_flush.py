"""The log flush of a broker-only node (`RaftNode(observer_flushes=False)`), beside the
loop: an observer of the Ready that asked for a flush the loop skipped.

Such a node's log is a copy of records the voters hold and counts toward no commit, so
its next Fetch need not wait for an fsync: the fsync runs in a worker thread while the
loop goes on appending and fetching, at most one per `LAZY_FLUSH_INTERVAL_S`, each
making durable the log as it was when it began (`RaftLog.begin_flush`). A crash may cost
it a tail, fetched again after the restart. A failed fsync stops the node (a log-dir
failure).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from raft.node import RaftNode
from raft.types import Ready

LAZY_FLUSH_INTERVAL_S = 1.0


class LazyFlusher:
    def __init__(self, node: RaftNode, on_synced: Callable[[], None]) -> None:
        """`on_synced()` after each fsync (the high-watermark checkpoint may rise)."""
        self._node = node
        self._on_synced = on_synced
        self._due = trio.Event()
        self._lock = trio.Lock()  # one fsync at a time

    def install(self) -> LazyFlusher:
        self._node.add_ready_observer(self._on_ready)
        self._node.add_background_task(self._flush_when_due)
        return self

    def _on_ready(self, ready: Ready, now_ms: int) -> None:
        if ready.needs_flush:
            self._due.set()

    async def _flush_when_due(self) -> None:
        try:
            while True:
                await self._due.wait()
                self._due = trio.Event()
                await self.sync()
                await trio.sleep(LAZY_FLUSH_INTERVAL_S)
        except OSError as exc:
            raise self._node.log_dir_failed(exc) from exc

    async def sync(self) -> None:
        """fsync the log as it is now, in a worker thread, while the loop goes on."""
        log = self._node.log
        async with self._lock:
            sync = log.begin_flush()
            await trio.to_thread.run_sync(sync.run)
            log.finish_flush(sync)
        self._on_synced()
