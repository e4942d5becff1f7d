"""Port picking for local clusters and tests: every address is on the loopback interface
(`HOST`), and a port is one the OS reported free a moment ago; `busy_ports` names the
ones another process holds, before a launcher starts nodes that would die binding them."""

from __future__ import annotations

import socket
from collections.abc import Collection, Iterable

HOST = "127.0.0.1"


def free_ports(count: int, avoid: Collection[int] = ()) -> list[int]:
    """Ports the OS reports free right now (held together, so all distinct), none of
    `avoid`: ports already given to a cluster's nodes but not bound yet, which the OS
    would hand out again."""
    sockets = []
    found: list[int] = []
    try:
        while len(found) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)  # held until the end, so never reported twice
            sock.bind((HOST, 0))
            if (port := sock.getsockname()[1]) not in avoid:
                found.append(port)
        return found
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
