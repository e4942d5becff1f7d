"""Node configuration: Kafka's key names, in a TOML file or a Java `.properties` file.

TOML keys may be written quoted (`"node.id" = 1`) or as TOML dotted keys (`node.id = 1`);
both flatten to the same Kafka name. A `.properties` file (Kafka's `server.properties`
syntax: `#`/`!` comments, `=`, `:` or a blank as the separator, a trailing `\\` continues
a line) holds the same keys as strings. Unknown keys and bad values fail at start with
the key named (`ConfigError.key`). The keys, their defaults and what they do are `KEYS`
(`kraft config-keys` prints them as the README's table). Example:

    "node.id" = 1
    "process.roles" = "controller"
    "controller.quorum.voters" = "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093"
    "listeners" = "CONTROLLER://127.0.0.1:19091"
    "log.dirs" = "/var/lib/kraft/node-1"

kraft-py's early names `quorum.*` still work as aliases of `controller.quorum.*`; each one
used adds a line to `NodeConfig.warnings` (`kraft node` logs them as WARNINGs). Keys of
Kafka's sample configurations that mean nothing here (`num.network.threads`, ...) are
accepted and named in one warning. A listener mapped to SSL serves TLS with the node's
`ssl.*` keys (`TlsSettings`, built into contexts by `raft.common.tls`); a broker's Kafka
listener mapped to SASL_PLAINTEXT or SASL_SSL runs SASL (`broker.kafka.sasl_api`) with
the `sasl.*` keys.

`load_client_properties` reads a client's properties file (`--command-config FILE`, a
TLS cluster's `client.properties`): `security.protocol` and the same `ssl.*` keys.
"""

from __future__ import annotations

import re
import socket
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from broker.kafka import sasl_settings
from broker.settings import BrokerSettings
from metadata.authorizer import AuthorizerSettings, authorizer_enabled, parse_super_users
from metadata.snapshot_policy import (
    DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS,
    DEFAULT_MAX_RETENTION_BYTES,
    DEFAULT_MAX_RETENTION_MS,
    DEFAULT_MAX_SNAPSHOT_INTERVAL_MS,
)
from raft.common.connection_limits import (
    DEFAULT_AUTHENTICATION_TIMEOUT_MS,
    DEFAULT_MAX_IDLE_MS,
    DEFAULT_SASL_MAX_RECEIVE_BYTES,
    ListenerLimits,
)
from raft.common.tls import CLIENT_AUTH_MODES, STORE_TYPES, TlsSettings
from tools.config_basics import Address as Address
from tools.config_basics import ConfigError as ConfigError
from tools.config_basics import parse_address as parse_address
from tools.properties import PropertiesError, logical_lines, parse_properties

CONTROLLER_LISTENER = "CONTROLLER"
STATUS_LISTENER = "STATUS"  # a broker's msgpack BrokerStatus port (kraft-py's, not Kafka's)
ROLES = ("broker", "controller")
FRAME_OVERHEAD_BYTES = 64 * 1024  # envelope and batch headers around fetched records
WILDCARD_HOST = "0.0.0.0"  # where a listener with an empty host binds
UNLIMITED_CONNECTIONS = 2147483647  # Kafka's default max.connections(.per.ip): Int.MaxValue
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# SASL_SSL is SASL (broker.kafka.sasl_api) over TLS
IMPLEMENTED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")  # the protocols that run over TLS
# Kafka's default listener.security.protocol.map; STATUS:PLAINTEXT is always added
DEFAULT_PROTOCOL_MAP = ("CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", "SSL:SSL",
                        "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL")


def _int(minimum: int) -> Callable[[str, Any], int]:
    def convert(key: str, value: Any) -> int:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, f"expected an integer, got {value!r}")
        if value < minimum:
            raise ConfigError(key, f"must be at least {minimum}, got {value}")
        return value
    return convert


def _str(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"expected a non-empty string, got {value!r}")
    return value.strip()


def _optional_str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(key, f"expected a string, got {value!r}")
    return value.strip()


def _list(key: str, value: Any) -> tuple[str, ...]:
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


def _metrics_listener(key: str, value: Any) -> str:
    """Checked here, served by `tools.metrics`; "" is off."""
    text = _optional_str(key, value)
    if text:
        parse_metrics_listener(text, key)
    return text


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(key, f"expected true or false, got {value!r}")


def _authorizer_class(key: str, value: Any) -> str:
    text = _optional_str(key, value)
    try:
        authorizer_enabled(text)
    except ValueError as exc:
        raise ConfigError(key, str(exc).removeprefix(f"{key} ")) from None
    return text.strip()


def _super_users(key: str, value: Any) -> str:
    text = _optional_str(key, value)
    try:
        parse_super_users(text)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None
    return text


