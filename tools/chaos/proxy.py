"""Network partitions without root: a fault-injecting TCP proxy on every link from a node
to a voter.

`ProxyNet.install(cluster)` gives each (node, voter) pair its own proxy port and rewrites
`controller.quorum.voters` in each node's node.toml so that node i reaches voter j only
through link i->j (its own entry stays its real listener). A link that is cut closes its
open connections and closes every new one at once, so a partition of node i cuts the
links i->* and *->i (symmetric), or only i->* (one-way: i cannot reach the voters, they
still reach i). Links from a node to the brokers' Kafka ports (partition replication)
are not proxied.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tools.cluster import Cluster, free_ports, parse_address
from tools.config import to_toml

log = logging.getLogger(__name__)

ACCEPT_POLL_S = 0.2
VOTERS_KEY = "controller.quorum.voters"


@dataclass(slots=True)
class Link:
    source: int
    target: int
    listen_port: int
    target_address: str
    cut: bool = False
    connections: list[socket.socket] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ProxyNet:
    def __init__(self, links: dict[tuple[int, int], Link]) -> None:
        self.links = links
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listeners: list[socket.socket] = []

    @classmethod
    def install(cls, cluster: Cluster) -> ProxyNet:
        """Rewrite every node's voters (call before the nodes start) and start the proxies."""
        voters = {n: str(cluster.node(n).controller_address) for n in cluster.voter_ids}
        pairs = [(s, t) for s in sorted(cluster.nodes) for t in voters if s != t]
        ports = free_ports(len(pairs))
        links = {pair: Link(source=pair[0], target=pair[1], listen_port=port,
                            target_address=voters[pair[1]])
                 for pair, port in zip(pairs, ports, strict=True)}
        for node_id, info in cluster.nodes.items():
            path = Path(info.config)
            settings = tomllib.loads(path.read_text())
            settings[VOTERS_KEY] = ",".join(
                f"{v}@{address if v == node_id else f'127.0.0.1:{links[(node_id, v)].listen_port}'}"
                for v, address in sorted(voters.items()))
            path.write_text(to_toml(settings))
        net = cls(links)
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

    # -- faults ------------------------------------------------------------------------

    def partition(self, node_id: int, *, one_way: bool = False) -> list[tuple[int, int]]:
        """Cut node_id off (from the voters; and, unless one-way, them from it)."""
        cut = [pair for pair in self.links
               if pair[0] == node_id or (not one_way and pair[1] == node_id)]
        for pair in cut:
            link = self.links[pair]
            link.cut = True
            self._drop(link)
        log.warning("partition", extra={"node": node_id, "one_way": one_way,
                                        "links": len(cut)})
        return cut

    def heal(self) -> None:
        for link in self.links.values():
            link.cut = False

    # -- forwarding --------------------------------------------------------------------

    def _drop(self, link: Link) -> None:
        with link.lock:
            connections, link.connections = link.connections, []
        for conn in connections:
            _close(conn)

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
            with link.lock:
                link.connections += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


def proxied_voters(text: str) -> dict[int, int]:
    """voter id -> port, from a `controller.quorum.voters` value (for tests)."""
    return {int(m[1]): int(m[2]) for m in re.finditer(r"(\d+)@[^,:]+:(\d+)", text)}
