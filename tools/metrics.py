"""Prometheus metrics of a node (`metrics.listener = "http://HOST:PORT"`, or
`https://HOST:PORT` over TLS with the node's keystore and truststore and its
`ssl.client.auth`; unset: off).

The registry, the metric types and the text exposition come from `prometheus-client`;
`GET http://HOST:PORT/metrics` serves them from its thread-per-connection WSGI server
(`MetricsServer`), which accepts in one thread and runs everything else, the TLS
handshake included, in the connection's own thread under a deadline: a silent or slow
peer holds only its own thread, never the endpoint.
One endpoint per process: a node rebuilt in place after a full disk
(`tools.server.supervisor`) keeps its endpoint and its counters (`install_metrics` finds
the process's `NodeMetrics` by its listener).

Nothing here touches the pure core. The Raft figures are read in the node's core task
after each turn (`RaftNode.add_ready_observer`): the role, epoch, leader and offsets from
the node, the records appended from `Ready.entries`, commits from
`Ready.high_watermark`, timed with the node's own clock (`now_ms`, which chaos may skew).
The broker's come from hooks of the broker layer: `Dispatcher.on_request` (every Kafka
request), `IsrManager.on_isr_change`, and `BrokerServer.applied_offset`.

Names follow Kafka's metrics (`kafka.server:type=raft-metrics` and friends), Prometheus
style: `current-leader` is `kafka_raft_current_leader`, a rate is a counter
(`..._total`: `rate()` gives Kafka's `-rate`), the `-avg`/`-max` latencies are gauges in
milliseconds over the last `WINDOW_S` seconds (Kafka's default: 2 samples of 30 s; NaN
with no sample in the window, as in Kafka).
"""

from __future__ import annotations

import logging
import math
import socket
import ssl
import threading
import time
from collections import deque
from importlib import metadata
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app

from raft.common.tls import TlsConfigError, TlsSettings, server_context
from raft.core import Role
from raft.node import RaftNode
from raft.types import Ready
from tools.config import parse_metrics_listener
from tools.errors import CommandError

if TYPE_CHECKING:
    from broker.role import BrokerRole

log = logging.getLogger(__name__)

WINDOW_S = 60.0
# Kafka's current-state values, plus kraft-py's own `prospective` (pre-vote) and
# `resigned` (a leader handing over before it stops)
STATES = ("unattached", "voted", "prospective", "candidate", "leader", "follower",
          "observer", "resigned")  # the first: before the node's first turn
CAMPAIGNING = frozenset({str(Role.PROSPECTIVE), str(Role.CANDIDATE)})

HANDSHAKE_TIMEOUT_S = 10.0  # a TLS peer that does not finish its handshake is dropped
IDLE_TIMEOUT_S = 30.0  # a connection that sends no request for this long is closed

_PROCESS: dict[str, NodeMetrics] = {}  # metrics.listener -> this process's endpoint
_PROCESS_LOCK = threading.Lock()


def package_version() -> str:
    try:
        return metadata.version("kraft-py")
    except metadata.PackageNotFoundError:
        return "unknown"


