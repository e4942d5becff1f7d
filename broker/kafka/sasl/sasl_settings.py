"""What SASL needs from the configuration, on both sides, and Kafka's JAAS text.

`SaslSettings` is a SASL listener's (`sasl.enabled.mechanisms`, and PLAIN's users);
`SaslClientSettings` is how a client logs in: the broker's replica fetcher to the other
brokers' SASL listeners (`sasl.mechanism.inter.broker.protocol` with the
`listener.name.<listener>.<mechanism>.sasl.jaas.config` credentials), and kraft's tools
(`sasl.mechanism`, `sasl.jaas.config` in a `--command-config` file).

A command-line tool's login (`tools.client.sasl`) is made here, not beside the SASL
exchange (`broker.kafka.sasl.sasl_client`), so that reading it from a properties file
loads no Kafka codec: a tool pays for the codec only when it opens a SASL connection.

`parse_jaas_config` reads Kafka's one-entry JAAS form,
`org.apache.kafka.common.security.scram.ScramLoginModule required username="x" password="y";`
(PlainLoginModule alike), into the login module, its flag and its options; PLAIN's
`user_<name>="password"` options are the users a PLAIN listener accepts (Kafka's
PlainServerCallbackHandler), for tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

PLAIN = "PLAIN"
SCRAM_SHA_256, SCRAM_SHA_512 = "SCRAM-SHA-256", "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
LOGIN_MODULES = {
    PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
    SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
}
JAAS_FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslSettings:
    """A SASL listener's (None in BrokerSettings: the Kafka listener has none)."""

    enabled_mechanisms: tuple[str, ...]  # sasl.enabled.mechanisms, all supported
    plain_users: Mapping[str, str] = field(default_factory=dict)  # PLAIN: user -> password

    def __post_init__(self) -> None:
        unknown = [m for m in self.enabled_mechanisms if m not in SUPPORTED_MECHANISMS]
        if unknown or not self.enabled_mechanisms:
            raise ValueError(f"SASL mechanisms {unknown or 'none'}: kraft-py supports "
                             f"{', '.join(SUPPORTED_MECHANISMS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslClientSettings:
    """How a client logs in to a SASL listener. `repr` leaves the password out."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if self.mechanism not in SUPPORTED_MECHANISMS:
            raise ValueError(f"SASL mechanism {self.mechanism!r}: kraft-py supports "
                             f"{', '.join(SUPPORTED_MECHANISMS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class JaasConfig:
    login_module: str
    flag: str
    options: dict[str, str] = field(repr=False)  # may hold passwords


_OPTION = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def parse_jaas_config(text: str) -> JaasConfig:
    """`Module flag key="value" ...;` -> JaasConfig; ValueError naming what is wrong
    (never echoing a value: they hold passwords)."""
    body = text.strip()
    if not body.endswith(";"):
        raise ValueError("a JAAS entry ends with ';'")
    body = body[:-1]
    parts = body.split(None, 2)
    if len(parts) < 2 or parts[1] not in JAAS_FLAGS:
        raise ValueError("expected 'LoginModuleClass required key=\"value\" ...;'")
    options: dict[str, str] = {}
    rest = parts[2] if len(parts) == 3 else ""
    position = 0
    while position < len(rest):
        if rest[position:].strip() == "":
            break
        match = _OPTION.match(rest, position)
        if match is None:
            raise ValueError(f"unreadable JAAS option at character {position} "
                             "(expected key=\"value\")")
        key, quoted, bare = match.groups()
        if key in options:
            raise ValueError(f"JAAS option {key} given twice")
        options[key] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        position = match.end()
    return JaasConfig(login_module=parts[0], flag=parts[1], options=options)


def client_settings(mechanism: str, jaas_text: str) -> SaslClientSettings:
    """A client's login from its mechanism and JAAS text (username and password
    options); ValueError when they are missing or the module does not fit."""
    jaas = parse_jaas_config(jaas_text)
    expected = LOGIN_MODULES.get(mechanism)
    if expected is None:
        raise ValueError(f"SASL mechanism {mechanism!r}: kraft-py supports "
                         f"{', '.join(SUPPORTED_MECHANISMS)}")
    if jaas.login_module != expected:
        raise ValueError(f"{mechanism} logs in with {expected}, not {jaas.login_module}")
    missing = [k for k in ("username", "password") if k not in jaas.options]
    if missing:
        raise ValueError(f"the JAAS entry lacks {' and '.join(missing)}")
    return SaslClientSettings(mechanism=mechanism, username=jaas.options["username"],
                              password=jaas.options["password"])


def plain_users(jaas_text: str) -> dict[str, str]:
    """PlainLoginModule's `user_<name>="password"` options: the users it accepts."""
    jaas = parse_jaas_config(jaas_text)
    return {key.removeprefix("user_"): value for key, value in jaas.options.items()
            if key.startswith("user_") and len(key) > len("user_")}


JAAS_KEY_PATTERN = "listener.name.<listener>.<mechanism>.sasl.jaas.config"
_JAAS_KEY = re.compile(r"listener\.name\.([A-Za-z0-9_]+)\.(plain|scram-sha-256|scram-sha-512)"
                       r"\.sasl\.jaas\.config", re.IGNORECASE)


def jaas_key(name: str) -> tuple[str, str] | None:
    """`listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config` ->
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"); None for any other key."""
    match = _JAAS_KEY.fullmatch(name)
    return None if match is None else (match.group(1).upper(), match.group(2).upper())
