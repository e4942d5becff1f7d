"""Port picking for local clusters and tests: every address is on the loopback interface
(`HOST`), and a port is one the OS reported free a moment ago; `busy_ports` names the
ones another process holds, before a launcher starts nodes that would die binding them."""

from __future__ import annotations

import socket
from collections.abc import Iterable

HOST = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """Ports the OS reports free right now (held together, so all distinct)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def busy_ports(ports: Iterable[int]) -> list[int]:
    """The ports among `ports` a listener cannot bind on `HOST` now: another process
    listens there. Probed as a node binds (with SO_REUSEADDR), so a port whose last
    connections linger in TIME_WAIT counts as free, as it is for the node."""
    busy = []
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((HOST, port))
            except OSError:
                busy.append(port)
    return busy
