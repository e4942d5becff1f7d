"""SASL for the `kraft` command line's Kafka clients, from a client properties file
(`--command-config FILE`, as Kafka's tools): `security.protocol=SASL_PLAINTEXT` (or
`SASL_SSL`, with the `ssl.*` keys `tools.cluster` reads), `sasl.mechanism` (PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512) and `sasl.jaas.config` (Kafka's
`org.apache.kafka.common.security.scram.ScramLoginModule required username="u"
password="p";`). The login becomes the process's default
(`broker.kafka.sasl.sasl_settings.set_default_login`), which `tools.client.connection` uses on
every new connection to a broker; nothing here loads the Kafka codec (kio), which a verb
imports only once it opens a connection."""

from __future__ import annotations

from broker.kafka.sasl.sasl_settings import SASL_PROTOCOLS, client_settings, set_default_login
from tools.config_basics import ConfigError


class SaslConfigError(ValueError):
    """The properties file's SASL keys are missing or wrong; names the key."""


def use_command_line_sasl(command_config: str | None) -> None:
    if not command_config:
        return
    from tools.config import load_client_properties  # the node configuration: only here
    try:
        properties = load_client_properties(command_config)
    except ConfigError as exc:
        raise SaslConfigError(str(exc)) from None
    if properties.security_protocol not in SASL_PROTOCOLS:
        return
    mechanism = properties.other.get("sasl.mechanism", "GSSAPI").strip().upper()
    jaas = properties.other.get("sasl.jaas.config")
    if jaas is None:
        raise SaslConfigError(f"{command_config}: sasl.jaas.config is required with "
                              f"security.protocol={properties.security_protocol}")
    try:
        set_default_login(client_settings(mechanism, jaas))
    except ValueError as exc:
        raise SaslConfigError(f"{command_config}: sasl.mechanism/sasl.jaas.config: {exc}") \
            from None