def _choice(choices: tuple[str, ...], *, upper: bool = False) -> Callable[[str, Any], str]:
    def convert(key: str, value: Any) -> str:
        text = _optional_str(key, value)
        text = text.upper() if upper else text.lower()
        if text not in choices:
            raise ConfigError(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return text
    return convert


def _algorithm(key: str, value: Any) -> str:
    text = _optional_str(key, value).lower()
    if text not in ("", "https"):
        raise ConfigError(key, f"expected https or empty (no hostname check), got {value!r}")
    return text


REQUIRED = object()  # a Key's default when the key must be given


@dataclass(frozen=True, slots=True)
class Key:
    """One configuration key: its Kafka-style name, the NodeConfig attribute it sets, how
    its value is read, its default (REQUIRED: none), and what it does (the README table)."""

    name: str
    attribute: str
    convert: Callable[[str, Any], Any]
    default: Any
    doc: str
    origin: str = "Kafka"  # "Kafka": Kafka's key and meaning; "kraft-py"; "test-only"
    aliases: tuple[str, ...] = ()  # older names, still read (with a deprecation warning)


KEYS: tuple[Key, ...] = (
    Key("node.id", "node_id", _int(0), REQUIRED, "this node's id"),
    Key("process.roles", "roles", _list, REQUIRED, "`broker`, `controller` or both"),
    Key("controller.quorum.voters", "voters", _optional_str, "",
        "the voters, `ID@HOST:PORT,...` (static quorum); required on a controller"),
    Key("controller.quorum.bootstrap.servers", "bootstrap_servers", _list, (),
        "controller endpoints `HOST:PORT,...`: a node without `controller.quorum.voters` "
        "(a broker, or a controller to be added to a dynamic quorum) learns the voters "
        "from them at start (DescribeQuorum); with both, each must be a "
        "voter's endpoint"),
    Key("listeners", "listener_specs", _list, (),
        "`NAME://HOST:PORT,...`; an empty host binds every interface (0.0.0.0)"),
    Key("advertised.listeners", "advertised_specs", _list, (),
        "what a broker registers for clients, `NAME://HOST:PORT,...`; default: `listeners` "
        "(an empty host advertises this host's name)"),
    Key("listener.security.protocol.map", "protocol_map", _list, DEFAULT_PROTOCOL_MAP,
        "`NAME:PROTOCOL,...`; PLAINTEXT and SSL are implemented, and SASL_PLAINTEXT and "
        "SASL_SSL on a broker's Kafka listener; `STATUS:PLAINTEXT` is added unless STATUS "
        "is mapped"),
    Key("controller.listener.names", "controller_listener_names", _list,
        (CONTROLLER_LISTENER,), "the listeners that serve raft and admin requests"),
    Key("inter.broker.listener.name", "inter_broker_listener_name", _optional_str, "",
        "the broker's Kafka listener (replication and clients); default: the one "
        "listener that is neither a controller's nor STATUS"),
    Key("log.dirs", "log_dirs", _list, (),
        "the node's log directory (exactly one); one of `log.dirs`, `log.dir`, "
        "`metadata.log.dir` is required"),
    Key("log.dir", "single_log_dir", _optional_str, "", "read when `log.dirs` is not set"),
    Key("metadata.log.dir", "metadata_log_dir", _optional_str, "",
        "where the metadata log lives; kraft-py keeps it with the partitions, so it must "
        "equal the log directory when both are set"),
    Key("cluster.id", "cluster_id", _optional_str, "",
        "when set, the log directory must be formatted for this cluster", origin="kraft-py"),
    Key("controller.quorum.election.timeout.ms", "election_timeout_ms", _int(1), 1000,
        "no leader heard for this long: a voter starts an election",
        aliases=("quorum.election.timeout.ms",)),
    Key("controller.quorum.fetch.timeout.ms", "fetch_timeout_ms", _int(1), 2000,
        "no successful Fetch for this long: a follower starts an election (at least the "
        "election timeout)", aliases=("quorum.fetch.timeout.ms",)),
    Key("controller.quorum.election.backoff.max.ms", "election_backoff_max_ms", _int(1), 1000,
        "the longest random wait before a new election",
        aliases=("quorum.election.backoff.max.ms",)),
    Key("controller.quorum.request.timeout.ms", "request_timeout_ms", _int(1), 2000,
        "how long a raft or controller request waits for its answer",
        aliases=("quorum.request.timeout.ms",)),
    Key("controller.quorum.fetch.max.wait.ms", "fetch_max_wait_ms", _int(0), 500,
        "how long the leader holds a Fetch with nothing new", origin="kraft-py",
        aliases=("quorum.fetch.max.wait.ms",)),
    Key("controller.quorum.fetch.max.bytes", "fetch_max_bytes", _int(1), 1 << 20,
        "the most record bytes in one Fetch answer", origin="kraft-py",
        aliases=("quorum.fetch.max.bytes",)),
    Key("controller.quorum.pre.vote.enable", "pre_vote", _bool, True,
        "pre-vote before an election (KIP-996)", origin="kraft-py",
        aliases=("quorum.pre.vote.enable",)),
    Key("controller.quorum.send.queue.max.messages", "send_queue_max_messages", _int(1), 256,
        "messages queued per peer before the oldest are dropped", origin="kraft-py",
        aliases=("quorum.send.queue.max.messages",)),
    Key("socket.request.max.bytes", "socket_request_max_bytes", _int(1024), 100 * 1024 * 1024,
        "the largest request frame accepted, on every listener (the controller listener, "
        "the Kafka listener once a connection has logged in, STATUS up to 1 MiB); a frame "
        "announcing more closes its connection before its body is read"),
    Key("sasl.server.max.receive.size", "sasl_server_max_receive_size", _int(1),
        DEFAULT_SASL_MAX_RECEIVE_BYTES,
        "the largest frame a SASL listener's connection may send before it has logged in; "
        "a larger one closes the connection at once"),
    Key("connections.max.idle.ms", "connections_max_idle_ms", _int(1), DEFAULT_MAX_IDLE_MS,
        "a connection to any listener with no complete request for this long is closed"),
    Key("connections.authentication.timeout.ms", "connections_authentication_timeout_ms",
        _int(1), DEFAULT_AUTHENTICATION_TIMEOUT_MS,
        "a connection to any listener that has not completed its TLS handshake and, on a "
        "SASL listener, its SASL login within this long is closed (Kafka has no such key: "
        "its idle timeout alone bounds them; this is raft/common/tls.py's handshake "
        "deadline, made a key)", origin="kraft-py"),
    Key("max.connections", "max_connections", _int(0), UNLIMITED_CONNECTIONS,
        "the most connections each listener holds; a new one over it is closed at once and "
        "counted. Whatever it says, the inbound connections of all listeners stay below the "
        "soft RLIMIT_NOFILE less a reserve (a quarter of it, at least 256) for the node's "
        "own files and connections (raft/common/connection_limits.py)"),
    Key("max.connections.per.ip", "max_connections_per_ip", _int(0), UNLIMITED_CONNECTIONS,
        "the most connections each listener holds from one address; a new one over it is "
        "closed at once and counted"),
    Key("delete.topic.delay.ms", "delete_topic_delay_ms", _int(0), 4 * 3600 * 1000,
        "a broker removes a deleted topic's staged directory after this", origin="kraft-py"),
    Key("broker.session.timeout.ms", "broker_session_timeout_ms", _int(1), 9000,
        "a broker without a heartbeat for this long is fenced"),
    Key("broker.heartbeat.interval.ms", "broker_heartbeat_interval_ms", _int(1), 2000,
        "how often a broker heartbeats to the controller"),
    Key("log.segment.bytes", "log_segment_bytes", _int(1024), 1 << 30,
        "the size of a metadata log segment"),
    Key("replica.lag.time.max.ms", "replica_lag_time_max_ms", _int(1), 30_000,
        "a follower behind for this long leaves the ISR"),
    Key("offsets.topic.num.partitions", "offsets_topic_num_partitions", _int(1), 50,
        "partitions of __consumer_offsets when a broker creates it on first use"),
    Key("authorizer.class.name", "authorizer_class_name", _authorizer_class, "",
        "`org.apache.kafka.metadata.authorizer.StandardAuthorizer` (or `standard`): ACLs "
        "are enforced on every listener (broker/access_table.py: one row per request); "
        "empty: no authorization"),
    Key("super.users", "super_users", _super_users, "",
        "`User:NAME;User:OTHER`: principals allowed everything when the authorizer is on"),
    Key("allow.everyone.if.no.acl.found", "allow_everyone_if_no_acl_found", _bool, False,
        "with the authorizer on, a resource that no ACL matches is open to everyone"),
    Key("authorizer.allow.unbound.controller.listener", "allow_unbound_controller_listener",
        _bool, False,
        "with the authorizer on, start a controller whose controller listener cannot bind "
        "a peer to a node id (PLAINTEXT, or SSL without ssl.client.auth=required): "
        "whoever reaches it may then claim to be any node; false refuses to start",
        origin="kraft-py"),
    Key("metadata.log.max.record.bytes.between.snapshots", "max_record_bytes_between_snapshots",
        _int(1), DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS,
        "committed record bytes between two snapshots of a node's image"),
    Key("metadata.max.retention.bytes", "max_retention_bytes", _int(-1),
        DEFAULT_MAX_RETENTION_BYTES,
        "log bytes kept before the log start moves to the newest snapshot (-1: never)"),
    Key("metadata.max.retention.ms", "max_retention_ms", _int(-1), DEFAULT_MAX_RETENTION_MS,
        "or once the oldest log segment was last written this long ago (-1: never)"),
    Key("metadata.log.max.snapshot.interval.ms", "max_snapshot_interval_ms", _int(0),
        DEFAULT_MAX_SNAPSHOT_INTERVAL_MS,
        "a snapshot at least this often while new records commit (0: by bytes only)"),
    Key("fetch.snapshot.max.bytes", "fetch_snapshot_max_bytes", _int(1), 1 << 20,
        "the most bytes in one FetchSnapshot answer", origin="kraft-py"),
    Key("ssl.keystore.location", "ssl_keystore_location", _optional_str, "",
        "the listeners' certificate and key (and, as a client, this node's): a file of "
        "`ssl.keystore.type`; or give `ssl.keystore.certificate.chain` and `ssl.keystore.key`"),
    Key("ssl.keystore.type", "ssl_keystore_type", _choice(STORE_TYPES, upper=True), "PEM",
        "`PEM` (the key and its certificate chain in one file) or `PKCS12` (Kafka's JKS "
        "is not read)"),
    Key("ssl.keystore.password", "ssl_keystore_password", _optional_str, "",
        "a PKCS12 keystore's password"),
    Key("ssl.keystore.certificate.chain", "ssl_keystore_certificate_chain", _optional_str, "",
        "PEM text: the certificate, then its chain (in place of a keystore file)"),
    Key("ssl.keystore.key", "ssl_keystore_key", _optional_str, "",
        "PEM text: the private key (in place of a keystore file)"),
    Key("ssl.key.password", "ssl_key_password", _optional_str, "",
        "the private key's password (empty: the key is not encrypted)"),
    Key("ssl.truststore.location", "ssl_truststore_location", _optional_str, "",
        "the CA certificates that check peers, a file of `ssl.truststore.type`; none "
        "(and no `ssl.truststore.certificates`): the system's CAs"),
    Key("ssl.truststore.type", "ssl_truststore_type", _choice(STORE_TYPES, upper=True), "PEM",
        "`PEM` or `PKCS12`"),
    Key("ssl.truststore.password", "ssl_truststore_password", _optional_str, "",
        "a PKCS12 truststore's password"),
    Key("ssl.truststore.certificates", "ssl_truststore_certificates", _optional_str, "",
        "PEM text: the trusted CA certificates (in place of a truststore file)"),
    Key("ssl.client.auth", "ssl_client_auth", _choice(CLIENT_AUTH_MODES), "none",
        "SSL listeners: `none`, `requested` or `required` (mutual TLS); per listener "
        "`listener.name.<listener>.ssl.client.auth`, which alone applies to a SASL_SSL "
        "listener (KIP-684); with `required` on the controller listener, a node id claimed "
        "in a raft request or broker registration must be the one in the peer certificate "
        "(CN `kraft-node-<id>`)"),
    Key("ssl.endpoint.identification.algorithm", "ssl_endpoint_identification_algorithm",
        _algorithm, "https",
        "`https`: a server's certificate must name the host or IP address dialled; empty: "
        "not checked (the chain still is)"),
    Key("sasl.enabled.mechanisms", "sasl_enabled_mechanisms", _list, ("GSSAPI",),
        "the mechanisms a SASL_PLAINTEXT or SASL_SSL listener offers: `PLAIN`, "
        "`SCRAM-SHA-256`, `SCRAM-SHA-512` (GSSAPI and OAUTHBEARER are not implemented: "
        "with a SASL listener, Kafka's default must be replaced)"),
    Key("sasl.mechanism.inter.broker.protocol", "sasl_mechanism_inter_broker_protocol",
        _optional_str, "GSSAPI",
        "how a broker logs in to the other brokers' SASL listener (its replica fetcher), "
        "with the credentials of `listener.name.<listener>.<mechanism>.sasl.jaas.config`"),
    Key(sasl_settings.JAAS_KEY_PATTERN, "sasl_jaas_configs", _optional_str, "",
        "e.g. `listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        "username=\"admin\" password=\"admin-secret\";`: the broker's own login to that "
        "listener (PlainLoginModule for PLAIN, whose `user_NAME=\"PASSWORD\"` options also "
        "add PLAIN users)"),
    Key("sasl.plain.users", "sasl_plain_users", _optional_str, "",
        "kraft-py's key, for tests only (the passwords sit in the file): `NAME:PASSWORD,...`, "
        "the users a listener with PLAIN enabled accepts", origin="test-only"),
    Key("metrics.listener", "metrics_listener", _metrics_listener, "",
        "`http://HOST:PORT`: serve Prometheus metrics at `/metrics` (port 0: any free port, "
        "logged); `https://HOST:PORT`: over TLS with the node's PEM keystore and truststore "
        "files and `ssl.client.auth`; empty: off", origin="kraft-py"),
    Key("fault.injection.file", "fault_injection_file", _optional_str, "",
        "kraft chaos: a JSON file of injected faults, relative to the config file; "
        "empty: off", origin="test-only"),
    Key("fault.injection.replica.routes", "replica_routes", _optional_str, "",
        "kraft chaos: `ID@HOST:PORT,...`, where this broker's replica fetcher dials broker "
        "ID instead of its endpoint; empty: off", origin="test-only"),
)
KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}
ALIASES: dict[str, str] = {alias: k.name for k in KEYS for alias in k.aliases}
KNOWN_KEYS = frozenset(KEYS_BY_NAME) | frozenset(ALIASES)
# Keys of Kafka's sample server/broker/controller.properties that have no effect here:
# accepted (so such a file starts a node) and named in one warning.
IGNORED_KAFKA_KEYS = frozenset({
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes", "num.partitions", "num.recovery.threads.per.data.dir",
    "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.retention.hours", "log.retention.bytes", "log.retention.check.interval.ms",
    "group.initial.rebalance.delay.ms", "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
})


