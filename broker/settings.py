"""BrokerSettings: what the broker role of a node takes from the node's configuration.

The caller builds it (`kraft node`: `tools.config.NodeConfig.broker_settings`), so
nothing in `broker` depends on the configuration file, its key names or its defaults.
The cluster ID is not here: it is the node's (`RaftNode.cluster_id`, from its log
directory).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker.kafka.partitions.segments import LogDefaults
from broker.kafka.sasl.sasl_settings import SaslClientSettings, SaslSettings
from metadata.authorizer import OFF, AuthorizerSettings
from raft.common.connection_limits import ListenerLimits

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class AutoCreateSettings:
    """`auto.create.topics.enable`, `num.partitions`, `default.replication.factor`
    (broker/kafka/admin/auto_create.py)."""

    enabled: bool = True
    num_partitions: int = 1
    replication_factor: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSettings:
    broker_id: int
    log_dir: Path
    delete_topic_delay_ms: int  # a deleted topic's staged directory is removed after this
    voters: Mapping[int, Address]  # the controllers, to find the active one
    request_timeout_ms: int
    heartbeat_interval_ms: int
    replica_lag_time_max_ms: int  # a follower behind for this long leaves the ISR
    controlled_shutdown: bool = True  # a graceful stop moves leadership away first
    # unclean.leader.election.enable of this node (the controllers' decides elections):
    # what DescribeConfigs shows for a topic that sets none
    unclean_election_default: bool = False
    # how often leaders apply retention.ms / retention.bytes to their partition logs
    log_retention_check_interval_ms: int = 300_000
    # how often the log cleaner looks at compacted partition logs, and its I/O budget
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_io_max_bytes_per_second: int = 2**63 - 1
    # log.retention.* and log.roll.*: what topics that set none retain and roll at
    log_defaults: LogDefaults = LogDefaults()
    socket_request_max_bytes: int  # the largest Kafka request frame accepted
    status_address: Address | None = None  # where to serve BrokerStatus (None: nowhere)
    client_address: Address | None = None  # the Kafka listener (None: none)
    offsets_topic_num_partitions: int = 50  # __consumer_offsets, created on first use
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024  # and its segment.bytes
    group_initial_rebalance_delay_ms: int = 0  # an Empty group's first round waits this
    auto_create: AutoCreateSettings = AutoCreateSettings()  # topics a Metadata names
    # what the broker registers for clients and replicas (None: client_address)
    advertised_address: Address | None = None
    # test-only: broker id -> the address the replica fetcher dials instead of that
    # broker's advertised endpoint (a fault-injecting proxy)
    replica_routes: Mapping[int, Address] = field(default_factory=dict)
    # the Kafka listener's SASL (SASL_PLAINTEXT, SASL_SSL; None: none), and how this
    # broker logs in to the other brokers' (the replica fetcher)
    sasl: SaslSettings | None = None
    inter_broker_sasl: SaslClientSettings | None = None
    # TLS (None: plaintext), built by tools/server/node_tls.py: the Kafka listener's and
    # the STATUS listener's server contexts, and what the replica fetcher dials other
    # brokers' Kafka listeners with
    kafka_ssl_context: ssl.SSLContext | None = None
    kafka_security_protocol: str = "PLAINTEXT"  # the Kafka listener's, for its sessions
    status_ssl_context: ssl.SSLContext | None = None
    inter_broker_ssl_context: ssl.SSLContext | None = None
    # the other brokers' certificates bind their node ids (the nodes' mutual TLS): the
    # replica fetcher refuses a leader whose certificate binds another id or none
    inter_broker_bind_identity: bool = False
    # authorizer.class.name, super.users, allow.everyone.if.no.acl.found (OFF: none)
    authorizer: AuthorizerSettings = OFF
    # the Kafka and STATUS listeners' connection limits (raft.common.connection_limits);
    # None: Kafka's defaults with `socket_request_max_bytes`
    kafka_limits: ListenerLimits | None = None
    status_limits: ListenerLimits | None = None

    def listener_limits(self, limits: ListenerLimits | None) -> ListenerLimits:
        """`limits`, or Kafka's defaults with this broker's `socket.request.max.bytes`."""
        return limits or ListenerLimits(max_request_bytes=self.socket_request_max_bytes)
