"""The lossy proxy's stalls are counted, so a test can tell that a loss fault did happen:
every chunk forwarded is counted per link, and so is every retransmission stall a "lost"
chunk cost (none without loss, some under it, as many as the holds say)."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator

import pytest

from tests.support.chaos_proxy_net import echo_proxy_net
from tools.chaos.proxy import Degradation, ProxyNet

ROUNDS = 100
MESSAGE_BYTES = 100


@pytest.fixture
def net() -> Iterator[ProxyNet]:
    with echo_proxy_net(seed=5, echo_recv_bytes=4096) as proxies:
        yield proxies


def ping_pong(net: ProxyNet, seed: int, rounds: int = ROUNDS) -> None:
    """`rounds` messages through link 4->1 to the echo server, each one back (whole and
    unchanged) before the next leaves: two chunks a round, one each way."""
    link = net.links[(4, 1)]
    rng = random.Random(seed)
    with socket.create_connection(("127.0.0.1", link.listen_port), timeout=10) as conn:
        for _ in range(rounds):
            message = rng.randbytes(MESSAGE_BYTES)
            conn.sendall(message)
            received = b""
            while len(received) < len(message):
                data = conn.recv(65536)
                assert data, "the proxy closed the connection"
                received += data
            assert received == message


@pytest.mark.parametrize("loss", [0.05, 0.2, 0.5])
def test_stalls_are_counted_when_the_link_loses_chunks(net: ProxyNet, loss: float) -> None:
    """Under loss every message arrives whole and the link counts stalls: some chunks
    stalled, each at least once."""
    net.degrade(4, loss=loss)
    ping_pong(net, seed=1)
    stats = net.stats()
    assert stats.chunks >= 2 * ROUNDS
    assert stats.stalls > 0
    assert stats.stalled_chunks > 0
    assert stats.stalled_chunks <= stats.chunks
    assert stats.stalls >= stats.stalled_chunks
    assert net.links[(4, 1)].stats == stats  # the only link


@pytest.mark.parametrize("degradation", [{}, {"delay_ms": 2.0, "jitter_ms": 1.0}])
def test_no_stall_is_counted_when_the_link_loses_nothing(
        net: ProxyNet, degradation: dict[str, float]) -> None:
    """Healthy or only slow: chunks are forwarded and counted, none stalls."""
    if degradation:
        net.degrade(4, **degradation)
    ping_pong(net, seed=2)
    stats = net.stats()
    assert stats.chunks >= 2 * ROUNDS
    assert stats.stalls == 0
    assert stats.stalled_chunks == 0


def test_stalls_stop_being_counted_when_the_link_is_healed(net: ProxyNet) -> None:
    net.degrade(4, loss=0.5)
    ping_pong(net, seed=3)
    lossy = net.stats()
    assert lossy.stalls > 0
    net.heal()
    ping_pong(net, seed=4)
    healed = net.stats()
    assert healed.chunks > lossy.chunks
    assert healed.stalls == lossy.stalls


def test_hold_counts_one_stall_per_retransmission_timeout_it_adds() -> None:
    """`hold` is `hold_s` with the number of losses: the same draws give the same hold,
    and with no delay configured the hold is exactly that many doubling timeouts."""
    rng = random.Random(6)
    degradation = Degradation(loss=0.5)
    losses = []
    for _ in range(1000):
        state = rng.getstate()
        held_s, lost = degradation.hold(rng, rto_ms=200, max_rto_ms=1600)
        after = rng.getstate()
        rng.setstate(state)
        assert degradation.hold_s(rng, rto_ms=200, max_rto_ms=1600) == held_s
        assert rng.getstate() == after
        assert held_s == pytest.approx(sum(min(200 * 2**i, 1600) for i in range(lost)) / 1000)
        losses.append(lost)
    assert {0, 1, 2} <= set(losses)
    assert {Degradation(delay_ms=100, jitter_ms=50).hold(rng)[1] for _ in range(100)} == {0}