class WindowedStat:
    """Average and maximum of the values recorded in the last `window_s` seconds (of
    `time.monotonic`); read from the scrape thread, so guarded by a lock."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_s = window_s
        self._samples: deque[tuple[float, float]] = deque()
        self._lock = threading.Lock()

    def record(self, value: float, at: float | None = None) -> None:
        with self._lock:
            self._samples.append((time.monotonic() if at is None else at, value))

    def _live(self, now: float | None) -> list[float]:
        cutoff = (time.monotonic() if now is None else now) - self._window_s
        with self._lock:
            while self._samples and self._samples[0][0] < cutoff:
                self._samples.popleft()
            return [value for _, value in self._samples]

    def avg(self, now: float | None = None) -> float:
        values = self._live(now)
        return sum(values) / len(values) if values else math.nan

    def max(self, now: float | None = None) -> float:
        values = self._live(now)
        return max(values) if values else math.nan


class NodeMetrics:
    """Every metric of one node, in its own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry if registry is not None else CollectorRegistry()
        self.address: tuple[str, int] | None = None  # where it is served, once it is
        self.info = Info("kraft_node", "this node: id, roles, cluster, kraft-py version",
                         registry=r)
        self.current_leader = Gauge("kafka_raft_current_leader",
                                    "the current leader's id; -1 when none is known",
                                    registry=r)
        self.current_epoch = Gauge("kafka_raft_current_epoch", "the current epoch",
                                   registry=r)
        self.current_state = Enum("kafka_raft_current_state", "this member's quorum state",
                                  states=list(STATES), registry=r)
        self.high_watermark = Gauge("kafka_raft_high_watermark",
                                    "the high watermark (exclusive)", registry=r)
        self.log_end_offset = Gauge("kafka_raft_log_end_offset", "the log end offset",
                                    registry=r)
        self.log_end_epoch = Gauge("kafka_raft_log_end_epoch",
                                   "the epoch of the last record in the log", registry=r)
        self.commit_latency = WindowedStat()
        self.election_latency = WindowedStat()
        for name, stat, what in (
                ("commit_latency", self.commit_latency,
                 "ms from a leader's append to its commit"),
                ("election_latency", self.election_latency,
                 "ms from starting to campaign to a known leader")):
            Gauge(f"kafka_raft_{name}_avg", f"average {what} (last {WINDOW_S:.0f} s)",
                  registry=r).set_function(stat.avg)
            Gauge(f"kafka_raft_{name}_max", f"maximum {what} (last {WINDOW_S:.0f} s)",
                  registry=r).set_function(stat.max)
        self.append_records = Counter("kafka_raft_append_records",
                                      "records appended by this node as the leader",
                                      registry=r)
        self.fetch_records = Counter("kafka_raft_fetch_records",
                                     "records appended from the leader's Fetch answers",
                                     registry=r)
        self.unknown_voters = Gauge("kafka_raft_number_unknown_voter_connections",
                                    "voters whose endpoint is not known", registry=r)
        self._broker_metrics = False
        self._node: RaftNode | None = None
        self._is_voter = False
        self._applied_offset: Any = None  # () -> int, on a broker
        self._pending_commits: deque[tuple[int, int]] = deque()  # (last offset, append ms)
        self._campaign_started_ms: int | None = None

    # -- the raft node -----------------------------------------------------------------

    def observe_node(self, node: RaftNode, *, is_voter: bool, roles: str) -> None:
        """Follow `node` (a rebuilt node replaces the previous one)."""
        self._node, self._is_voter = node, is_voter
        self._pending_commits.clear()
        self._campaign_started_ms = None
        self.info.info({"node_id": str(node.node_id), "roles": roles,
                        "cluster_id": node.cluster_id, "version": package_version()})
        self.unknown_voters.set(sum(1 for v, a in node.voters.items()
                                    if v != node.node_id and not a))
        node.add_ready_observer(self.on_ready)

    def on_ready(self, ready: Ready, now_ms: int) -> None:
        """In the node's core task, after each turn's Ready was handled."""
        node = self._node
        if node is None:
            return
        role = node.role or str(Role.UNATTACHED)
        leader = node.leader_id
        state = "observer" if role == str(Role.FOLLOWER) and not self._is_voter else role
        self.current_state.state(state)
        self.current_leader.set(-1 if leader is None else leader)
        self.current_epoch.set(node.epoch)
        self.high_watermark.set(node.high_watermark)
        self.log_end_offset.set(node.log_end_offset)
        self.log_end_epoch.set(node.log_end_epoch)
        self._count_appends(ready, role, now_ms)
        self._time_commits(ready, role, now_ms)
        self._time_election(role, leader, now_ms)
        if self._applied_offset is not None:
            self._observe_broker_image(node)

    def _count_appends(self, ready: Ready, role: str, now_ms: int) -> None:
        if not ready.entries:
            return
        count = sum(len(batch.records) for batch in ready.entries)
        if role == str(Role.LEADER):
            self.append_records.inc(count)
            self._pending_commits.append((ready.entries[-1].next_offset - 1, now_ms))
        else:
            self.fetch_records.inc(count)

    def _time_commits(self, ready: Ready, role: str, now_ms: int) -> None:
        if role != str(Role.LEADER):
            self._pending_commits.clear()  # not ours to commit any more
            return
        hw = ready.high_watermark
        while hw is not None and self._pending_commits and self._pending_commits[0][0] < hw:
            _, appended_ms = self._pending_commits.popleft()
            self.commit_latency.record(max(0, now_ms - appended_ms))

    def _time_election(self, role: str, leader: int | None, now_ms: int) -> None:
        if role in CAMPAIGNING and self._campaign_started_ms is None:
            self._campaign_started_ms = now_ms
        elif leader is not None and self._campaign_started_ms is not None:
            self.election_latency.record(max(0, now_ms - self._campaign_started_ms))
            self._campaign_started_ms = None

    # -- the broker --------------------------------------------------------------------

    def observe_broker(self, role: BrokerRole) -> None:
        """Request counts and latency, ISR changes, and the image's applied offset."""
        if not self._broker_metrics:
            r = self.registry
            self.last_applied = Gauge(
                "kafka_server_broker_metadata_metrics_last_applied_record_offset",
                "the offset of the last metadata record applied to the image", registry=r)
            self.metadata_lag = Gauge(
                "kraft_broker_metadata_lag_records",
                "the leader's high watermark minus the records applied to the image",
                registry=r)
            self.requests = Counter("kafka_network_requests", "Kafka requests handled",
                                    ["request"], registry=r)
            self.request_time = Histogram("kafka_network_request_total_time_seconds",
                                          "time to handle a Kafka request", ["request"],
                                          registry=r)
            self.isr_changes = {kind: Counter(
                f"kafka_server_replica_manager_{name}", help_text, registry=r)
                for kind, name, help_text in (
                    ("shrink", "isr_shrinks", "ISR shrinks made by this broker"),
                    ("expand", "isr_expands", "ISR expansions made by this broker"),
                    ("failed", "failed_isr_updates", "ISR changes the controller refused"))}
            self._broker_metrics = True
        server = role.server
        self._applied_offset = lambda: server.applied_offset
        if role.kafka is not None:
            role.kafka.dispatcher.on_request = self.on_request
            if role.kafka.isr_manager is not None:
                role.kafka.isr_manager.on_isr_change = self.on_isr_change

    def on_request(self, api: str, seconds: float) -> None:
        self.requests.labels(api).inc()
        self.request_time.labels(api).observe(seconds)

    def on_isr_change(self, kind: str) -> None:
        self.isr_changes[kind].inc()

    def _observe_broker_image(self, node: RaftNode) -> None:
        applied = int(self._applied_offset())
        self.last_applied.set(applied)
        leader_hw = node.leader_high_watermark
        if leader_hw is not None:
            self.metadata_lag.set(max(0, leader_hw - (applied + 1)))

    # -- serving -----------------------------------------------------------------------

    def serve(self, host: str, port: int, tls: TlsSettings | None = None) -> tuple[str, int]:
        """Serve `/metrics` (`serve_registry`), over TLS with `tls`'s keystore and, as
        its `client_auth` asks, truststore (`required` refuses a client without a
        certificate). OSError when the address cannot be bound, TlsConfigError when
        the keystore or truststore does not load."""
        context = server_context(tls) if tls is not None else None
        server = serve_registry(self.registry, host, port, context)
        self.address = (host, int(server.server_port))
        return self.address


