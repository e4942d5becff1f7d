"""The listener-limit keys (tools/config/keys.py): Kafka's defaults, their values carried to
every listener (`NodeConfig.listener_limits`, the broker's settings), and a bad value
refused naming its key."""

from __future__ import annotations

import pytest

from raft.common.connection_limits import ListenerLimits
from tools.config import UNLIMITED_CONNECTIONS, ConfigError, from_mapping

BROKER = {"node.id": "4", "process.roles": "broker",
          "controller.quorum.voters": "1@127.0.0.1:19091",
          "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": "/tmp/x"}


def test_kafka_defaults_when_no_limit_key_is_given() -> None:
    limits = from_mapping(BROKER).listener_limits()
    assert limits == ListenerLimits(
        max_connections=UNLIMITED_CONNECTIONS, max_connections_per_ip=UNLIMITED_CONNECTIONS,
        max_idle_ms=600_000, authentication_timeout_ms=10_000,
        sasl_max_receive_bytes=524288, max_request_bytes=104857600)


def test_the_keys_reach_the_kafka_and_status_listeners() -> None:
    config = from_mapping({**BROKER, "max.connections": "500",
                           "max.connections.per.ip": "20",
                           "connections.max.idle.ms": "30000",
                           "connections.authentication.timeout.ms": "3000",
                           "sasl.server.max.receive.size": "65536",
                           "socket.request.max.bytes": "2097152"})
    expected = ListenerLimits(max_connections=500, max_connections_per_ip=20,
                              max_idle_ms=30_000, authentication_timeout_ms=3000,
                              sasl_max_receive_bytes=65536, max_request_bytes=2 << 20)
    assert config.listener_limits() == expected
    settings = config.broker_settings()
    assert settings.listener_limits(settings.kafka_limits) == expected
    assert settings.listener_limits(settings.status_limits) == expected


@pytest.mark.parametrize(("key", "value"), [
    ("max.connections", "-1"), ("max.connections.per.ip", "many"),
    ("connections.max.idle.ms", "0"), ("sasl.server.max.receive.size", "0"),
    ("connections.authentication.timeout.ms", "0"),
])
def test_a_bad_limit_is_refused_naming_its_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        from_mapping({**BROKER, key: value})
    assert raised.value.key == key
