"""Kafka 3.9's broker config keys, as its DynamicBrokerConfig sorts them (data and their
value checks, pure): which a running broker takes dynamically, which only per broker,
which only behind a listener prefix, and which are read-only.

- `STORED_ONLY`: the dynamic keys this project stores and describes without effect
  (Kafka's DynamicLogConfig, LogCleaner, DynamicThreadPool, DynamicListenerConfig,
  SocketServer, producer-state and remote-log keys, `metric.reporters` and the
  alter-log-dirs quota), each with Kafka's type, default and range. A null default in
  Kafka is `NO_DEFAULT` here. Kafka also refuses a thread count below half or above
  double the running one; there is no such pool here, so only the range is checked.
- `PER_BROKER`: Kafka's PerBrokerConfigs, the listener and security keys but for the
  cluster-level connection limits and `num.network.threads`: refused on the cluster
  default.
- `LISTENER_PREFIX_ONLY`: SSL keystore and truststore keys (Kafka's
  DynamicSecurityConfigs), taken only as `listener.name.<listener>.<key>`.
- `READ_ONLY`: every other key of Kafka's KafkaConfig (`broker.id`, `log.dirs`,
  `log.retention.hours`, ...): "Cannot update these configs dynamically". A name Kafka
  does not know is neither: Kafka stores it as given (a plugin's custom key).
"""

from __future__ import annotations

from collections.abc import Callable

from metadata.topic_configs import INT_MAX, LONG_MAX, ConfigKey, InvalidConfig

SHORT_MAX, DOUBLE_MAX = 2**15 - 1, 1.7976931348623157e308
_LIMITS = {"SHORT": (-SHORT_MAX - 1, SHORT_MAX), "INT": (-INT_MAX - 1, INT_MAX),
           "LONG": (-LONG_MAX - 1, LONG_MAX), "DOUBLE": (-DOUBLE_MAX, DOUBLE_MAX)}
LISTENER_PREFIX = "listener.name."
NO_DEFAULT: set[str] = set()  # filled by `_key`: Kafka's default is null


def typed_parser(name: str, type_: str, low: float | None = None, high: float | None = None,
                 choices: tuple[str, ...] = ()) -> Callable[[str], str]:
    """The canonical value of `name` as Kafka's ConfigDef parses `type_` (numbers in
    [low, high], or the type's own limits; a STRING or each LIST item one of `choices`
    when given), or InvalidConfig."""
    def refuse(value: str, why: str) -> InvalidConfig:
        return InvalidConfig(f"invalid value {value!r} for configuration {name}: {why}")

    def parse(value: str) -> str:
        text = value.strip()
        if type_ in _LIMITS:
            try:
                number: float = float(text) if type_ == "DOUBLE" else int(text, 10)
            except ValueError:
                raise refuse(value, "not a number") from None
            least, most = _LIMITS[type_]
            least, most = max(least, low if low is not None else least), min(
                most, high if high is not None else most)
            if not least <= number <= most:
                raise refuse(value, f"must be between {least} and {most}")
            return repr(number) if type_ == "DOUBLE" else str(number)
        if type_ == "BOOLEAN":
            if text.lower() not in ("true", "false"):
                raise refuse(value, "must be true or false")
            return text.lower()
        items = [i.strip() for i in text.split(",") if i.strip()] if type_ == "LIST" \
            else [text]
        if choices and any(i not in choices for i in items):
            raise refuse(value, f"must be one of {', '.join(choices)}")
        return ",".join(items) if type_ == "LIST" else (value if type_ == "PASSWORD" else text)
    return parse


