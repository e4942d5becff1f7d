"""raft.transport over real loopback sockets: routing, bad frames, bounded queues."""

from __future__ import annotations

import logging
import os
import select
import struct
from collections.abc import Callable

import msgpack
import pytest
import trio

from raft.common.framing import FramedStream
from raft.transport import Connection, TcpTransport
from raft.transport_protocol import Frame, ProtocolError


def _frame(api: str, correlation_id: int = 1, body: object = None) -> Frame:
    return {"api": api, "version": 0, "correlation_id": correlation_id, "cluster_id": "c",
            "body": body or {}}


class Recorder:
    def __init__(self) -> None:
        self.frames: list[tuple[Connection, Frame]] = []
        self.arrived = trio.Event()

    async def __call__(self, conn: Connection, frame: Frame) -> None:
        if frame["api"] == "Bad":
            raise ProtocolError("api Bad is not served here")
        self.frames.append((conn, frame))
        self.arrived.set()

    async def wait(self, count: int) -> None:
        while len(self.frames) < count:
            self.arrived = trio.Event()
            await self.arrived.wait()


async def _eventually(predicate: Callable[[], bool]) -> None:
    """Poll a state that offers no event (the caller's fail_after bounds it)."""
    while True:
        if predicate():
            return
        await trio.sleep(0.01)


async def _listener() -> tuple[list[trio.SocketListener], int]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    return listeners, listeners[0].socket.getsockname()[1]


async def test_request_and_reply_are_routed_when_two_transports_connect() -> None:
    """A request goes out on the outbound connection to the peer; the reply goes back on
    the inbound connection it came from and arrives tagged with the peer's node id."""
    listeners_a, port_a = await _listener()
    listeners_b, port_b = await _listener()
    peers = {1: ("127.0.0.1", port_a), 2: ("127.0.0.1", port_b)}
    got_a, got_b = Recorder(), Recorder()
    a = TcpTransport(node_id=1, peers=peers, handler=got_a, listeners=listeners_a)
    b = TcpTransport(node_id=2, peers=peers, handler=got_b, listeners=listeners_b)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(a.serve)
            await nursery.start(b.serve)
            assert a.send_to_peer(2, _frame("Ping", 7))
            await got_b.wait(1)
            conn, frame = got_b.frames[0]
            assert conn.node_id is None
            assert frame["api"] == "Ping"
            assert b.send_on(conn.conn_id, _frame("Pong", 7))
            await got_a.wait(1)
            reply_conn, reply = got_a.frames[0]
            assert reply_conn.node_id == 2
            assert reply["api"] == "Pong"
            assert reply["correlation_id"] == 7
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(("payload", "reason"), [
    (b"\x00\x00\x00\x05hello", "undecodable"),
    (struct.pack(">I", 1 << 30) + b"x", "exceeds"),
    (struct.pack(">I", 100) + b"\x85", "middle of a frame"),
    (struct.pack(">I", 3) + msgpack.packb([1, 2]), "not a map"),
])
async def test_connection_closed_with_logged_reason_when_frame_is_malformed(
        payload: bytes, reason: str, caplog: pytest.LogCaptureFixture) -> None:
    """DESIGN wire format: a malformed, oversized or truncated frame closes that
    connection only, with a logged (peer, reason); a well-behaved client is still served."""
    caplog.set_level(logging.WARNING, logger="raft.transport")
    listeners, port = await _listener()
    recorder = Recorder()
    transport = TcpTransport(node_id=1, peers={}, handler=recorder, listeners=listeners,
                          max_frame_bytes=1 << 20)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(transport.serve)
            good = FramedStream(await trio.open_tcp_stream("127.0.0.1", port))
            stranger = await trio.open_tcp_stream("127.0.0.1", port)
            await stranger.send_all(payload)
            if reason == "middle of a frame":
                await stranger.send_eof()
            assert await stranger.receive_some(100) == b""  # closed by the transport
            await good.send(_frame("Ping"))
            await recorder.wait(1)
            assert recorder.frames[0][1]["api"] == "Ping"
            nursery.cancel_scope.cancel()
    closes = [r for r in caplog.records if r.getMessage() == "closed connection"]
    assert len(closes) == 1
    assert reason in closes[0].reason
    assert closes[0].peer.startswith("127.0.0.1:")


async def test_connection_closed_when_handler_raises_protocol_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """A well-framed but unacceptable message closes its connection with the reason."""
    caplog.set_level(logging.WARNING, logger="raft.transport")
    listeners, port = await _listener()
    transport = TcpTransport(node_id=1, peers={}, handler=Recorder(), listeners=listeners)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(transport.serve)
            client = FramedStream(await trio.open_tcp_stream("127.0.0.1", port))
            await client.send(_frame("Bad"))
            assert await client.receive() is None
            nursery.cancel_scope.cancel()
    assert any("api Bad is not served" in getattr(r, "reason", "") for r in caplog.records)


async def test_sends_are_dropped_not_queued_without_bound_when_peer_is_down() -> None:
    """Bounded per-peer queues: a dead peer never makes send block or memory grow."""
    dead_port = (await _listener())[1]  # listener object dropped: nothing accepts there
    transport = TcpTransport(node_id=1, peers={2: ("127.0.0.1", dead_port)}, handler=Recorder(),
                          queue_size=8)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(transport.serve)
            accepted = [transport.send_to_peer(2, _frame("Ping", i)) for i in range(100)]
            assert accepted.count(True) == 8
            assert transport.dropped == 92
            assert transport.pending() == 8
            assert not transport.is_connected(2)
            nursery.cancel_scope.cancel()


