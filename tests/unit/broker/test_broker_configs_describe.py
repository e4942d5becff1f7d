"""DescribeConfigs of a BROKER resource, as Kafka's broker answers it: its own id with
every dynamic key and the source it resolves to, "" with the defaults set, another id
refused."""

from __future__ import annotations

from broker.kafka.admin.configs_api import CONFIG_TYPES, describe_broker_configs
from metadata.broker_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    FOLLOWER_RATE,
    LEADER_RATE,
    UNLIMITED,
)
from raft.common.errors import ErrorCode

CONFIGS = (("", LEADER_RATE, "30"), ("5", LEADER_RATE, "10"))


def by_name(result: object) -> dict[str, dict[str, object]]:
    return {c["name"]: c for c in result["configs"]}  # type: ignore[index]


def test_own_id_lists_every_dynamic_key_with_its_source_and_synonyms() -> None:
    configs = by_name(describe_broker_configs(CONFIGS, 5, "5", None, synonyms=True,
                                             documentation=False))
    leader, follower = configs[LEADER_RATE], configs[FOLLOWER_RATE]
    assert (leader["value"], leader["config_source"]) == ("10", DYNAMIC_BROKER_CONFIG)
    assert [(s["value"], s["source"]) for s in leader["synonyms"]] == [  # type: ignore[attr-defined]
        ("10", DYNAMIC_BROKER_CONFIG), ("30", DYNAMIC_DEFAULT_BROKER_CONFIG),
        (str(UNLIMITED), DEFAULT_CONFIG)]
    assert (follower["value"], follower["config_source"], follower["is_default"]) == (
        str(UNLIMITED), DEFAULT_CONFIG, True)


def test_another_broker_takes_the_default_and_synonyms_only_when_asked() -> None:
    configs = by_name(describe_broker_configs(CONFIGS, 6, "6", (LEADER_RATE,),
                                              synonyms=False, documentation=False))
    assert list(configs) == [LEADER_RATE]
    assert (configs[LEADER_RATE]["value"], configs[LEADER_RATE]["config_source"],
            configs[LEADER_RATE]["synonyms"]) == ("30", DYNAMIC_DEFAULT_BROKER_CONFIG, [])


def test_the_default_resource_lists_only_the_defaults_set() -> None:
    configs = by_name(describe_broker_configs(CONFIGS, 5, "", None, synonyms=True,
                                              documentation=False))
    assert {k: (c["value"], c["config_source"]) for k, c in configs.items()} == {
        LEADER_RATE: ("30", DYNAMIC_DEFAULT_BROKER_CONFIG)}


def test_another_brokers_id_is_refused_with_kafkas_message() -> None:
    result = describe_broker_configs(CONFIGS, 5, "6", None, synonyms=True,
                                     documentation=False)
    assert result["error_code"] == ErrorCode.INVALID_REQUEST
    assert result["error_message"] == ("Unexpected broker id, expected 5 or empty string, "
                                       "but received 6")


def test_stored_only_keys_are_described_with_kafkas_type_and_default() -> None:
    configs = by_name(describe_broker_configs((), 5, "5", None, synonyms=True,
                                              documentation=True))
    relogin = configs["sasl.kerberos.min.time.before.relogin"]
    assert (relogin["value"], relogin["config_source"], relogin["config_type"]) == (
        "60000", DEFAULT_CONFIG, CONFIG_TYPES["LONG"])
    assert "no effect here" in relogin["documentation"]  # type: ignore[operator]
    no_default = configs["log.retention.ms"]
    assert (no_default["value"], no_default["synonyms"]) == (None, [])
    assert "broker.id" not in configs  # read-only: not a dynamic key


def test_password_keys_are_sensitive_and_their_values_never_leave() -> None:
    key = "listener.name.plaintext.ssl.keystore.password"
    configs = by_name(describe_broker_configs((("5", key, "secret"),), 5, "5", None,
                                              synonyms=True, documentation=False))
    entry = configs[key]
    assert (entry["value"], entry["is_sensitive"], entry["config_source"]) == (
        None, True, DYNAMIC_BROKER_CONFIG)
    assert [s["value"] for s in entry["synonyms"]] == [None]  # type: ignore[attr-defined]


def test_a_key_kafka_does_not_know_is_described_where_it_is_set() -> None:
    stored = (("", "my.plugin.setting", "on"),)
    for name in ("", "5"):
        entry = by_name(describe_broker_configs(stored, 5, name, None, synonyms=False,
                                                documentation=False))["my.plugin.setting"]
        assert (entry["value"], entry["config_source"], entry["config_type"]) == (
            "on", DYNAMIC_DEFAULT_BROKER_CONFIG, CONFIG_TYPES["UNKNOWN"])
