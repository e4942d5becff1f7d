"""Port picking for local clusters and tests: every address is on the loopback interface
(`HOST`), and a port is one that was free a moment ago, drawn at random outside the OS's
ephemeral range; `busy_ports` names the ones another process holds, before a launcher
starts nodes that would die binding them. Processes that start clusters side by side
(the test suite's workers) each take a slice of the range (`PORT_SLICE_ENV`), so no two
pick the same port between picking it and a node binding it."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Collection, Iterable
from pathlib import Path

HOST = "127.0.0.1"
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL = (32768, 60999)
LOWEST_PORT = 10_000  # above the well-known and most registered services' ports
MIN_SPAN = 4096
MAX_TRIES = 10_000
PORT_SLICE_ENV = "KRAFT_PORT_SLICE"  # "K/N": pick from the K-th of N equal slices (0-based)


def free_ports(count: int, avoid: Collection[int] = ()) -> list[int]:
    """`count` distinct ports free right now (bindable as a node binds), none of `avoid`
    (ports already given to a cluster's nodes but not bound yet), drawn at random from
    below the OS's ephemeral range (`pick_range`). Not `bind(0)`: the OS hands its
    ephemeral ports out nearly in sequence and a just-released one again, so two
    processes picking at once (two test workers, each making a cluster) got the same
    port and one node died binding it; outgoing connections take ephemeral ports too."""
    low, high = pick_range()
    rng = random.SystemRandom()
    sockets = []
    found: list[int] = []
    try:
        for _ in range(MAX_TRIES):
            if len(found) == count:
                return found
            port = rng.randrange(low, high)
            if port in avoid or port in found:
                continue
            sock = _bound_as_a_node(port)
            if sock is None:
                continue
            sockets.append(sock)  # held until the end: the same port is not bindable twice
            found.append(port)
        if len(found) == count:
            return found
        raise OSError(f"no {count} free ports in {low}-{high - 1} after {MAX_TRIES} tries")
    finally:
        for sock in sockets:
            sock.close()


def pick_range(path: Path = EPHEMERAL_RANGE_FILE, port_slice: str | None = None
               ) -> tuple[int, int]:
    """[low, high) to pick listener ports from: below the OS's ephemeral range (Linux's
    ip_local_port_range, 32768-60999 by default), or above it when too little is below;
    with `port_slice` ("K/N", default: the KRAFT_PORT_SLICE environment variable) the
    K-th of N equal parts of that."""
    try:
        first, last = (int(n) for n in path.read_text().split())
    except (OSError, ValueError):
        first, last = DEFAULT_EPHEMERAL
    low, high = (LOWEST_PORT, first) if first - LOWEST_PORT >= MIN_SPAN else (last + 1, 65536)
    port_slice = os.environ.get(PORT_SLICE_ENV) if port_slice is None else port_slice
    if not port_slice:
        return low, high
    index, _, count = port_slice.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise OSError(f"{PORT_SLICE_ENV}={port_slice!r}: expected K/N with 0 <= K < N")
    width = (high - low) // int(count)
    return low + int(index) * width, low + (int(index) + 1) * width


def busy_ports(ports: Iterable[int]) -> list[int]:
    """The ports among `ports` a listener cannot bind on `HOST` now: another process
    listens there. Probed as a node binds (with SO_REUSEADDR), so a port whose last
    connections linger in TIME_WAIT counts as free, as it is for the node."""
    busy = []
    for port in ports:
        sock = _bound_as_a_node(port)
        if sock is None:
            busy.append(port)
        else:
            sock.close()
    return busy


def _bound_as_a_node(port: int) -> socket.socket | None:
    """A socket bound to `port` as a node binds its listener (SO_REUSEADDR), or None
    when another process holds the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        return None
    return sock
