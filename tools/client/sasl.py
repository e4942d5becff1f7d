"""SASL for the `kraft` command line's Kafka clients, from a client properties file
(`--command-config FILE`, as Kafka's tools): `security.protocol=SASL_PLAINTEXT` (or
`SASL_SSL`, with the `ssl.*` keys `tools.cluster` reads), `sasl.mechanism` (PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512) and `sasl.jaas.config` (Kafka's
`org.apache.kafka.common.security.scram.ScramLoginModule required username="u"
password="p";`). The command line reads the login once (`tools/cli.py`: `args.client_sasl`)
and the verb hands it to its Kafka clients (`tools.client.connection`), which log in with
it on every new connection to a broker; nothing here loads the Kafka codec (kio), which a
verb imports only once it opens a connection."""

from __future__ import annotations

from broker.kafka.sasl.sasl_settings import SASL_PROTOCOLS, SaslClientSettings, client_settings
from tools.config_basics import ConfigError


class SaslConfigError(ValueError):
    """The properties file's SASL keys are missing or wrong; names the key."""


def command_line_sasl(command_config: str | None) -> SaslClientSettings | None:
    """The login a client properties file names; None without a file or SASL in it."""
    if not command_config:
        return None
    from tools.config import load_client_properties  # the node configuration: only here
    try:
        properties = load_client_properties(command_config)
    except ConfigError as exc:
        raise SaslConfigError(str(exc)) from None
    if properties.security_protocol not in SASL_PROTOCOLS:
        return None
    mechanism = properties.other.get("sasl.mechanism", "GSSAPI").strip().upper()
    jaas = properties.other.get("sasl.jaas.config")
    if jaas is None:
        raise SaslConfigError(f"{command_config}: sasl.jaas.config is required with "
                              f"security.protocol={properties.security_protocol}")
    try:
        return client_settings(mechanism, jaas)
    except ValueError as exc:
        raise SaslConfigError(f"{command_config}: sasl.mechanism/sasl.jaas.config: {exc}") \
            from None
