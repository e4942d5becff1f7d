"""A full disk under a running node (hostile input): ENOSPC injected into the log
write, the log fsync or the quorum-state write. The RaftNode logs one ERROR naming the
error and the directory and stops (like Kafka's log-dir failure) without acknowledging
what was not durable; a restart once space is back holds every acknowledged record. Two
paths meeting the same full disk (a broker-only node's core loop and its lazy flush) stop
the node with one ERROR between them.

`kraft node` does that restart in place: it probes the directory until a write succeeds
(tested here) and rebuilds the node (tests/integration/test_full_disk.py, a real tmpfs)."""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from raft.log import DiskLog, MemoryLog, SegmentSync
from raft.node import LogDirFailure
from raft.storage import read_quorum_state
from raft.types import Batch, ElectionState
from tests.support.node_quorum import FAST, Member
from tests.support.polling import eventually
from tests.support.single_node import make_node
from tools.server.supervisor import PROBE_FILE, find_exception, probe_log_dir, wait_for_space


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))





def records_on_disk(data: Path) -> list[bytes]:
    """The data records (not the LeaderChange control records) after recovery, which
    cuts any torn tail."""
    with DiskLog.open_metadata_log(data) as disk_log:
        return [r for b in disk_log.read(0, 1 << 30) for r in b.records
                if r.startswith((b"acked-", b"not-durable", b"after-restart"))]


