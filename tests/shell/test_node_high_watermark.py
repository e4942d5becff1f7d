"""The high-watermark checkpoint of a running node (raft.node, DiskLog in a temp dir):
never above the high watermark, caught up after appends, exact after a graceful stop,
and a failed write is a log-dir failure. What `kraft replay` reads to tell committed
records from replicated ones (Raft §5.4.2)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import trio

from raft import hw_checkpoint
from raft.node import LogDirFailure
from raft.storage import read_high_watermark_checkpoint
from tests.support.polling import eventually
from tests.support.single_node import make_node
from tools.server.supervisor import find_exception


async def test_checkpoint_follows_the_high_watermark_when_records_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint never claims more than the node's high watermark, and it reaches
    the committed end once appends stop."""
    monkeypatch.setattr(hw_checkpoint, "HW_CHECKPOINT_INTERVAL_S", 0.05)
    node, disk_log = await make_node(tmp_path)
    partition = disk_log.directory
    seen: list[int] = []

    def checkpoint_within_high_watermark() -> None:
        offset = read_high_watermark_checkpoint(partition)
        if offset is not None:
            assert offset <= node.high_watermark
            seen.append(offset)

    with trio.fail_after(10), disk_log:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await eventually(lambda: node.is_leader)
            for i in range(30):
                await node.propose_and_wait([b"r%d" % i])
                checkpoint_within_high_watermark()
            _, last = await node.propose_and_wait([b"end"])
            assert node.high_watermark == last + 1

            def caught_up() -> bool:
                checkpoint_within_high_watermark()
                return seen[-1:] == [last + 1]
            await eventually(caught_up)
            nursery.cancel_scope.cancel()
    assert seen == sorted(seen)


async def test_graceful_shutdown_leaves_the_final_high_watermark_when_writes_are_coalesced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Coalesced: after one write the next waits for the interval (here an hour), so
    only the write on a graceful stop brings the checkpoint to the final HW."""
    monkeypatch.setattr(hw_checkpoint, "HW_CHECKPOINT_INTERVAL_S", 3600.0)
    node, disk_log = await make_node(tmp_path)
    partition = disk_log.directory
    with trio.fail_after(10), disk_log:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await eventually(lambda: node.is_leader)
            _, first = await node.propose_and_wait([b"first"])
            early = await eventually(lambda: read_high_watermark_checkpoint(partition))
            assert 0 < early <= first + 1
            for i in range(10):
                _, last = await node.propose_and_wait([b"r%d" % i])
            assert read_high_watermark_checkpoint(partition) == early  # not yet: coalesced
            await node.shutdown()
    assert node.high_watermark == last + 1
    assert read_high_watermark_checkpoint(partition) == last + 1


async def test_node_stops_with_log_dir_failure_when_the_checkpoint_write_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk met by the checkpoint write stops the node like any log write."""
    def full(directory: Path, offset: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory))

    monkeypatch.setattr(hw_checkpoint, "write_high_watermark_checkpoint", full)
    node, disk_log = await make_node(tmp_path)

    async def until_the_checkpoint_fails() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await eventually(lambda: node.is_leader)
            await node.propose_and_wait([b"x"])
            await trio.sleep_forever()  # the failed checkpoint write stops the node

    with trio.fail_after(10), disk_log, pytest.raises(BaseExceptionGroup) as caught:
        await until_the_checkpoint_fails()
    failure = find_exception(caught.value, LogDirFailure)
    assert isinstance(failure, LogDirFailure)
    assert failure.error.errno == errno.ENOSPC
