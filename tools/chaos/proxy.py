"""Network faults without root: a fault-injecting TCP proxy on every node-to-node link.

`ProxyNet.install(cluster)` gives each (node, voter) pair and each (broker, other broker)
pair its own proxy port. It rewrites `controller.quorum.voters` in each node's node.toml
so that node i reaches voter j only through link i->j (its own entry stays its real
listener), and writes each broker's test-only `fault.injection.replica.routes` so that
its replica fetcher reaches broker j's Kafka port (partition replication) only through
link i->j. Clients of the brokers (the workload) are not proxied.

Faults, per link (the link i->j carries the connections that i opens to j, both ways):
- cut: closes its open connections and closes every new one at once. A partition of
  node i cuts the links i->* and *->i (symmetric), or only i->* (one-way: i cannot reach
  the others, they still reach i);
- degrade: delay and loss as `tc netem` on a TCP connection would show them to the
  endpoints. Bytes are never dropped or reordered inside a connection: each received
  chunk is held for delay +- jitter, and a "lost" chunk costs a retransmission stall
  (RTO_MS, doubled on each consecutive loss of the same chunk, capped at MAX_RTO_MS)
  during which everything behind it in that direction waits. A chunk is what one
  recv() returned, a stand-in for a segment.
`heal()` clears both. The proxy's randomness comes from one seeded `random.Random`.
Each link counts what it forwarded and the stalls losses cost it (`Link.stats`,
`ProxyNet.stats()`), so that a test can tell a loss fault really happened.
"""

from __future__ import annotations

import logging
import queue
import random
import re
import socket
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tools.cluster import Cluster, ClusterError
from tools.config import parse_address, to_toml
from tools.ports import free_ports

log = logging.getLogger(__name__)

