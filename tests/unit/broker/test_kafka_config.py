"""tools.config: a broker's Kafka listener, its separate BrokerStatus listener, and the
settings the broker role takes from the configuration."""

from __future__ import annotations

from pathlib import Path

from broker.settings import BrokerSettings
from tools.config import from_mapping


def test_kafka_and_status_listeners_distinct_when_both_configured(tmp_path: Path) -> None:
    """PLAINTEXT is the Kafka protocol; STATUS (msgpack BrokerStatus) never is."""
    config = from_mapping({
        "node.id": 4, "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:19091",
        "listeners": "STATUS://127.0.0.1:9101,PLAINTEXT://127.0.0.1:9092",
        "log.dirs": str(tmp_path)})
    assert config.client_address == ("127.0.0.1", 9092)
    assert config.status_address == ("127.0.0.1", 9101)


def test_no_status_listener_when_not_configured(tmp_path: Path) -> None:
    """Without STATUS the broker serves no BrokerStatus port (nothing shares the Kafka
    port)."""
    config = from_mapping({
        "node.id": 4, "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:19091",
        "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": str(tmp_path)})
    assert config.client_address == ("127.0.0.1", 9092)
    assert config.status_address is None


def test_broker_settings_carry_the_brokers_part_of_the_configuration(tmp_path: Path) -> None:
    """The broker takes BrokerSettings, built from the node's configuration: the values
    of its keys, the listeners' addresses and the test-only replica routes."""
    config = from_mapping({
        "node.id": 4, "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:19091",
        "listeners": "STATUS://127.0.0.1:9101,PLAINTEXT://127.0.0.1:9092",
        "log.dirs": str(tmp_path), "delete.topic.delay.ms": 5000,
        "broker.heartbeat.interval.ms": 300, "replica.lag.time.max.ms": 700,
        "fault.injection.replica.routes": "5@127.0.0.1:41234"})
    settings = config.broker_settings()
    assert settings == BrokerSettings(
        broker_id=4, log_dir=tmp_path, delete_topic_delay_ms=5000,
        voters={1: ("127.0.0.1", 19091)}, request_timeout_ms=config.request_timeout_ms,
        heartbeat_interval_ms=300, replica_lag_time_max_ms=700,
        socket_request_max_bytes=config.socket_request_max_bytes,
        status_address=("127.0.0.1", 9101), client_address=("127.0.0.1", 9092),
        replica_routes={5: ("127.0.0.1", 41234)}, kafka_limits=config.listener_limits(),
        status_limits=config.listener_limits())
