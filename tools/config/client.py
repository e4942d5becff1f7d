"""A client's properties file (Kafka's `--command-config FILE`, a TLS cluster's
`client.properties`): `security.protocol` and the node keys' `ssl.*` keys, with their
meanings and defaults from the key table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raft.common.tls import TlsSettings
from tools.config.keys import KEYS
from tools.config.parsers import (
    SECURITY_PROTOCOLS,
    TLS_PROTOCOLS,
    ConfigError,
    optional_str,
    pop_tls_settings,
)
from tools.properties import PropertiesError, parse_properties

CLIENT_SSL_KEYS = tuple(k for k in KEYS if k.name.startswith("ssl.")
                        and k.name != "ssl.client.auth")
# every ssl.* key, ssl.client.auth included: the fields of TlsSettings
CLIENT_TLS_SHAPE = tuple(k for k in KEYS if k.name.startswith("ssl."))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientProperties:
    """A client's properties file (Kafka's `--command-config`): `security.protocol`, the
    `ssl.*` keys with the node keys' meanings, and every other key as written (`other`:
    e.g. the SASL ones, for the layers that read them)."""

    security_protocol: str = "PLAINTEXT"  # not a node key: a client's own
    tls: TlsSettings  # the ssl.* keys; client_auth unused by a client
    other: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS


def client_properties(raw: Mapping[str, str], source: str = "") -> ClientProperties:
    """ClientProperties from `key -> value` strings; ConfigError naming a bad key. Paths
    relative to the file's directory are resolved against it."""
    values: dict[str, Any] = {k.attribute: k.default for k in CLIENT_TLS_SHAPE}
    other: dict[str, str] = {}
    known = {k.name: k for k in CLIENT_SSL_KEYS}
    base = Path(source).parent if source else None
    try:
        for name, value in raw.items():
            if name == "security.protocol":
                protocol = optional_str(name, value).upper()
                if protocol not in SECURITY_PROTOCOLS:
                    raise ConfigError(name, f"expected one of {', '.join(SECURITY_PROTOCOLS)}, "
                                      f"got {value!r}")
                values["security_protocol"] = protocol
            elif name in known:
                converted = known[name].convert(name, value)
                if name.endswith(".location") and converted and base is not None \
                        and not Path(converted).is_absolute():
                    converted = str(base / converted)
                values[known[name].attribute] = converted
            elif name.startswith("ssl."):
                raise ConfigError(name, "unknown client TLS key")
            else:
                other[name] = str(value)
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.detail, source) from None
    return ClientProperties(tls=pop_tls_settings(values), **values, other=other, source=source)


def load_client_properties(path: str | Path) -> ClientProperties:
    """A client properties file (Java properties syntax, like Kafka tools' files)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("command-config", f"cannot read {path}: {exc.strerror}") from None
    try:
        raw = dict(parse_properties(text, str(path)))
    except PropertiesError as exc:
        raise ConfigError("command-config", str(exc)) from None
    return client_properties(raw, str(path))
