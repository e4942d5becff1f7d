"""The chaos proxy forwards bytes on a link until it is cut; a cut closes open
connections and every new one; degrading delays and "loses" chunks the way TCP shows it
(late and stalled, never missing, duplicated or reordered); healing restores it
(127.0.0.1 only)."""

from __future__ import annotations

import random
import socket
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.chaos_proxy_net import echo_proxy_net
from tools.chaos.proxy import (
    NO_DEGRADATION,
    REPLICA_ROUTES_KEY,
    VOTERS_KEY,
    Degradation,
    ProxyNet,
    proxied_voters,
)
from tools.cluster import Cluster
from tools.config import load, parse_replica_routes


@pytest.fixture
def net() -> Iterator[ProxyNet]:
    with echo_proxy_net(seed=9, echo_recv_bytes=1024) as proxies:
        yield proxies


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


def echo_through(net: ProxyNet, payload: bytes, *, pieces: int = 1) -> bytes:
    """Send `payload` (in `pieces` writes) through the proxy to the echo server and read
    back as many bytes (the writer is a thread, so neither side waits on the other's
    buffers)."""
    with connect(net) as conn:
        step = max(1, -(-len(payload) // pieces))
        writer = threading.Thread(target=lambda: [conn.sendall(payload[i:i + step])
                                                  for i in range(0, len(payload), step)])
        writer.start()
        received = bytearray()
        while len(received) < len(payload):
            data = conn.recv(65536)
            if not data:
                break
            received += data
        writer.join()
        return bytes(received)


@pytest.mark.parametrize("seed", range(3))
def test_every_byte_arrives_once_and_in_order_when_the_link_is_lossy_and_jittery(
        net: ProxyNet, seed: int) -> None:
    """TCP under netem loss: a lost segment is retransmitted, so the stream is intact."""
    rng = random.Random(seed)
    net.degrade(4, delay_ms=2, jitter_ms=2, loss=0.5)
    for size in (1, 1000, 20_000, 100_000):
        payload = rng.randbytes(size)
        assert echo_through(net, payload, pieces=rng.choice((1, 10, 100))) == payload


def test_a_message_arrives_no_earlier_than_the_delay_when_the_link_is_slow(
        net: ProxyNet) -> None:
    """Both directions of a connection on a degraded link are held for the delay."""
    delay_ms = 150
    assert net.degrade(1, delay_ms=delay_ms) == [(4, 1)]  # the link to 1 counts too
    with connect(net) as conn:
        began = time.monotonic()
        assert round_trip(conn, b"slow") == b"slow"
        assert time.monotonic() - began >= 2 * delay_ms / 1000  # there and back


def test_cut_closes_the_connection_when_a_chunk_is_held_by_the_delay(net: ProxyNet) -> None:
    net.degrade(4, delay_ms=60_000)
    with connect(net) as conn:
        conn.sendall(b"held")
        assert net.partition(4) == [(4, 1)]
        assert conn.recv(1024) == b""  # the held chunk is not delivered after the cut


def test_heal_clears_the_degradation_and_the_cut_when_both_were_applied(
        net: ProxyNet) -> None:
    net.degrade(4, delay_ms=60_000, loss=0.9)
    net.partition(4)
    net.heal()
    link = net.links[(4, 1)]
    assert link.degradation == NO_DEGRADATION
    assert not link.cut
    with connect(net) as conn:
        assert round_trip(conn, b"healed") == b"healed"


def test_hold_is_a_sum_of_doubling_timeouts_when_chunks_are_lost() -> None:
    """Consecutive losses of one chunk back off as TCP's RTO does: 200, 400, 800 ms...
    up to the cap; without loss nothing is held."""
    rng = random.Random(3)
    stalls = {0.0, 0.2, 0.6, 1.4} | {round(3.0 + 1.6 * capped, 6) for capped in range(100)}
    holds = {round(Degradation(loss=0.5).hold_s(rng, rto_ms=200, max_rto_ms=1600), 6)
             for _ in range(2000)}
    assert holds <= stalls
    assert {0.0, 0.2, 0.6} <= holds
    assert {Degradation().hold_s(rng) for _ in range(100)} == {0.0}


def test_hold_stays_within_delay_and_jitter_when_nothing_is_lost() -> None:
    rng = random.Random(4)
    holds = [Degradation(delay_ms=100, jitter_ms=25).hold_s(rng) for _ in range(1000)]
    assert all(0.075 <= hold <= 0.125 for hold in holds)
    assert all(Degradation(delay_ms=10, jitter_ms=50).hold_s(rng) >= 0 for _ in range(100))


@pytest.mark.parametrize("bad", [{"loss": 1.0}, {"loss": -0.1}, {"delay_ms": -1},
                                 {"jitter_ms": -1}])
def test_degradation_is_rejected_when_out_of_range(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        Degradation(**bad)


def test_install_routes_voter_and_replication_links_through_the_proxies_when_installed(
        tmp_path: Path) -> None:
    """Every node reaches the other voters through link i->j; every broker's replica
    fetcher reaches the other brokers through link i->j (fault.injection.replica.routes)."""
    cluster = Cluster.create(tmp_path / "cluster", voters=3, brokers=3)
    net = ProxyNet.install(cluster, random.Random(1))
    try:
        for node_id, info in cluster.nodes.items():
            settings = tomllib.loads(Path(info.config).read_text())
            voters = proxied_voters(settings[VOTERS_KEY])
            assert set(voters) == {1, 2, 3}
            for voter, port in voters.items():
                expected = cluster.node(voter).controller_address if voter == node_id \
                    else f"127.0.0.1:{net.links[(node_id, voter)].listen_port}"
                assert f"127.0.0.1:{port}" == expected
            if info.is_voter:
                assert REPLICA_ROUTES_KEY not in settings
                continue
            routes = parse_replica_routes(REPLICA_ROUTES_KEY, settings[REPLICA_ROUTES_KEY])
            assert routes == {b: ("127.0.0.1", net.links[(node_id, b)].listen_port)
                              for b in (4, 5, 6) if b != node_id}
            assert load(info.config).replica_routes == routes
            for broker in routes:
                assert net.links[(node_id, broker)].target_address == \
                    cluster.node(broker).client_address
        assert sorted(net.partition(5, one_way=True)) == [(5, 1), (5, 2), (5, 3), (5, 4),
                                                          (5, 6)]
        assert {(4, 5), (6, 5)} <= set(net.partition(5))
        assert {(4, 5), (5, 4), (5, 1)} <= set(net.degrade(5, delay_ms=50))
    finally:
        net.close()
