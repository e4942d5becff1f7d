"""raft.node's write path in process (real RaftCore, MemoryLog, loopback sockets):
proposals made together share a batch, callbacks get each proposal's own offsets, a
voter's flush runs in the core task only after its early messages left, an observer's
in a worker thread."""

from __future__ import annotations

import threading
from typing import Any

import trio

from raft.node import NotLeaderError
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


async def test_observer_flushes_in_a_worker_thread() -> None:
    listeners = [await trio.open_tcp_listeners(0, host="127.0.0.1") for _ in range(4)]
    voters = {i + 1: ("127.0.0.1", ls[0].socket.getsockname()[1])
              for i, ls in enumerate(listeners[:3])}
    members = [Member(i + 1, voters, listeners[i], FAST) for i in range(4)]
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
