"""tools/config's TLS keys: SSL listeners accepted with a keystore, the keys' checks,
the settings handed to raft/common/tls.py, the client properties file, and which
listeners tools/server/node_tls.py serves over TLS."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest

from raft.common.tls import tls_session
from tools import tls_certs
from tools.config import ConfigError, client_properties, from_mapping, load_client_properties
from tools.server.node_tls import broker_tls, node_tls, transport_tls


def controller(**extra: Any) -> dict[str, Any]:
    return {"node.id": 1, "process.roles": "controller",
            "controller.quorum.voters": "1@127.0.0.1:19091",
            "listeners": "CONTROLLER://127.0.0.1:19091", "log.dirs": "/tmp/x",
            "listener.security.protocol.map": "CONTROLLER:SSL", **extra}


def broker(**extra: Any) -> dict[str, Any]:
    return {"node.id": 4, "process.roles": "broker",
            "controller.quorum.voters": "1@127.0.0.1:19091",
            "listeners": "SSL://127.0.0.1:19094,STATUS://127.0.0.1:19095", "log.dirs": "/tmp/y",
            "listener.security.protocol.map": "CONTROLLER:SSL,SSL:SSL,STATUS:SSL", **extra}


@pytest.fixture(scope="module")
def cluster_tls(tmp_path_factory: pytest.TempPathFactory) -> tls_certs.ClusterTls:
    return tls_certs.write_cluster_tls(tmp_path_factory.mktemp("cluster"), [1, 4])


def test_ssl_listener_is_refused_when_no_keystore_is_given() -> None:
    with pytest.raises(ConfigError) as error:
        from_mapping(controller())
    assert error.value.key == "ssl.keystore.location"
    assert "CONTROLLER is SSL" in str(error.value)


def test_ssl_listener_is_accepted_when_a_keystore_is_given() -> None:
    config = from_mapping(controller(**{"ssl.keystore.location": "/k.pem",
                                        "ssl.client.auth": "REQUIRED"}))
    assert config.is_tls("CONTROLLER")
    assert config.tls.keystore_location == "/k.pem"
    assert config.tls.client_auth == "required"
    assert config.tls.endpoint_identification_algorithm == "https"


@pytest.mark.parametrize(("key", "value"), [
    ("ssl.client.auth", "sometimes"), ("ssl.keystore.type", "JKS"),
    ("ssl.truststore.type", "BCFKS"), ("ssl.endpoint.identification.algorithm", "ldaps")])
def test_a_tls_key_is_refused_when_its_value_is_not_one_kafka_offers(key: str,
                                                                     value: str) -> None:
    with pytest.raises(ConfigError) as error:
        from_mapping(controller(**{"ssl.keystore.location": "/k.pem", key: value}))
    assert error.value.key == key


def test_keystore_file_and_pem_text_are_refused_when_both_are_given() -> None:
    with pytest.raises(ConfigError, match="not both"):
        from_mapping(controller(**{"ssl.keystore.location": "/k.pem",
                                   "ssl.keystore.key": "x", "ssl.keystore.certificate.chain": "y"}))
    with pytest.raises(ConfigError, match="go together"):
        from_mapping(controller(**{"ssl.keystore.key": "x"}))


def test_https_metrics_are_refused_when_the_keystore_is_not_a_pem_file() -> None:
    with pytest.raises(ConfigError) as error:
        from_mapping(controller(**{"ssl.keystore.location": "/k.p12",
                                   "ssl.keystore.type": "PKCS12",
                                   "metrics.listener": "https://127.0.0.1:0"}))
    assert error.value.key == "metrics.listener"


def test_plaintext_node_builds_no_tls_when_no_listener_is_ssl() -> None:
    config = from_mapping(controller(**{"listener.security.protocol.map": "CONTROLLER:PLAINTEXT"}))
    contexts = node_tls(config)
    assert (contexts.servers, contexts.client) == ({}, None)
    assert transport_tls(config, contexts) is None


def test_controller_binds_identities_whenever_client_certificates_are_asked_for(
        cluster_tls: tls_certs.ClusterTls) -> None:
    config = from_mapping(controller(**tls_certs.node_tls_settings(cluster_tls, 1)))
    raft_tls = transport_tls(config, node_tls(config))
    assert raft_tls is not None
    assert raft_tls.server is not None
    assert raft_tls.client is not None
    assert raft_tls.bind_identity
    assert raft_tls.claims["RegisterBroker"] == "broker_id"
    # requested: a peer without a certificate binds no node id, so it may claim none
    requested = from_mapping(controller(**{**tls_certs.node_tls_settings(cluster_tls, 1),
                                           "ssl.client.auth": "requested"}))
    requested_tls = transport_tls(requested, node_tls(requested))
    assert requested_tls is not None
    assert requested_tls.bind_identity
    unasked = from_mapping(controller(**{**tls_certs.node_tls_settings(cluster_tls, 1),
                                         "ssl.client.auth": "none"}))
    unasked_tls = transport_tls(unasked, node_tls(unasked))
    assert unasked_tls is not None
    assert not unasked_tls.bind_identity


@pytest.mark.parametrize("settings", [
    {}, {"ssl.client.auth": "requested"}, {"ssl.client.auth": "none"}])
def test_authorizer_refuses_a_controller_listener_that_binds_no_identity(
        cluster_tls: tls_certs.ClusterTls, settings: dict[str, str]) -> None:
    on = {"authorizer.class.name": "standard"}
    plaintext = {"listener.security.protocol.map": "CONTROLLER:PLAINTEXT"}
    given = controller(**plaintext, **on) if not settings else controller(
        **{**tls_certs.node_tls_settings(cluster_tls, 1), **settings, **on})
    with pytest.raises(ConfigError, match="authorizer.allow.unbound.controller.listener"):
        from_mapping(given)
    opted_out = from_mapping({**given, "authorizer.allow.unbound.controller.listener": "true"})
    assert opted_out.allow_unbound_controller_listener
    bound = from_mapping(controller(**{**tls_certs.node_tls_settings(cluster_tls, 1), **on}))
    assert bound.authorizer_settings().enabled


def test_broker_dials_controllers_and_serves_its_listeners_over_tls_when_mapped_to_ssl(
        cluster_tls: tls_certs.ClusterTls) -> None:
    config = from_mapping(broker(**tls_certs.node_tls_settings(cluster_tls, 4)))
    contexts = node_tls(config)
    raft_tls = transport_tls(config, contexts)
    assert raft_tls is not None
    assert raft_tls.server is None
    assert raft_tls.client is not None
    settings = broker_tls(config, config.broker_settings(), contexts)
    assert settings.kafka_ssl_context is contexts.servers["required"]
    assert settings.status_ssl_context is contexts.servers["required"]
    assert settings.inter_broker_ssl_context is contexts.client
    assert settings.kafka_security_protocol == "SSL"


def test_node_tls_is_a_config_error_when_the_keystore_does_not_load(tmp_path: Path) -> None:
    (tmp_path / "bad.pem").write_text("not a key\n")
    config = from_mapping(controller(**{"ssl.keystore.location": str(tmp_path / "bad.pem")}))
    with pytest.raises(ConfigError, match="cannot load"):
        node_tls(config)


def test_client_properties_resolve_relative_paths_when_read_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=ssl\nssl.truststore.location=tls/ca.pem\n"
                    "sasl.mechanism=SCRAM-SHA-256\nclient.id=x\n")
    properties = load_client_properties(path)
    assert properties.uses_tls
    assert properties.tls.truststore_location == str(tmp_path / "tls" / "ca.pem")
    assert properties.other == {"sasl.mechanism": "SCRAM-SHA-256", "client.id": "x"}


@pytest.mark.parametrize(("raw", "key"), [({"security.protocol": "TLS"}, "security.protocol"),
                                          ({"ssl.keystore.lokation": "x"},
                                           "ssl.keystore.lokation")])
def test_client_properties_are_refused_when_a_key_or_protocol_is_unknown(
        raw: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as error:
        client_properties(raw)
    assert error.value.key == key


def test_generated_client_properties_name_the_cluster_files_when_tls_is_made(
        cluster_tls: tls_certs.ClusterTls) -> None:
    properties = load_client_properties(cluster_tls.client_properties)
    assert properties.security_protocol == "SSL"
    assert properties.tls.truststore_location == str(cluster_tls.ca_file)
    assert properties.tls.keystore_location == str(cluster_tls.client_keystore)
    assert (cluster_tls.ca_file.parent / "ca-key.pem").stat().st_mode & 0o077 == 0


def test_a_listener_takes_its_own_client_auth_when_listener_name_prefixed(
        cluster_tls: tls_certs.ClusterTls) -> None:
    config = from_mapping(broker(**tls_certs.node_tls_settings(cluster_tls, 4),
                                 **{"listener.name.ssl.ssl.client.auth": "none"}))
    assert config.client_auth_of("SSL") == "none"
    assert config.client_auth_of("STATUS") == "required"
    contexts = node_tls(config)
    settings = broker_tls(config, config.broker_settings(), contexts)
    assert settings.kafka_ssl_context is not None
    assert settings.kafka_ssl_context.verify_mode == ssl.CERT_NONE
    assert settings.status_ssl_context is not None
    assert settings.status_ssl_context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ConfigError) as error:
        from_mapping(broker(**{"ssl.keystore.location": "/k.pem",
                               "listener.name.ssl.ssl.client.auth": "always"}))
    assert error.value.key == "listener.name.ssl.ssl.client.auth"


def test_a_sasl_ssl_listener_asks_no_certificate_when_only_the_node_key_is_set() -> None:
    """KIP-684: the unprefixed ssl.client.auth is not a SASL_SSL listener's."""
    config = from_mapping(controller(**{
        "listener.security.protocol.map": "CONTROLLER:SSL,SASL_SSL:SASL_SSL",
        "ssl.keystore.location": "/k.pem", "ssl.client.auth": "required"}))
    assert config.client_auth_of("SASL_SSL") == "none"
    assert config.client_auth_of("CONTROLLER") == "required"


def test_super_users_are_the_nodes_and_the_admin_when_a_tls_cluster_is_made(
        cluster_tls: tls_certs.ClusterTls) -> None:
    """The principal written is the one a node's connection gets (tls_session); the
    unprivileged client is not among them."""
    settings = tls_certs.node_tls_settings(cluster_tls, 1)
    config = from_mapping(controller(**settings))
    assert config.authorizer_settings().super_users == {
        "User:CN=kraft-node-1,O=kraft-py", "User:CN=kraft-node-4,O=kraft-py",
        "User:CN=kraft-admin,O=kraft-py"}
    cert = {"subject": ((("organizationName", "kraft-py"),), (("commonName", "kraft-node-4"),))}
    assert str(tls_session(cert, client_host="h").principal) == tls_certs.node_principal(4)
