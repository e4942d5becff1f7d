"""In-memory links between nodes of one trio run: the `Transport`
(`raft.transport_protocol`) of tests that run several `RaftNode`s with no sockets, so
under trio's `MockClock` too.

A `MemoryNetwork` holds one `MemoryTransport` per node id and routes by node id (a
peer's address is not used). A link is a pair of connections, the sender's outbound one
and the receiver's inbound one; each direction is a bounded channel read by a task of
the receiving endpoint, so frames arrive in order and a full channel drops, as the TCP
transport's send queues do. Frames are encoded as on the wire (`raft.common.framing`)
and decoded on arrival: nothing is shared between nodes, and what TCP cannot carry fails
here too. Each inbound link binds a `Session` of the sending endpoint's principal before
`refused` sees its requests.

A send to a node that is not serving is refused and reported to the sender's
`on_peer_down(node, True)`, as a connect to a dead process is; an endpoint that stops
closes its links, and the far ends hear `on_close` (and `on_peer_down(node, False)` for
their outbound link). `cut(a, b)` silently drops what goes between two nodes (a
partition that refuses nothing); `heal(a, b)` undoes it. `MemoryNetwork(record=True)`
keeps `(src, dst, api)` of every frame delivered, for a test to see what crossed.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field

import trio

from raft.common.framing import FrameError, decode_payload, encode_frame
from raft.common.session import ANONYMOUS, KafkaPrincipal, Session, bind_session
from raft.transport_protocol import (
    Address,
    CloseHandler,
    Frame,
    FrameHandler,
    PeerDownHandler,
    ProtocolError,
    RequestFilter,
    TransportTls,
)

log = logging.getLogger(__name__)

LINK_QUEUE_SIZE = 256
DRAIN_POLL_S = 0.01
LENGTH_BYTES = 4  # `encode_frame`'s length prefix


@dataclass(eq=False)
class MemoryConnection:
    """One end of a link; `node_id`: the peer of an outbound connection, else None."""

    conn_id: int
    peer: str
    node_id: int | None
    owner: MemoryTransport
    far: MemoryConnection | None = None
    # what the far end sends here: written by the far end, read by this end's task
    incoming: tuple[trio.MemorySendChannel[bytes], trio.MemoryReceiveChannel[bytes]] = \
        field(default_factory=lambda: trio.open_memory_channel[bytes](LINK_QUEUE_SIZE))
    closed: bool = False


class MemoryNetwork:
    def __init__(self, *, record: bool = False) -> None:
        self.endpoints: dict[int, MemoryTransport] = {}
        self.delivered: list[tuple[int, int, str]] | None = [] if record else None
        self._cuts: set[frozenset[int]] = set()
        self._next_conn_id = 1

    def endpoint(self, node_id: int, principal: KafkaPrincipal = ANONYMOUS
                 ) -> MemoryTransport:
        """The transport of node `node_id` (a tool too); its requests arrive as
        `principal`'s."""
        transport = MemoryTransport(self, node_id, principal)
        self.endpoints[node_id] = transport
        return transport

    def cut(self, a: int, b: int) -> None:
        self._cuts.add(frozenset((a, b)))

    def heal(self, a: int, b: int) -> None:
        self._cuts.discard(frozenset((a, b)))

    def is_cut(self, a: int, b: int) -> bool:
        return frozenset((a, b)) in self._cuts

    def new_conn_id(self) -> int:
        self._next_conn_id += 1
        return self._next_conn_id - 1


async def _unattached(conn: MemoryConnection, frame: Frame) -> None:
    raise ProtocolError("this transport serves no frames yet")


