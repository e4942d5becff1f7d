"""The Kafka listener's limits over real TCP on 127.0.0.1 (broker/kafka/listener.py,
raft/common/connection_limits.py): a frame before login is bounded by
`sasl.server.max.receive.size` and after it by `socket.request.max.bytes`; a SASL
connection not logged in by its deadline and a connection idle past
`connections.max.idle.ms` are closed; `max.connections.per.ip` closes the newest
connection at once and counts it."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from broker.kafka.listener import KafkaListener
from broker.kafka.sasl import sasl_client
from broker.kafka.sasl.sasl_settings import SaslClientSettings
from raft.common.connection_limits import ListenerLimits
from raft.common.kafka.wire_client import encode_request
from tests.unit.broker.test_kafka_listener import make_dispatcher
from tests.unit.broker.test_sasl_api import SETTINGS, read_frame

API_VERSIONS = encode_request(ApiVersionsRequest(client_software_name="t",
                                                 client_software_version="1"))
BOB = SaslClientSettings(mechanism="PLAIN", username="bob", password="bob-pw")
WAIT_S = 5.0  # every wait below ends well before this, or the test fails


def close_reasons(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [str(getattr(r, "reason", "")) for r in caplog.records
            if r.getMessage() == "closing Kafka connection"]


async def closed_by_listener(stream: trio.abc.Stream) -> bool:
    """True once the listener closes `stream` (what it sends before is skipped)."""
    with trio.fail_after(WAIT_S):
        while True:
            try:
                if not await stream.receive_some(65536):
                    return True
            except trio.BrokenResourceError:  # reset: closed with our bytes unread
                return True


async def test_a_frame_above_the_sasl_receive_size_closes_before_login_not_after(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "broker.kafka.listener")
    limits = ListenerLimits(sasl_max_receive_bytes=1024, max_request_bytes=1 << 20)
    listener = KafkaListener(make_dispatcher(tmp_path), ("127.0.0.1", 0), limits=limits)
    listener.sasl = SETTINGS
    big = (4096).to_bytes(4, "big") + bytes(4096)  # no valid request: only its size matters
    async with trio.open_nursery() as nursery:
        port = await nursery.start(listener.serve)
        before = await trio.open_tcp_stream("127.0.0.1", port)
        await before.send_all(big[:4])  # the header alone closes it
        assert await closed_by_listener(before)
        after = await trio.open_tcp_stream("127.0.0.1", port)
        await sasl_client.authenticate(after, BOB, rng=random.Random(1))
        await after.send_all(big)  # read whole, then refused as a request
        assert await closed_by_listener(after)
        nursery.cancel_scope.cancel()
    reasons = close_reasons(caplog)
    assert reasons[0] == "frame size 4096 outside 0..1024"
    assert len(reasons) == 2
    assert "outside" not in reasons[1]


async def test_a_sasl_connection_not_logged_in_by_its_deadline_is_closed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "broker.kafka.listener")
    limits = ListenerLimits(authentication_timeout_ms=200)
    listener = KafkaListener(make_dispatcher(tmp_path), ("127.0.0.1", 0), limits=limits)
    listener.sasl = SETTINGS
    async with trio.open_nursery() as nursery:
        port = await nursery.start(listener.serve)
        silent = await trio.open_tcp_stream("127.0.0.1", port)
        await silent.send_all(API_VERSIONS)  # allowed before login, but no login follows
        started = trio.current_time()
        assert await closed_by_listener(silent)
        assert trio.current_time() - started < WAIT_S
        logged_in = await trio.open_tcp_stream("127.0.0.1", port)
        # logged in within the deadline: served on
        await sasl_client.authenticate(logged_in, BOB, rng=random.Random(2))
        await logged_in.send_all(API_VERSIONS)
        assert await read_frame(logged_in)
        nursery.cancel_scope.cancel()
    assert close_reasons(caplog) == ["not logged in within 200 ms"]


async def test_a_connection_without_a_complete_request_for_the_idle_time_is_closed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "broker.kafka.listener")
    listener = KafkaListener(make_dispatcher(tmp_path), ("127.0.0.1", 0),
                             limits=ListenerLimits(max_idle_ms=300))
    async with trio.open_nursery() as nursery:
        port = await nursery.start(listener.serve)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(API_VERSIONS)
        assert await read_frame(stream)
        await stream.send_all(API_VERSIONS[:6])  # part of a request is no request
        assert await closed_by_listener(stream)
        nursery.cancel_scope.cancel()
    assert close_reasons(caplog) == ["no complete request for 300 ms"]


async def test_max_connections_per_ip_closes_the_newest_at_once_and_counts_it(
        tmp_path: Path) -> None:
    listener = KafkaListener(make_dispatcher(tmp_path), ("127.0.0.1", 0),
                             limits=ListenerLimits(max_connections_per_ip=2))
    async with trio.open_nursery() as nursery:
        port = await nursery.start(listener.serve)
        kept = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
        for stream in kept:  # both admitted and served
            await stream.send_all(API_VERSIONS)
            assert await read_frame(stream)
        third = await trio.open_tcp_stream("127.0.0.1", port)
        assert await closed_by_listener(third)
        assert listener.gate.refused == 1
        await kept.pop().aclose()
        # the close is in the kernel at once on loopback: its reader sees it, then idles
        await trio.testing.wait_all_tasks_blocked(0.05)
        assert listener.gate.open == 1
        again = await trio.open_tcp_stream("127.0.0.1", port)
        await again.send_all(API_VERSIONS)
        assert await read_frame(again)
        assert listener.gate.refused == 1
        nursery.cancel_scope.cancel()