class _QuietHandler(WSGIRequestHandler):
    """A connection's handler: no access log; a read idle past `timeout` ends it."""

    timeout = IDLE_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        """Scrapes are not logged."""


class MetricsServer(ThreadingWSGIServer):
    """prometheus-client's thread-per-connection server, with the TLS handshake moved
    out of the accepting thread: `finish_request` runs in the connection's own thread
    and wraps the socket there, `handshake_timeout_s` bounding each handshake read."""

    ssl_context: ssl.SSLContext | None = None
    handshake_timeout_s = HANDSHAKE_TIMEOUT_S

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(self.handshake_timeout_s)
        try:
            secured = self.ssl_context.wrap_socket(request, server_side=True)
        except OSError as exc:  # silence past the deadline, plaintext, a refused certificate
            log.debug("metrics: TLS handshake failed", extra={
                "peer": str(client_address), "reason": str(exc)})
            return
        try:
            super().finish_request(secured, client_address)
        finally:
            secured.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection's failure (a peer gone, a read timed out) is its own: logged at
        DEBUG, not printed."""
        log.debug("metrics: connection failed", exc_info=True,
                  extra={"peer": str(client_address)})


def serve_registry(registry: CollectorRegistry, host: str, port: int,
                   context: ssl.SSLContext | None) -> MetricsServer:
    """A `MetricsServer` for `registry` bound to (host, port), over TLS with `context`,
    serving from a daemon thread (it ends with the process). OSError when the address
    cannot be bound."""
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]
    server_class: type[MetricsServer] = type(
        "MetricsServer", (MetricsServer,), {"address_family": family, "ssl_context": context})
    server = make_server(host, port, make_wsgi_app(registry), server_class=server_class,
                         handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def install_metrics(node: RaftNode, listener: str, *, is_voter: bool, roles: str,
                    broker: BrokerRole | None = None, tls: TlsSettings | None = None
                    ) -> NodeMetrics:
    """The process's metrics for `listener` (served from the first call on), now
    following `node` and, on a broker, its role. CommandError (exit 1) when the
    listener cannot be bound."""
    with _PROCESS_LOCK:
        metrics = _PROCESS.get(listener)
        if metrics is None:
            host, port = parse_metrics_listener(listener)
            scheme = "https" if listener.strip().lower().startswith("https:") else "http"
            metrics = NodeMetrics()
            try:
                address = metrics.serve(host, port, tls if scheme == "https" else None)
            except (OSError, TlsConfigError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else None
                raise CommandError(f"metrics.listener {listener}: cannot listen: "
                                   f"{reason or exc}") from None
            log.info("serving Prometheus metrics", extra={
                "node": node.node_id, "url": f"{scheme}://{address[0]}:{address[1]}/metrics"})
            _PROCESS[listener] = metrics
    metrics.observe_node(node, is_voter=is_voter, roles=roles)
    if broker is not None:
        metrics.observe_broker(broker)
    return metrics