async def test_outbound_connection_reconnects_when_peer_restarts() -> None:
    """One outbound connection per peer, re-established with backoff after it breaks."""
    listeners, port = await _listener()
    got = Recorder()
    server = TcpTransport(node_id=2, peers={}, handler=got, listeners=listeners)
    client = TcpTransport(node_id=1, peers={2: ("127.0.0.1", port)}, handler=Recorder(),
                       backoff_min_s=0.01, backoff_max_s=0.05)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(client.serve)
            async with trio.open_nursery() as server_nursery:
                await server_nursery.start(server.serve)
                client.send_to_peer(2, _frame("Ping", 1))
                await got.wait(1)
                first_conn = got.frames[0][0]
                first_conn.cancel_scope.cancel()  # the server drops the connection
                await _eventually(lambda: client.connects[2] == 2 and client.is_connected(2))
                client.send_to_peer(2, _frame("Ping", 2))
                await got.wait(2)
                assert got.frames[1][0].conn_id != first_conn.conn_id
                server_nursery.cancel_scope.cancel()
            nursery.cancel_scope.cancel()


async def test_outbound_connection_dials_the_new_address_when_a_peer_moves() -> None:
    """A voter restarted on a new port (KIP-853: its VotersRecord entry updated): the
    next connect goes to the address `add_peer` gave, not the configured one."""
    old_listeners, old_port = await _listener()
    for listener in old_listeners:
        await listener.aclose()  # nobody listens at the old address any more
    listeners, port = await _listener()
    got = Recorder()
    server = TcpTransport(node_id=2, peers={}, handler=got, listeners=listeners)
    client = TcpTransport(node_id=1, peers={2: ("127.0.0.1", old_port)}, handler=Recorder(),
                          backoff_min_s=0.01, backoff_max_s=0.05)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            await nursery.start(client.serve)
            client.add_peer(2, ("127.0.0.1", port))
            client.send_to_peer(2, _frame("Ping", 1))
            await got.wait(1)
            assert client.is_connected(2)
            nursery.cancel_scope.cancel()


async def _inbound_pair(nursery: trio.Nursery) -> tuple[TcpTransport, int, trio.SocketStream]:
    """Transport 1 serving, a bare client connected to it that sent one request:
    (the transport, the inbound connection's id, the client's stream)."""
    listeners, port = await _listener()
    got = Recorder()
    a = TcpTransport(node_id=1, peers={}, handler=got, listeners=listeners)
    await nursery.start(a.serve)
    client = await trio.open_tcp_stream("127.0.0.1", port)
    await FramedStream(client).send(_frame("Hello", 1))
    await got.wait(1)
    return a, got.frames[0][0].conn_id, client


def _readable_now(stream: trio.SocketStream) -> bytes:
    """What the socket holds this instant, read without a schedule point."""
    ready, _, _ = select.select([stream.socket.fileno()], [], [], 0)
    return os.read(stream.socket.fileno(), 1 << 16) if ready else b""


async def test_reply_is_on_the_wire_before_the_sender_yields_when_the_connection_is_idle(
        ) -> None:
    """No task switch between a reply and the socket (a leader's early Fetch answers go
    out before its fsync blocks the loop)."""
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            a, conn_id, client = await _inbound_pair(nursery)
            assert a.send_on(conn_id, _frame("Pong", 3))
            data = _readable_now(client)
            assert a.pending() == 0
            (length,) = struct.unpack(">I", data[:4])
            assert msgpack.unpackb(data[4:4 + length])["correlation_id"] == 3
            nursery.cancel_scope.cancel()


async def test_request_is_on_the_wire_before_the_sender_yields_when_the_connection_is_idle(
        ) -> None:
    """The same on an outbound connection (a follower's next Fetch right after its
    fsync)."""
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            peer_listeners, port = await _listener()
            a = TcpTransport(node_id=1, peers={2: ("127.0.0.1", port)}, handler=Recorder(),
                          listeners=(await _listener())[0])
            await nursery.start(a.serve)
            peer = await peer_listeners[0].accept()
            await _eventually(lambda: a.is_connected(2))
            assert a.send_to_peer(2, _frame("Ping", 4))
            data = _readable_now(peer)
            assert a.pending() == 0
            (length,) = struct.unpack(">I", data[:4])
            assert msgpack.unpackb(data[4:4 + length])["correlation_id"] == 4
            nursery.cancel_scope.cancel()


async def test_replies_keep_their_order_when_the_socket_takes_one_only_in_part() -> None:
    """A reply larger than the socket's buffer is written in part at once, its rest by
    the writer; replies sent meanwhile queue behind it, and all arrive whole, in order."""
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            a, conn_id, client = await _inbound_pair(nursery)
            big = {"blob": b"x" * (8 << 20)}
            assert a.send_on(conn_id, _frame("Big", 1, big))
            assert a.pending() == 1  # the rest waits for the writer
            for correlation_id in range(2, 6):
                assert a.send_on(conn_id, _frame("Small", correlation_id))
            framed = FramedStream(client)
            got = [await framed.receive() for _ in range(5)]
            assert [f["correlation_id"] for f in got if f] == [1, 2, 3, 4, 5]
            assert got[0] is not None
            assert got[0]["body"] == big
            await _eventually(lambda: a.pending() == 0)
            nursery.cancel_scope.cancel()
