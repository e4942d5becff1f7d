"""TCP transport for the Trio node: a listener, one outbound connection per peer, framing.

- Outbound: one connection per peer, reconnected with jittered exponential backoff. Our
  requests go out on it and the peer's responses come back on it.
- Inbound: connections from anyone (peers' outbound connections, brokers, tools). Their
  requests come in on it and our responses go back on the same connection.
- Every connection has a bounded send queue drained by its own writer task: `send_*` never
  blocks, and a full queue drops the message (Raft retries), so a slow or dead peer never
  stalls the others nor grows memory. A frame with nothing before it on a plain TCP
  connection is written at once by the sender (non-blocking; what the socket does not
  take goes to the writer), sparing the task switch on every Raft message.
- A peer's loss is reported (`on_peer_down(node_id, refused)`): False when the outbound
  connection to it closed, True when a (re)connect was refused (ECONNREFUSED: no process
  listens there, as after a crash). A paused or cut-off peer refuses nothing (connects
  hang until their timeout), so it is never reported: the Raft timeouts find it.
- A malformed frame (or a `ProtocolError` raised by the frame handler) closes that one
  connection with a logged reason (peer, reason); everyone else keeps being served.
- Limits (`use_limits`, set before `serve`; `raft.common.connection_limits` states the
  rule): the listener's connections are counted and capped (`max.connections`,
  `max.connections.per.ip`, and the process's share of RLIMIT_NOFILE, so idle inbound
  connections never starve the node's own files and outbound connections); a frame
  announcing more than `socket.request.max.bytes` closes its connection before its body
  is read; an inbound connection with no complete request for `connections.max.idle.ms`
  is closed; accept() out of descriptors is a rate-limited WARNING, never fatal.
- TLS (`use_tls`, set before `serve`): inbound connections complete a server-side
  handshake within `connections.authentication.timeout.ms` or are closed (a plaintext
  client, a missing or untrusted client certificate when `ssl.client.auth=required`);
  outbound ones check the peer's certificate. Each inbound connection task binds its
  `Session` (`raft.common.session`): `User:<subject DN>` for a client certificate.
- Authorization (`refused`, set by the node): every inbound request passes it first; a
  refused one is answered there and reaches neither the identity check nor the handler.
- Identity binding (`bind_identity`, on with mutual TLS): every node id an inbound
  request claims (`raft.peer_identity`) must be the one in the peer's certificate, and an
  outbound connection to node N must reach a certificate of node N; a mismatch closes
  the connection, logged once per certificate subject and claimed id. The core never
  sees such a request.
"""

from __future__ import annotations

import logging
import math
import os
import random
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from raft.common import tls
from raft.common.connection_limits import (
    ConnectionGate,
    ListenerLimits,
    idle_deadline,
    serve_with_limits,
)
from raft.common.framing import DEFAULT_MAX_FRAME_BYTES, FramedStream, FrameError, encode_frame
from raft.common.session import Session, bind_session
from raft.peer_identity import identity_violation
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


@dataclass(frozen=True, slots=True)
class _Rest:
    """The bytes of a frame the socket of connection `conn_id` took only in part: only
    that connection's writer may send them (a new connection starts between frames)."""

    conn_id: int
    data: bytes


Outgoing = Frame | _Rest
Connector = Callable[[Address], Awaitable[trio.abc.Stream]]
MAX_IDENTITY_LOGS = 1024  # distinct (subject, claimed id) refusals logged at WARNING


async def _tcp_connect(address: Address) -> trio.abc.Stream:
    return await trio.open_tcp_stream(*address)


def is_refused(exc: BaseException) -> bool:
    """ECONNREFUSED, also as trio reports it: one error per address tried, grouped as the
    cause of its own OSError."""
    if isinstance(exc, ConnectionRefusedError):
        return True
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        return all(is_refused(error) for error in cause.exceptions)
    return False


async def _unattached(conn: Connection, frame: Frame) -> None:
    raise ProtocolError("this transport serves no frames yet")


@dataclass(eq=False)
class Connection:
    """One live connection. `node_id` is the peer for outbound connections, else None."""

    conn_id: int
    peer: str
    node_id: int | None
    queue: trio.MemorySendChannel[Outgoing]
    dropped: int = 0
    closed: bool = False
    cancel_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    # inbound over TLS: the peer certificate's subject DN and the node id it binds
    peer_subject: str | None = None
    cert_node_id: int | None = None
    identity_refused: bool = False  # closed for a claimed node id (logged once, there)
    # a plain TCP connection's socket: frames may be written to it directly (`_offer`)
    socket: trio.socket.SocketType | None = None


