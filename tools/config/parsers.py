"""The values of the configuration keys: how each is read (`integer`, `str_list`, ...),
the addresses and listener lists they hold (`parse_address`, `parse_listeners`, ...), and
`ConfigError`, which names the key a bad value was given for. Pure functions: no file is
read here, and nothing here knows the key table (`tools.config.keys`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from metadata.authorizer import authorizer_enabled, parse_super_users
from raft.common.tls import TlsSettings
from tools.config_basics import Address as Address
from tools.config_basics import ConfigError as ConfigError
from tools.config_basics import parse_address as parse_address

CONTROLLER_LISTENER = "CONTROLLER"
STATUS_LISTENER = "STATUS"  # a broker's msgpack BrokerStatus port (kraft-py's, not Kafka's)
ROLES = ("broker", "controller")
FRAME_OVERHEAD_BYTES = 64 * 1024  # envelope and batch headers around fetched records
WILDCARD_HOST = "0.0.0.0"  # where a listener with an empty host binds
UNLIMITED_CONNECTIONS = 2147483647  # Kafka's default max.connections(.per.ip): Int.MaxValue
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# SASL_SSL is SASL (broker.kafka.sasl.sasl_api) over TLS
IMPLEMENTED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")  # the protocols that run over TLS
# Kafka's default listener.security.protocol.map; STATUS:PLAINTEXT is always added
DEFAULT_PROTOCOL_MAP = ("CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", "SSL:SSL",
                        "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL")


def integer(minimum: int) -> Callable[[str, Any], int]:
    def convert(key: str, value: Any) -> int:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, f"expected an integer, got {value!r}")
        if value < minimum:
            raise ConfigError(key, f"must be at least {minimum}, got {value}")
        return value
    return convert


def non_empty_str(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"expected a non-empty string, got {value!r}")
    return value.strip()


def optional_str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(key, f"expected a string, got {value!r}")
    return value.strip()


def str_list(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value if v.strip()]
    else:
        raise ConfigError(key, f"expected a comma-separated string or a list, got {value!r}")
    return tuple(items)


def parse_metrics_listener(text: str, key: str = "metrics.listener") -> Address:
    """`http://HOST:PORT` or `https://HOST:PORT` (a trailing `/` or `/metrics` allowed)
    -> (host, port)."""
    parts = urlsplit(text.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None or \
            parts.path not in ("", "/", "/metrics") or parts.query:
        raise ConfigError(key, f"expected http://HOST:PORT or https://HOST:PORT, got {text!r}")
    return parts.hostname, port


def metrics_listener_url(key: str, value: Any) -> str:
    """Checked here, served by `tools.metrics`; "" is off."""
    text = optional_str(key, value)
    if text:
        parse_metrics_listener(text, key)
    return text


def boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(key, f"expected true or false, got {value!r}")


def authorizer_class(key: str, value: Any) -> str:
    text = optional_str(key, value)
    try:
        authorizer_enabled(text)
    except ValueError as exc:
        raise ConfigError(key, str(exc).removeprefix(f"{key} ")) from None
    return text.strip()


def super_users_text(key: str, value: Any) -> str:
    text = optional_str(key, value)
    try:
        parse_super_users(text)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None
    return text


def choice(choices: tuple[str, ...], *, upper: bool = False) -> Callable[[str, Any], str]:
    def convert(key: str, value: Any) -> str:
        text = optional_str(key, value)
        text = text.upper() if upper else text.lower()
        if text not in choices:
            raise ConfigError(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return text
    return convert


def endpoint_algorithm(key: str, value: Any) -> str:
    text = optional_str(key, value).lower()
    if text not in ("", "https"):
        raise ConfigError(key, f"expected https or empty (no hostname check), got {value!r}")
    return text




def parse_voters(key: str, text: str) -> dict[int, Address]:
    """`1@127.0.0.1:19091,2@127.0.0.1:19092` -> {1: ("127.0.0.1", 19091), ...}."""
    return _addresses_by_id(key, (e.strip() for e in text.split(",")), entry_name="voter",
                            id_name="ID", repeated="voter {} is listed twice")


def parse_replica_routes(key: str, text: str) -> dict[int, Address]:
    """`5@127.0.0.1:41234,6@127.0.0.1:41235` -> {5: ("127.0.0.1", 41234), ...}; "" -> {}."""
    return _addresses_by_id(key, (e.strip() for e in text.split(",") if e.strip()),
                            entry_name="route", id_name="BROKER_ID",
                            repeated="broker {} is routed twice")


def _addresses_by_id(key: str, entries: Iterable[str], *, entry_name: str, id_name: str,
                     repeated: str) -> dict[int, Address]:
    """`ID@HOST:PORT` entries -> {ID: (host, port)}. The errors call an entry
    `entry_name` and its ID `id_name`; `repeated` (formatted with the ID) is the error
    for an ID given twice."""
    found: dict[int, Address] = {}
    for entry in entries:
        number, sep, address = entry.partition("@")
        if not sep or not number.isdigit():
            raise ConfigError(key, f"bad {entry_name} {entry!r}: expected {id_name}@HOST:PORT")
        if int(number) in found:
            raise ConfigError(key, repeated.format(number))
        found[int(number)] = parse_address(address, key)
    return found


def parse_listeners(key: str, items: Iterable[str]) -> dict[str, Address]:
    """`CONTROLLER://127.0.0.1:19091,PLAINTEXT://:9092` -> {name: (host, port)}, names
    upper-cased; an empty host stays "" (see `bind_address`)."""
    listeners: dict[str, Address] = {}
    for item in items:
        name, sep, address = item.partition("://")
        if not sep or not name or not re.fullmatch(r"[A-Za-z0-9_]+", name):
            raise ConfigError(key, f"bad listener {item!r}: expected NAME://HOST:PORT")
        if name.upper() in listeners:
            raise ConfigError(key, f"listener {name} is listed twice")
        if address.startswith(":") and address[1:].isdigit():  # `PLAINTEXT://:9092`
            listeners[name.upper()] = ("", _port(key, item, address[1:]))
        else:
            listeners[name.upper()] = parse_address(address, key)
    return listeners


def _port(key: str, item: str, text: str) -> int:
    if not 0 <= int(text) <= 65535:
        raise ConfigError(key, f"bad listener {item!r}: port out of range")
    return int(text)


def bind_address(address: Address) -> Address:
    """Where a listener binds: an empty host is every interface."""
    return (address[0] or WILDCARD_HOST, address[1])


def parse_protocol_map(key: str, items: Iterable[str]) -> dict[str, str]:
    """`CONTROLLER:PLAINTEXT,...` -> {listener name: security protocol}."""
    protocols: dict[str, str] = {}
    for item in items:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(key, f"bad entry {item!r}: expected NAME:PROTOCOL with a "
                              f"protocol among {', '.join(SECURITY_PROTOCOLS)}")
        protocols[name] = protocol
    protocols.setdefault(STATUS_LISTENER, "PLAINTEXT")
    return protocols


def parse_plain_users(key: str, text: str) -> dict[str, str]:
    """`alice:secret,bob:pw` -> {"alice": "secret", "bob": "pw"} (a password may hold
    ':'; never echoed in errors)."""
    users: dict[str, str] = {}
    for index, entry in enumerate(e.strip() for e in text.split(",") if e.strip()):
        name, sep, password = entry.partition(":")
        if not sep or not name or not password:
            raise ConfigError(key, f"entry {index + 1} is not NAME:PASSWORD")
        if name in users:
            raise ConfigError(key, f"user {name} is listed twice")
        users[name] = password
    return users



def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML dotted keys become nested tables; Kafka names are the dotted paths."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat



TLS_ATTRIBUTE_PREFIX = "ssl_"  # the key table's `ssl.*` attributes: TlsSettings' fields


def pop_tls_settings(values: dict[str, Any]) -> TlsSettings:
    """The `ssl_*` attributes the key table gives (a node's or a client's), taken out of
    `values` into one `TlsSettings`."""
    return TlsSettings(**{name.removeprefix(TLS_ATTRIBUTE_PREFIX): values.pop(name)
                          for name in list(values) if name.startswith(TLS_ATTRIBUTE_PREFIX)})