def canonical_key(name: str) -> str:
    """The current name of `name` (itself unless it is an old alias)."""
    return ALIASES.get(name, name)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    node_id: int
    roles: frozenset[str]
    voters: dict[int, Address]
    listeners: dict[str, Address]  # name -> where it binds (an empty host: 0.0.0.0)
    controller_listener_names: tuple[str, ...]
    log_dir: Path
    advertised_listeners: dict[str, Address] = field(default_factory=dict)
    protocol_map: dict[str, str] = field(default_factory=dict)
    inter_broker_listener_name: str = ""
    bootstrap_servers: tuple[Address, ...] = ()
    cluster_id: str = ""
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 1 << 20
    pre_vote: bool = True
    send_queue_max_messages: int = 256
    socket_request_max_bytes: int = 100 * 1024 * 1024
    sasl_server_max_receive_size: int = DEFAULT_SASL_MAX_RECEIVE_BYTES
    connections_max_idle_ms: int = DEFAULT_MAX_IDLE_MS
    connections_authentication_timeout_ms: int = DEFAULT_AUTHENTICATION_TIMEOUT_MS
    max_connections: int = UNLIMITED_CONNECTIONS
    max_connections_per_ip: int = UNLIMITED_CONNECTIONS
    delete_topic_delay_ms: int = 4 * 3600 * 1000
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    log_segment_bytes: int = 1 << 30
    replica_lag_time_max_ms: int = 30_000
    offsets_topic_num_partitions: int = 50
    sasl_enabled_mechanisms: tuple[str, ...] = ("GSSAPI",)
    sasl_mechanism_inter_broker_protocol: str = "GSSAPI"
    # listener.name.<listener>.<mechanism>.sasl.jaas.config: (LISTENER, MECHANISM) -> text
    sasl_jaas_configs: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    # listener.name.<listener>.ssl.client.auth: LISTENER -> none | requested | required
    listener_client_auth: dict[str, str] = field(default_factory=dict)
    sasl_plain_users: str = field(default="", repr=False)  # NAME:PASSWORD,... (tests)
    authorizer_class_name: str = ""  # "" off (metadata.authorizer)
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False
    allow_unbound_controller_listener: bool = False
    max_record_bytes_between_snapshots: int = DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS
    max_retention_bytes: int = DEFAULT_MAX_RETENTION_BYTES
    max_retention_ms: int = DEFAULT_MAX_RETENTION_MS
    max_snapshot_interval_ms: int = DEFAULT_MAX_SNAPSHOT_INTERVAL_MS
    fetch_snapshot_max_bytes: int = 1 << 20
    metrics_listener: str = ""  # http(s)://HOST:PORT; "" off (tools.metrics)
    ssl_keystore_location: str = ""
    ssl_keystore_type: str = "PEM"
    ssl_keystore_password: str = ""
    ssl_keystore_certificate_chain: str = ""
    ssl_keystore_key: str = ""
    ssl_key_password: str = ""
    ssl_truststore_location: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_truststore_password: str = ""
    ssl_truststore_certificates: str = ""
    ssl_client_auth: str = "none"
    ssl_endpoint_identification_algorithm: str = "https"
    fault_injection_file: str = ""
    replica_routes: dict[int, Address] = field(default_factory=dict)  # test-only
    source: str = field(default="", compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)  # deprecated/ignored keys

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def tls(self) -> TlsSettings:
        """The node's `ssl.*` keys, for `raft.common.tls` (its listeners and clients)."""
        return tls_settings(self)

    def listener_protocol(self, name: str | None) -> str:
        """The security protocol of listener `name` (PLAINTEXT when it has none)."""
        return self.protocol_map.get(name.upper(), "PLAINTEXT") if name else "PLAINTEXT"

    def is_tls(self, name: str | None) -> bool:
        return self.listener_protocol(name) in TLS_PROTOCOLS

    def client_auth_of(self, name: str | None) -> str:
        """`ssl.client.auth` on listener `name`: its `listener.name.<name>.ssl.client.auth`,
        else the node's, except on a SASL_SSL listener, which takes only its own (none
        unless set), as Kafka does since KIP-684."""
        listener = (name or "").upper()
        if listener in self.listener_client_auth:
            return self.listener_client_auth[listener]
        return "none" if self.listener_protocol(listener) == "SASL_SSL" \
            else self.ssl_client_auth

    @property
    def controller_listener_name(self) -> str | None:
        """The controller listener this node serves, or (a broker) the one its voters
        serve: the first of `controller.listener.names`."""
        for name in self.controller_listener_names:
            if name.upper() in self.listeners:
                return name.upper()
        return self.controller_listener_names[0].upper() if self.controller_listener_names \
            else None

    @property
    def controller_address(self) -> Address | None:
        """Where this node listens for raft and admin requests (None: it does not)."""
        for name in self.controller_listener_names:
            if name.upper() in self.listeners:
                return self.listeners[name.upper()]
        return None

    @property
    def kafka_listener_name(self) -> str | None:
        """The broker's Kafka-protocol listener: `inter.broker.listener.name`, else the
        first listener that is neither a controller's nor STATUS."""
        if self.inter_broker_listener_name:
            return self.inter_broker_listener_name.upper()
        reserved = {n.upper() for n in self.controller_listener_names} | {STATUS_LISTENER}
        return next((n for n in self.listeners if n not in reserved), None)

    @property
    def client_address(self) -> Address | None:
        """Where the broker serves the Kafka protocol (None: it does not)."""
        name = self.kafka_listener_name
        return self.listeners.get(name) if name else None

    @property
    def advertised_client_address(self) -> Address | None:
        """What the broker registers for its Kafka listener (`advertised.listeners`)."""
        name = self.kafka_listener_name
        return self.advertised_listeners.get(name) if name else None

    @property
    def status_address(self) -> Address | None:
        """Where a broker serves BrokerStatus (msgpack framing): `STATUS://HOST:PORT`."""
        return self.listeners.get(STATUS_LISTENER)

    def listener_limits(self) -> ListenerLimits:
        """Every listener's connection limits (`raft.common.connection_limits`)."""
        return ListenerLimits(
            max_connections=self.max_connections,
            max_connections_per_ip=self.max_connections_per_ip,
            max_idle_ms=self.connections_max_idle_ms,
            authentication_timeout_ms=self.connections_authentication_timeout_ms,
            sasl_max_receive_bytes=self.sasl_server_max_receive_size,
            max_request_bytes=self.socket_request_max_bytes)

    def authorizer_settings(self) -> AuthorizerSettings:
        """`authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`."""
        return AuthorizerSettings(
            enabled=authorizer_enabled(self.authorizer_class_name),
            super_users=parse_super_users(self.super_users),
            allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found)

    @property
    def kafka_listener_sasl(self) -> bool:
        """Whether the broker's Kafka listener (also its inter-broker one) is SASL_*."""
        name = self.kafka_listener_name
        return bool(name) and self.protocol_map.get(name or "") in sasl_settings.SASL_PROTOCOLS

    def listener_sasl(self) -> sasl_settings.SaslSettings | None:
        """The Kafka listener's SASL (None: it has none); checked by `_check_sasl`."""
        if not self.kafka_listener_sasl:
            return None
        users = parse_plain_users("sasl.plain.users", self.sasl_plain_users)
        jaas = self.sasl_jaas_configs.get((self.kafka_listener_name or "", "PLAIN"))
        if jaas is not None:
            users = {**sasl_settings.plain_users(jaas), **users}
        return sasl_settings.SaslSettings(
            enabled_mechanisms=tuple(m.upper() for m in self.sasl_enabled_mechanisms),
            plain_users=users)

    def inter_broker_sasl(self) -> sasl_settings.SaslClientSettings | None:
        """How the replica fetcher logs in to the other brokers (None: no SASL)."""
        if not self.kafka_listener_sasl:
            return None
        mechanism = self.sasl_mechanism_inter_broker_protocol.upper()
        jaas = self.sasl_jaas_configs[(self.kafka_listener_name or "", mechanism)]
        return sasl_settings.client_settings(mechanism, jaas)

    def broker_settings(self) -> BrokerSettings:
        """What the broker role (`broker.role.install_broker_role`) takes from this
        configuration."""
        advertised = self.advertised_client_address
        return BrokerSettings(
            broker_id=self.node_id, log_dir=self.log_dir,
            delete_topic_delay_ms=self.delete_topic_delay_ms, voters=dict(self.voters),
            request_timeout_ms=self.request_timeout_ms,
            heartbeat_interval_ms=self.broker_heartbeat_interval_ms,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            offsets_topic_num_partitions=self.offsets_topic_num_partitions,
            socket_request_max_bytes=self.socket_request_max_bytes,
            status_address=self.status_address, client_address=self.client_address,
            advertised_address=None if advertised == self.client_address else advertised,
            replica_routes=dict(self.replica_routes),
            sasl=self.listener_sasl(), inter_broker_sasl=self.inter_broker_sasl(),
            authorizer=self.authorizer_settings(), kafka_limits=self.listener_limits(),
            status_limits=self.listener_limits())


