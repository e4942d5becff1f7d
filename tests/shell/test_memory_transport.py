"""The in-memory transport (tests/support/memory_transport.py) keeps the rules of the TCP one
that the loop relies on: frames in order, a frame that does not encode dropped without
harm, a full link dropping, a connect to a stopped node refused and reported, a cut
silently losing frames."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from tests.support.memory_transport import LINK_QUEUE_SIZE, MemoryNetwork, MemoryTransport
from tests.support.polling import eventually


class Endpoint:
    """A transport and what reached it."""

    def __init__(self, transport: MemoryTransport) -> None:
        self.transport = transport
        self.frames: list[Any] = []
        self.peers_down: list[tuple[int, bool]] = []
        transport.attach(handler=self._handle, on_close=lambda conn: None,
                         on_peer_down=lambda node_id, refused: self.peers_down.append(
                             (node_id, refused)))

    async def _handle(self, conn: Any, frame: dict[str, Any]) -> None:
        self.frames.append(frame["body"])


@asynccontextmanager
async def two_nodes(network: MemoryNetwork,
                    serving: tuple[int, ...] = (1, 2)) -> AsyncIterator[
                        tuple[Endpoint, Endpoint]]:
    """Nodes 1 and 2 on `network`, those in `serving` served, for at most 5 s."""
    one, two = Endpoint(network.endpoint(1)), Endpoint(network.endpoint(2))
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            for node_id, endpoint in ((1, one), (2, two)):
                if node_id in serving:
                    await nursery.start(endpoint.transport.serve)
            yield one, two
            nursery.cancel_scope.cancel()


def frame(body: Any) -> dict[str, Any]:
    return {"api": "Note", "version": 0, "correlation_id": 1, "cluster_id": "c",
            "body": body}


async def test_frames_arrive_in_order_and_one_that_does_not_encode_is_dropped(
        autojump_clock: trio.testing.MockClock) -> None:
    async with two_nodes(MemoryNetwork()) as (one, two):
        assert not one.transport.send_to_peer(2, frame({"bad": object()}))
        for i in range(5):
            assert one.transport.send_to_peer(2, frame(i))
        await eventually(lambda: len(two.frames) == 5)
        assert two.frames == [0, 1, 2, 3, 4]


async def test_a_full_link_drops_and_a_cut_loses_frames_silently(
        autojump_clock: trio.testing.MockClock) -> None:
    network = MemoryNetwork()
    async with two_nodes(network) as (one, two):
        sent = [one.transport.send_to_peer(2, frame(i))  # no checkpoint: none read
                for i in range(LINK_QUEUE_SIZE + 3)]
        assert sent == [True] * LINK_QUEUE_SIZE + [False] * 3
        await eventually(lambda: len(two.frames) == LINK_QUEUE_SIZE)
        network.cut(1, 2)
        assert one.transport.send_to_peer(2, frame("lost"))
        network.heal(1, 2)
        assert one.transport.send_to_peer(2, frame("after"))
        await eventually(lambda: two.frames[-1] == "after")
        assert "lost" not in two.frames
        assert one.peers_down == []


async def test_a_connect_to_a_stopped_node_is_refused_and_reported(
        autojump_clock: trio.testing.MockClock) -> None:
    async with two_nodes(MemoryNetwork(), serving=(1,)) as (one, two):
        async with trio.open_nursery() as two_running:
            await two_running.start(two.transport.serve)
            assert one.transport.send_to_peer(2, frame("hello"))
            await eventually(lambda: two.frames == ["hello"])
            two_running.cancel_scope.cancel()
        assert one.peers_down == [(2, False)]  # its link closed
        assert not one.transport.send_to_peer(2, frame("to nobody"))
        assert one.peers_down == [(2, False), (2, True)]  # the reconnect refused
