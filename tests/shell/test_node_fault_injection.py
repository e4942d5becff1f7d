"""The node's test-only faults (raft/fault_injection.py, composed into the node's clock
and fsyncs by tools/server/faults.py, used by `kraft chaos`): an
fsync delay holds back commit acknowledgement by at least the delay, and a clock rate
makes the node's now_ms run faster or slower than trio's clock, monotonically.

Trio's mock clock makes the timings exact: it jumps to the next deadline once the run
loop has been idle for AUTOJUMP_S of real time (not at once: the node's fsyncs run in worker
threads, and a jump while one runs would leap to an unrelated deadline)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
import trio.testing

from metadata.image import MetadataImage
from raft.fault_injection import POLL_INTERVAL_S, clear_fault_file, write_fault_file
from raft.log import MemoryLog
from raft.node import RaftNode
from tests.support.polling import eventually
from tests.support.single_node import FAST
from tests.support.tcp_node import tcp_node
from tools.server.faults import node_faults

AUTOJUMP_S = 0.05
POLL_S = 0.25  # virtual time: each poll costs AUTOJUMP_S of real time
DELAY_MS = 2000  # far above any timer of FAST, so a stray jump cannot blur the bounds


@asynccontextmanager
async def single_node(fault_file: Path) -> AsyncIterator[RaftNode]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    voters = {1: ("127.0.0.1", listeners[0].socket.getsockname()[1])}
    faults = node_faults(fault_file)
    node = tcp_node(node_id=1, cluster_id="cluster-a", voters=voters, config=FAST,
                    log=MemoryLog(), election=None, write_election=lambda state: None,
                    listeners=listeners, rng=random.Random(1), clock=faults.clock,
                    before_fsync=faults.before_fsync).node
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        yield node
        nursery.cancel_scope.cancel()


async def timed_commit(node: RaftNode, record: bytes) -> float:
    began = trio.current_time()
    await node.propose_and_wait([record])
    return trio.current_time() - began


async def test_fsync_delay_holds_back_commit_acknowledgement_when_injected(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = AUTOJUMP_S
    fault_file = tmp_path / "faults.json"
    write_fault_file(fault_file, fsync_delay_ms=DELAY_MS)
    with trio.fail_after(60):
        async with single_node(fault_file) as node:
            await eventually(lambda: node.is_leader, POLL_S)
            for i in range(3):
                assert await timed_commit(node, f"slow-{i}".encode()) >= DELAY_MS / 1000
            clear_fault_file(fault_file)  # healed: seen within one poll interval
            await trio.sleep(POLL_INTERVAL_S * 2)
            assert await timed_commit(node, b"healed") < DELAY_MS / 1000


async def test_clock_rate_changes_node_clock_monotonically_when_injected(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = AUTOJUMP_S
    fault_file = tmp_path / "faults.json"
    with trio.fail_after(60):
        async with single_node(fault_file) as node:
            await eventually(lambda: node.is_leader, POLL_S)
            before = node.now_ms()
            await trio.sleep(1.0)
            assert node.now_ms() - before in range(999, 1002)  # no file: real rate

            write_fault_file(fault_file, clock_rate=2.0)
            await trio.sleep(POLL_INTERVAL_S * 2)
            start = node.now_ms()  # the new rate is in force from here at the latest
            assert start >= before + 1000
            await trio.sleep(1.0)
            assert node.now_ms() - start in range(1999, 2002)

            write_fault_file(fault_file, clock_rate=0.5)
            await trio.sleep(POLL_INTERVAL_S * 2)
            start, then = node.now_ms(), node.now_ms()
            assert then >= start  # never backwards across a rate change
            await trio.sleep(1.0)
            assert node.now_ms() - start in range(499, 502)
            # the core still elects and commits on the skewed clock
            await node.propose_and_wait([b"skewed"])


async def test_frozen_metadata_serves_the_image_of_the_freeze_until_cleared(
        tmp_path: Path) -> None:
    fault_file = tmp_path / "faults.json"
    faults = node_faults(fault_file)
    first, second, third = (MetadataImage.empty() for _ in range(3))
    frozen = faults.metadata
    thaws: list[bool] = []
    frozen.on_thaw = lambda: thaws.append(True)
    assert frozen.view(first) is first  # no file: live
    write_fault_file(fault_file, metadata_frozen=True)
    faults.clock.now_ms()  # the node's clock polls the file every turn
    assert frozen.view(second) is second  # frozen at the image it was serving
    assert frozen.view(third) is second
    assert not thaws
    clear_fault_file(fault_file)
    await trio.sleep(POLL_INTERVAL_S)
    faults.clock.now_ms()
    assert thaws == [True]  # the Kafka side is told its image changed
    assert frozen.view(third) is third