def arm(monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """From now on the disk is full, the way `fault` names."""
    real_pwrite = os.pwrite

    def failing(*args: Any) -> Any:
        raise enospc()

    def io_error(*args: Any) -> Any:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def short_then_full(fd: int, data: Any, position: int) -> int:
        monkeypatch.setattr(os, "pwrite", failing)  # the rest of the batch does not fit
        return real_pwrite(fd, bytes(data)[:len(data) // 2], position)

    if fault == "fsync":
        monkeypatch.setattr(os, "fsync", failing)
    elif fault == "write":
        monkeypatch.setattr(os, "pwrite", failing)
    elif fault == "torn-write":  # half a batch lands and cannot even be cut off
        monkeypatch.setattr(os, "pwrite", short_then_full)
        monkeypatch.setattr(os, "ftruncate", io_error)
    else:
        raise AssertionError(fault)


@pytest.mark.parametrize("fault", ["fsync", "write", "torn-write"])
async def test_full_disk_stops_node_and_restart_keeps_acknowledged_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        fault: str) -> None:
    """Appends acknowledged before ENOSPC all survive a restart; the append that hit the
    full disk is never acknowledged; the node stops with one ERROR naming the dir."""
    caplog.set_level(logging.ERROR, logger="raft.node")
    node, disk_log = await make_node(tmp_path)
    acked: list[bytes] = []
    late_ack: list[tuple[int, int]] = []

    async def until_the_disk_fills() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await eventually(lambda: node.is_leader)
            for i in range(20):
                record = f"acked-{i}".encode()
                await node.propose_and_wait([record])
                acked.append(record)
            with monkeypatch.context() as patch:
                arm(patch, fault)
                late_ack.append(await node.propose_and_wait([b"not-durable"] * 3))

    with trio.fail_after(10), pytest.raises(BaseExceptionGroup) as raised:
        await until_the_disk_fills()
    disk_log.close()
    failure = find_exception(raised.value, LogDirFailure)
    assert failure is not None, raised.value
    assert late_ack == []
    # torn-write: the failed cut-off of the half batch is what stops the node
    assert ("Input/output error" if fault == "torn-write" else "No space left on device"
            ) in str(failure)
    assert str(tmp_path) in str(failure)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "log directory failed" in errors[0].getMessage()
    assert getattr(errors[0], "dir", "").startswith(str(tmp_path))

    # Space is back: the restarted node holds every acknowledged record and goes on.
    assert len(acked) == 20
    assert records_on_disk(tmp_path)[:len(acked)] == acked
    node, disk_log = await make_node(tmp_path)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await eventually(lambda: node.is_leader)
            await node.propose_and_wait([b"after-restart"])
            await node.shutdown()
    disk_log.close()
    after = records_on_disk(tmp_path)
    assert after[:len(acked)] == acked
    assert after[-1] == b"after-restart"
    assert all(r in (b"not-durable", b"after-restart") for r in after[len(acked):])


async def test_full_disk_on_quorum_state_write_stops_node(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """ENOSPC persisting quorum-state (the vote) stops the node before it acts as leader."""
    caplog.set_level(logging.ERROR, logger="raft.node")

    def full(state: ElectionState) -> None:
        raise enospc()

    node, disk_log = await make_node(tmp_path, write_election=full)

    async def until_the_vote_fails() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            await trio.sleep_forever()  # until the node stops on the failed write

    with trio.fail_after(10), pytest.raises(BaseExceptionGroup) as raised:
        await until_the_vote_fails()
    disk_log.close()
    failure = find_exception(raised.value, LogDirFailure)
    assert failure is not None
    assert "No space left on device" in str(failure)
    assert not node.is_leader
    assert read_quorum_state(tmp_path) is None
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1


class FillsUnderTheLazyFlush(MemoryLog):
    """A broker-only node's log whose disk fills at `fill()`: the next lazy flush's fsync
    hangs in its worker thread until the core loop's next append meets the full disk, then
    fails too. Both paths meet one ENOSPC, always in this order: the core loop first, then
    the flush's thread, which cancelling the node cannot stop."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False
        self.flush_hangs = threading.Event()  # a lazy flush waits in its worker thread
        self.append_failed = threading.Event()
        self.met: list[str] = []  # the paths that met ENOSPC, in order

    def fill(self) -> None:
        self.full = True

    def begin_flush(self) -> SegmentSync:
        sync = super().begin_flush()
        if not self.full:
            return sync
        disk = self

        class HangsThenFails(SegmentSync):
            def run(self) -> None:
                disk.flush_hangs.set()
                disk.append_failed.wait(10)
                disk.met.append("lazy flush")
                raise enospc()
        return HangsThenFails(sync.end_offset, sync.generation)

    def append_batches(self, batches: Sequence[Batch]) -> None:
        if self.full and self.flush_hangs.is_set():
            self.met.append("core loop")
            self.append_failed.set()
            raise enospc()
        super().append_batches(batches)


def leaves(exc: BaseException, kind: type[BaseException]) -> list[BaseException]:
    """Every `kind` in a (nested) exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner, kind)]
    return [exc] if isinstance(exc, kind) else []


async def test_a_full_disk_met_by_the_core_loop_and_the_lazy_flush_logs_one_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """A broker-only observer (`observer_flushes=False`) whose core loop and lazy flush
    both meet the full disk: both stop the node, one ERROR is logged."""
    caplog.set_level(logging.ERROR)
    listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1") for _ in range(2)]
    voters = {1: ("127.0.0.1", listeners[0][0].socket.getsockname()[1])}
    disk = FillsUnderTheLazyFlush()
    voter = Member(1, voters, listeners[0], FAST)
    broker = Member(2, voters, listeners[1], FAST, log=disk, observer_flushes=False)
    stopped: list[BaseExceptionGroup[Any]] = []

    async def run_broker(*, task_status: trio.TaskStatus[int | None]) -> None:
        try:
            await broker.node.run(task_status=task_status)
        except BaseExceptionGroup as group:
            stopped.append(group)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(voter.run)
            await nursery.start(run_broker)
            await eventually(lambda: voter.node.is_leader)
            _, last = await voter.node.propose_and_wait([b"before"])
            await eventually(lambda: broker.committed_end > last)
            disk.fill()
            await voter.node.propose_and_wait([b"due a flush"])
            await eventually(disk.flush_hangs.is_set)
            await voter.node.propose_and_wait([b"meets the full disk"])
            await eventually(lambda: stopped)
            nursery.cancel_scope.cancel()
    assert disk.met == ["core loop", "lazy flush"]
    (group,) = stopped
    assert len(leaves(group, LogDirFailure)) == 2  # each path stopped the node
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "log directory failed" in errors[0].getMessage()
    assert "No space left on device" in getattr(errors[0], "error", "")


async def test_wait_for_space_returns_once_a_probe_write_succeeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor's probe: write + fsync + remove a small file; ENOSPC means wait."""
    still_full = [enospc()]  # the first probe finds the disk still full
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if still_full:
            raise still_full.pop()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with trio.fail_after(10):
        assert await wait_for_space(tmp_path, trio.Event())
    assert still_full == []
    assert not (tmp_path / PROBE_FILE).exists()  # removed after a failed probe too


async def test_wait_for_space_gives_up_when_a_stop_is_requested(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM while the disk is still full: probing ends (False) without waiting for space."""
    probes: list[int] = []

    def full(fd: int) -> None:
        probes.append(fd)
        raise enospc()

    monkeypatch.setattr(os, "fsync", full)
    stop_requested = trio.Event()
    outcome: list[bool] = []

    async def probe_until_stopped() -> None:
        outcome.append(await wait_for_space(tmp_path, stop_requested))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(probe_until_stopped)
            await eventually(lambda: probes)
            stop_requested.set()
    assert outcome == [False]
    with pytest.raises(OSError, match="No space left"):
        probe_log_dir(tmp_path)
    assert not (tmp_path / PROBE_FILE).exists()