ACCEPT_POLL_S = 0.2
VOTERS_KEY = "controller.quorum.voters"
REPLICA_ROUTES_KEY = "fault.injection.replica.routes"
RTO_MS = 200.0  # Linux's minimum retransmission timeout
MAX_RTO_MS = 1600.0  # Linux backs off up to 120 s; a chaos fault is held for seconds
RECV_BYTES = 65536
# Chunks waiting per direction; beyond it the reader stops reading, as a full TCP window
# would stop the sender, so a long stall cannot buffer without bound.
MAX_QUEUED_CHUNKS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class Degradation:
    """What a degraded link does to each chunk it forwards (all zero: nothing)."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0  # the delay is uniform in delay_ms +- jitter_ms (never < 0)
    loss: float = 0.0  # the probability that a chunk is lost, each time it is sent

    def __post_init__(self) -> None:
        if self.delay_ms < 0 or self.jitter_ms < 0:
            raise ValueError(f"delay and jitter must not be negative: {self}")
        if not 0 <= self.loss < 1:  # at 1 nothing would ever get through
            raise ValueError(f"loss must be in [0, 1): {self}")

    def hold_s(self, rng: random.Random, *, rto_ms: float = RTO_MS,
               max_rto_ms: float = MAX_RTO_MS) -> float:
        """How long one chunk is held: its delay, plus a retransmission timeout for each
        time it is lost (doubling, as TCP backs off, up to `max_rto_ms`)."""
        return self.hold(rng, rto_ms=rto_ms, max_rto_ms=max_rto_ms)[0]

    def hold(self, rng: random.Random, *, rto_ms: float = RTO_MS,
             max_rto_ms: float = MAX_RTO_MS) -> tuple[float, int]:
        """(`hold_s`, how many times the chunk was lost: the stalls it cost)."""
        held_ms = 0.0
        if self.delay_ms or self.jitter_ms:
            held_ms = max(0.0, self.delay_ms + rng.uniform(-self.jitter_ms, self.jitter_ms))
        rto, lost = rto_ms, 0
        while self.loss and rng.random() < self.loss:
            held_ms += rto
            rto = min(2 * rto, max_rto_ms)
            lost += 1
        return held_ms / 1000, lost


NO_DEGRADATION = Degradation()


@dataclass(frozen=True, slots=True)
class LinkStats:
    """What a link forwarded, both directions of all its connections (test-only
    observability: a loss fault that stalled nothing did nothing)."""

    chunks: int = 0  # chunks forwarded (what one recv() returned)
    stalled_chunks: int = 0  # chunks lost at least once
    stalls: int = 0  # retransmission stalls: one per loss of a chunk

    def __add__(self, other: LinkStats) -> LinkStats:
        return LinkStats(self.chunks + other.chunks,
                         self.stalled_chunks + other.stalled_chunks,
                         self.stalls + other.stalls)


@dataclass(slots=True, eq=False)
class Connection:
    """One proxied TCP connection: the accepted socket and the one to the target."""

    client: socket.socket
    upstream: socket.socket
    # set when the link is cut, so that a chunk held for delay or loss is not sent later
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closed.set()
        _close(self.client)
        _close(self.upstream)


@dataclass(slots=True)
class Link:
    source: int
    target: int
    listen_port: int
    target_address: str
    cut: bool = False
    # replaced whole (never mutated), so a forwarding thread reads a consistent one
    degradation: Degradation = NO_DEGRADATION
    connections: list[Connection] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stats: LinkStats = LinkStats()  # replaced whole, under `lock`

    def count_chunk(self, lost: int) -> None:
        with self.lock:
            self.stats = self.stats + LinkStats(1, int(lost > 0), lost)


class ProxyNet:
    def __init__(self, links: dict[tuple[int, int], Link], rng: random.Random | None = None,
                 *, rto_ms: float = RTO_MS, max_rto_ms: float = MAX_RTO_MS) -> None:
        self.links = links
        self.rto_ms = rto_ms
        self.max_rto_ms = max_rto_ms
        self._rng = rng if rng is not None else random.Random(0)
        self._rng_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listeners: list[socket.socket] = []

    @classmethod
    def install(cls, cluster: Cluster, rng: random.Random | None = None) -> ProxyNet:
        """Rewrite every node's voters and every broker's replica routes (call before the
        nodes start) and start the proxies."""
        voters = {n: str(cluster.node(n).controller_address) for n in cluster.voter_ids}
        brokers = {n: info.client_address for n, info in sorted(cluster.nodes.items())
                   if "broker" in info.roles and info.client_address}
        if set(voters) & set(brokers):  # link i->j would be ambiguous: which port of j?
            raise ClusterError("the proxies need each node to be a voter or a broker, "
                               f"not both: {sorted(set(voters) & set(brokers))}")
        targets = {(s, t): address for s in sorted(cluster.nodes)
                   for t, address in voters.items() if s != t}
        targets |= {(s, t): address for s in brokers
                    for t, address in brokers.items() if s != t}
        ports = free_ports(len(targets), avoid=cluster.own_ports())
        links = {pair: Link(source=pair[0], target=pair[1], listen_port=port,
                            target_address=address)
                 for (pair, address), port in zip(targets.items(), ports, strict=True)}
        for node_id, info in cluster.nodes.items():
            path = Path(info.config)
            settings = tomllib.loads(path.read_text())
            settings[VOTERS_KEY] = ",".join(
                f"{v}@{address if v == node_id else f'127.0.0.1:{links[(node_id, v)].listen_port}'}"
                for v, address in sorted(voters.items()))
            if node_id in brokers:
                settings[REPLICA_ROUTES_KEY] = ",".join(
                    f"{b}@127.0.0.1:{links[(node_id, b)].listen_port}"
                    for b in sorted(brokers) if b != node_id)
            path.write_text(to_toml(settings))
        net = cls(links, rng)
        net.start()
        return net

    def start(self) -> None:
        for link in self.links.values():
            listener = socket.create_server(("127.0.0.1", link.listen_port))
            listener.settimeout(ACCEPT_POLL_S)
            self._listeners.append(listener)
            thread = threading.Thread(target=self._accept, args=(link, listener), daemon=True,
                                      name=f"proxy-{link.source}-{link.target}")
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        self._stop.set()
        for link in self.links.values():
            self._drop(link)
        for thread in self._threads:
            thread.join(2 * ACCEPT_POLL_S + 1)
        for listener in self._listeners:
            listener.close()

    def stats(self) -> LinkStats:
        """The counts of every link together."""
        return sum((link.stats for link in self.links.values()), LinkStats())

    # -- faults ------------------------------------------------------------------------

    def partition(self, node_id: int, *, one_way: bool = False) -> list[tuple[int, int]]:
        """Cut node_id off (from every node it has a link to; and, unless one-way, them
        from it)."""
        cut = [pair for pair in self.links
               if pair[0] == node_id or (not one_way and pair[1] == node_id)]
        for pair in cut:
            link = self.links[pair]
            link.cut = True
            self._drop(link)
        log.warning("partition", extra={"node": node_id, "one_way": one_way,
                                        "links": len(cut)})
        return cut

    def degrade(self, node_id: int, *, delay_ms: float = 0.0, jitter_ms: float = 0.0,
                loss: float = 0.0) -> list[tuple[int, int]]:
        """Delay and/or lose chunks on every link to and from node_id, both directions of
        each connection, open ones included (replaces an earlier degradation)."""
        degradation = Degradation(delay_ms=delay_ms, jitter_ms=jitter_ms, loss=loss)
        degraded = [pair for pair in self.links if node_id in pair]
        for pair in degraded:
            self.links[pair].degradation = degradation
        log.warning("degrade", extra={"node": node_id, "delay_ms": delay_ms,
                                      "jitter_ms": jitter_ms, "loss": loss,
                                      "links": len(degraded)})
        return degraded

    def heal(self) -> None:
        """No link is cut or degraded (chunks already held keep their release time, as
        packets already in flight would)."""
        for link in self.links.values():
            link.cut = False
            link.degradation = NO_DEGRADATION

    # -- forwarding --------------------------------------------------------------------

    def _drop(self, link: Link) -> None:
        with link.lock:
            connections, link.connections = link.connections, []
        for connection in connections:
            connection.close()

    def _fork_rng(self) -> random.Random:
        """A generator of its own for one direction of one connection (the threads do
        not share one), drawn from the seeded one."""
        with self._rng_lock:
            return random.Random(self._rng.getrandbits(64))

    def _accept(self, link: Link, listener: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if link.cut:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(parse_address(link.target_address),
                                                    timeout=1.0)
            except OSError:
                _close(client)
                continue
            for conn in (client, upstream):
                conn.settimeout(None)
            connection = Connection(client, upstream)
            with link.lock:  # a cut between the check above and here must not miss it
                if link.cut:
                    connection.close()
                    continue
                link.connections.append(connection)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump,
                                 args=(link, connection, source, sink, self._fork_rng()),
                                 daemon=True).start()

    def _pump(self, link: Link, connection: Connection, source: socket.socket,
              sink: socket.socket, rng: random.Random) -> None:
        """Read `source` and queue each chunk with its release time; a delivery thread
        writes them to `sink` in order. Reading goes on while a chunk is held, as the
        kernel would go on receiving behind a lost segment."""
        chunks: queue.Queue[tuple[float, bytes] | None] = queue.Queue(MAX_QUEUED_CHUNKS)
        threading.Thread(target=_deliver, args=(link, connection, chunks, sink),
                         daemon=True).start()
        release_at = 0.0
        try:
            while data := source.recv(RECV_BYTES):
                hold_s, lost = link.degradation.hold(rng, rto_ms=self.rto_ms,
                                                     max_rto_ms=self.max_rto_ms)
                link.count_chunk(lost)
                # never before the chunk ahead of it: TCP delivers in order
                release_at = max(release_at, time.monotonic() + hold_s)
                chunks.put((release_at, data))
        except OSError:
            pass
        finally:
            chunks.put(None)


def _deliver(link: Link, connection: Connection,
             chunks: queue.Queue[tuple[float, bytes] | None], sink: socket.socket) -> None:
    """Send each chunk once its release time has come; on end of stream (after the
    queued chunks), a cut, or a broken sink, close the connection."""
    item: tuple[float, bytes] | None = (0.0, b"")
    try:
        while (item := chunks.get()) is not None:
            release_at, data = item
            while (wait_s := release_at - time.monotonic()) > 0:
                if connection.closed.wait(wait_s):
                    return
            sink.sendall(data)
    except OSError:
        pass
    finally:
        connection.close()
        with link.lock:  # a closed connection is not kept (reconnects would pile up)
            if connection in link.connections:
                link.connections.remove(connection)
        while item is not None:  # unblock the reader (it ends on the closed socket)
            item = chunks.get()


def _close(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def proxied_voters(text: str) -> dict[int, int]:
    """voter id -> port, from a `controller.quorum.voters` value (for tests)."""
    return {int(m[1]): int(m[2]) for m in re.finditer(r"(\d+)@[^,:]+:(\d+)", text)}
