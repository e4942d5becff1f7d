"""What `raft.node.RaftNode` and the RPC host need of a transport: the `Transport`
interface, the frames it carries and the links it hands them on.

Two transports implement it: `raft.transport.TcpTransport` (sockets, TLS, connection
limits: production) and `tests.support.memory_transport.MemoryTransport` (nodes of one trio run,
for tests without sockets or a real clock). The rules both keep:

- `send_to_peer` / `send_on` never block: a full queue drops the frame (Raft retries);
- frames on one link arrive in the order sent;
- every inbound request passes `refused` (authorization) first: a refused one is
  answered there and reaches no handler;
- a peer's loss is reported to `on_peer_down(node_id, refused)` and a closed link to
  `on_close(link)`.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from raft.common import tls

Address = tuple[str, int]
Frame = dict[str, Any]


class ProtocolError(Exception):
    """The peer sent a well-framed but unacceptable message: close its connection."""


class Link(Protocol):
    """One connection as the frame handler sees it: `node_id` is the peer of our
    outbound connection (its frames are answers), None for an inbound one (requests)."""

    @property
    def conn_id(self) -> int: ...

    @property
    def peer(self) -> str: ...

    @property
    def node_id(self) -> int | None: ...


# The handler may block (backpressure on that one link); it raises ProtocolError to have
# the link closed.
FrameHandler = Callable[[Any, Frame], Awaitable[None]]
CloseHandler = Callable[[Any], None]
PeerDownHandler = Callable[[int, bool], None]  # (node id, refused)
# True when it refused (and answered) an inbound request, which then goes no further
RequestFilter = Callable[[Any, Frame], bool]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportTls:
    """The transport's TLS (None: plaintext). `server` serves the listener, `client`
    dials the peers; `bind_identity` checks claimed node ids against certificates;
    `claims` adds api -> top-level body field naming a node id (the layers above, e.g.
    a broker registration's `broker_id`)."""

    server: ssl.SSLContext | None
    client: ssl.SSLContext | None
    bind_identity: bool = False
    security_protocol: str = "SSL"
    handshake_timeout_s: float = tls.DEFAULT_HANDSHAKE_TIMEOUT_S
    claims: Mapping[str, str] = field(default_factory=dict)


class Transport(Protocol):
    port: int | None  # the bound listener's, once serving (None: none)
    tls: TransportTls | None
    refused: RequestFilter | None

    def attach(self, *, handler: FrameHandler, on_close: CloseHandler,
               on_peer_down: PeerDownHandler) -> None:
        """Whom frames, closed links and lost peers go to (before `serve`)."""

    @property
    def client_ssl_context(self) -> ssl.SSLContext | None: ...

    def add_peer(self, node_id: int, address: Address) -> None: ...

    def send_to_peer(self, node_id: int, frame: Frame) -> bool: ...

    def send_on(self, conn_id: int, frame: Frame) -> bool: ...

    def is_connected(self, node_id: int) -> bool: ...

    def pending(self) -> int:
        """Frames handed over and not yet delivered, over every link."""

    async def drain(self, timeout_s: float) -> bool: ...

    async def bind(self) -> object:
        """Claim the listening address; OSError when it is unusable."""

    async def serve(self, *, task_status: trio.TaskStatus[int | None] = ...) -> None: ...
