"""The chaos proxy forwards bytes on a link until it is cut; a cut closes open
connections and every new one; healing restores it (127.0.0.1 only)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tools.chaos.proxy import Link, ProxyNet
from tools.cluster import free_ports


@pytest.fixture
def echo_address() -> Iterator[str]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(2)
    server.close()


@pytest.fixture
def net(echo_address: str) -> Iterator[ProxyNet]:
    (port,) = free_ports(1)
    proxies = ProxyNet({(4, 1): Link(source=4, target=1, listen_port=port,
                                     target_address=echo_address)})
    proxies.start()
    yield proxies
    proxies.close()


def round_trip(conn: socket.socket, payload: bytes) -> bytes:
    conn.sendall(payload)
    return conn.recv(1024)


def connect(net: ProxyNet) -> socket.socket:
    return socket.create_connection(("127.0.0.1", net.links[(4, 1)].listen_port), timeout=5)


def test_proxy_forwards_until_cut_and_again_when_healed(net: ProxyNet) -> None:
    with connect(net) as conn:
        assert round_trip(conn, b"ping") == b"ping"
        assert net.partition(4) == [(4, 1)]
        assert conn.recv(1024) == b""  # the open connection was closed by the cut
    with connect(net) as conn:  # a new connection is closed at once while cut
        assert conn.recv(1024) == b""
    net.heal()
    with connect(net) as conn:
        assert round_trip(conn, b"again") == b"again"


def test_one_way_partition_cuts_only_the_partitioned_nodes_outgoing_links(net: ProxyNet
                                                                         ) -> None:
    assert net.partition(1, one_way=True) == []  # 4 -> 1 is 1's incoming link: kept
    with connect(net) as conn:
        assert round_trip(conn, b"still") == b"still"
    assert net.partition(1) == [(4, 1)]
