"""The launcher's ports (tools/cluster.py, tools/ports.py), on real sockets of 127.0.0.1:
a cluster made with a base port records it, and `add_controller_node` takes the port
after the cluster's highest (refused, naming it, while another process holds it); a
held port is what `busy_ports` reports, a closed one is not."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import pytest

from tools.cluster import Cluster, ClusterError
from tools.ports import HOST, busy_ports, free_ports, pick_range


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


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range() -> None:
    """Drawn below the OS's ephemeral range (where bind(0) and outgoing connections take
    theirs, so two processes picking at once got the same one), none of `avoid`."""
    low, high = pick_range()
    first = free_ports(50)
    ports = free_ports(50, avoid=set(first))
    assert len(set(ports)) == 50
    assert not set(ports) & set(first)
    assert all(low <= p < high for p in ports)
    assert busy_ports(ports) == []


def test_pick_range_is_below_the_ephemeral_range_or_above_when_too_little_is_below(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KRAFT_PORT_SLICE", raising=False)  # a test worker's own slice
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    assert pick_range(ranges) == (10_000, 32768)
    ranges.write_text("12000 50000\n")
    assert pick_range(ranges) == (50001, 65536)
    assert pick_range(tmp_path / "missing") == (10_000, 32768)  # Linux's default range


def test_add_node_takes_the_port_after_the_clusters_highest(tmp_path: Path) -> None:
    base = _consecutive_free_ports(6)
    made = Cluster.create(tmp_path / "c", voters=3, brokers=1, base_port=base)
    loaded = Cluster.load(made.directory)
    assert loaded.base_port == base  # voters base..base+2, broker base+3, status base+4
    added = loaded.add_controller_node()
    assert added.controller_address == f"{HOST}:{base + 5}"
    assert Cluster.load(made.directory).node(added.id).controller_address == \
        f"{HOST}:{base + 5}"


def _consecutive_free_ports(count: int) -> int:
    """The first of `count` consecutive ports free together (each bound at once, then
    let go): the launcher's ports are base + k, and on a busy host another process's
    port can sit at any k (it failed once so)."""
    for _ in range(100):
        with contextlib.ExitStack() as held:
            first = held.enter_context(socket.socket())
            first.bind((HOST, 0))
            base = first.getsockname()[1]
            try:
                for offset in range(1, count):
                    held.enter_context(socket.socket()).bind((HOST, base + offset))
            except OSError:
                continue
            return base
    raise AssertionError(f"no {count} consecutive free ports in 100 tries")


def test_add_node_refuses_a_held_next_port(tmp_path: Path) -> None:
    base = _consecutive_free_ports(2)
    with socket.socket() as held:
        held.bind((HOST, base + 1))
        held.listen()
        made = Cluster.create(tmp_path / "c", voters=1, base_port=base)
        with pytest.raises(ClusterError, match=rf"port in use by another process: "
                           rf"{HOST}:{base + 1} \(node 2\)"):
            made.add_controller_node()


def test_a_port_slice_picks_from_its_own_part_of_the_range(tmp_path: Path) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    slices = [pick_range(ranges, f"{k}/3") for k in range(3)]
    assert slices[0][0] == 10_000
    assert slices[-1][1] <= 32768
    assert all(a[1] <= b[0] for a, b in zip(slices, slices[1:], strict=False))
    assert pick_range(ranges, "") == (10_000, 32768)
    for bad in ("3/3", "x/2", "1"):
        with pytest.raises(OSError, match="KRAFT_PORT_SLICE"):
            pick_range(ranges, bad)