class MemoryTransport:
    """One node's endpoint of a `MemoryNetwork` (see the module docstring)."""

    def __init__(self, network: MemoryNetwork, node_id: int,
                 principal: KafkaPrincipal) -> None:
        self.node_id = node_id
        self.principal = principal
        self.port: int | None = None
        self.tls: TransportTls | None = None
        self.refused: RequestFilter | None = None
        self._network = network
        self._handler: FrameHandler = _unattached
        self._on_close: CloseHandler = lambda conn: None
        self._on_peer_down: PeerDownHandler = lambda node_id, refused: None
        self._nursery: trio.Nursery | None = None  # set while serving
        self._outbound: dict[int, MemoryConnection] = {}
        self._inbound: dict[int, MemoryConnection] = {}

    def attach(self, *, handler: FrameHandler, on_close: CloseHandler,
               on_peer_down: PeerDownHandler) -> None:
        self._handler = handler
        self._on_close = on_close
        self._on_peer_down = on_peer_down

    @property
    def client_ssl_context(self) -> ssl.SSLContext | None:
        return None

    def add_peer(self, node_id: int, address: Address) -> None:
        """Nothing to do: the network routes by node id."""

    def send_to_peer(self, node_id: int, frame: Frame) -> bool:
        conn = self._outbound.get(node_id) or self._connect(node_id)
        return conn is not None and self._deliver(conn, frame)

    def send_on(self, conn_id: int, frame: Frame) -> bool:
        conn = self._inbound.get(conn_id)
        return conn is not None and self._deliver(conn, frame)

    def is_connected(self, node_id: int) -> bool:
        return node_id in self._outbound

    def pending(self) -> int:
        """Frames sent and not yet taken by the far ends' tasks."""
        links = [*self._outbound.values(), *self._inbound.values()]
        return sum(conn.far.incoming[0].statistics().current_buffer_used
                   for conn in links if conn.far is not None)

    async def drain(self, timeout_s: float) -> bool:
        with trio.move_on_after(timeout_s):
            while True:  # no completion signal, as over TCP: poll the queue depths
                if not self.pending():
                    return True
                await trio.sleep(DRAIN_POLL_S)
        return False

    async def bind(self) -> object:
        return None

    async def serve(self, *, task_status: trio.TaskStatus[int | None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started(None)
            try:
                await trio.sleep_forever()
            finally:  # before the nursery closes to new links' tasks
                self._nursery = None
                for conn in [*self._outbound.values(), *self._inbound.values()]:
                    self._close(conn)

    # -- links --------------------------------------------------------------------------

    def _connect(self, node_id: int) -> MemoryConnection | None:
        far_end = self._network.endpoints.get(node_id)
        if self._nursery is None:
            return None
        if far_end is None or far_end._nursery is None:
            self._on_peer_down(node_id, True)
            return None
        network = self._network
        out = MemoryConnection(network.new_conn_id(), f"memory:{node_id}", node_id, self)
        into = MemoryConnection(network.new_conn_id(), f"memory:{self.node_id}", None, far_end)
        out.far, into.far = into, out
        self._outbound[node_id] = out
        far_end._inbound[into.conn_id] = into
        self._nursery.start_soon(self._read, out)
        far_end._nursery.start_soon(far_end._read_inbound, into, self.principal)
        return out

    def _deliver(self, conn: MemoryConnection, frame: Frame) -> bool:
        far = conn.far
        if conn.closed or far is None:
            return False
        if self._network.is_cut(self.node_id, far.owner.node_id):
            return True  # lost on the way, as on a cut cable
        try:
            far.incoming[0].send_nowait(encode_frame(frame))
        except (FrameError, TypeError, ValueError) as exc:  # as the TCP writer: dropped
            log.error("cannot encode frame, dropping it", extra={
                "peer": conn.peer, "api": frame.get("api"), "reason": str(exc)})
            return False
        except trio.WouldBlock:
            log.debug("link queue full, dropping", extra={"peer": conn.peer,
                                                          "api": frame["api"]})
            return False
        return True

    async def _read_inbound(self, conn: MemoryConnection, principal: KafkaPrincipal) -> None:
        bind_session(Session(principal=principal, client_host="memory"))
        await self._read(conn)

    async def _read(self, conn: MemoryConnection) -> None:
        """This end's task: hand each arriving frame to the handler until the link
        closes or the handler refuses the frame (ProtocolError)."""
        try:
            async for data in conn.incoming[1]:
                far = conn.far
                if far is None or self._network.is_cut(self.node_id, far.owner.node_id):
                    continue
                frame = decode_payload(data[LENGTH_BYTES:])
                if self._network.delivered is not None:
                    self._network.delivered.append((far.owner.node_id, self.node_id,
                                                    frame["api"]))
                if conn.node_id is None and self.refused is not None and \
                        self.refused(conn, frame):
                    continue
                await self._handler(conn, frame)
        except ProtocolError as exc:
            log.warning("closing connection", extra={"peer": conn.peer, "reason": str(exc)})
            self._close(conn)

    def _close(self, conn: MemoryConnection) -> None:
        """Close both ends of `conn`'s link; each end's owner hears of its own."""
        for end in (conn, conn.far):
            if end is None or end.closed:
                continue
            end.closed = True
            end.incoming[0].close()
            owner = end.owner
            if end.node_id is not None:
                owner._outbound.pop(end.node_id, None)
            else:
                owner._inbound.pop(end.conn_id, None)
            owner._on_close(end)
            if end.node_id is not None and end is not conn:
                owner._on_peer_down(end.node_id, False)
