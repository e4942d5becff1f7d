"""The TLS, SASL and JAAS checks of a node's configuration: the keys an SSL listener
needs, SASL on the broker's Kafka listener only with the broker's own login, the
`listener.name.<listener>.*` pattern keys, and a controller listener that binds peers to
node ids when the authorizer is on. Each check raises one `ConfigError` naming the key."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from broker.kafka.sasl import sasl_settings
from raft.common.tls import CLIENT_AUTH_MODES
from tools.config.node import NodeConfig
from tools.config.parsers import ConfigError, choice, non_empty_str, parse_plain_users


def check_controller_identities(config: NodeConfig, name: Callable[[str], str]) -> None:
    """With the authorizer on, a controller's listener must bind each peer to its node id
    (mutual TLS): otherwise anyone who reaches it could vote or fetch as a voter."""
    listener = config.controller_listener_name
    if ("controller" not in config.roles or config.controller_address is None
            or not config.authorizer_settings().enabled
            or config.allow_unbound_controller_listener):
        return
    if config.is_tls(listener) and config.client_auth_of(listener) == "required":
        return
    how = (f"SSL with ssl.client.auth={config.client_auth_of(listener)}"
           if config.is_tls(listener) else config.listener_protocol(listener))
    raise ConfigError(name("authorizer.class.name"), f"the authorizer is on but controller "
                      f"listener {listener} ({how}) cannot tell which node a peer is: use "
                      "SSL with ssl.client.auth=required there, or set "
                      "authorizer.allow.unbound.controller.listener=true to accept that")


def check_tls(config: NodeConfig, name: Callable[[str], str]) -> None:
    """The keys an SSL listener (or https metrics) needs, checked at start; whether the
    files load is checked when the contexts are built (`tools.server.build`)."""
    tls_listeners = [n for n in config.listeners if config.is_tls(n)]
    if config.tls.keystore_location and (config.tls.keystore_certificate_chain
                                         or config.tls.keystore_key):
        raise ConfigError(name("ssl.keystore.location"), "give a keystore file or "
                          "ssl.keystore.certificate.chain and ssl.keystore.key, not both")
    if bool(config.tls.keystore_certificate_chain) != bool(config.tls.keystore_key):
        raise ConfigError(name("ssl.keystore.key"), "ssl.keystore.certificate.chain and "
                          "ssl.keystore.key go together")
    if config.tls.truststore_location and config.tls.truststore_certificates:
        raise ConfigError(name("ssl.truststore.location"), "give a truststore file or "
                          "ssl.truststore.certificates, not both")
    if tls_listeners and not config.tls.has_keystore:
        raise ConfigError(name("ssl.keystore.location"), f"listener {tls_listeners[0]} is "
                          f"{config.listener_protocol(tls_listeners[0])}: it needs a keystore "
                          "(ssl.keystore.location, or ssl.keystore.certificate.chain and "
                          "ssl.keystore.key)")
    if config.metrics_listener.strip().lower().startswith("https:") and (
            not config.tls.keystore_location or config.tls.keystore_type != "PEM"
            or config.tls.key_password or (config.tls.client_auth != "none" and (
                not config.tls.truststore_location or config.tls.truststore_type != "PEM"))):
        raise ConfigError(name("metrics.listener"), "https metrics are served from PEM files: "
                          "set ssl.keystore.location (ssl.keystore.type=PEM, an unencrypted "
                          "key) and, with ssl.client.auth, ssl.truststore.location (PEM)")



LISTENER_CLIENT_AUTH_KEY = re.compile(r"listener\.name\.([A-Za-z0-9_]+)\.ssl\.client\.auth")


def listener_client_auth_modes(given: Mapping[str, Any]) -> dict[str, str]:
    """`listener.name.<listener>.ssl.client.auth` keys: LISTENER -> mode."""
    found: dict[str, str] = {}
    convert = choice(CLIENT_AUTH_MODES)
    for name, value in given.items():
        match = LISTENER_CLIENT_AUTH_KEY.fullmatch(name)
        if match:
            found[match.group(1).upper()] = convert(name, value)
    return found


def jaas_configs(given: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """The `listener.name.<listener>.<mechanism>.sasl.jaas.config` keys, by (LISTENER,
    MECHANISM), each checked to parse (its text is never echoed: it holds a password)."""
    found: dict[tuple[str, str], str] = {}
    for name, value in given.items():
        parts = sasl_settings.jaas_key(name)
        if parts is None:
            continue
        text = non_empty_str(name, value)
        try:
            sasl_settings.parse_jaas_config(text)
        except ValueError as exc:
            raise ConfigError(name, str(exc)) from None
        found[parts] = text
    return found


def check_sasl(config: NodeConfig) -> None:
    """SASL listeners: the broker's Kafka listener only, with supported mechanisms, and
    this broker's own login to it (the replica fetcher's)."""
    parse_plain_users("sasl.plain.users", config.sasl_plain_users)
    kafka = config.kafka_listener_name if "broker" in config.roles else None
    for listener in config.listeners:
        if config.protocol_map.get(listener) in sasl_settings.SASL_PROTOCOLS \
                and listener != kafka:
            raise ConfigError("listeners", f"listener {listener} is "
                              f"{config.protocol_map[listener]}: kraft-py has SASL on a "
                              "broker's Kafka listener only (controllers: PLAINTEXT or SSL)")
    if not config.kafka_listener_sasl:
        return
    enabled = [m.upper() for m in config.sasl_enabled_mechanisms]
    unsupported = [m for m in enabled if m not in sasl_settings.SUPPORTED_MECHANISMS]
    if unsupported or not enabled:
        raise ConfigError("sasl.enabled.mechanisms", f"{', '.join(unsupported) or 'empty'}: "
                          "kraft-py implements "
                          f"{', '.join(sasl_settings.SUPPORTED_MECHANISMS)}; set "
                          "sasl.enabled.mechanisms (Kafka's default is GSSAPI)")
    mechanism = config.sasl_mechanism_inter_broker_protocol.upper()
    if mechanism not in enabled:
        raise ConfigError("sasl.mechanism.inter.broker.protocol",
                          f"{mechanism} is not in sasl.enabled.mechanisms "
                          f"({', '.join(enabled)})")
    key = (f"listener.name.{(config.kafka_listener_name or '').lower()}."
           f"{mechanism.lower()}.sasl.jaas.config")
    jaas = config.sasl_jaas_configs.get((config.kafka_listener_name or "", mechanism))
    if jaas is None:
        raise ConfigError(key, "is required: the broker logs in to the other brokers' "
                          f"{config.kafka_listener_name} listener with {mechanism}")
    try:
        sasl_settings.client_settings(mechanism, jaas)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None

