"""Each configuration default is written once, as its key's default in the key table
(tools/config/keys.py): a key left out of a file yields that default, `NodeConfig` and
`ClientProperties` declare none of their own, and the Raft keys' defaults are the pure
core's (`RaftConfig`, which `tools.server.build.raft_config` fills from the node's keys)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from raft.common.tls import TlsSettings
from raft.core import RaftConfig
from tools.config import (
    CLIENT_SSL_KEYS,
    KEYS,
    REQUIRED,
    ClientProperties,
    Key,
    NodeConfig,
    client_properties,
    from_mapping,
)
from tools.config.parsers import TLS_ATTRIBUTE_PREFIX
from tools.server.build import raft_config

CONTROLLER = {"node.id": 1, "process.roles": "controller",
              "controller.quorum.voters": "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093",
              "listeners": "CONTROLLER://127.0.0.1:19091", "log.dirs": "/var/lib/kraft/node-1"}
# for the keys CONTROLLER gives: a broker that names neither voters nor listeners
BROKER = {"node.id": 5, "process.roles": "broker",
          "controller.quorum.bootstrap.servers": "127.0.0.1:19091",
          "log.dir": "/var/lib/kraft/node-5"}
# NodeConfig's bookkeeping, set by the loader after the keys: not keys of the table
NOT_KEYS = frozenset({"source", "warnings"})
# Keys whose value NodeConfig holds parsed into another shape (a voters string becomes a
# dict, ...): `test_a_key_given_its_default_reads_as_one_left_out` covers them.
PARSED = frozenset({"voters", "protocol_map", "replica_routes", "sasl_jaas_configs",
                    "roles", "bootstrap_servers"})
RAFT_ATTRIBUTES = frozenset({"election_timeout_ms", "fetch_timeout_ms",
                             "election_backoff_max_ms", "request_timeout_ms",
                             "fetch_max_wait_ms", "fetch_max_bytes", "pre_vote",
                             "fetch_snapshot_max_bytes"})
NODE_FIELDS = {f.name for f in dataclasses.fields(NodeConfig)}
TLS_FIELDS = {f.name for f in dataclasses.fields(TlsSettings)}


def value_of(config: NodeConfig | ClientProperties, attribute: str) -> Any:
    """A key's value in a loaded config: the `ssl_*` keys live in its `tls`."""
    if attribute.startswith(TLS_ATTRIBUTE_PREFIX):
        return getattr(config.tls, attribute.removeprefix(TLS_ATTRIBUTE_PREFIX))
    return getattr(config, attribute)


def is_node_value(attribute: str) -> bool:
    return attribute in NODE_FIELDS or (attribute.startswith(TLS_ATTRIBUTE_PREFIX) and
                                        attribute.removeprefix(TLS_ATTRIBUTE_PREFIX)
                                        in TLS_FIELDS)


def optional(key: Key) -> bool:
    """A key with a default and one name (not the `listener.name.<...>` pattern)."""
    return key.default is not REQUIRED and "<" not in key.name


def as_written(value: Any) -> Any:
    """A default as a file gives it (a list key: comma-separated)."""
    return ",".join(value) if isinstance(value, tuple) else value


def base_without(name: str) -> dict[str, Any]:
    return dict(BROKER if name in CONTROLLER else CONTROLLER)


# a key whose default is None (not given: another key decides, as log.retention.ms
# leaves it to log.retention.hours) has no written form
@pytest.mark.parametrize("key", [k for k in KEYS if optional(k) and k.default is not None],
                         ids=lambda k: k.name)
def test_a_key_given_its_default_reads_as_one_left_out(key: Key) -> None:
    base = base_without(key.name)
    assert from_mapping({**base, key.name: as_written(key.default)}) == from_mapping(base)


@pytest.mark.parametrize("key", [k for k in KEYS if optional(k) and is_node_value(k.attribute)
                                 and k.attribute not in PARSED], ids=lambda k: k.name)
def test_a_key_left_out_yields_its_default(key: Key) -> None:
    assert value_of(from_mapping(base_without(key.name)), key.attribute) == key.default


def test_a_left_out_pattern_key_yields_nothing() -> None:
    config = from_mapping(CONTROLLER)
    assert config.sasl_jaas_configs == {}
    assert config.listener_client_auth == {}


def test_node_config_declares_no_default_of_its_own() -> None:
    with_default = [f.name for f in dataclasses.fields(NodeConfig) if f.name not in NOT_KEYS
                    and (f.default is not dataclasses.MISSING
                         or f.default_factory is not dataclasses.MISSING)]
    assert with_default == []


def test_every_key_sets_a_node_config_field_or_one_derived_in_the_loader() -> None:
    derived = {"listener_specs": "listeners", "advertised_specs": "advertised_listeners",
               "log_dirs": "log_dir", "single_log_dir": "log_dir", "metadata_log_dir": "log_dir"}
    for key in KEYS:
        assert is_node_value(derived.get(key.attribute, key.attribute)), key.name


def test_the_raft_keys_defaults_are_raft_configs() -> None:
    core = {f.name: f.default for f in dataclasses.fields(RaftConfig)
            if f.default is not dataclasses.MISSING}
    raft_keys = {k.attribute: k.default for k in KEYS if k.attribute in core}
    assert set(raft_keys) == RAFT_ATTRIBUTES
    assert raft_keys == {name: core[name] for name in RAFT_ATTRIBUTES}


def test_a_default_node_builds_a_default_raft_config() -> None:
    """What the node hands the core with no raft key given is RaftConfig's own defaults."""
    assert raft_config(from_mapping(CONTROLLER)) == RaftConfig(voters=(1, 2, 3))


def test_a_raft_key_given_reaches_the_raft_config() -> None:
    """The mapping is not vacuous: each raft key's value, changed, arrives changed."""
    changed = {"controller.quorum.election.timeout.ms": 1500,
               "controller.quorum.fetch.timeout.ms": 3500,
               "controller.quorum.election.backoff.max.ms": 700,
               "controller.quorum.request.timeout.ms": 2500,
               "controller.quorum.fetch.max.wait.ms": 250,
               "controller.quorum.fetch.max.bytes": 1 << 19,
               "controller.quorum.pre.vote.enable": False,
               "fetch.snapshot.max.bytes": 1 << 19}
    got = raft_config(from_mapping({**CONTROLLER, **changed}))
    by_name = {k.name: k.attribute for k in KEYS}
    assert {by_name[name]: getattr(got, by_name[name]) for name in changed} == \
        {by_name[name]: value for name, value in changed.items()}


def test_client_properties_left_out_yield_the_keys_defaults() -> None:
    client = client_properties({})
    assert {k.attribute: value_of(client, k.attribute) for k in CLIENT_SSL_KEYS} == \
        {k.attribute: k.default for k in CLIENT_SSL_KEYS}
    assert [f.name for f in dataclasses.fields(ClientProperties) if f.name == "tls"
            and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING] \
        == ["tls"]


def test_the_ssl_keys_are_the_fields_of_tls_settings() -> None:
    """The key table's `ssl.*` keys and TlsSettings' fields are one set: a key added to
    one only would be dropped (or fail) when a config is loaded."""
    assert {k.attribute.removeprefix(TLS_ATTRIBUTE_PREFIX) for k in KEYS
            if k.name.startswith("ssl.")} == TLS_FIELDS
