"""tools.config: SASL keys (sasl.enabled.mechanisms, sasl.mechanism.inter.broker.protocol,
listener.name.<listener>.<mechanism>.sasl.jaas.config, sasl.plain.users), what they make
for the broker (its listener's SASL and its replica fetcher's login), and one clear
error per mistake, never echoing a password."""

from __future__ import annotations

from typing import Any

import pytest

from broker.kafka.sasl.sasl_settings import SaslClientSettings, parse_jaas_config
from tools.config import ConfigError, from_mapping, to_toml

BASE = {"node.id": "4", "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:19091", "log.dirs": "/tmp/x",
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9092"}
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="admin" password="admin-secret";')
SASL = {**BASE, "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS,
        "sasl.plain.users": "alice:al:ice-pw,bob:bob-pw"}


def test_sasl_listener_gets_its_mechanisms_and_the_brokers_login_when_configured() -> None:
    settings = from_mapping(SASL, "server.properties").broker_settings()
    assert settings.sasl is not None
    assert settings.sasl.enabled_mechanisms == ("SCRAM-SHA-256", "PLAIN")
    assert dict(settings.sasl.plain_users) == {"alice": "al:ice-pw", "bob": "bob-pw"}
    assert settings.inter_broker_sasl == SaslClientSettings(
        mechanism="SCRAM-SHA-256", username="admin", password="admin-secret")
    assert "admin-secret" not in repr(settings.inter_broker_sasl)


def test_plaintext_listener_has_no_sasl_when_sasl_keys_are_set_anyway() -> None:
    settings = from_mapping({**SASL, "listeners": "PLAINTEXT://127.0.0.1:9092"}
                            ).broker_settings()
    assert settings.sasl is None
    assert settings.inter_broker_sasl is None


def test_plain_login_module_users_are_plain_users_when_given() -> None:
    config = from_mapping({
        **BASE, "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="pw" user_admin="pw" user_carol="c";'})
    settings = config.broker_settings()
    assert settings.sasl is not None
    assert dict(settings.sasl.plain_users) == {"admin": "pw", "carol": "c"}


@pytest.mark.parametrize(("changes", "key", "message"), [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms",
     "GSSAPI: kraft-py implements PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
     "sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512 is not in sasl.enabled"),
    ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": None},
     "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "is required"),
    ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
      'org.apache.kafka.common.security.scram.ScramLoginModule required username="a";'},
     "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "lacks password"),
    ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": "Module required"},
     "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "ends with ';'"),
    ({"sasl.plain.users": "alice"}, "sasl.plain.users", "entry 1 is not NAME:PASSWORD"),
    ({"process.roles": "broker,controller", "node.id": "1",
      "listeners": "SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19091",
      "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                        "CONTROLLER:SASL_PLAINTEXT"},
     "listeners", "SASL on a broker's Kafka listener only"),
])
def test_config_is_refused_with_the_key_named_when_sasl_is_misconfigured(
        changes: dict[str, Any], key: str, message: str) -> None:
    raw = {k: v for k, v in {**SASL, **changes}.items() if v is not None}
    with pytest.raises(ConfigError) as caught:
        from_mapping(raw, "server.properties")
    assert caught.value.key == key
    assert message in str(caught.value)
    assert "admin-secret" not in str(caught.value)


def test_jaas_key_survives_the_launchers_toml_when_written() -> None:
    text = to_toml(SASL)
    assert '"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"' in text
    import tomllib
    assert from_mapping(tomllib.loads(text)).broker_settings().inter_broker_sasl is not None


def test_jaas_options_keep_escaped_quotes_when_parsed() -> None:
    jaas = parse_jaas_config('M required username="a\\"b" password=plain-word;')
    assert jaas.options == {"username": 'a"b', "password": "plain-word"}
