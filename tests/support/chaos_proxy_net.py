"""A chaos proxy in front of a local echo server, for the proxy's unit tests: one link
4->1 (127.0.0.1 only) with short retransmission timeouts that keep lossy runs quick (the
stalls still happen)."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tools.chaos.proxy import Link, ProxyNet
from tools.ports import free_ports

TEST_RTO_MS = 2.0
TEST_MAX_RTO_MS = 8.0


@contextmanager
def echo_server(recv_bytes: int) -> Iterator[str]:
    """A server on 127.0.0.1 that sends back what it reads, `recv_bytes` at a time, on
    every connection; yields its address."""
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
            while data := conn.recv(recv_bytes):
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        server.close()


@contextmanager
def echo_proxy_net(seed: int, echo_recv_bytes: int) -> Iterator[ProxyNet]:
    """A started proxy net with the one link 4->1 to an `echo_server`."""
    (port,) = free_ports(1)
    with echo_server(echo_recv_bytes) as echo_address:
        proxies = ProxyNet({(4, 1): Link(source=4, target=1, listen_port=port,
                                         target_address=echo_address)},
                           random.Random(seed), rto_ms=TEST_RTO_MS, max_rto_ms=TEST_MAX_RTO_MS)
        proxies.start()
        try:
            yield proxies
        finally:
            proxies.close()
