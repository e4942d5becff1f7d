"""raft.node hands a long backlog of committed batches to the layers above a chunk per
turn (a restart replaying a long log), so the node keeps answering meanwhile."""

from __future__ import annotations

import itertools

import trio

from raft.log import MemoryLog
from raft.publication import PUBLISH_BYTES_PER_TURN
from tests.support.node_quorum import FAST, Member, leader_of
from tests.support.polling import eventually

BACKLOG_BATCHES = 400
RECORD = b"r" * 4096  # ~4 KiB a batch: the backlog is several chunks


def logged(count: int) -> MemoryLog:
    log = MemoryLog()
    for _ in range(count):
        log.append(1, [RECORD])
    log.flush()
    return log


async def test_backlog_is_published_a_chunk_per_turn_while_the_node_keeps_answering(
        ) -> None:
    listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1") for _ in range(3)]
    voters = {i + 1: ("127.0.0.1", ls[0].socket.getsockname()[1])
              for i, ls in enumerate(listeners)}
    members = [Member(i + 1, voters, listeners[i], FAST, log=logged(BACKLOG_BATCHES))
               for i in range(3)]
    turns = {m.node.node_id: 0 for m in members}
    per_turn: dict[int, list[int]] = {m.node.node_id: [] for m in members}
    announced: dict[int, list[int]] = {m.node.node_id: [] for m in members}
    answered_while_behind = []

    for member in members:
        node_id = member.node.node_id

        def on_ready(ready: object, now: int, node_id: int = node_id,
                     member: Member = member) -> None:
            turns[node_id] += 1
            per_turn[node_id].append(member.committed_end)
        member.node.add_ready_observer(on_ready)
        member.node.add_high_watermark_listener(announced[node_id].append)

    async def ask_while_behind(member: Member) -> None:
        while member.committed_end < BACKLOG_BATCHES:
            started = member.committed_end
            await member.node.call(lambda now: None)  # answered between chunks
            if member.committed_end < BACKLOG_BATCHES and started > 0:
                answered_while_behind.append(member.node.node_id)
            await trio.lowlevel.checkpoint()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for member in members:
                await nursery.start(member.run)
                nursery.start_soon(ask_while_behind, member)
            leader = await leader_of(members)
            _, last = await leader.node.propose_and_wait([b"after the backlog"])
            await eventually(lambda: all(m.committed_end > last for m in members))
            nursery.cancel_scope.cancel()

    chunk_batches = PUBLISH_BYTES_PER_TURN // len(RECORD) + 1
    for member in members:
        node_id = member.node.node_id
        offsets = [r for b in member.committed for r in range(b.base_offset, b.next_offset)]
        assert offsets == list(range(len(offsets)))  # every batch once, in order
        steps = [b - a for a, b in itertools.pairwise(per_turn[node_id])]
        assert max(steps) <= chunk_batches
        assert announced[node_id] == sorted(announced[node_id])
        assert announced[node_id][-1] == member.committed_end
    assert answered_while_behind  # calls were served while a backlog remained
