"""Node configuration: a TOML file with Kafka's key names.

Keys may be written quoted (`"node.id" = 1`) or as TOML dotted keys (`node.id = 1`); both
flatten to the same Kafka name. Unknown keys and bad values fail at start with the key
named (`ConfigError.key`). Example:

    "node.id" = 1
    "process.roles" = "controller"
    "controller.quorum.voters" = "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093"
    "listeners" = "CONTROLLER://127.0.0.1:19091"
    "log.dirs" = "/var/lib/kraft/node-1"
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from broker.settings import BrokerSettings
from metadata.snapshot_policy import (
    DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS,
    DEFAULT_MAX_RETENTION_BYTES,
    DEFAULT_MAX_RETENTION_MS,
    DEFAULT_MAX_SNAPSHOT_INTERVAL_MS,
)

Address = tuple[str, int]

CONTROLLER_LISTENER = "CONTROLLER"
STATUS_LISTENER = "STATUS"  # a broker's msgpack BrokerStatus port (kraft-py's, not Kafka's)
ROLES = ("broker", "controller")
FRAME_OVERHEAD_BYTES = 64 * 1024  # envelope and batch headers around fetched records


class ConfigError(ValueError):
    """A configuration key is unknown, missing or has a bad value; `key` names it."""

    def __init__(self, key: str, message: str, source: str = "") -> None:
        prefix = f"{source}: " if source else ""
        super().__init__(f"{prefix}{key}: {message}")
        self.key = key
        self.detail = message


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


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(key, f"expected true or false, got {value!r}")


# Kafka key -> (attribute, converter, default). A default of None means required.
_KEYS: dict[str, tuple[str, Callable[[str, Any], Any], Any]] = {
    "node.id": ("node_id", _int(0), None),
    "process.roles": ("roles", _list, None),
    "controller.quorum.voters": ("voters", _str, None),
    "listeners": ("listeners", _list, ()),
    "controller.listener.names": ("controller_listener_names", _list, (CONTROLLER_LISTENER,)),
    "log.dirs": ("log_dirs", _list, None),
    "cluster.id": ("cluster_id", _str, ""),
    "quorum.election.timeout.ms": ("election_timeout_ms", _int(1), 1000),
    "quorum.fetch.timeout.ms": ("fetch_timeout_ms", _int(1), 2000),
    "quorum.election.backoff.max.ms": ("election_backoff_max_ms", _int(1), 1000),
    "quorum.request.timeout.ms": ("request_timeout_ms", _int(1), 2000),
    # kraft-py extensions, named in Kafka's style
    "quorum.fetch.max.wait.ms": ("fetch_max_wait_ms", _int(0), 500),
    "quorum.fetch.max.bytes": ("fetch_max_bytes", _int(1), 1 << 20),
    "quorum.pre.vote.enable": ("pre_vote", _bool, True),
    "quorum.send.queue.max.messages": ("send_queue_max_messages", _int(1), 256),
    "socket.request.max.bytes": ("socket_request_max_bytes", _int(1024), 100 * 1024 * 1024),
    "delete.topic.delay.ms": ("delete_topic_delay_ms", _int(0), 4 * 3600 * 1000),
    "broker.session.timeout.ms": ("broker_session_timeout_ms", _int(1), 9000),
    "broker.heartbeat.interval.ms": ("broker_heartbeat_interval_ms", _int(1), 2000),
    "log.segment.bytes": ("log_segment_bytes", _int(1024), 1 << 30),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", _int(1), 30_000),
    # partitions of __consumer_offsets when a broker creates it (broker.kafka.coordinator)
    "offsets.topic.num.partitions": ("offsets_topic_num_partitions", _int(1), 50),
    # committed record bytes between two snapshots of a node's image (metadata.snapshot_policy)
    "metadata.log.max.record.bytes.between.snapshots": (
        "max_record_bytes_between_snapshots", _int(1), DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS),
    # log bytes kept before the log start advances to the newest snapshot, deleting the
    # whole segments below it; -1: never (metadata.snapshot_writer)
    "metadata.max.retention.bytes": ("max_retention_bytes", _int(-1),
                                     DEFAULT_MAX_RETENTION_BYTES),
    # ... or once its oldest segment was last written this long ago; -1: never
    "metadata.max.retention.ms": ("max_retention_ms", _int(-1), DEFAULT_MAX_RETENTION_MS),
    # a snapshot at least this often while new records commit; 0: by bytes only
    "metadata.log.max.snapshot.interval.ms": ("max_snapshot_interval_ms", _int(0),
                                              DEFAULT_MAX_SNAPSHOT_INTERVAL_MS),
    "fetch.snapshot.max.bytes": ("fetch_snapshot_max_bytes", _int(1), 1 << 20),
    # test-only (kraft chaos): a JSON file of injected faults (raft/fault_injection.py);
    # empty: off; a relative path is resolved against the config file's directory
    "fault.injection.file": ("fault_injection_file", _optional_str, ""),
    # test-only (kraft chaos): `ID@HOST:PORT,...`, the address this broker's replica
    # fetcher dials for broker ID instead of its advertised endpoint (a fault-injecting
    # proxy, tools/chaos/proxy.py); empty: off
    "fault.injection.replica.routes": ("replica_routes", _optional_str, ""),
}
KNOWN_KEYS = frozenset(_KEYS)


def parse_address(text: str, key: str = "address") -> Address:
    """`HOST:PORT` (an IPv6 host in brackets: `[::1]:9092`) -> (host, port). A ConfigError
    naming `key` when it is not one; its `detail` is the message without the key."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(key, f"bad address {text!r}: expected HOST:PORT")
    return host, int(port)


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


