"""The launcher's ports (tools/cluster.py, tools/ports.py), on real sockets of 127.0.0.1:
a cluster made with a base port records it, and `add_controller_node` takes the port
after the cluster's highest (refused, naming it, while another process holds it); a
held port is what `busy_ports` reports, a closed one is not."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tools.cluster import Cluster, ClusterError
from tools.ports import HOST, busy_ports, free_ports


def _held() -> socket.socket:
    sock = socket.socket()
    sock.bind((HOST, 0))
    sock.listen()
    return sock


def test_busy_ports_names_the_listening_ones_only() -> None:
    with _held() as held:
        port = held.getsockname()[1]
        (free,) = free_ports(1)
        assert busy_ports([port, free]) == [port]


def test_add_node_takes_the_port_after_the_clusters_highest(tmp_path: Path) -> None:
    base = free_ports(1)[0]
    made = Cluster.create(tmp_path / "c", voters=3, brokers=1, base_port=base)
    loaded = Cluster.load(made.directory)
    assert loaded.base_port == base  # voters base..base+2, broker base+3, status base+4
    added = loaded.add_controller_node()
    assert added.controller_address == f"{HOST}:{base + 5}"
    assert Cluster.load(made.directory).node(added.id).controller_address == \
        f"{HOST}:{base + 5}"


def _held_after_a_free_port() -> tuple[int, socket.socket]:
    """A free port and a held socket on the port after it: taken together, so no other
    process on the host can own the next port by chance (it failed once so)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind((HOST, 0))
            base = probe.getsockname()[1]
            squatter = socket.socket()
            try:
                squatter.bind((HOST, base + 1))
            except OSError:
                squatter.close()
                continue
        squatter.listen()
        return base, squatter
    raise AssertionError("no two consecutive free ports in 100 tries")


def test_add_node_refuses_a_held_next_port(tmp_path: Path) -> None:
    base, held = _held_after_a_free_port()
    with held:
        made = Cluster.create(tmp_path / "c", voters=1, base_port=base)
        with pytest.raises(ClusterError, match=rf"port in use by another process: "
                           rf"{HOST}:{base + 1} \(node 2\)"):
            made.add_controller_node()
