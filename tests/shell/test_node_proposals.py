"""raft.node's write path in process (real RaftCore, MemoryLog, loopback sockets):
proposals made together share a batch, callbacks get each proposal's own offsets, a
voter's flush runs in the core task only after its early messages left, an observer's
in a worker thread, a broker-only observer's beside its fetching."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from raft import hw_checkpoint
from raft.log import DiskLog, SegmentSync
from raft.node import NotLeaderError
from raft.storage import read_high_watermark_checkpoint
from tests.support.node_quorum import FAST, Member, follower_of, leader_of, quorum
from tests.support.polling import eventually


def collect(outcomes: dict[int, Any], index: int) -> Any:
    return lambda outcome: outcomes.__setitem__(index, outcome)


async def test_proposals_made_in_one_turn_share_a_batch_with_their_own_offsets() -> None:
    with trio.fail_after(10):
        async with quorum() as members:
            leader = await leader_of(members)
            await leader.node.propose_and_wait([b"first"])  # past the leader's own batch
            outcomes: dict[int, Any] = {}
            for i in range(50):  # no schedule point between them: one turn's proposals
                records = [b"p%d-%d" % (i, k) for k in range(1 + i % 3)]
                leader.node.propose_soon(records, collect(outcomes, i))
            await eventually(lambda: len(outcomes) == 50)
            batches = [b for b in leader.committed if b.records[0].startswith(b"p")]
            assert len(batches) == 1  # one batch, one fsync, one Fetch round
            (batch,) = batches
            for i in range(50):
                epoch, last_offset = outcomes[i]
                assert epoch == batch.epoch == leader.node.epoch
                assert batch.records[last_offset - batch.base_offset] == b"p%d-%d" % (i, i % 3)


async def test_proposal_callback_gets_not_leader_when_the_node_is_a_follower() -> None:
    with trio.fail_after(10):
        async with quorum() as members:
            leader = await leader_of(members)
            follower = await follower_of(members, leader)
            outcomes: dict[int, Any] = {}
            follower.node.propose_soon([b"x"], collect(outcomes, 0))
            await eventually(lambda: 0 in outcomes)
            assert isinstance(outcomes[0], NotLeaderError)
            assert outcomes[0].leader_id == leader.node.node_id


async def test_voter_flushes_in_the_core_task_after_its_early_messages_left() -> None:
    """A leader's Fetch answers leave before its own fsync; a voter's fsync blocks its
    loop (no worker-thread round trip), so it must come after the writers ran."""
    seen: list[tuple[int, bool, int]] = []  # (node, in the main thread, frames unsent)

    def watch(member: Member) -> None:
        original = member.log.flush

        def flush() -> None:
            if member.node.is_leader:
                seen.append((member.node.node_id,
                             threading.current_thread() is threading.main_thread(),
                             member.node.transport.pending()))
            original()
        member.log.flush = flush  # type: ignore[method-assign]

    with trio.fail_after(10):
        async with quorum(setup=watch) as members:
            leader = await leader_of(members)
            for i in range(20):
                await leader.node.propose_and_wait([b"r%d" % i])
            assert len(seen) >= 20
            assert all(main for _, main, _ in seen)
            assert [unsent for _, _, unsent in seen] == [0] * len(seen)


async def three_voters_and_an_observer(*, observer_flushes: bool = True,
                                       observer_log: Any = None) -> list[Member]:
    listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1") for _ in range(4)]
    voters = {i + 1: ("127.0.0.1", ls[0].socket.getsockname()[1])
              for i, ls in enumerate(listeners[:3])}
    return [Member(i + 1, voters, listeners[i], FAST, log=observer_log if i == 3 else None,
                   observer_flushes=observer_flushes or i < 3) for i in range(4)]


async def test_observer_flushes_in_a_worker_thread() -> None:
    members = await three_voters_and_an_observer()
    observer = members[3]
    threads: list[bool] = []
    original = observer.log.flush

    def flush() -> None:
        threads.append(threading.current_thread() is threading.main_thread())
        original()
    observer.log.flush = flush  # type: ignore[method-assign]

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for member in members:
                await nursery.start(member.run)
            leader = await leader_of(members[:3])
            _, last = await leader.node.propose_and_wait([b"to the observer"])
            await eventually(lambda: observer.committed_end > last)
            assert threads
            assert not any(threads)
            nursery.cancel_scope.cancel()


async def test_broker_only_observer_fetches_and_publishes_while_its_flush_is_stuck(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """observer_flushes=False: the observer's next Fetch does not wait for its fsync (it
    counts toward no commit), so commits reach it while its one flush hangs, and its
    high-watermark checkpoint stays within what is durable; the flush then makes durable
    the log as it was when that flush began."""
    monkeypatch.setattr(hw_checkpoint, "HW_CHECKPOINT_INTERVAL_S", 0.01)
    with DiskLog(tmp_path / "observer") as disk_log:
        await observer_fetches_while_its_flush_is_stuck(disk_log)


async def observer_fetches_while_its_flush_is_stuck(disk_log: DiskLog) -> None:
    members = await three_voters_and_an_observer(observer_flushes=False, observer_log=disk_log)
    observer = members[3]
    release = threading.Event()
    began: list[int] = []
    original_begin = observer.log.begin_flush

    class StuckSync(SegmentSync):
        def run(self) -> None:
            release.wait(10)
            super().run()

    def begin_flush() -> SegmentSync:
        sync = original_begin()
        began.append(sync.end_offset)
        return StuckSync(sync.end_offset, sync.generation, sync.fds)
    observer.log.begin_flush = begin_flush  # type: ignore[method-assign]
    observer.log.flush = lambda: pytest.fail("a full flush before the stop")  # type: ignore

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for member in members:
                await nursery.start(member.run)
            leader = await leader_of(members[:3])
            for i in range(20):
                _, last = await leader.node.propose_and_wait([b"r%d" % i])
                await eventually(lambda last=last: observer.committed_end > last)
            assert len(began) == 1  # the first flush hangs; the next waits for it
            assert observer.log.flushed_end_offset == 0
            assert not read_high_watermark_checkpoint(disk_log.directory)
            release.set()
            await eventually(lambda: observer.log.flushed_end_offset == began[0] > 0)
            await eventually(
                lambda: (read_high_watermark_checkpoint(disk_log.directory) or 0) >= began[0])
            checkpoint = read_high_watermark_checkpoint(disk_log.directory)
            assert checkpoint is not None
            assert checkpoint <= observer.log.flushed_end_offset
            nursery.cancel_scope.cancel()