class TcpTransport:
    """The `raft.transport_protocol.Transport` over TCP (see the module docstring)."""

    def __init__(self, *, node_id: int, peers: dict[int, Address],
                 handler: FrameHandler = _unattached, listen: Address | None = None,
                 listeners: list[trio.SocketListener] | None = None,
                 on_close: CloseHandler | None = None,
                 on_peer_down: PeerDownHandler | None = None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 queue_size: int = 256, connect_timeout_s: float = 1.0,
                 backoff_min_s: float = 0.05, backoff_max_s: float = 1.0,
                 connector: Connector = _tcp_connect, rng: random.Random | None = None
                 ) -> None:
        self.node_id = node_id
        self._peers = {n: a for n, a in peers.items() if n != node_id}
        self._handler = handler
        self._listen = listen
        self._listeners = listeners
        self._on_close = on_close
        self._on_peer_down = on_peer_down
        self._max_frame_bytes = max_frame_bytes
        self._queue_size = queue_size
        self._connect_timeout_s = connect_timeout_s
        self._backoff = (backoff_min_s, backoff_max_s)
        self._connector = connector
        self._rng = rng or random.Random()
        self._next_conn_id = 1
        self._inbound: dict[int, Connection] = {}
        # Per-peer queues outlive reconnects: the first request after a reconnect goes out.
        self._peer_queues: dict[int, tuple[trio.MemorySendChannel[Outgoing],
                                           trio.MemoryReceiveChannel[Outgoing]]] = {
            n: trio.open_memory_channel(queue_size) for n in self._peers}
        self._peer_connected: dict[int, bool] = {n: False for n in self._peers}
        self.connects: dict[int, int] = {n: 0 for n in self._peers}  # per peer, ever
        self.dropped = 0
        # Frames handed over and not yet written (or lost with their connection), per
        # queue: a peer's ("peer", node id), an inbound connection's ("conn", conn id).
        # A frame handed straight to a waiting writer is in no queue's buffer.
        self._unsent: dict[tuple[str, int], int] = {}
        self._peer_conns: dict[int, Connection] = {}  # the live outbound connections
        self.port: int | None = None
        self.tls: TransportTls | None = None
        self.identity_refusals = 0  # requests refused for a node id not in the certificate
        self._identity_logged: set[tuple[str | None, int]] = set()
        self._outbound_nursery: trio.Nursery | None = None  # set while serving
        # inbound requests pass this first (authorization): True when it refused and
        # answered the frame, which then goes no further (not even the identity check)
        self.refused: RequestFilter | None = None
        self.limits = ListenerLimits(max_request_bytes=max_frame_bytes)
        self.gate = ConnectionGate("CONTROLLER", self.limits)  # the listener's counts

    def attach(self, *, handler: FrameHandler, on_close: CloseHandler,
               on_peer_down: PeerDownHandler) -> None:
        """Whom frames, closed connections and lost peers go to (before `serve`)."""
        self._handler = handler
        self._on_close = on_close
        self._on_peer_down = on_peer_down

    def add_peer(self, node_id: int, address: Address) -> None:
        """A voter learnt while running (KIP-853: a VotersRecord named it): keep a
        connection to it as to the configured ones. A known peer moves to `address` (it
        restarted on a new endpoint): its next connect dials there."""
        if node_id == self.node_id:
            return
        if node_id in self._peers:
            self._peers[node_id] = address
            return
        self._peers[node_id] = address
        self._peer_queues[node_id] = trio.open_memory_channel(self._queue_size)
        self._peer_connected[node_id] = False
        self.connects[node_id] = 0
        if self._outbound_nursery is not None:
            self._outbound_nursery.start_soon(self._run_outbound, node_id)

    def use_limits(self, limits: ListenerLimits) -> None:
        """The listener's limits from now on (call before `serve`); its frame limit is
        `limits.max_request_bytes` on every connection."""
        self.limits = limits
        self._max_frame_bytes = limits.max_request_bytes
        self.gate = ConnectionGate(self.gate.name, limits)

    def use_tls(self, settings: TransportTls) -> None:
        """Serve and dial over TLS from now on (call before `serve`)."""
        self.tls = settings

    @property
    def client_ssl_context(self) -> ssl.SSLContext | None:
        """What this node's other clients of the controllers (the broker's controller
        client, DescribeQuorum forwarding) dial with."""
        return self.tls.client if self.tls is not None else None

    # -- sending (never blocks) ---------------------------------------------------------

    def send_to_peer(self, node_id: int, frame: Frame) -> bool:
        """Queue a frame on the outbound connection to `node_id`; False if dropped."""
        queue = self._peer_queues.get(node_id)
        if queue is None:
            log.debug("no address for node", extra={"dst": node_id})
            return False
        return self._offer(("peer", node_id), queue[0], frame, f"node {node_id}",
                           self._peer_conns.get(node_id))

    def send_on(self, conn_id: int, frame: Frame) -> bool:
        """Queue a frame on inbound connection `conn_id` (a reply); False if dropped."""
        conn = self._inbound.get(conn_id)
        if conn is None or conn.closed:
            return False
        if not self._offer(("conn", conn_id), conn.queue, frame, conn.peer, conn):
            conn.dropped += 1
            return False
        return True

    def _offer(self, key: tuple[str, int], queue: trio.MemorySendChannel[Outgoing],
               frame: Frame, who: str, conn: Connection | None) -> bool:
        item: Outgoing = frame
        if conn is not None and conn.socket is not None and not self._unsent.get(key):
            item = self._write_now(conn, frame)
            if isinstance(item, _Rest) and not item.data:
                return True
        try:
            queue.send_nowait(item)
            self._unsent[key] = self._unsent.get(key, 0) + 1
            return True
        except trio.WouldBlock:
            self.dropped += 1
            log.debug("send queue full, dropping", extra={"peer": who, "api": frame["api"]})
            return False
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False

    def _write_now(self, conn: Connection, frame: Frame) -> Outgoing:
        """Nothing waits before this frame on `conn`: write it in the caller's task
        rather than one task switch later (a leader's early messages are on the wire
        before its fsync). Returns what the writer still has to send: the rest of its
        bytes (none when the socket took them all), or the frame when it does not encode
        (the writer logs and drops it)."""
        assert conn.socket is not None
        try:
            data = encode_frame(frame, self._max_frame_bytes)
        except (FrameError, TypeError, ValueError):
            return frame
        try:
            written = os.write(conn.socket.fileno(), data)
        except OSError:  # a full socket buffer; any other error the writer meets too
            written = 0
        return _Rest(conn.conn_id, data[written:])

    def is_connected(self, node_id: int) -> bool:
        return self._peer_connected.get(node_id, False)

    def pending(self) -> int:
        """Frames handed over and not yet written to the OS, over every connection."""
        return sum(self._unsent.values())

    async def drain(self, timeout_s: float) -> bool:
        """Wait (bounded) until every queued frame has been handed to the OS."""
        with trio.move_on_after(timeout_s):
            while True:  # writers give no completion signal; poll the queue depths
                if not self.pending():
                    return True
                await trio.sleep(0.01)
        return False

    # -- serving ------------------------------------------------------------------------

    async def bind(self) -> list[trio.SocketListener]:
        """Open the listening socket (once); OSError if the address is unusable."""
        if self._listeners is None and self._listen is not None:
            host, port = self._listen
            self._listeners = await trio.open_tcp_listeners(port, host=host)
        return self._listeners or []

    async def serve(self, *, task_status: trio.TaskStatus[int | None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Listen (if configured) and keep one connection per peer; reports the bound port."""
        async with trio.open_nursery() as nursery:
            listeners = await self.bind()
            if listeners:
                self.port = listeners[0].socket.getsockname()[1]
                nursery.start_soon(self._accept_loop, listeners)
            for node_id in self._peers:
                nursery.start_soon(self._run_outbound, node_id)
            self._outbound_nursery = nursery
            task_status.started(self.port)

    async def _accept_loop(self, listeners: list[trio.SocketListener]) -> None:
        await serve_with_limits(self._serve_inbound_socket, listeners, self.gate)

    async def _serve_inbound_socket(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            host, peer = "", "?"
        server = self.tls.server if self.tls is not None else None
        if server is None or self.tls is None:
            bind_session(Session(client_host=host))
            await self.serve_stream(stream, peer)
            return
        try:
            secured, cert = await tls.accept(stream, server,
                                             timeout_s=self.limits.authentication_timeout_s)
        except tls.TlsHandshakeError as exc:
            log.info("refused connection", extra={"peer": peer, "reason": str(exc)})
            await trio.aclose_forcefully(stream)
            return
        session = tls.tls_session(cert, client_host=host,
                                  security_protocol=self.tls.security_protocol)
        bind_session(session)
        await self.serve_stream(secured, peer, peer_subject=session.tls_peer_subject,
                                cert_node_id=tls.node_id_of(cert))

    async def serve_stream(self, stream: trio.abc.Stream, peer: str, *,
                           peer_subject: str | None = None,
                           cert_node_id: int | None = None) -> None:
        """Serve one inbound connection until it closes (public for memory-stream tests)."""
        send, receive = trio.open_memory_channel[Outgoing](self._queue_size)
        conn = Connection(conn_id=self._new_conn_id(), peer=peer, node_id=None, queue=send,
                          peer_subject=peer_subject, cert_node_id=cert_node_id)
        self._inbound[conn.conn_id] = conn
        try:
            reason = await self._run_connection(conn, stream, receive)
            if reason:
                level = logging.DEBUG if conn.identity_refused else logging.WARNING
                log.log(level, "closed connection", extra={"peer": peer, "reason": reason})
            else:
                log.debug("connection closed by peer", extra={"peer": peer})
        finally:
            conn.closed = True
            conn.socket = None
            del self._inbound[conn.conn_id]
            self._unsent.pop(("conn", conn.conn_id), None)  # lost with the connection
            send.close()
            if self._on_close:
                self._on_close(conn)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)

    async def _run_outbound(self, node_id: int) -> None:
        send, receive = self._peer_queues[node_id]
        failures = 0
        while True:
            address = self._peers[node_id]  # read at each connect: a peer may move
            peer = f"{address[0]}:{address[1]}"
            try:
                with trio.fail_after(self._connect_timeout_s + self._handshake_s()):
                    stream = await self._connect(node_id, address)
            except (OSError, trio.TooSlowError) as exc:
                failures += 1
                level = logging.INFO if failures == 1 else logging.DEBUG
                log.log(level, "cannot connect", extra={"dst": node_id, "peer": peer,
                                                        "reason": str(exc) or "timeout"})
                if self._on_peer_down is not None and is_refused(exc):
                    self._on_peer_down(node_id, True)
                await trio.sleep(self._backoff_s(failures))
                continue
            log.info("connected", extra={"dst": node_id, "peer": peer})
            failures = 0
            conn = Connection(conn_id=self._new_conn_id(), peer=peer, node_id=node_id,
                              queue=send)
            self._peer_connected[node_id] = True
            self._peer_conns[node_id] = conn
            self.connects[node_id] += 1
            try:
                reason = await self._run_connection(conn, stream, receive)
            finally:
                self._peer_connected[node_id] = False
                del self._peer_conns[node_id]
                conn.closed = True
                conn.socket = None
                if self._on_close:
                    self._on_close(conn)
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(stream)
            log.info("disconnected", extra={"dst": node_id, "peer": peer,
                                            "reason": reason or "closed by peer"})
            if self._on_peer_down is not None:
                self._on_peer_down(node_id, False)
            # The reconnect follows within one short backoff: a crashed peer refuses it
            # (reported above), a live one takes it.
            await trio.sleep(self._backoff_s(1))

    def _handshake_s(self) -> float:
        return self.tls.handshake_timeout_s if self.tls and self.tls.client else 0.0

    async def _connect(self, node_id: int, address: Address) -> trio.abc.Stream:
        """The connector's stream, over TLS when configured: the peer's certificate must
        name the address dialled (unless the endpoint check is off) and, with identity
        binding, bind `node_id`."""
        stream = await self._connector(address)
        if self.tls is None or self.tls.client is None:
            return stream
        secured = await tls.wrap_client(stream, self.tls.client, address[0],
                                        timeout_s=self.tls.handshake_timeout_s)
        if self.tls.bind_identity:
            bound = tls.node_id_of(secured.getpeercert())
            if bound != node_id:
                await trio.aclose_forcefully(secured)
                raise OSError(f"the certificate at {address[0]}:{address[1]} binds "
                              f"{'no node id' if bound is None else f'node {bound}'}, "
                              f"not node {node_id}")
        return secured

    def _admits(self, conn: Connection, frame: Frame) -> bool:
        """Whether an inbound request goes on to the handler: not when the authorization
        refused (and answered) it; ProtocolError when it claims a node id its peer's
        certificate does not bind. Our outbound connections carry answers: admitted."""
        if conn.node_id is not None:
            return True
        if self.refused is not None and self.refused(conn, frame):
            return False
        if self.tls is not None and self.tls.bind_identity:
            self._check_identity(conn, frame)
        return True

    def _check_identity(self, conn: Connection, frame: Frame) -> None:
        """ProtocolError when an inbound request claims a node id its peer's certificate
        does not bind (see `raft.peer_identity`)."""
        assert self.tls is not None
        claimed = identity_violation(frame, conn.cert_node_id, self.tls.claims)
        if claimed is None:
            return
        self.identity_refusals += 1
        conn.identity_refused = True
        bound = "no node id" if conn.cert_node_id is None else f"node {conn.cert_node_id}"
        reason = (f"{frame.get('api')!r:.60} claims node {claimed} but the peer's "
                  f"certificate ({conn.peer_subject}) binds {bound}")
        key = (conn.peer_subject, claimed)
        if key not in self._identity_logged and len(self._identity_logged) < MAX_IDENTITY_LOGS:
            self._identity_logged.add(key)
            log.warning("refused a node identity", extra={
                "peer": conn.peer, "subject": conn.peer_subject, "claimed": claimed,
                "certificate_node": conn.cert_node_id, "api": frame.get("api")})
        raise ProtocolError(reason)

    def _backoff_s(self, failures: int) -> float:
        low, high = self._backoff
        ceiling = min(high, low * math.pow(2, min(failures - 1, 16)))
        return ceiling * (0.5 + self._rng.random() / 2)

    def _new_conn_id(self) -> int:
        self._next_conn_id += 1
        return self._next_conn_id - 1

    async def _run_connection(self, conn: Connection, stream: trio.abc.Stream,
                              queue: trio.MemoryReceiveChannel[Outgoing]) -> str | None:
        """Run reader and writer until either ends; the reason to log, None for a clean EOF."""
        framed = FramedStream(stream, self._max_frame_bytes)
        outcome: list[str | None] = [None]
        if isinstance(stream, trio.SocketStream):  # not TLS: frames may go out directly
            conn.socket = stream.socket

        # an inbound connection with no complete request for this long is closed
        idle_ms = self.limits.max_idle_ms if conn.node_id is None else None

        async def reader() -> None:
            try:
                while True:
                    if idle_ms is None:
                        frame = await framed.receive()
                    else:
                        with trio.move_on_at(idle_deadline(trio.current_time(),
                                                           self.limits)) as idle:
                            frame = await framed.receive()
                        if idle.cancelled_caught:
                            outcome[0] = f"no complete request for {idle_ms} ms"
                            break
                    if frame is None:
                        break
                    if self._admits(conn, frame):
                        await self._handler(conn, frame)
            except (FrameError, ProtocolError) as exc:
                outcome[0] = str(exc)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                outcome[0] = f"connection error: {exc}"
            nursery.cancel_scope.cancel()

        async def writer() -> None:
            try:
                await self._write_frames(stream, queue, conn)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                outcome[0] = f"connection error: {exc}"
            nursery.cancel_scope.cancel()

        with conn.cancel_scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader)
                nursery.start_soon(writer)
        return outcome[0]

    async def _write_frames(self, stream: trio.abc.Stream,
                            queue: trio.MemoryReceiveChannel[Outgoing], conn: Connection
                            ) -> None:
        key = ("conn", conn.conn_id) if conn.node_id is None else ("peer", conn.node_id)
        async for frame in queue:
            frames = [frame]
            while len(frames) < 64:  # coalesce what is already queued into one write
                try:
                    frames.append(queue.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            try:
                await self._write(stream, frames, conn)
            finally:  # written, or lost with the connection
                self._unsent[key] -= len(frames)

    async def _write(self, stream: trio.abc.Stream, frames: list[Outgoing],
                     conn: Connection) -> None:
        chunks = []
        for item in frames:
            if isinstance(item, _Rest):
                if item.conn_id == conn.conn_id:  # else lost with its connection
                    chunks.append(item.data)
                continue
            try:
                chunks.append(encode_frame(item, self._max_frame_bytes))
            except (FrameError, TypeError, ValueError) as exc:
                log.error("cannot encode frame, dropping it",
                          extra={"peer": conn.peer, "api": item.get("api"),
                                 "reason": str(exc)})
        if chunks:
            await stream.send_all(b"".join(chunks))

    def close(self, conn: Connection, reason: str) -> None:
        """Close one connection from outside its tasks (logged by its reader)."""
        log.warning("closing connection", extra={"peer": conn.peer, "reason": reason})
        conn.cancel_scope.cancel()
