"""Limits of every listener (the controller listener, a broker's Kafka and STATUS
listeners), before and after login, with Kafka's keys and defaults.

The rule:
- Frames: before a connection has authenticated (a SASL listener's connection before its
  login) a frame may announce at most `sasl.server.max.receive.size` bytes, after it
  `socket.request.max.bytes` (`frame_limit`); a frame announcing more closes the
  connection at once, before any of its body is read. A frame's buffer grows with the
  bytes that arrive, never to the size announced.
- Idle: a connection with no complete request for `connections.max.idle.ms` is closed
  (`idle_deadline`).
- Handshake: a connection that has not completed its TLS handshake and, on a SASL
  listener, its SASL login within `connections.authentication.timeout.ms` is closed.
- Count: a listener holds at most `max.connections` connections (None: Kafka's
  unlimited) and at most `max.connections.per.ip` from one address; over either, the new
  connection is closed at once (the newest, as Kafka does) and counted in `refused`.
- Descriptors: whatever those say, the inbound connections of every listener of the
  process together stay below `inbound_budget(soft RLIMIT_NOFILE)`: the soft limit less a
  reserve (a quarter of it, at least `RESERVED_DESCRIPTORS_MIN`) for the node's own log
  segments, snapshots and checkpoints, its connections to peers and controllers and the
  clients it runs, so idle inbound connections can never starve those. The limit is read
  at every accept (a `prlimit` on a running node applies from its next accept).
- accept() failing for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)
  is a WARNING at most once per `ACCEPT_WARNING_INTERVAL_S` per listener, and the
  listener accepts again shortly; it is never a log-directory failure.

The decisions are pure functions (`refusal`, `inbound_budget`, `frame_limit`,
`idle_deadline`, `RateLimit`); `serve_with_limits` is the accept loop that applies them.
"""

from __future__ import annotations

import errno
import logging
import math
import resource
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trio

log = logging.getLogger(__name__)

DEFAULT_SASL_MAX_RECEIVE_BYTES = 524288  # Kafka's sasl.server.max.receive.size
DEFAULT_MAX_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms
DEFAULT_AUTHENTICATION_TIMEOUT_MS = 10_000  # raft.common.tls's handshake deadline
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
RESERVED_DESCRIPTORS_MIN = 256
ACCEPT_WARNING_INTERVAL_S = 10.0
ACCEPT_RETRY_S = 0.1  # after accept() found no descriptor, as trio's serve_listeners
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
DESCRIPTOR_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerLimits:
    """One listener's limits (see the module docstring); None: unlimited."""

    max_connections: int | None = None
    max_connections_per_ip: int | None = None
    max_idle_ms: int = DEFAULT_MAX_IDLE_MS
    authentication_timeout_ms: int = DEFAULT_AUTHENTICATION_TIMEOUT_MS
    sasl_max_receive_bytes: int = DEFAULT_SASL_MAX_RECEIVE_BYTES
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES

    @property
    def authentication_timeout_s(self) -> float:
        return self.authentication_timeout_ms / 1000


