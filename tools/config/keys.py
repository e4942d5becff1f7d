"""The key table: every node configuration key once, with the attribute of `NodeConfig`
it sets, how its value is read, its default and what it does. A default is written here
and nowhere else: `NodeConfig` declares none (`tools.config.loading` fills every field from
this table), and the Raft keys take theirs from `RaftConfig`, the pure core's own.
`reference_table` renders the table as docs/configuration.md's (`kraft config-keys`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any

from broker.kafka.sasl import sasl_settings
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
)
from raft.common.tls import CLIENT_AUTH_MODES, STORE_TYPES
from raft.core import RaftConfig
from tools.config.parsers import (
    CONTROLLER_LISTENER,
    DEFAULT_PROTOCOL_MAP,
    UNLIMITED_CONNECTIONS,
    authorizer_class,
    boolean,
    choice,
    endpoint_algorithm,
    integer,
    metrics_listener_url,
    optional_str,
    str_list,
    super_users_text,
)

REQUIRED = object()  # a Key's default when the key must be given
# The Raft keys' defaults are the pure core's own: its tests and the simulator build a
# RaftConfig without a file, and a node's keys left out must give the core the same.
RAFT_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(RaftConfig)
                                 if f.default is not MISSING}


@dataclass(frozen=True, slots=True)
class Key:
    """One configuration key: its Kafka-style name, the NodeConfig attribute it sets, how
    its value is read, its default (REQUIRED: none), and what it does (docs/configuration.md)."""

    name: str
    attribute: str
    convert: Callable[[str, Any], Any]
    default: Any
    doc: str
    origin: str = "Kafka"  # "Kafka": Kafka's key and meaning; "kraft-py"; "test-only"
    aliases: tuple[str, ...] = ()  # older names, still read (with a deprecation warning)


KEYS: tuple[Key, ...] = (
    Key("node.id", "node_id", integer(0), REQUIRED, "this node's id"),
    Key("process.roles", "roles", str_list, REQUIRED, "`broker`, `controller` or both"),
    Key("controller.quorum.voters", "voters", optional_str, "",
        "the voters, `ID@HOST:PORT,...` (static quorum); required on a controller"),
    Key("controller.quorum.bootstrap.servers", "bootstrap_servers", str_list, (),
        "controller endpoints `HOST:PORT,...`: a node without `controller.quorum.voters` "
        "(a broker, or a controller to be added to a dynamic quorum) learns the voters "
        "from them at start (DescribeQuorum); with both, each must be a "
        "voter's endpoint"),
    Key("listeners", "listener_specs", str_list, (),
        "`NAME://HOST:PORT,...`; an empty host binds every interface (0.0.0.0)"),
    Key("advertised.listeners", "advertised_specs", str_list, (),
        "what a broker registers for clients, `NAME://HOST:PORT,...`; default: `listeners` "
        "(an empty host advertises this host's name)"),
    Key("listener.security.protocol.map", "protocol_map", str_list, DEFAULT_PROTOCOL_MAP,
        "`NAME:PROTOCOL,...`; PLAINTEXT and SSL are implemented, and SASL_PLAINTEXT and "
        "SASL_SSL on a broker's Kafka listener; `STATUS:PLAINTEXT` is added unless STATUS "
        "is mapped"),
    Key("controller.listener.names", "controller_listener_names", str_list,
        (CONTROLLER_LISTENER,), "the listeners that serve raft and admin requests"),
    Key("inter.broker.listener.name", "inter_broker_listener_name", optional_str, "",
        "the broker's Kafka listener (replication and clients); default: the one "
        "listener that is neither a controller's nor STATUS"),
    Key("log.dirs", "log_dirs", str_list, (),
        "the node's log directory (exactly one); one of `log.dirs`, `log.dir`, "
        "`metadata.log.dir` is required"),
    Key("log.dir", "single_log_dir", optional_str, "", "read when `log.dirs` is not set"),
    Key("metadata.log.dir", "metadata_log_dir", optional_str, "",
        "where the metadata log lives; kraft-py keeps it with the partitions, so it must "
        "equal the log directory when both are set"),
    Key("cluster.id", "cluster_id", optional_str, "",
        "when set, the log directory must be formatted for this cluster", origin="kraft-py"),
    Key("controller.quorum.election.timeout.ms", "election_timeout_ms", integer(1),
        RAFT_DEFAULTS["election_timeout_ms"],
        "no leader heard for this long: a voter starts an election",
        aliases=("quorum.election.timeout.ms",)),
    Key("controller.quorum.fetch.timeout.ms", "fetch_timeout_ms", integer(1),
        RAFT_DEFAULTS["fetch_timeout_ms"],
        "no successful Fetch for this long: a follower starts an election (at least the "
        "election timeout)", aliases=("quorum.fetch.timeout.ms",)),
    Key("controller.quorum.election.backoff.max.ms", "election_backoff_max_ms", integer(1),
        RAFT_DEFAULTS["election_backoff_max_ms"],
        "the longest random wait before a new election",
        aliases=("quorum.election.backoff.max.ms",)),
    Key("controller.quorum.request.timeout.ms", "request_timeout_ms", integer(1),
        RAFT_DEFAULTS["request_timeout_ms"],
        "how long a raft or controller request waits for its answer",
        aliases=("quorum.request.timeout.ms",)),
    Key("controller.quorum.fetch.max.wait.ms", "fetch_max_wait_ms", integer(0),
        RAFT_DEFAULTS["fetch_max_wait_ms"],
        "how long the leader holds a Fetch with nothing new", origin="kraft-py",
        aliases=("quorum.fetch.max.wait.ms",)),
    Key("controller.quorum.fetch.max.bytes", "fetch_max_bytes", integer(1),
        RAFT_DEFAULTS["fetch_max_bytes"],
        "the most record bytes in one Fetch answer", origin="kraft-py",
        aliases=("quorum.fetch.max.bytes",)),
    Key("controller.quorum.pre.vote.enable", "pre_vote", boolean, RAFT_DEFAULTS["pre_vote"],
        "pre-vote before an election (KIP-996)", origin="kraft-py",
        aliases=("quorum.pre.vote.enable",)),
    Key("controller.quorum.send.queue.max.messages", "send_queue_max_messages", integer(1), 256,
        "messages queued per peer before the oldest are dropped", origin="kraft-py",
        aliases=("quorum.send.queue.max.messages",)),
    Key("socket.request.max.bytes", "socket_request_max_bytes", integer(1024), 100 * 1024 * 1024,
        "the largest request frame accepted, on every listener (the controller listener, "
        "the Kafka listener once a connection has logged in, STATUS up to 1 MiB); a frame "
        "announcing more closes its connection before its body is read"),
    Key("sasl.server.max.receive.size", "sasl_server_max_receive_size", integer(1),
        DEFAULT_SASL_MAX_RECEIVE_BYTES,
        "the largest frame a SASL listener's connection may send before it has logged in; "
        "a larger one closes the connection at once"),
    Key("connections.max.idle.ms", "connections_max_idle_ms", integer(1), DEFAULT_MAX_IDLE_MS,
        "a connection to any listener with no complete request for this long is closed"),
    Key("connections.authentication.timeout.ms", "connections_authentication_timeout_ms",
        integer(1), DEFAULT_AUTHENTICATION_TIMEOUT_MS,
        "a connection to any listener that has not completed its TLS handshake and, on a "
        "SASL listener, its SASL login within this long is closed (Kafka has no such key: "
        "its idle timeout alone bounds them; this is raft/common/tls.py's handshake "
        "deadline, made a key)", origin="kraft-py"),
    Key("max.connections", "max_connections", integer(0), UNLIMITED_CONNECTIONS,
        "the most connections each listener holds; a new one over it is closed at once and "
        "counted. Whatever it says, the inbound connections of all listeners stay below the "
        "soft RLIMIT_NOFILE less a reserve (a quarter of it, at least 256) for the node's "
        "own files and connections (raft/common/connection_limits.py)"),
    Key("max.connections.per.ip", "max_connections_per_ip", integer(0), UNLIMITED_CONNECTIONS,
        "the most connections each listener holds from one address; a new one over it is "
        "closed at once and counted"),
    Key("delete.topic.delay.ms", "delete_topic_delay_ms", integer(0), 4 * 3600 * 1000,
        "a broker removes a deleted topic's staged directory after this", origin="kraft-py"),
    Key("broker.session.timeout.ms", "broker_session_timeout_ms", integer(1), 9000,
        "a broker without a heartbeat for this long is fenced"),
    Key("broker.heartbeat.interval.ms", "broker_heartbeat_interval_ms", integer(1), 2000,
        "how often a broker heartbeats to the controller"),
    Key("controlled.shutdown.enable", "controlled_shutdown_enable", boolean, True,
        "on SIGTERM a broker asks the controller to move the leadership of its partitions "
        "to other ISR members (it is fenced) and stops once its image shows that, within "
        "5 s (broker/heartbeat.py); false: it stops at once, and stays registered unfenced "
        "until its session times out"),
    Key("enable.ordered.delivery", "ordered_delivery_default", boolean, False,
        "controllers: a topic created without its own `enable.ordered.delivery` gets this "
        "one, recorded with it (KIP-253, docs/kip-253.md); later changes of the key leave "
        "existing topics as they are", origin="kraft-py"),
    Key("unclean.leader.election.enable", "unclean_leader_election_enable", boolean, False,
        "controllers: for a topic that sets no `unclean.leader.election.enable`, elect a "
        "live replica outside the ISR when no ISR member is unfenced (records only the ISR "
        "held may be lost); false: such a partition stays leaderless until an ISR member "
        "returns (metadata/elections.py)"),
    Key("log.segment.bytes", "log_segment_bytes", integer(1024), 1 << 30,
        "the size of a metadata log segment"),
    Key("log.retention.check.interval.ms", "log_retention_check_interval_ms", integer(1),
        300_000, "how often a partition leader deletes the segments past its topic's "
        "retention.ms and retention.bytes"),
    Key("log.retention.ms", "log_retention_ms", integer(-1), None,
        "a topic's retention.ms when it sets none (-1: no limit); before "
        "log.retention.minutes and log.retention.hours"),
    Key("log.retention.minutes", "log_retention_minutes", integer(-1), None,
        "log.retention.ms in minutes, when that is not given"),
    Key("log.retention.hours", "log_retention_hours", integer(-1), 168,
        "log.retention.ms in hours, when neither it nor log.retention.minutes is given"),
    Key("log.retention.bytes", "log_retention_bytes", integer(-1), -1,
        "a topic's retention.bytes when it sets none (-1: no limit)"),
    Key("log.roll.ms", "log_roll_ms", integer(1), None,
        "a topic's segment.ms when it sets none; before log.roll.hours"),
    Key("log.roll.hours", "log_roll_hours", integer(1), 168,
        "log.roll.ms in hours, when that is not given"),
    Key("log.cleaner.backoff.ms", "log_cleaner_backoff_ms", integer(1), 15_000,
        "how often the log cleaner looks for compacted partition logs to clean"),
    Key("log.cleaner.io.max.bytes.per.second", "log_cleaner_io_max_bytes_per_second",
        integer(1), 2**63 - 1,
        "the log cleaner's reads and writes together, in bytes per second (an integer "
        "here; Kafka's is a double)"),
    Key("replica.lag.time.max.ms", "replica_lag_time_max_ms", integer(1), 30_000,
        "a follower behind for this long leaves the ISR"),
    Key("auto.create.topics.enable", "auto_create_topics_enable", boolean, True,
        "a Metadata request naming a topic that does not exist creates it (when the "
        "request allows it and the caller may CREATE the topic)"),
    Key("num.partitions", "num_partitions", integer(1), 1,
        "partitions of an auto-created topic"),
    Key("default.replication.factor", "default_replication_factor", integer(1), 1,
        "replication factor of an auto-created topic"),
    Key("offsets.topic.num.partitions", "offsets_topic_num_partitions", integer(1), 50,
        "partitions of __consumer_offsets when a broker creates it on first use"),
    Key("offsets.topic.segment.bytes", "offsets_topic_segment_bytes", integer(14),
        100 * 1024 * 1024,
        "segment.bytes of __consumer_offsets when a broker creates it (compacted: only "
        "segments below the active one are cleaned)"),
    Key("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms", integer(0), 0,
        "an Empty consumer group's first rebalance waits this long after its first "
        "JoinGroup (and again after each new member's, up to the rebalance timeout), so "
        "consumers started together share one round; 0 here, as in Kafka's sample "
        "server.properties (its built-in default is 3000)"),
    Key("authorizer.class.name", "authorizer_class_name", authorizer_class, "",
        "`org.apache.kafka.metadata.authorizer.StandardAuthorizer` (or `standard`): ACLs "
        "are enforced on every listener (broker/access_table.py: one row per request); "
        "empty: no authorization"),
    Key("super.users", "super_users", super_users_text, "",
        "`User:NAME;User:OTHER`: principals allowed everything when the authorizer is on"),
    Key("allow.everyone.if.no.acl.found", "allow_everyone_if_no_acl_found", boolean, False,
        "with the authorizer on, a resource that no ACL matches is open to everyone"),
    Key("authorizer.allow.unbound.controller.listener", "allow_unbound_controller_listener",
        boolean, False,
        "with the authorizer on, start a controller whose controller listener cannot bind "
        "a peer to a node id (PLAINTEXT, or SSL without ssl.client.auth=required): "
        "whoever reaches it may then claim to be any node; false refuses to start",
        origin="kraft-py"),
    Key("metadata.log.max.record.bytes.between.snapshots", "max_record_bytes_between_snapshots",
        integer(1), DEFAULT_MAX_BYTES_BETWEEN_SNAPSHOTS,
        "committed record bytes between two snapshots of a node's image"),
    Key("metadata.max.retention.bytes", "max_retention_bytes", integer(-1),
        DEFAULT_MAX_RETENTION_BYTES,
        "log bytes kept before the log start moves to the newest snapshot (-1: never)"),
    Key("metadata.max.retention.ms", "max_retention_ms", integer(-1), DEFAULT_MAX_RETENTION_MS,
        "or once the oldest log segment was last written this long ago (-1: never)"),
    Key("metadata.log.max.snapshot.interval.ms", "max_snapshot_interval_ms", integer(0),
        DEFAULT_MAX_SNAPSHOT_INTERVAL_MS,
        "a snapshot at least this often while new records commit (0: by bytes only)"),
    Key("fetch.snapshot.max.bytes", "fetch_snapshot_max_bytes", integer(1),
        RAFT_DEFAULTS["fetch_snapshot_max_bytes"],
        "the most bytes in one FetchSnapshot answer", origin="kraft-py"),
    Key("ssl.keystore.location", "ssl_keystore_location", optional_str, "",
        "the listeners' certificate and key (and, as a client, this node's): a file of "
        "`ssl.keystore.type`; or give `ssl.keystore.certificate.chain` and `ssl.keystore.key`"),
    Key("ssl.keystore.type", "ssl_keystore_type", choice(STORE_TYPES, upper=True), "PEM",
        "`PEM` (the key and its certificate chain in one file) or `PKCS12` (Kafka's JKS "
        "is not read)"),
    Key("ssl.keystore.password", "ssl_keystore_password", optional_str, "",
        "a PKCS12 keystore's password"),
    Key("ssl.keystore.certificate.chain", "ssl_keystore_certificate_chain", optional_str, "",
        "PEM text: the certificate, then its chain (in place of a keystore file)"),
    Key("ssl.keystore.key", "ssl_keystore_key", optional_str, "",
        "PEM text: the private key (in place of a keystore file)"),
    Key("ssl.key.password", "ssl_key_password", optional_str, "",
        "the private key's password (empty: the key is not encrypted)"),
    Key("ssl.truststore.location", "ssl_truststore_location", optional_str, "",
        "the CA certificates that check peers, a file of `ssl.truststore.type`; none "
        "(and no `ssl.truststore.certificates`): the system's CAs"),
    Key("ssl.truststore.type", "ssl_truststore_type", choice(STORE_TYPES, upper=True), "PEM",
        "`PEM` or `PKCS12`"),
    Key("ssl.truststore.password", "ssl_truststore_password", optional_str, "",
        "a PKCS12 truststore's password"),
    Key("ssl.truststore.certificates", "ssl_truststore_certificates", optional_str, "",
        "PEM text: the trusted CA certificates (in place of a truststore file)"),
    Key("ssl.client.auth", "ssl_client_auth", choice(CLIENT_AUTH_MODES), "none",
        "SSL listeners: `none`, `requested` or `required` (mutual TLS); per listener "
        "`listener.name.<listener>.ssl.client.auth`, which alone applies to a SASL_SSL "
        "listener (KIP-684); with `required` on the controller listener, a node id claimed "
        "in a raft request or broker registration must be the one in the peer certificate "
        "(CN `kraft-node-<id>`)"),
    Key("ssl.endpoint.identification.algorithm", "ssl_endpoint_identification_algorithm",
        endpoint_algorithm, "https",
        "`https`: a server's certificate must name the host or IP address dialled; empty: "
        "not checked (the chain still is)"),
    Key("sasl.enabled.mechanisms", "sasl_enabled_mechanisms", str_list, ("GSSAPI",),
        "the mechanisms a SASL_PLAINTEXT or SASL_SSL listener offers: `PLAIN`, "
        "`SCRAM-SHA-256`, `SCRAM-SHA-512` (GSSAPI and OAUTHBEARER are not implemented: "
        "with a SASL listener, Kafka's default must be replaced)"),
    Key("sasl.mechanism.inter.broker.protocol", "sasl_mechanism_inter_broker_protocol",
        optional_str, "GSSAPI",
        "how a broker logs in to the other brokers' SASL listener (its replica fetcher), "
        "with the credentials of `listener.name.<listener>.<mechanism>.sasl.jaas.config`"),
    Key(sasl_settings.JAAS_KEY_PATTERN, "sasl_jaas_configs", optional_str, "",
        "e.g. `listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        "username=\"admin\" password=\"admin-secret\";`: the broker's own login to that "
        "listener (PlainLoginModule for PLAIN, whose `user_NAME=\"PASSWORD\"` options also "
        "add PLAIN users)"),
    Key("sasl.plain.users", "sasl_plain_users", optional_str, "",
        "kraft-py's key, for tests only (the passwords sit in the file): `NAME:PASSWORD,...`, "
        "the users a listener with PLAIN enabled accepts", origin="test-only"),
    Key("metrics.listener", "metrics_listener", metrics_listener_url, "",
        "`http://HOST:PORT`: serve Prometheus metrics at `/metrics` (port 0: any free port, "
        "logged); `https://HOST:PORT`: over TLS with the node's PEM keystore and truststore "
        "files and `ssl.client.auth`; empty: off", origin="kraft-py"),
    Key("fault.injection.file", "fault_injection_file", optional_str, "",
        "kraft chaos: a JSON file of injected faults, relative to the config file; "
        "empty: off", origin="test-only"),
    Key("fault.injection.replica.routes", "replica_routes", optional_str, "",
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
    "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
    "offsets.topic.replication.factor", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "log.flush.interval.messages", "log.flush.interval.ms",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
})


def canonical_key(name: str) -> str:
    """The current name of `name` (itself unless it is an old alias)."""
    return ALIASES.get(name, name)

# --- the reference table ------------------------------------------------------------


def _default_text(key: Key) -> str:
    if key.default is REQUIRED:
        return "required"
    if isinstance(key.default, tuple):
        return f"`{','.join(key.default)}`" if key.default else "(none)"
    if isinstance(key.default, bool):
        return f"`{str(key.default).lower()}`"
    if key.default == "" or key.default is None:
        return "(none)"
    return f"`{key.default}`"


def reference_table() -> str:
    """docs/configuration.md's key table (Markdown), generated from `KEYS`."""
    lines = ["| key | default | origin | meaning |", "|---|---|---|---|"]
    for key in KEYS:
        also = f" (old name: {', '.join(f'`{a}`' for a in key.aliases)})" if key.aliases else ""
        lines.append(f"| `{key.name}` | {_default_text(key)} | {key.origin} | "
                     f"{key.doc}{also} |")
    lines.append(f"| {', '.join(f'`{k}`' for k in sorted(IGNORED_KAFKA_KEYS))} | | Kafka | "
                 "accepted with a warning, no effect |")
    return "\n".join(lines)