def parse_listeners(key: str, items: tuple[str, ...]) -> dict[str, Address]:
    """`CONTROLLER://127.0.0.1:19091,PLAINTEXT://127.0.0.1:9092` -> {name: address}."""
    listeners: dict[str, Address] = {}
    for item in items:
        name, sep, address = item.partition("://")
        if not sep or not name:
            raise ConfigError(key, f"bad listener {item!r}: expected NAME://HOST:PORT")
        if name.upper() in listeners:
            raise ConfigError(key, f"listener {name} is listed twice")
        listeners[name.upper()] = parse_address(address, key)
    return listeners


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    node_id: int
    roles: frozenset[str]
    voters: dict[int, Address]
    listeners: dict[str, Address]
    controller_listener_names: tuple[str, ...]
    log_dir: Path
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
    delete_topic_delay_ms: int = 4 * 3600 * 1000
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    log_segment_bytes: int = 1 << 30
    replica_lag_time_max_ms: int = 30_000
    offsets_topic_num_partitions: int = 50
    max_record_bytes_between_snapshots: int = DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS
    max_retention_bytes: int = DEFAULT_MAX_RETENTION_BYTES
    max_retention_ms: int = DEFAULT_MAX_RETENTION_MS
    max_snapshot_interval_ms: int = DEFAULT_MAX_SNAPSHOT_INTERVAL_MS
    fetch_snapshot_max_bytes: int = 1 << 20
    fault_injection_file: str = ""
    replica_routes: dict[int, Address] = field(default_factory=dict)  # test-only
    source: str = field(default="", compare=False)

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def controller_address(self) -> Address | None:
        """Where this node listens for raft and admin requests (None: it does not)."""
        for name in self.controller_listener_names:
            if name.upper() in self.listeners:
                return self.listeners[name.upper()]
        return None

    @property
    def client_address(self) -> Address | None:
        """The first listener that is neither a controller's nor STATUS (the Kafka
        protocol, for brokers)."""
        reserved = {n.upper() for n in self.controller_listener_names} | {STATUS_LISTENER}
        return next((a for n, a in self.listeners.items() if n not in reserved), None)

    @property
    def status_address(self) -> Address | None:
        """Where a broker serves BrokerStatus (msgpack framing): `STATUS://HOST:PORT`."""
        return self.listeners.get(STATUS_LISTENER)

    def broker_settings(self) -> BrokerSettings:
        """What the broker role (`broker.role.install_broker_role`) takes from this
        configuration."""
        return BrokerSettings(
            broker_id=self.node_id, log_dir=self.log_dir,
            delete_topic_delay_ms=self.delete_topic_delay_ms, voters=dict(self.voters),
            request_timeout_ms=self.request_timeout_ms,
            heartbeat_interval_ms=self.broker_heartbeat_interval_ms,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            offsets_topic_num_partitions=self.offsets_topic_num_partitions,
            socket_request_max_bytes=self.socket_request_max_bytes,
            status_address=self.status_address, client_address=self.client_address,
            replica_routes=dict(self.replica_routes))


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