def inbound_budget(soft_nofile: int) -> int:
    """How many inbound connections the whole process may hold under a soft
    RLIMIT_NOFILE of `soft_nofile` (RLIM_INFINITY or less than 0: unlimited)."""
    if soft_nofile < 0 or soft_nofile == resource.RLIM_INFINITY:
        return sys.maxsize
    reserve = max(RESERVED_DESCRIPTORS_MIN, soft_nofile // 4)
    return max(0, soft_nofile - reserve)


def refusal(*, open_here: int, open_from_host: int, open_in_process: int,
            soft_nofile: int, limits: ListenerLimits) -> str | None:
    """Why a new connection must be closed at once (None: it is served), given what is
    open before it: on this listener, from its address here, in the whole process."""
    if limits.max_connections is not None and open_here >= limits.max_connections:
        return f"max.connections ({limits.max_connections}) reached"
    if limits.max_connections_per_ip is not None and \
            open_from_host >= limits.max_connections_per_ip:
        return f"max.connections.per.ip ({limits.max_connections_per_ip}) reached"
    budget = inbound_budget(soft_nofile)
    if open_in_process >= budget:
        return (f"{budget} inbound connections open, the most the descriptor limit "
                f"({soft_nofile}) leaves beside the node's own files and connections")
    return None


def frame_limit(limits: ListenerLimits, *, authenticated: bool) -> int:
    """The largest frame a connection may announce: `sasl.server.max.receive.size`
    before its login, `socket.request.max.bytes` after."""
    if authenticated:
        return limits.max_request_bytes
    return min(limits.sasl_max_receive_bytes, limits.max_request_bytes)


def idle_deadline(last_request_s: float, limits: ListenerLimits) -> float:
    """When a connection whose last complete request (or its accept) was at
    `last_request_s` is closed if no complete request came since."""
    return last_request_s + limits.max_idle_ms / 1000


@dataclass(slots=True)
class RateLimit:
    """At most one event per `interval_s`: `due(now)` says whether this one is, and
    counts the ones it held back (`suppressed`, since the last one due)."""

    interval_s: float
    last_s: float = -math.inf
    suppressed: int = 0

    def due(self, now_s: float) -> bool:
        if now_s - self.last_s < self.interval_s:
            self.suppressed += 1
            return False
        self.last_s = now_s
        return True

    def take_suppressed(self) -> int:
        held, self.suppressed = self.suppressed, 0
        return held


def out_of_descriptors(exc: OSError) -> bool:
    """The process (EMFILE) or the system (ENFILE) has no file descriptor left: a
    passing shortage, not a failed disk."""
    return exc.errno in DESCRIPTOR_ERRNOS


def soft_nofile() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


@dataclass(eq=False)
class InboundCount:
    """The inbound connections open in this process, over every listener (the
    descriptor limit is the process's)."""

    open: int = 0


PROCESS_INBOUND = InboundCount()


@dataclass(eq=False)
class ConnectionGate:
    """One listener's connection counts: `admit` a new connection (a refusal reason, or
    None and it is counted) and `release` it once closed."""

    name: str
    limits: ListenerLimits
    process: InboundCount = field(default_factory=lambda: PROCESS_INBOUND)
    read_nofile: Callable[[], int] = soft_nofile
    open: int = 0
    refused: int = 0
    by_host: dict[str, int] = field(default_factory=dict)
    refusal_log: RateLimit = field(
        default_factory=lambda: RateLimit(ACCEPT_WARNING_INTERVAL_S))
    accept_error_log: RateLimit = field(
        default_factory=lambda: RateLimit(ACCEPT_WARNING_INTERVAL_S))

    def admit(self, host: str) -> str | None:
        reason = refusal(open_here=self.open, open_from_host=self.by_host.get(host, 0),
                         open_in_process=self.process.open, soft_nofile=self.read_nofile(),
                         limits=self.limits)
        if reason is not None:
            self.refused += 1
            return reason
        self.open += 1
        self.process.open += 1
        self.by_host[host] = self.by_host.get(host, 0) + 1
        return None

    def release(self, host: str) -> None:
        self.open -= 1
        self.process.open -= 1
        left = self.by_host[host] - 1
        if left:
            self.by_host[host] = left
        else:
            del self.by_host[host]


# The serving below imports Trio where it runs: the settings above are read by every
# configuration (tools/config.py), also the command line's, which needs no Trio.
ConnectionHandler = Callable[["trio.SocketStream"], Awaitable[None]]


def _host_of(stream: trio.SocketStream) -> str:
    try:
        return str(stream.socket.getpeername()[0])
    except OSError:
        return ""


async def serve_with_limits(handler: ConnectionHandler, listeners: list[trio.SocketListener],
                            gate: ConnectionGate) -> None:
    """trio.serve_listeners with `gate` applied: a connection over a limit is closed at
    once (logged at most once per interval), and accept() failing for want of
    descriptors is a rate-limited WARNING, then accept again."""
    import trio
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(_accept_loop, handler, listener, gate, nursery)


async def _accept_loop(handler: ConnectionHandler, listener: trio.SocketListener,
                       gate: ConnectionGate, nursery: trio.Nursery) -> None:
    import trio
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                    raise
                if gate.accept_error_log.due(trio.current_time()):
                    log.warning("cannot accept a connection, retrying", extra={
                        "listener": gate.name, "error": str(exc),
                        "open": gate.open, "open_in_process": gate.process.open,
                        "suppressed": gate.accept_error_log.take_suppressed()})
                await trio.sleep(ACCEPT_RETRY_S)
                continue
            host = _host_of(stream)
            reason = gate.admit(host)
            if reason is not None:
                if gate.refusal_log.due(trio.current_time()):
                    log.warning("refused a connection", extra={
                        "listener": gate.name, "peer": host, "reason": reason,
                        "refused": gate.refused,
                        "suppressed": gate.refusal_log.take_suppressed()})
                await trio.aclose_forcefully(stream)
                continue
            nursery.start_soon(_serve_admitted, handler, stream, gate, host)


async def _serve_admitted(handler: ConnectionHandler, stream: trio.SocketStream,
                          gate: ConnectionGate, host: str) -> None:
    import trio
    try:
        await handler(stream)
    finally:
        try:
            await trio.aclose_forcefully(stream)  # the descriptor is free before the count
        finally:
            gate.release(host)
