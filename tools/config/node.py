"""`NodeConfig`: a node's checked configuration, and what each part of the node takes
from it (its listeners, TLS, SASL, connection limits, authorizer, the broker's settings).
Its fields have no defaults: it is built only from the key table (`tools.config.loading`),
whose `Key.default` is each default's one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from broker.kafka.partitions.segments import LogDefaults
from broker.kafka.sasl import sasl_settings
from broker.settings import AutoCreateSettings, BrokerSettings
from metadata.authorizer import AuthorizerSettings, authorizer_enabled, parse_super_users
from raft.common.connection_limits import ListenerLimits
from raft.common.tls import TlsSettings
from tools.config.parsers import (
    STATUS_LISTENER,
    TLS_PROTOCOLS,
    Address,
    parse_plain_users,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    # No defaults: the loader (`tools.config.loading`) sets every field from the key
    # table, so a default written here would be a second one that nothing reads.
    node_id: int
    roles: frozenset[str]
    voters: dict[int, Address]
    listeners: dict[str, Address]  # name -> where it binds (an empty host: 0.0.0.0)
    controller_listener_names: tuple[str, ...]
    log_dir: Path
    advertised_listeners: dict[str, Address]
    protocol_map: dict[str, str]
    inter_broker_listener_name: str
    bootstrap_servers: tuple[Address, ...]
    cluster_id: str
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    fetch_max_wait_ms: int
    fetch_max_bytes: int
    pre_vote: bool
    send_queue_max_messages: int
    socket_request_max_bytes: int
    sasl_server_max_receive_size: int
    connections_max_idle_ms: int
    connections_authentication_timeout_ms: int
    max_connections: int
    max_connections_per_ip: int
    delete_topic_delay_ms: int
    broker_session_timeout_ms: int
    broker_heartbeat_interval_ms: int
    controlled_shutdown_enable: bool
    ordered_delivery_default: bool  # the controller's enable.ordered.delivery
    unclean_leader_election_enable: bool  # the controller's default for topics
    log_segment_bytes: int
    replica_lag_time_max_ms: int
    log_retention_check_interval_ms: int
    log_cleaner_backoff_ms: int
    log_cleaner_io_max_bytes_per_second: int
    auto_create_topics_enable: bool
    num_partitions: int
    default_replication_factor: int
    log_retention_ms: int | None  # None: not given (then .minutes, then .hours)
    log_retention_minutes: int | None
    log_retention_hours: int
    log_retention_bytes: int
    log_roll_ms: int | None  # None: not given (then .hours)
    log_roll_hours: int
    offsets_topic_num_partitions: int
    offsets_topic_segment_bytes: int
    group_initial_rebalance_delay_ms: int
    sasl_enabled_mechanisms: tuple[str, ...]
    sasl_mechanism_inter_broker_protocol: str
    # listener.name.<listener>.<mechanism>.sasl.jaas.config: (LISTENER, MECHANISM) -> text
    sasl_jaas_configs: dict[tuple[str, str], str] = field(repr=False)
    # listener.name.<listener>.ssl.client.auth: LISTENER -> none | requested | required
    listener_client_auth: dict[str, str]
    sasl_plain_users: str = field(repr=False)  # NAME:PASSWORD,... (tests)
    authorizer_class_name: str  # "" off (metadata.authorizer)
    super_users: str
    allow_everyone_if_no_acl_found: bool
    allow_unbound_controller_listener: bool
    max_record_bytes_between_snapshots: int
    max_retention_bytes: int
    max_retention_ms: int
    max_snapshot_interval_ms: int
    fetch_snapshot_max_bytes: int
    metrics_listener: str  # http(s)://HOST:PORT; "" off (tools.metrics)
    tls: TlsSettings  # the ssl.* keys
    fault_injection_file: str
    replica_routes: dict[int, Address]  # test-only
    source: str = field(default="", compare=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)  # deprecated/ignored keys

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

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
            else self.tls.client_auth

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
        """The Kafka listener's SASL (None: it has none); checked by `check_sasl`."""
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

    def log_defaults(self) -> LogDefaults:
        """What a topic that sets no retention.ms, retention.bytes or segment.ms gets, as
        Kafka's: `log.retention.ms`, else `.minutes`, else `.hours` (below 0: no limit);
        `log.roll.ms`, else `.hours`."""
        if self.log_retention_ms is not None:
            retention_ms = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            retention_ms = self.log_retention_minutes * 60_000
        else:
            retention_ms = self.log_retention_hours * 3_600_000
        return LogDefaults(retention_ms=max(-1, retention_ms),
                           retention_bytes=self.log_retention_bytes,
                           segment_ms=self.log_roll_hours * 3_600_000
                           if self.log_roll_ms is None else self.log_roll_ms)

    def broker_settings(self) -> BrokerSettings:
        """What the broker role (`broker.role.install_broker_role`) takes from this
        configuration."""
        advertised = self.advertised_client_address
        return BrokerSettings(
            broker_id=self.node_id, log_dir=self.log_dir,
            delete_topic_delay_ms=self.delete_topic_delay_ms, voters=dict(self.voters),
            request_timeout_ms=self.request_timeout_ms,
            heartbeat_interval_ms=self.broker_heartbeat_interval_ms,
            controlled_shutdown=self.controlled_shutdown_enable,
            unclean_election_default=self.unclean_leader_election_enable,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            log_retention_check_interval_ms=self.log_retention_check_interval_ms,
            log_cleaner_backoff_ms=self.log_cleaner_backoff_ms,
            log_cleaner_io_max_bytes_per_second=self.log_cleaner_io_max_bytes_per_second,
            auto_create=AutoCreateSettings(
                enabled=self.auto_create_topics_enable, num_partitions=self.num_partitions,
                replication_factor=self.default_replication_factor),
            log_defaults=self.log_defaults(),
            offsets_topic_num_partitions=self.offsets_topic_num_partitions,
            offsets_topic_segment_bytes=self.offsets_topic_segment_bytes,
            group_initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            socket_request_max_bytes=self.socket_request_max_bytes,
            status_address=self.status_address, client_address=self.client_address,
            advertised_address=None if advertised == self.client_address else advertised,
            replica_routes=dict(self.replica_routes),
            sasl=self.listener_sasl(), inter_broker_sasl=self.inter_broker_sasl(),
            authorizer=self.authorizer_settings(), kafka_limits=self.listener_limits(),
            status_limits=self.listener_limits())

