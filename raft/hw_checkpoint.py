"""The high-watermark checkpoint, an observer of what `raft.node.RaftNode` publishes.

A node whose log has a `directory` (a `DiskLog`) keeps
`<directory>/high-watermark-checkpoint` (`raft.storage`) so tools such as `kraft replay`
can tell committed records from a tail that was merely replicated (Raft §5.4.2). It only
ever holds a high watermark the node published, bounded by what is flushed here (a
broker's log flushes lazily, `raft.lazy_flush`), and never moves back (a restarted node
starts from HW 0 and catches up). It is written in a worker thread, beside the loop, at
most once per `HW_CHECKPOINT_INTERVAL_S` while the HW advances, and once more on a
graceful stop; a failed write is a log-dir failure like any other, except a process out
of file descriptors (EMFILE, ENFILE): that write is tried again next interval.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from raft.common.connection_limits import ACCEPT_WARNING_INTERVAL_S, RateLimit, out_of_descriptors
from raft.node import RaftNode
from raft.storage import read_high_watermark_checkpoint, write_high_watermark_checkpoint

log = logging.getLogger(__name__)

HW_CHECKPOINT_INTERVAL_S = 1.0


class HighWatermarkCheckpointer:
    def __init__(self, node: RaftNode, directory: Path,
                 flush_first: Callable[[], Awaitable[None]] | None = None) -> None:
        """`flush_first`: what `checkpoint_now` awaits first (a lazily flushed log's
        fsync, so the checkpoint covers all the node published)."""
        self._node = node
        self._directory = directory
        self._flush_first = flush_first
        self._published = 0  # the last HW the node published
        self._checkpointed: int | None = None  # read from the file at the first write
        self.advanced = trio.Event()  # set when the checkpoint may rise
        self._lock = trio.Lock()  # one writer of the file at a time

    def install(self) -> HighWatermarkCheckpointer:
        self._node.add_high_watermark_listener(self._on_published)
        self._node.add_background_task(self._checkpoint_every_interval)
        self._node.add_stop_task(self.checkpoint_now)  # graceful stop: the final HW
        return self

    def _on_published(self, high_watermark: int) -> None:
        self._published = high_watermark
        self.advanced.set()

    async def _checkpoint_every_interval(self) -> None:
        """Coalesced: one write per advance, then at most one per interval."""
        warning = RateLimit(ACCEPT_WARNING_INTERVAL_S)
        while True:
            await self.advanced.wait()
            self.advanced = trio.Event()
            try:
                await self._checkpoint()
            except OSError as exc:
                if not out_of_descriptors(exc):
                    raise self._node.log_dir_failed(exc) from exc
                self.advanced.set()  # the next interval tries again
                if warning.due(trio.current_time()):
                    log.warning("out of file descriptors, high-watermark checkpoint "
                                "postponed", extra={"node": self._node.node_id,
                                                    "error": str(exc),
                                                    "suppressed": warning.take_suppressed()})
            await trio.sleep(HW_CHECKPOINT_INTERVAL_S)

    async def checkpoint_now(self) -> None:
        """Write the checkpoint now (e.g. before a snapshot, so no snapshot ever ends
        above the checkpoint on disk), unless it already holds the last high watermark
        published; OSError when the write fails."""
        if self._flush_first is not None:
            await self._flush_first()
        await self._checkpoint()

    async def _checkpoint(self) -> None:
        async with self._lock:  # within what is flushed here, never back
            if self._checkpointed is None:
                self._checkpointed = read_high_watermark_checkpoint(self._directory) or 0
            offset = min(self._published, self._node.log.flushed_end_offset)
            if offset <= self._checkpointed:
                return
            await trio.to_thread.run_sync(write_high_watermark_checkpoint,
                                          self._directory, offset)
            self._checkpointed = offset
