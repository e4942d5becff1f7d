"""tools.config with Kafka's spellings: `.properties` files, `controller.quorum.*` keys
(the old `quorum.*` names as aliases), listeners with an empty host, advertised
listeners, security protocols, metadata.log.dir and the bootstrap servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.kafka.partitions.segments import LogDefaults
from tools.config import (
    ConfigError,
    from_mapping,
    load,
    to_toml,
)
from tools.properties import parse_properties

BASE = {"node.id": "1", "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:19091",
        "listeners": "CONTROLLER://127.0.0.1:19091", "log.dirs": "/tmp/x"}
BROKER = {**BASE, "node.id": "4", "process.roles": "broker",
          "listeners": "PLAINTEXT://127.0.0.1:9092"}


def test_properties_syntax_comments_separators_continuations_and_escapes() -> None:
    text = ("# a comment\n! another\n\n   key.one = 1\nkey.two:two\nkey.three three\n"
            "key.four=a,\\\n     b,\\\n  c\nkey\\:five=x\\ty\\u0041\nkey.six=\n"
            "key.one=again\ntrailing=ends with \\\\\n")
    assert parse_properties(text) == {
        "key.one": "again", "key.two": "two", "key.three": "three", "key.four": "a,b,c",
        "key:five": "x\tyA", "key.six": "", "trailing": "ends with \\"}


def test_server_properties_file_loads_like_the_same_toml(tmp_path: Path) -> None:
    """Same keys, same NodeConfig; values are strings in a properties file."""
    props = tmp_path / "server.properties"
    props.write_text("process.roles=controller\nnode.id=1\n"
                     "controller.quorum.voters=1@127.0.0.1:19091\n"
                     "listeners=CONTROLLER://127.0.0.1:19091\nlog.dirs=/tmp/x\n"
                     "controller.quorum.election.timeout.ms=300\n"
                     "controller.quorum.fetch.timeout.ms=600\n"
                     "controller.quorum.pre.vote.enable=false\n")
    toml = tmp_path / "node.toml"
    toml.write_text(to_toml({**BASE, "controller.quorum.election.timeout.ms": 300,
                             "controller.quorum.fetch.timeout.ms": 600,
                             "controller.quorum.pre.vote.enable": False}))
    assert load(props) == load(toml)
    assert load(props).election_timeout_ms == 300
    assert not load(props).pre_vote


def test_a_key_value_file_not_named_properties_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "server.conf"
    path.write_text("\n".join(f"{k}={v}" for k, v in BASE.items()) + "\n")
    assert load(path).node_id == 1
    broken = tmp_path / "broken.toml"
    broken.write_text("node.id = = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML|neither valid TOML"):
        load(broken)


def test_old_quorum_names_are_aliases_with_one_deprecation_warning_each() -> None:
    config = from_mapping({**BASE, "quorum.election.timeout.ms": "300",
                           "quorum.fetch.timeout.ms": "600"})
    assert (config.election_timeout_ms, config.fetch_timeout_ms) == (300, 600)
    assert config.warnings == (
        "quorum.election.timeout.ms is deprecated: use controller.quorum.election.timeout.ms",
        "quorum.fetch.timeout.ms is deprecated: use controller.quorum.fetch.timeout.ms")
    assert from_mapping({**BASE, "controller.quorum.election.timeout.ms": "300",
                         "controller.quorum.fetch.timeout.ms": "600"}).warnings == ()


def test_a_key_under_both_names_is_refused() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        from_mapping({**BASE, "quorum.election.timeout.ms": 3,
                      "controller.quorum.election.timeout.ms": 3})


def test_to_toml_writes_the_current_names() -> None:
    assert '"controller.quorum.election.timeout.ms" = 300' in \
        to_toml({**BASE, "quorum.election.timeout.ms": 300})


def test_kafka_sample_keys_without_effect_are_accepted_in_one_warning() -> None:
    config = from_mapping({**BASE, "num.network.threads": "3", "log.flush.interval.ms": "9"})
    assert config.warnings == (
        "ignored (no effect in kraft-py): log.flush.interval.ms, num.network.threads",)
    with pytest.raises(ConfigError, match="unknown configuration key"):
        from_mapping({**BASE, "num.netwrok.threads": "3"})


HOUR_MS = 3_600_000


@pytest.mark.parametrize(("keys", "expected"), [
    ({}, LogDefaults(retention_ms=168 * HOUR_MS, retention_bytes=-1,
                     segment_ms=168 * HOUR_MS)),  # Kafka's
    ({"log.retention.hours": "2", "log.retention.bytes": "1000", "log.roll.hours": "3"},
     LogDefaults(retention_ms=2 * HOUR_MS, retention_bytes=1000, segment_ms=3 * HOUR_MS)),
    ({"log.retention.hours": "2", "log.retention.minutes": "5"},
     LogDefaults(retention_ms=300_000, segment_ms=168 * HOUR_MS)),
    ({"log.retention.hours": "2", "log.retention.minutes": "5", "log.retention.ms": "7",
      "log.roll.hours": "3", "log.roll.ms": "11"},
     LogDefaults(retention_ms=7, segment_ms=11)),
    ({"log.retention.hours": "-1"}, LogDefaults(retention_ms=-1, segment_ms=168 * HOUR_MS)),
])
def test_log_retention_and_roll_keys_give_the_topic_defaults_as_kafka_s(
        keys: dict[str, str], expected: LogDefaults) -> None:
    """log.retention.ms before .minutes before .hours, log.roll.ms before .hours, read
    without a warning, and passed to the broker role."""
    config = from_mapping({**BROKER, **keys})
    assert config.warnings == ()
    assert config.log_defaults() == expected
    assert config.broker_settings().log_defaults == expected


def test_empty_listener_host_binds_every_interface_and_advertises_this_host() -> None:
    config = from_mapping({**BROKER, "listeners": "PLAINTEXT://:9092"})
    assert config.client_address == ("0.0.0.0", 9092)
    advertised = config.advertised_client_address
    assert advertised is not None
    assert advertised[1] == 9092
    assert advertised[0] not in ("", "0.0.0.0")
    controller = from_mapping({**BASE, "listeners": "CONTROLLER://:19091"})
    assert controller.controller_address == ("0.0.0.0", 19091)


def test_advertised_listeners_are_what_a_broker_registers() -> None:
    config = from_mapping({**BROKER, "listeners": "PLAINTEXT://0.0.0.0:9092",
                           "advertised.listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert config.client_address == ("0.0.0.0", 9092)
    assert config.broker_settings().advertised_address == ("127.0.0.1", 9092)
    assert from_mapping(BROKER).broker_settings().advertised_address is None  # the same
    with pytest.raises(ConfigError, match="advertised.listeners: PLAINTEXT would advertise"):
        from_mapping({**BROKER, "listeners": "PLAINTEXT://0.0.0.0:9092"})
    with pytest.raises(ConfigError, match="listener OTHER is not in listeners"):
        from_mapping({**BROKER, "advertised.listeners": "OTHER://127.0.0.1:1"})


# SASL_PLAINTEXT and SASL_SSL listeners: tests/unit/tools/test_config_sasl.py; SSL's keys:
# tests/unit/tools/test_tls_config.py
def test_an_ssl_listener_is_refused_when_the_node_has_no_keystore() -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping({**BROKER, "listeners": "SSL://h:9093"}, "server.properties")
    assert caught.value.key == "ssl.keystore.location"
    assert "listener SSL is SSL: it needs a keystore" in str(caught.value)


def test_protocol_map_names_listeners_and_refuses_unmapped_ones() -> None:
    config = from_mapping({**BROKER, "listeners": "INTERNAL://127.0.0.1:9092",
                           "listener.security.protocol.map": "INTERNAL:PLAINTEXT"})
    assert config.client_address == ("127.0.0.1", 9092)
    with pytest.raises(ConfigError, match="no security protocol for listener INTERNAL"):
        from_mapping({**BROKER, "listeners": "INTERNAL://127.0.0.1:9092"})
    with pytest.raises(ConfigError, match="listener INTERNAL is SSL: it needs a keystore"):
        from_mapping({**BROKER, "listeners": "INTERNAL://h:1",
                      "listener.security.protocol.map": "INTERNAL:SSL"})
    with pytest.raises(ConfigError, match="listener.security.protocol.map: bad entry"):
        from_mapping({**BROKER, "listener.security.protocol.map": "PLAINTEXT:BOGUS"})


def test_inter_broker_listener_name_picks_the_kafka_listener() -> None:
    two = {**BROKER, "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
           "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"}
    with pytest.raises(ConfigError, match="one listener"):
        from_mapping(two)
    config = from_mapping({**two, "inter.broker.listener.name": "EXTERNAL"})
    assert config.client_address == ("127.0.0.1", 9093)
    with pytest.raises(ConfigError, match="inter.broker.listener.name: NOPE is not in"):
        from_mapping({**two, "inter.broker.listener.name": "NOPE"})


def test_log_dir_and_metadata_log_dir() -> None:
    no_dirs = {k: v for k, v in BASE.items() if k != "log.dirs"}
    assert from_mapping({**no_dirs, "metadata.log.dir": "/m"}).log_dir == Path("/m")
    assert from_mapping({**no_dirs, "log.dir": "/l"}).log_dir == Path("/l")
    assert from_mapping({**BASE, "metadata.log.dir": "/tmp/x"}).log_dir == Path("/tmp/x")
    with pytest.raises(ConfigError, match="metadata.log.dir: /m differs"):
        from_mapping({**BASE, "metadata.log.dir": "/m"})
    with pytest.raises(ConfigError, match="log.dirs: is required"):
        from_mapping(no_dirs)


def test_bootstrap_servers_alone_serve_a_broker_and_a_controller_to_be_added() -> None:
    """A broker, and (KIP-853) a controller formatted to be added to a dynamic quorum,
    learn the voters from controller.quorum.bootstrap.servers at start."""
    broker = {k: v for k, v in BROKER.items() if k != "controller.quorum.voters"}
    config = from_mapping({**broker, "controller.quorum.bootstrap.servers": "127.0.0.1:19091"})
    assert config.voters == {}
    assert config.bootstrap_servers == (("127.0.0.1", 19091),)
    controller = {k: v for k, v in BASE.items() if k != "controller.quorum.voters"}
    config = from_mapping({**controller,
                           "controller.quorum.bootstrap.servers": "127.0.0.1:19091"})
    assert config.voters == {}
    assert not config.is_voter
    with pytest.raises(ConfigError, match="controller.quorum.voters: is required"):
        from_mapping(controller)
    with pytest.raises(ConfigError, match="not the endpoint of any voter"):
        from_mapping({**BROKER, "controller.quorum.bootstrap.servers": "127.0.0.1:1"})