def _key(name: str, type_: str, default: str | None, low: float | None = None,
         high: float | None = None, choices: tuple[str, ...] = ()) -> ConfigKey:
    if default is None:
        NO_DEFAULT.add(name)
    return ConfigKey(name=name, default=default or "", type=type_,
                     documentation=f"Kafka's broker config {name} (stored; no effect here)",
                     parse=typed_parser(name, type_, low, high, choices))


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
LISTENER_PREFIX_ONLY = frozenset((
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates"))
CLUSTER_LEVEL_LISTENER_KEYS = frozenset(("max.connections", "max.connection.creation.rate",
                                         "num.network.threads"))
# Kafka's DynamicListenerConfig keys (with `LISTENER_PREFIX_ONLY`)
_LISTENER = (
    _key("advertised.listeners", "STRING", None),
    _key("listeners", "STRING", "PLAINTEXT://:9092"),
    _key("listener.security.protocol.map", "STRING",
         "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"),
    _key("principal.builder.class", "CLASS",
         "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    _key("ssl.protocol", "STRING", "TLSv1.3"),
    _key("ssl.provider", "STRING", None),
    _key("ssl.cipher.suites", "LIST", ""),
    _key("ssl.enabled.protocols", "LIST", "TLSv1.2,TLSv1.3"),
    _key("ssl.keystore.type", "STRING", "JKS"),
    _key("ssl.keystore.location", "STRING", None),
    _key("ssl.keystore.password", "PASSWORD", None),
    _key("ssl.key.password", "PASSWORD", None),
    _key("ssl.truststore.type", "STRING", "JKS"),
    _key("ssl.truststore.location", "STRING", None),
    _key("ssl.truststore.password", "PASSWORD", None),
    _key("ssl.keystore.certificate.chain", "PASSWORD", None),
    _key("ssl.keystore.key", "PASSWORD", None),
    _key("ssl.truststore.certificates", "PASSWORD", None),
    _key("ssl.keymanager.algorithm", "STRING", "SunX509"),
    _key("ssl.trustmanager.algorithm", "STRING", "PKIX"),
    _key("ssl.endpoint.identification.algorithm", "STRING", "https"),
    _key("ssl.secure.random.implementation", "STRING", None),
    _key("ssl.client.auth", "STRING", "none", choices=("required", "requested", "none")),
    _key("ssl.engine.factory.class", "CLASS", None),
    _key("sasl.mechanism.inter.broker.protocol", "STRING", "GSSAPI"),
    _key("sasl.jaas.config", "PASSWORD", None),
    _key("sasl.enabled.mechanisms", "LIST", "GSSAPI"),
    _key("sasl.kerberos.service.name", "STRING", None),
    _key("sasl.kerberos.kinit.cmd", "STRING", "/usr/bin/kinit"),
    _key("sasl.kerberos.ticket.renew.window.factor", "DOUBLE", "0.8"),
    _key("sasl.kerberos.ticket.renew.jitter", "DOUBLE", "0.05"),
    _key("sasl.kerberos.min.time.before.relogin", "LONG", "60000"),
    _key("sasl.kerberos.principal.to.local.rules", "LIST", "DEFAULT"),
    _key("sasl.login.refresh.window.factor", "DOUBLE", "0.8"),
    _key("sasl.login.refresh.window.jitter", "DOUBLE", "0.05"),
    _key("sasl.login.refresh.min.period.seconds", "SHORT", "60"),
    _key("sasl.login.refresh.buffer.seconds", "SHORT", "300"),
    _key("max.connections", "INT", str(INT_MAX), 0),
    _key("max.connection.creation.rate", "INT", str(INT_MAX), 0),
    _key("num.network.threads", "INT", "3", 1),
)
PER_BROKER = frozenset(k.name for k in _LISTENER) - CLUSTER_LEVEL_LISTENER_KEYS

STORED_ONLY: tuple[ConfigKey, ...] = (
    *_LISTENER,
    # DynamicLogConfig: the broker-wide defaults of topic configs
    _key("log.segment.bytes", "INT", "1073741824", 14),
    _key("log.roll.ms", "LONG", None),
    _key("log.roll.jitter.ms", "LONG", None),
    _key("log.index.size.max.bytes", "INT", "10485760", 4),
    _key("log.flush.interval.messages", "LONG", str(LONG_MAX), 1),
    _key("log.flush.interval.ms", "LONG", None),
    _key("log.retention.bytes", "LONG", "-1"),
    _key("log.retention.ms", "LONG", None),
    _key("message.max.bytes", "INT", "1048588", 0),
    _key("log.index.interval.bytes", "INT", "4096", 0),
    _key("log.cleaner.delete.retention.ms", "LONG", "86400000", 0),
    _key("log.cleaner.min.compaction.lag.ms", "LONG", "0", 0),
    _key("log.cleaner.max.compaction.lag.ms", "LONG", str(LONG_MAX), 1),
    _key("log.segment.delete.delay.ms", "LONG", "60000", 0),
    _key("log.cleaner.min.cleanable.ratio", "DOUBLE", "0.5", 0, 1),
    _key("log.cleanup.policy", "LIST", "delete", choices=("compact", "delete")),
    _key("unclean.leader.election.enable", "BOOLEAN", "false"),
    _key("min.insync.replicas", "INT", "1", 1),
    _key("compression.type", "STRING", "producer", choices=_COMPRESSION),
    _key("compression.gzip.level", "INT", "-1", -1, 9),
    _key("compression.lz4.level", "INT", "9", 1, 17),
    _key("compression.zstd.level", "INT", "3", -131072, 22),
    _key("log.preallocate", "BOOLEAN", "false"),
    _key("log.message.timestamp.type", "STRING", "CreateTime",
         choices=("CreateTime", "LogAppendTime")),
    _key("log.message.timestamp.difference.max.ms", "LONG", str(LONG_MAX), 0),
    _key("log.message.timestamp.before.max.ms", "LONG", str(LONG_MAX), 0),
    _key("log.message.timestamp.after.max.ms", "LONG", str(LONG_MAX), 0),
    _key("log.message.downconversion.enable", "BOOLEAN", "true"),
    _key("log.local.retention.ms", "LONG", "-2", -2),
    _key("log.local.retention.bytes", "LONG", "-2", -2),
    # LogCleaner
    _key("log.cleaner.threads", "INT", "1", 0),
    _key("log.cleaner.dedupe.buffer.size", "LONG", "134217728"),
    _key("log.cleaner.io.buffer.load.factor", "DOUBLE", "0.9"),
    _key("log.cleaner.io.buffer.size", "INT", "524288", 0),
    _key("log.cleaner.io.max.bytes.per.second", "DOUBLE", repr(DOUBLE_MAX)),
    _key("log.cleaner.backoff.ms", "LONG", "15000", 0),
    # DynamicThreadPool
    _key("num.io.threads", "INT", "8", 1),
    _key("num.replica.fetchers", "INT", "1"),
    _key("num.recovery.threads.per.data.dir", "INT", "2", 1),
    _key("background.threads", "INT", "10", 1),
    # SocketServer, metric reporters, producer state, remote log, the alter-log-dirs quota
    _key("max.connections.per.ip", "INT", str(INT_MAX), 0),
    _key("max.connections.per.ip.overrides", "STRING", ""),
    _key("metric.reporters", "LIST", ""),
    _key("producer.id.expiration.ms", "INT", "86400000", 1),
    _key("transaction.partition.verification.enable", "BOOLEAN", "true"),
    _key("remote.log.index.file.cache.total.size.bytes", "LONG", "1073741824", 1),
    _key("remote.fetch.max.wait.ms", "INT", "500", 1),
    _key("remote.log.manager.copy.max.bytes.per.second", "LONG", str(LONG_MAX), 1),
    _key("remote.log.manager.fetch.max.bytes.per.second", "LONG", str(LONG_MAX), 1),
    _key("replica.alter.log.dirs.io.max.bytes.per.second", "LONG", str(LONG_MAX), 0),
)

READ_ONLY = frozenset("""
alter.config.policy.class.name alter.log.dirs.replication.quota.window.num
alter.log.dirs.replication.quota.window.size.seconds authorizer.class.name
auto.create.topics.enable auto.include.jmx.reporter auto.leader.rebalance.enable
broker.heartbeat.interval.ms broker.id broker.id.generation.enable broker.rack
broker.session.timeout.ms client.quota.callback.class
connection.failed.authentication.delay.ms connection_creation_rate
connections.max.idle.ms connections.max.reauth.ms consumer_byte_rate
control.plane.listener.name controlled.shutdown.enable controlled.shutdown.max.retries
controlled.shutdown.retry.backoff.ms controller.listener.names
controller.quorum.append.linger.ms controller.quorum.bootstrap.servers
controller.quorum.election.backoff.max.ms controller.quorum.election.timeout.ms
controller.quorum.fetch.timeout.ms controller.quorum.request.timeout.ms
controller.quorum.retry.backoff.ms controller.quorum.voters controller.quota.window.num
controller.quota.window.size.seconds controller.socket.timeout.ms
controller_mutation_rate create.topic.policy.class.name default.replication.factor
delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
delegation.token.master.key delegation.token.max.lifetime.ms delegation.token.secret.key
delete.records.purgatory.purge.interval.requests delete.topic.enable
early.start.listeners eligible.leader.replicas.enable fetch.max.bytes
fetch.purgatory.purge.interval.requests group.consumer.assignors
group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms
group.consumer.max.session.timeout.ms group.consumer.max.size
group.consumer.migration.policy group.consumer.min.heartbeat.interval.ms
group.consumer.min.session.timeout.ms group.consumer.session.timeout.ms
group.coordinator.append.linger.ms group.coordinator.new.enable
group.coordinator.rebalance.protocols group.coordinator.threads
group.initial.rebalance.delay.ms group.max.session.timeout.ms group.max.size
group.min.session.timeout.ms group.share.delivery.count.limit group.share.enable
group.share.heartbeat.interval.ms group.share.max.groups
group.share.max.heartbeat.interval.ms group.share.max.record.lock.duration.ms
group.share.max.session.timeout.ms group.share.max.size
group.share.min.heartbeat.interval.ms group.share.min.record.lock.duration.ms
group.share.min.session.timeout.ms group.share.partition.max.record.locks
group.share.record.lock.duration.ms group.share.session.timeout.ms
initial.broker.registration.timeout.ms inter.broker.listener.name
inter.broker.protocol.version kafka.metrics.polling.interval.secs
kafka.metrics.reporters leader.imbalance.check.interval.seconds
leader.imbalance.per.broker.percentage log.cleaner.enable log.dir
log.dir.failure.timeout.ms log.dirs log.flush.offset.checkpoint.interval.ms
log.flush.scheduler.interval.ms log.flush.start.offset.checkpoint.interval.ms
log.initial.task.delay.ms log.message.format.version log.retention.check.interval.ms
log.retention.hours log.retention.minutes log.roll.hours log.roll.jitter.hours
max.incremental.fetch.session.cache.slots max.request.partition.size.limit
metadata.log.dir metadata.log.max.record.bytes.between.snapshots
metadata.log.max.snapshot.interval.ms metadata.log.segment.bytes
metadata.log.segment.min.bytes metadata.log.segment.ms metadata.max.idle.interval.ms
metadata.max.retention.bytes metadata.max.retention.ms metrics.num.samples
metrics.recording.level metrics.sample.window.ms node.id num.partitions
num.replica.alter.log.dirs.threads offset.metadata.max.bytes
offsets.commit.required.acks offsets.commit.timeout.ms offsets.load.buffer.size
offsets.retention.check.interval.ms offsets.retention.minutes
offsets.topic.compression.codec offsets.topic.num.partitions
offsets.topic.replication.factor offsets.topic.segment.bytes
password.encoder.cipher.algorithm password.encoder.iterations
password.encoder.key.length password.encoder.keyfactory.algorithm
password.encoder.old.secret password.encoder.secret process.roles
producer.id.expiration.check.interval.ms producer.purgatory.purge.interval.requests
producer_byte_rate queued.max.request.bytes queued.max.requests quota.window.num
quota.window.size.seconds remote.log.manager.copier.thread.pool.size
remote.log.manager.copy.quota.window.num
remote.log.manager.copy.quota.window.size.seconds
remote.log.manager.expiration.thread.pool.size remote.log.manager.fetch.quota.window.num
remote.log.manager.fetch.quota.window.size.seconds remote.log.manager.task.interval.ms
remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.backoff.ms
remote.log.manager.task.retry.jitter remote.log.manager.thread.pool.size
remote.log.metadata.custom.metadata.max.bytes remote.log.metadata.manager.class.name
remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
remote.log.metadata.manager.listener.name remote.log.reader.max.pending.tasks
remote.log.reader.threads remote.log.storage.manager.class.name
remote.log.storage.manager.class.path remote.log.storage.manager.impl.prefix
remote.log.storage.system.enable replica.fetch.backoff.ms replica.fetch.max.bytes
replica.fetch.min.bytes replica.fetch.response.max.bytes replica.fetch.wait.max.ms
replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms
replica.selector.class replica.socket.receive.buffer.bytes replica.socket.timeout.ms
replication.quota.window.num replication.quota.window.size.seconds request.timeout.ms
request_percentage reserved.broker.max.id sasl.client.callback.handler.class
sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms
sasl.login.read.timeout.ms sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
sasl.mechanism.controller.protocol sasl.oauthbearer.clock.skew.seconds
sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
sasl.oauthbearer.jwks.endpoint.refresh.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url sasl.server.callback.handler.class
sasl.server.max.receive.size security.inter.broker.protocol security.providers
server.max.startup.time.ms socket.connection.setup.timeout.max.ms
socket.connection.setup.timeout.ms socket.listen.backlog.size
socket.receive.buffer.bytes socket.request.max.bytes socket.send.buffer.bytes
ssl.allow.dn.changes ssl.allow.san.changes ssl.principal.mapping.rules
telemetry.max.bytes transaction.abort.timed.out.transaction.cleanup.interval.ms
transaction.max.timeout.ms transaction.remove.expired.transaction.cleanup.interval.ms
transaction.state.log.load.buffer.size transaction.state.log.min.isr
transaction.state.log.num.partitions transaction.state.log.replication.factor
transaction.state.log.segment.bytes transactional.id.expiration.ms
unclean.leader.election.interval.ms unstable.api.versions.enable
unstable.feature.versions.enable zookeeper.clientCnxnSocket zookeeper.connect
zookeeper.connection.timeout.ms zookeeper.max.in.flight.requests
zookeeper.metadata.migration.enable zookeeper.metadata.migration.min.batch.size
zookeeper.session.timeout.ms zookeeper.set.acl zookeeper.ssl.cipher.suites
zookeeper.ssl.client.enable zookeeper.ssl.crl.enable zookeeper.ssl.enabled.protocols
zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.keystore.location
zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type zookeeper.ssl.ocsp.enable
zookeeper.ssl.protocol zookeeper.ssl.truststore.location
zookeeper.ssl.truststore.password zookeeper.ssl.truststore.type
""".split())