def from_mapping(raw: Mapping[str, Any], source: str = "") -> NodeConfig:
    flat = flatten(raw)
    unknown = sorted(set(flat) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(unknown[0], "unknown configuration key", source)
    values: dict[str, Any] = {}
    try:
        for key, (attribute, convert, default) in _KEYS.items():
            if key in flat:
                values[attribute] = convert(key, flat[key])
            elif default is None:
                raise ConfigError(key, "is required")
            else:
                values[attribute] = default
        return _build(values, source)
    except ConfigError as exc:
        raise ConfigError(exc.key, exc.detail, source) from None


def _build(values: dict[str, Any], source: str) -> NodeConfig:
    roles = frozenset(r.lower() for r in values.pop("roles"))
    if not roles or not roles <= set(ROLES):
        raise ConfigError("process.roles", f"expected broker and/or controller, got "
                          f"{sorted(roles)}")
    voters = parse_voters("controller.quorum.voters", values.pop("voters"))
    listeners = parse_listeners("listeners", values.pop("listeners"))
    replica_routes = parse_replica_routes("fault.injection.replica.routes",
                                          values.pop("replica_routes"))
    log_dirs = values.pop("log_dirs")
    if len(log_dirs) != 1:
        raise ConfigError("log.dirs", f"exactly one directory is supported, got {len(log_dirs)}")
    config = NodeConfig(roles=roles, voters=voters, listeners=listeners,
                        replica_routes=replica_routes, log_dir=Path(log_dirs[0]),
                        source=source, **values)
    if "controller" in roles and not config.is_voter:
        raise ConfigError("controller.quorum.voters",
                          f"node {config.node_id} has the controller role but is not a voter")
    if "controller" not in roles and config.is_voter:
        raise ConfigError("process.roles",
                          f"node {config.node_id} is a voter but lacks the controller role")
    if config.is_voter and config.controller_address is None:
        raise ConfigError("listeners", "a controller needs a "
                          f"{'/'.join(config.controller_listener_names)} listener")
    if config.fetch_max_bytes + FRAME_OVERHEAD_BYTES > config.socket_request_max_bytes:
        # A Fetch response must fit in one frame, or the follower could never catch up.
        raise ConfigError("quorum.fetch.max.bytes", f"must be at least {FRAME_OVERHEAD_BYTES} "
                          "below socket.request.max.bytes")
    if config.fetch_timeout_ms < config.election_timeout_ms:
        raise ConfigError("quorum.fetch.timeout.ms",
                          "must not be below quorum.election.timeout.ms")
    return config


def load(path: str | Path) -> NodeConfig:
    path = Path(path)
    try:
        with path.open("rb") as handle:
            raw = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", f"{path} is not valid TOML: {exc}") from None
    config = from_mapping(raw, str(path))
    if config.fault_injection_file and not Path(config.fault_injection_file).is_absolute():
        config = replace(config,
                         fault_injection_file=str(path.parent / config.fault_injection_file))
    return config


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def to_toml(settings: Mapping[str, Any]) -> str:
    """Render Kafka-named settings as TOML with quoted keys (what the launcher writes)."""
    unknown = sorted(set(settings) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(unknown[0], "unknown configuration key")
    return "".join(f'"{key}" = {_toml_value(value)}\n' for key, value in settings.items())