def tls_settings(values: Any) -> TlsSettings:
    """`TlsSettings` from anything holding the `ssl_*` attributes (a NodeConfig, a
    ClientProperties)."""
    return TlsSettings(
        keystore_location=values.ssl_keystore_location,
        keystore_type=values.ssl_keystore_type,
        keystore_password=values.ssl_keystore_password,
        keystore_certificate_chain=values.ssl_keystore_certificate_chain,
        keystore_key=values.ssl_keystore_key, key_password=values.ssl_key_password,
        truststore_location=values.ssl_truststore_location,
        truststore_type=values.ssl_truststore_type,
        truststore_password=values.ssl_truststore_password,
        truststore_certificates=values.ssl_truststore_certificates,
        client_auth=values.ssl_client_auth,
        endpoint_identification_algorithm=values.ssl_endpoint_identification_algorithm)


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


def _canonical(flat: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(values by current name, the name each was written as, warnings). An unknown key
    is a ConfigError; so is a key given under both its names."""
    values: dict[str, Any] = {}
    written: dict[str, str] = {}
    warnings: list[str] = []
    ignored: list[str] = []
    for name, value in flat.items():
        if name in IGNORED_KAFKA_KEYS:
            ignored.append(name)
            continue
        if sasl_settings.jaas_key(name) is not None:  # a pattern key: kept as written
            values[name], written[name] = value, name
            continue
        if _LISTENER_CLIENT_AUTH.fullmatch(name):  # listener.name.<l>.ssl.client.auth
            values[name], written[name] = value, name
            continue
        if name not in KNOWN_KEYS:
            raise ConfigError(name, "unknown configuration key")
        current = canonical_key(name)
        if current in written:
            raise ConfigError(name, f"given twice, as {written[current]} and {name}")
        if current != name:
            warnings.append(f"{name} is deprecated: use {current}")
        values[current], written[current] = value, name
    if ignored:
        warnings.append(f"ignored (no effect in kraft-py): {', '.join(sorted(ignored))}")
    return values, written, warnings


def from_mapping(raw: Mapping[str, Any], source: str = "") -> NodeConfig:
    values: dict[str, Any] = {}
    try:
        given, written, warnings = _canonical(flatten(raw))
        for key in KEYS:
            if key.name in given:
                values[key.attribute] = key.convert(written[key.name], given[key.name])
            elif key.default is REQUIRED:
                raise ConfigError(key.name, "is required")
            else:
                values[key.attribute] = key.default
        values["sasl_jaas_configs"] = _jaas_configs(given)
        values["listener_client_auth"] = _listener_client_auth(given)
        return replace(_build(values, written), source=source, warnings=tuple(warnings))
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.detail, source) from None


def _build(values: dict[str, Any], written: Mapping[str, str]) -> NodeConfig:
    def name(key: str) -> str:  # a key as the file spells it
        return written.get(key, key)

    roles = frozenset(r.lower() for r in values.pop("roles"))
    if not roles or not roles <= set(ROLES):
        raise ConfigError("process.roles", f"expected broker and/or controller, got "
                          f"{sorted(roles)}")
    voters_text = values.pop("voters")
    voters = parse_voters("controller.quorum.voters", voters_text) if voters_text else {}
    bootstrap = tuple(parse_address(a, "controller.quorum.bootstrap.servers")
                      for a in values.pop("bootstrap_servers"))
    listeners = parse_listeners("listeners", values.pop("listener_specs"))
    protocols = parse_protocol_map("listener.security.protocol.map",
                                   values.pop("protocol_map"))
    _check_protocols(listeners, protocols)
    advertised = _advertised(listeners, values.pop("advertised_specs"))
    replica_routes = parse_replica_routes(name("fault.injection.replica.routes"),
                                          values.pop("replica_routes"))
    config = NodeConfig(roles=roles, voters=voters, listeners={
        n: bind_address(a) for n, a in listeners.items()}, advertised_listeners=advertised,
        protocol_map=protocols, bootstrap_servers=bootstrap, replica_routes=replica_routes,
        log_dir=_log_dir(values.pop("log_dirs"), values.pop("single_log_dir"),
                         values.pop("metadata_log_dir")), **values)
    _check_quorum(config, voters_text, bootstrap)
    _check_listeners(config)
    _check_sasl(config)
    _check_tls(config, name)
    _check_controller_identities(config, name)
    if config.fetch_max_bytes + FRAME_OVERHEAD_BYTES > config.socket_request_max_bytes:
        # A Fetch response must fit in one frame, or the follower could never catch up.
        raise ConfigError(name("controller.quorum.fetch.max.bytes"), "must be at least "
                          f"{FRAME_OVERHEAD_BYTES} below socket.request.max.bytes")
    if config.fetch_timeout_ms < config.election_timeout_ms:
        raise ConfigError(name("controller.quorum.fetch.timeout.ms"),
                          f"must not be below {name('controller.quorum.election.timeout.ms')}")
    return config


def _check_protocols(listeners: Mapping[str, Address], protocols: Mapping[str, str]) -> None:
    for listener, address in listeners.items():
        protocol = protocols.get(listener)
        if protocol is None:
            raise ConfigError("listener.security.protocol.map",
                              f"no security protocol for listener {listener}: map it, "
                              f"e.g. {listener}:PLAINTEXT")
        if protocol not in IMPLEMENTED_PROTOCOLS:
            raise ConfigError("listeners", f"listener {listener}://{address[0]}:{address[1]} "
                              f"uses security protocol {protocol}, which kraft-py does not "
                              f"implement (only {', '.join(IMPLEMENTED_PROTOCOLS)})")


def _check_controller_identities(config: NodeConfig, name: Callable[[str], str]) -> None:
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


def _check_tls(config: NodeConfig, name: Callable[[str], str]) -> None:
    """The keys an SSL listener (or https metrics) needs, checked at start; whether the
    files load is checked when the contexts are built (`tools.server.build`)."""
    tls_listeners = [n for n in config.listeners if config.is_tls(n)]
    if config.ssl_keystore_location and (config.ssl_keystore_certificate_chain
                                         or config.ssl_keystore_key):
        raise ConfigError(name("ssl.keystore.location"), "give a keystore file or "
                          "ssl.keystore.certificate.chain and ssl.keystore.key, not both")
    if bool(config.ssl_keystore_certificate_chain) != bool(config.ssl_keystore_key):
        raise ConfigError(name("ssl.keystore.key"), "ssl.keystore.certificate.chain and "
                          "ssl.keystore.key go together")
    if config.ssl_truststore_location and config.ssl_truststore_certificates:
        raise ConfigError(name("ssl.truststore.location"), "give a truststore file or "
                          "ssl.truststore.certificates, not both")
    if tls_listeners and not config.tls.has_keystore:
        raise ConfigError(name("ssl.keystore.location"), f"listener {tls_listeners[0]} is "
                          f"{config.listener_protocol(tls_listeners[0])}: it needs a keystore "
                          "(ssl.keystore.location, or ssl.keystore.certificate.chain and "
                          "ssl.keystore.key)")
    if config.metrics_listener.strip().lower().startswith("https:") and (
            not config.ssl_keystore_location or config.ssl_keystore_type != "PEM"
            or config.ssl_key_password or (config.ssl_client_auth != "none" and (
                not config.ssl_truststore_location or config.ssl_truststore_type != "PEM"))):
        raise ConfigError(name("metrics.listener"), "https metrics are served from PEM files: "
                          "set ssl.keystore.location (ssl.keystore.type=PEM, an unencrypted "
                          "key) and, with ssl.client.auth, ssl.truststore.location (PEM)")


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


_LISTENER_CLIENT_AUTH = re.compile(r"listener\.name\.([A-Za-z0-9_]+)\.ssl\.client\.auth")


def _listener_client_auth(given: Mapping[str, Any]) -> dict[str, str]:
    """`listener.name.<listener>.ssl.client.auth` keys: LISTENER -> mode."""
    found: dict[str, str] = {}
    convert = _choice(CLIENT_AUTH_MODES)
    for name, value in given.items():
        match = _LISTENER_CLIENT_AUTH.fullmatch(name)
        if match:
            found[match.group(1).upper()] = convert(name, value)
    return found


def _jaas_configs(given: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """The `listener.name.<listener>.<mechanism>.sasl.jaas.config` keys, by (LISTENER,
    MECHANISM), each checked to parse (its text is never echoed: it holds a password)."""
    found: dict[tuple[str, str], str] = {}
    for name, value in given.items():
        parts = sasl_settings.jaas_key(name)
        if parts is None:
            continue
        text = _str(name, value)
        try:
            sasl_settings.parse_jaas_config(text)
        except ValueError as exc:
            raise ConfigError(name, str(exc)) from None
        found[parts] = text
    return found


def _check_sasl(config: NodeConfig) -> None:
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


def _advertised(listeners: Mapping[str, Address], specs: tuple[str, ...]) -> dict[str, Address]:
    """advertised.listeners, defaulting per listener to `listeners`; an empty host is
    this host's name, a wildcard is refused (nobody can connect to it)."""
    given = parse_listeners("advertised.listeners", specs)
    for listener in given:
        if listener not in listeners:
            raise ConfigError("advertised.listeners",
                              f"listener {listener} is not in listeners")
    # a wildcard stays: _check_listeners refuses it where it would be advertised
    return {listener: (address[0] or socket.getfqdn(), address[1])
            for listener, address in {**listeners, **given}.items()}


def _log_dir(log_dirs: tuple[str, ...], single: str, metadata: str) -> Path:
    if len(log_dirs) > 1:
        raise ConfigError("log.dirs", f"exactly one directory is supported, got {len(log_dirs)}")
    chosen = log_dirs[0] if log_dirs else single or metadata
    if not chosen:
        raise ConfigError("log.dirs", "is required (or log.dir, or metadata.log.dir)")
    if metadata and Path(metadata) != Path(chosen):
        raise ConfigError("metadata.log.dir", f"{metadata} differs from the log directory "
                          f"{chosen}: kraft-py keeps the metadata log beside the partitions "
                          "in one directory")
    return Path(chosen)


def _check_quorum(config: NodeConfig, voters_text: str, bootstrap: tuple[Address, ...]) -> None:
    roles, node_id = config.roles, config.node_id
    if not voters_text:
        if not bootstrap:
            raise ConfigError("controller.quorum.voters", "is required")
        # A broker, or a controller of a dynamic quorum (KIP-853) to be added, learns
        # the voters from the bootstrap servers at start.
        return
    endpoints = set(config.voters.values())
    for address in bootstrap:
        if address not in endpoints:
            raise ConfigError("controller.quorum.bootstrap.servers",
                              f"{address[0]}:{address[1]} is not the endpoint of any voter "
                              "in controller.quorum.voters")
    # A controller outside controller.quorum.voters is one of a dynamic quorum (KIP-853)
    # formatted with --no-initial-controllers: an observer until `kraft quorum
    # add-controller` adds it; the configured voters are whom it asks.
    if "controller" not in roles and config.is_voter:
        raise ConfigError("process.roles",
                          f"node {node_id} is a voter but lacks the controller role")


def _check_listeners(config: NodeConfig) -> None:
    if "controller" in config.roles and config.controller_address is None:
        raise ConfigError("listeners", "a controller needs a "
                          f"{'/'.join(config.controller_listener_names)} listener")
    name = config.inter_broker_listener_name.upper()
    if name and name not in config.listeners:
        raise ConfigError("inter.broker.listener.name", f"{name} is not in listeners")
    if name and name in {n.upper() for n in config.controller_listener_names}:
        raise ConfigError("inter.broker.listener.name", f"{name} is a controller listener")
    if "broker" not in config.roles:
        return
    reserved = {n.upper() for n in config.controller_listener_names} | {STATUS_LISTENER}
    kafka = [n for n in config.listeners if n not in reserved]
    if not name and len(kafka) > 1:
        raise ConfigError("listeners", f"kraft-py serves the Kafka protocol on one listener, "
                          f"got {', '.join(kafka)}: set inter.broker.listener.name")
    advertised = config.advertised_client_address
    if advertised is not None and advertised[0] in (WILDCARD_HOST, "::"):
        raise ConfigError("advertised.listeners",
                          f"{config.kafka_listener_name} would advertise {advertised[0]}, "
                          "which no client can connect to: set advertised.listeners")


# --- files --------------------------------------------------------------------------


def _read(path: Path) -> dict[str, Any]:
    """A `.properties` file by its name; anything else as TOML, and as properties when it
    is not TOML but reads as key=value lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("config", f"{path} is not UTF-8 text: {exc}") from None
    try:
        if path.suffix == ".properties":
            return dict(parse_properties(text, str(path)))
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            if path.suffix == ".toml" or not all("=" in line or ":" in line
                                                 for _, line in logical_lines(text)):
                raise ConfigError("config", f"{path} is neither valid TOML ({exc}) nor a "
                                  ".properties file (name it *.properties)") from None
            return dict(parse_properties(text, str(path)))
    except PropertiesError as exc:
        raise ConfigError("config", str(exc)) from None


def load(path: str | Path) -> NodeConfig:
    path = Path(path)
    config = from_mapping(_read(path), str(path))
    if config.fault_injection_file and not Path(config.fault_injection_file).is_absolute():
        config = replace(config,
                         fault_injection_file=str(path.parent / config.fault_injection_file))
    return config


# --- client properties (--command-config FILE) ----------------------------------------

CLIENT_SSL_KEYS = tuple(k for k in KEYS if k.name.startswith("ssl.")
                        and k.name != "ssl.client.auth")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientProperties:
    """A client's properties file (Kafka's `--command-config`): `security.protocol`, the
    `ssl.*` keys with the node keys' meanings, and every other key as written (`other`:
    e.g. the SASL ones, for the layers that read them)."""

    security_protocol: str = "PLAINTEXT"
    ssl_keystore_location: str = ""
    ssl_keystore_type: str = "PEM"
    ssl_keystore_password: str = ""
    ssl_keystore_certificate_chain: str = ""
    ssl_keystore_key: str = ""
    ssl_key_password: str = ""
    ssl_truststore_location: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_truststore_password: str = ""
    ssl_truststore_certificates: str = ""
    ssl_client_auth: str = "none"  # not a client key; here so tls_settings reads one shape
    ssl_endpoint_identification_algorithm: str = "https"
    other: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def tls(self) -> TlsSettings:
        return tls_settings(self)


def client_properties(raw: Mapping[str, str], source: str = "") -> ClientProperties:
    """ClientProperties from `key -> value` strings; ConfigError naming a bad key. Paths
    relative to the file's directory are resolved against it."""
    values: dict[str, Any] = {}
    other: dict[str, str] = {}
    known = {k.name: k for k in CLIENT_SSL_KEYS}
    base = Path(source).parent if source else None
    try:
        for name, value in raw.items():
            if name == "security.protocol":
                protocol = _optional_str(name, value).upper()
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
    return ClientProperties(**values, other=other, source=source)


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


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def to_toml(settings: Mapping[str, Any]) -> str:
    """Render Kafka-named settings as TOML with quoted keys (what the launcher writes);
    old alias names are written under their current name."""
    flat = flatten(settings)
    unknown = sorted(k for k in set(flat) - KNOWN_KEYS if sasl_settings.jaas_key(k) is None)
    if unknown:
        raise ConfigError(unknown[0], "unknown configuration key")
    current = {canonical_key(k): v for k, v in flat.items()}
    return "".join(f'"{key}" = {_toml_value(value)}\n' for key, value in current.items())


# --- the reference table ------------------------------------------------------------


def _default_text(key: Key) -> str:
    if key.default is REQUIRED:
        return "required"
    if isinstance(key.default, tuple):
        return f"`{','.join(key.default)}`" if key.default else "(none)"
    if isinstance(key.default, bool):
        return f"`{str(key.default).lower()}`"
    if key.default == "":
        return "(none)"
    return f"`{key.default}`"


def reference_table() -> str:
    """The README's configuration-key table (Markdown), generated from `KEYS`."""
    lines = ["| key | default | origin | meaning |", "|---|---|---|---|"]
    for key in KEYS:
        also = f" (old name: {', '.join(f'`{a}`' for a in key.aliases)})" if key.aliases else ""
        lines.append(f"| `{key.name}` | {_default_text(key)} | {key.origin} | "
                     f"{key.doc}{also} |")
    lines.append(f"| {', '.join(f'`{k}`' for k in sorted(IGNORED_KAFKA_KEYS))} | | Kafka | "
                 "accepted with a warning, no effect |")
    return "\n".join(lines)
