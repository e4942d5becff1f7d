"""What makes a node's published state durable beside its loop: the high-watermark
checkpoint of a `DiskLog` (`raft.hw_checkpoint`) and, for a broker-only node, the lazy
log flush (`raft.lazy_flush`), both observers of what `raft.node.RaftNode` publishes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from raft.hw_checkpoint import HighWatermarkCheckpointer
from raft.lazy_flush import LazyFlusher
from raft.node import RaftNode


async def _nothing_to_checkpoint() -> None:
    pass


def install_durability(node: RaftNode) -> Callable[[], Awaitable[None]]:
    """Install the lazy flush on a node that skips the loop's (not `observer_flushes`)
    and the checkpoint when its log has a directory; returns what writes the checkpoint
    now (after a lazy log's fsync)."""
    directory = getattr(node.log, "directory", None)
    checkpointer: HighWatermarkCheckpointer | None = None

    def synced() -> None:
        if checkpointer is not None:
            checkpointer.advanced.set()  # it may rise to what is durable now

    flusher = LazyFlusher(node, synced).install() if not node.observer_flushes else None
    if directory is None:
        return _nothing_to_checkpoint
    checkpointer = HighWatermarkCheckpointer(
        node, Path(directory), flusher.sync if flusher is not None else None).install()
    return checkpointer.checkpoint_now
