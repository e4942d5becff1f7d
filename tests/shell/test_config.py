"""tools.config: Kafka key names in TOML; unknown keys and bad values name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.config import ConfigError, from_mapping, load, to_toml

BASE = {"node.id": 1, "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:19091,2@127.0.0.1:19092",
        "listeners": "CONTROLLER://127.0.0.1:19091", "log.dirs": "/tmp/x"}


def test_config_reads_kafka_names_when_written_as_quoted_or_dotted_keys(tmp_path: Path) -> None:
    """Both `"node.id" = 1` and TOML dotted `node.id = 1` mean Kafka's node.id."""
    quoted = tmp_path / "quoted.toml"
    quoted.write_text(to_toml({**BASE, "quorum.election.timeout.ms": 300,
                               "quorum.fetch.timeout.ms": 600}))
    dotted = tmp_path / "dotted.toml"
    dotted.write_text('node.id = 1\nprocess.roles = "controller"\n'
                      'controller.quorum.voters = "1@127.0.0.1:19091,2@127.0.0.1:19092"\n'
                      'listeners = "CONTROLLER://127.0.0.1:19091"\nlog.dirs = "/tmp/x"\n'
                      'quorum.election.timeout.ms = 300\nquorum.fetch.timeout.ms = 600\n')
    for path in (quoted, dotted):
        config = load(path)
        assert config.node_id == 1
        assert config.roles == {"controller"}
        assert config.voters == {1: ("127.0.0.1", 19091), 2: ("127.0.0.1", 19092)}
        assert config.controller_address == ("127.0.0.1", 19091)
        assert config.election_timeout_ms == 300
        assert config.fetch_timeout_ms == 600
        assert config.request_timeout_ms == 2000  # Kafka's default


@pytest.mark.parametrize(("change", "key"), [
    ({"quorum.electon.timeout.ms": 5}, "quorum.electon.timeout.ms"),
    ({"quorum.election.timeout.ms": "soon"}, "quorum.election.timeout.ms"),
    ({"quorum.election.timeout.ms": 0}, "quorum.election.timeout.ms"),
    ({"controller.quorum.voters": "1@localhost"}, "controller.quorum.voters"),
    ({"controller.quorum.voters": "x@127.0.0.1:1"}, "controller.quorum.voters"),
    ({"process.roles": "leader"}, "process.roles"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "listeners"),
    ({"log.dirs": "/a,/b"}, "log.dirs"),
    ({"socket.request.max.bytes": True}, "socket.request.max.bytes"),
    ({"quorum.fetch.timeout.ms": 10}, "quorum.fetch.timeout.ms"),
    ({"socket.request.max.bytes": 1 << 20}, "controller.quorum.fetch.max.bytes"),
])
def test_config_fails_naming_the_key_when_a_key_is_unknown_or_bad(
        change: dict[str, object], key: str) -> None:
    """Unknown keys and bad values fail at start with the key named."""
    with pytest.raises(ConfigError) as caught:
        from_mapping({**BASE, **change}, "node.toml")
    assert caught.value.key == key
    assert str(caught.value).startswith(f"node.toml: {key}: ")


def test_controller_outside_the_voters_is_an_observer_when_configured() -> None:
    """KIP-853: a controller formatted to be added later (`kraft format
    --no-initial-controllers`) runs as an observer until `kraft quorum add-controller`
    adds it; the configured voters are whom it asks."""
    config = from_mapping({**BASE, "node.id": 3})
    assert config.roles == {"controller"}
    assert not config.is_voter


def test_config_fails_naming_the_key_when_a_required_key_is_missing() -> None:
    """controller.quorum.voters has no default."""
    settings = dict(BASE)
    del settings["controller.quorum.voters"]
    with pytest.raises(ConfigError, match="controller.quorum.voters: is required"):
        from_mapping(settings)


def test_broker_config_is_an_observer_when_its_roles_lack_controller() -> None:
    """Brokers fetch as observers: not voters, and they need no controller listener."""
    config = from_mapping({**BASE, "node.id": 4, "process.roles": "broker",
                           "listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert not config.is_voter
    assert config.controller_address is None
    assert config.client_address == ("127.0.0.1", 9092)


def test_fault_injection_file_is_off_by_default_and_relative_to_the_config_file(
        tmp_path: Path) -> None:
    """Test-only `fault.injection.file` (kraft chaos): empty means off; a relative path
    names a file beside node.toml."""
    assert from_mapping(BASE).fault_injection_file == ""
    path = tmp_path / "node.toml"
    path.write_text(to_toml({**BASE, "fault.injection.file": "faults.json"}))
    assert load(path).fault_injection_file == str(tmp_path / "faults.json")
    with pytest.raises(ConfigError, match="fault.injection.file"):
        from_mapping({**BASE, "fault.injection.file": 3})


def test_replica_routes_are_off_by_default_and_parse_broker_addresses(tmp_path: Path) -> None:
    """Test-only `fault.injection.replica.routes` (kraft chaos): broker id -> the proxy a
    broker's replica fetcher dials instead of that broker's advertised endpoint."""
    assert from_mapping(BASE).replica_routes == {}
    path = tmp_path / "node.toml"
    path.write_text(to_toml({**BASE, "fault.injection.file": "faults.json",
                             "fault.injection.replica.routes":
                                 "5@127.0.0.1:41234, 6@127.0.0.1:41235"}))
    assert load(path).replica_routes == {5: ("127.0.0.1", 41234), 6: ("127.0.0.1", 41235)}


@pytest.mark.parametrize("routes", ["5", "x@127.0.0.1:1", "5@127.0.0.1", "5@127.0.0.1:99999",
                                    "5@127.0.0.1:1,5@127.0.0.1:2", 5])
def test_replica_routes_fail_naming_the_key_when_malformed(routes: object) -> None:
    with pytest.raises(ConfigError, match="fault.injection.replica.routes"):
        from_mapping({**BASE, "fault.injection.replica.routes": routes})


SNAPSHOT_BYTES = "metadata.log.max.record.bytes.between.snapshots"


def test_snapshot_interval_defaults_to_kafkas_20_mib_and_reads_the_kafka_key() -> None:
    assert from_mapping(BASE).max_record_bytes_between_snapshots == 20 * 1024 * 1024
    assert from_mapping({**BASE, SNAPSHOT_BYTES: 4096}).max_record_bytes_between_snapshots \
        == 4096
    assert from_mapping({**BASE, SNAPSHOT_BYTES: "1"}).max_record_bytes_between_snapshots == 1


@pytest.mark.parametrize("value", [0, -5, "often", 1.5, True])
def test_snapshot_interval_fails_naming_the_key_when_not_a_positive_integer(
        value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping({**BASE, SNAPSHOT_BYTES: value}, "node.toml")
    assert caught.value.key == SNAPSHOT_BYTES
