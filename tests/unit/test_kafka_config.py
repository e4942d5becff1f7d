"""tools.config: a broker's Kafka listener and its separate BrokerStatus listener."""

from __future__ import annotations

from pathlib import Path

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
