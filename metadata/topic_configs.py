"""Topic configs: the keys this cluster knows, their defaults and their validation (pure).

A topic's configs live in the metadata log as `TopicConfig` records (keyed by topic ID;
a None value deletes the key) and in the image as `TopicImage.configs`, only the keys
set. Everything else takes the default below (Kafka's, as its broker has them out of the
box); `effective` gives the value a topic has either way.

Every key of Kafka's topic configs is accepted, with Kafka's type, range and default.
Enforced, with Kafka's meaning:
- `min.insync.replicas` (int >= 1): an acks=all produce needs this many in-sync replicas
  (enforced by `broker.kafka.partitions.produce`);
- `max.message.bytes` (int >= 0): a larger batch is refused MESSAGE_TOO_LARGE;
- `compression.type` (`producer`, the default: batches stored as sent; `uncompressed`,
  `gzip`, `snappy`, `lz4`, `zstd`) and `compression.{gzip,lz4,zstd}.level`: the leader
  stores a batch in another codec re-compressed in the topic's (produce.py,
  broker.kafka.partitions.compression);
- `message.timestamp.type` (`CreateTime`, `LogAppendTime`: the leader stamps each batch
  with its append time) and `message.timestamp.before.max.ms` / `.after.max.ms` (and
  the deprecated `message.timestamp.difference.max.ms`, both ways): a CreateTime record
  further from the broker's clock is refused INVALID_TIMESTAMP (produce.py);
- `segment.bytes` (int >= 14) and `segment.ms` (long >= 1): a partition log starts a
  new segment file past either (broker.kafka.partitions.segments);
- `retention.ms`, `retention.bytes` (long >= -1, -1 = unlimited): a partition's leader
  deletes its oldest segments past either (broker.kafka.partitions.retention);
- `cleanup.policy`: `delete`, `compact` or both (`compact,delete`): `delete` applies
  retention, `compact` log compaction (broker.kafka.partitions.compaction);
- `min.cleanable.dirty.ratio` (double in [0, 1]), `min.compaction.lag.ms`,
  `max.compaction.lag.ms` (long >= 0; the maximum >= 1) and `delete.retention.ms`
  (long >= 0): when a compacted log is cleaned and how long its tombstones stay
  (broker.kafka.partitions.cleaner);
- `unclean.leader.election.enable` (boolean; a topic that sets none takes the
  controllers' key of the same name, default false): a partition whose ISR has no
  unfenced member gets a live replica outside the ISR as leader (metadata.elections);
- `leader.replication.throttled.replicas`, `follower.replication.throttled.replicas`
  (empty, `*` or PARTITION:BROKER,...): the replicas the brokers' replication throttle
  rates cap (broker.kafka.partitions.replication_quota, metadata.broker_configs);
- `remote.storage.enable`: only `false` (no tiered storage here: `true` is refused
  rather than ignored);
- `enable.ordered.delivery` (boolean, default false; this project's): KIP-253, per-key
  order kept across a change of the partition count (growth blocks new partitions on
  their split source, a shrink marks partitions and removes them once empty). Off, the
  count only grows and growth touches no existing partition, as in Kafka. With
  compaction too, the ordered producer leaves a tombstone where a key used to live
  (broker.kafka.ordered.split_tombstones).
  In the log, a topic is ordered only when its TopicConfig says `true`: absence is off,
  whatever a node's configuration, so every replay agrees. The cluster-wide default (the
  controller's node key `enable.ordered.delivery`) is resolved at creation
  (`validate_all`): `true` is then recorded with the topic. Deleting the key later turns
  ordered delivery off. A log written before this default changed recorded the key only
  when a client set it: its topics without it were ordered then and read as unordered
  now. They replay unchanged (the same image and content hash); only later decisions
  differ (growth bumps no epoch, a shrink is refused); partitions already marked are
  still removed once empty, and `enable.ordered.delivery=true` makes such a topic ordered
  again.
Stored and described, no effect here (`STORED_ONLY`): `flush.messages` / `flush.ms` (every
append is fsynced), the index, preallocation, jitter and file-deletion tunings, the
tiered-storage `local.retention.*`, and the deprecated `message.downconversion.enable` and
`message.format.version`.

An unknown key is refused (INVALID_CONFIG), never dropped: a client that asked for a
config it did not get would be misled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

MIN_INSYNC_REPLICAS = "min.insync.replicas"
RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
CLEANUP_POLICY = "cleanup.policy"
MIN_CLEANABLE_DIRTY_RATIO = "min.cleanable.dirty.ratio"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
MAX_COMPACTION_LAG_MS = "max.compaction.lag.ms"
DELETE_RETENTION_MS = "delete.retention.ms"
CLEANUP_POLICIES = ("compact", "delete")  # canonical order, as Kafka lists them
ORDERED_DELIVERY = "enable.ordered.delivery"
UNCLEAN_LEADER_ELECTION = "unclean.leader.election.enable"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"

MAX_MESSAGE_BYTES = "max.message.bytes"
COMPRESSION_TYPE, PRODUCER_COMPRESSION = "compression.type", "producer"
TIMESTAMP_TYPE = "message.timestamp.type"
TIMESTAMP_BEFORE_MAX_MS = "message.timestamp.before.max.ms"
TIMESTAMP_AFTER_MAX_MS = "message.timestamp.after.max.ms"
TIMESTAMP_DIFFERENCE_MAX_MS = "message.timestamp.difference.max.ms"
LOG_APPEND_TIME = "LogAppendTime"

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class InvalidConfig(ValueError):
    """A config key or value is not accepted; the message says why (INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigKey:
    name: str
    default: str
    type: str  # Kafka's ConfigType name as DescribeConfigs v3 reports it
    documentation: str
    parse: Callable[[str], str]  # the canonical value, or InvalidConfig


def integer_parser(name: str, low: int, high: int) -> Callable[[str], str]:
    def parse(value: str) -> str:
        text = value.strip()
        try:
            number = int(text, 10)
        except ValueError:
            raise InvalidConfig(f"invalid value {value!r} for configuration {name}: "
                                "not a number") from None
        if not low <= number <= high:
            raise InvalidConfig(f"invalid value {value!r} for configuration {name}: "
                                f"must be between {low} and {high}")
        return str(number)
    return parse


def _cleanup_policy(value: str) -> str:
    policies = {p.strip() for p in value.split(",") if p.strip()}
    if not policies:
        raise InvalidConfig(f"invalid value {value!r} for configuration {CLEANUP_POLICY}: "
                            "empty")
    if not policies <= set(CLEANUP_POLICIES):
        raise InvalidConfig(f"invalid value {value!r} for configuration {CLEANUP_POLICY}: "
                            "must be 'delete', 'compact' or both")
    return ",".join(p for p in CLEANUP_POLICIES if p in policies)


def _ratio(name: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        try:
            number = float(value.strip())
        except ValueError:
            raise InvalidConfig(f"invalid value {value!r} for configuration {name}: "
                                "not a number") from None
        if not 0.0 <= number <= 1.0:
            raise InvalidConfig(f"invalid value {value!r} for configuration {name}: "
                                "must be between 0 and 1")
        return repr(number)
    return parse


def cleanup_policies(configs: Mapping[str, str] | Iterable[tuple[str, str]]) -> frozenset[str]:
    """The policies of a topic's (canonical) `cleanup.policy`: delete, compact or both."""
    return frozenset(effective(configs, CLEANUP_POLICY).split(","))


def _boolean(name: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        text = value.strip().lower()
        if text not in ("true", "false"):
            raise InvalidConfig(f"invalid value {value!r} for configuration {name}: "
                                "must be true or false")
        return text
    return parse


def _one_of(name: str, *choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        text = value.strip()
        if text not in choices:
            raise InvalidConfig(f"invalid value {value!r} for configuration {name}: "
                                f"must be one of {', '.join(choices)}")
        return text
    return parse


def _false_only(name: str, why: str) -> Callable[[str], str]:
    check = _boolean(name)

    def parse(value: str) -> str:
        if check(value) == "true":
            raise InvalidConfig(f"invalid value {value!r} for configuration {name}: {why}")
        return "false"
    return parse


def _throttled_replicas(name: str) -> Callable[[str], str]:
    """Kafka's format: empty, `*`, or `PARTITION:BROKER,...`."""
    def parse(value: str) -> str:
        text = value.strip()
        if text in ("", "*"):
            return text
        entries = [e.strip() for e in text.split(",")]
        for entry in entries:
            partition, sep, broker = entry.partition(":")
            if not (sep and partition.isdigit() and broker.isdigit()):
                raise InvalidConfig(f"invalid value {value!r} for configuration {name}: "
                                    "must be '*' or PARTITION:BROKER,...")
        return ",".join(entries)
    return parse


def _stored(name: str, default: str, type_: str, documentation: str,
            parse: Callable[[str], str]) -> ConfigKey:
    return ConfigKey(name=name, default=default, type=type_, parse=parse,
                     documentation=documentation + " (stored; no effect here)")


STORED_ONLY: tuple[ConfigKey, ...] = (
    _stored("file.delete.delay.ms", "60000", "LONG", "delay before a deleted file goes",
            integer_parser("file.delete.delay.ms", 0, LONG_MAX)),
    _stored("flush.messages", str(LONG_MAX), "LONG", "records between forced flushes",
            integer_parser("flush.messages", 1, LONG_MAX)),
    _stored("flush.ms", str(LONG_MAX), "LONG", "time between forced flushes",
            integer_parser("flush.ms", 0, LONG_MAX)),
    _stored("index.interval.bytes", "4096", "INT", "bytes between offset index entries",
            integer_parser("index.interval.bytes", 0, INT_MAX)),
    _stored("local.retention.bytes", "-2", "LONG", "tiered storage's local retention size",
            integer_parser("local.retention.bytes", -2, LONG_MAX)),
    _stored("local.retention.ms", "-2", "LONG", "tiered storage's local retention time",
            integer_parser("local.retention.ms", -2, LONG_MAX)),
    _stored("message.downconversion.enable", "true", "BOOLEAN",
            "down-conversion for old consumers (deprecated)",
            _boolean("message.downconversion.enable")),
    _stored("message.format.version", "3.0-IV1", "STRING",
            "the message format version (deprecated)", lambda value: value.strip()),
    _stored("preallocate", "false", "BOOLEAN", "preallocate segment files",
            _boolean("preallocate")),
    _stored("segment.index.bytes", "10485760", "INT", "the size of a segment's index",
            integer_parser("segment.index.bytes", 4, INT_MAX)),
    _stored("segment.jitter.ms", "0", "LONG", "random jitter subtracted from segment.ms",
            integer_parser("segment.jitter.ms", 0, LONG_MAX)),
)

KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    *STORED_ONLY,
    ConfigKey(name=FOLLOWER_THROTTLED_REPLICAS, default="", type="LIST",
              documentation="replicas whose follower fetches are throttled "
                            "(follower.replication.throttled.rate)",
              parse=_throttled_replicas(FOLLOWER_THROTTLED_REPLICAS)),
    ConfigKey(name=LEADER_THROTTLED_REPLICAS, default="", type="LIST",
              documentation="replicas whose leader answers are throttled "
                            "(leader.replication.throttled.rate)",
              parse=_throttled_replicas(LEADER_THROTTLED_REPLICAS)),
    ConfigKey(name=COMPRESSION_TYPE, default=PRODUCER_COMPRESSION, type="STRING",
              documentation="the codec the leader stores batches in (producer: as sent)",
              parse=_one_of(COMPRESSION_TYPE, "uncompressed", "zstd", "lz4", "snappy",
                            "gzip", PRODUCER_COMPRESSION)),
    ConfigKey(name="compression.gzip.level", default="-1", type="INT",
              documentation="the gzip level when the leader compresses",
              parse=integer_parser("compression.gzip.level", -1, 9)),
    ConfigKey(name="compression.lz4.level", default="9", type="INT",
              documentation="the lz4 level when the leader compresses",
              parse=integer_parser("compression.lz4.level", 1, 17)),
    ConfigKey(name="compression.zstd.level", default="3", type="INT",
              documentation="the zstd level when the leader compresses",
              parse=integer_parser("compression.zstd.level", -131072, 22)),
    ConfigKey(name=MAX_MESSAGE_BYTES, default="1048588", type="INT",
              documentation="the largest record batch a partition accepts",
              parse=integer_parser(MAX_MESSAGE_BYTES, 0, INT_MAX)),
    ConfigKey(name=TIMESTAMP_TYPE, default="CreateTime", type="STRING",
              documentation="CreateTime (the producer's) or LogAppendTime (the leader's)",
              parse=_one_of(TIMESTAMP_TYPE, "CreateTime", LOG_APPEND_TIME)),
    ConfigKey(name=TIMESTAMP_BEFORE_MAX_MS, default=str(LONG_MAX), type="LONG",
              documentation="how far behind the broker's clock a CreateTime may be",
              parse=integer_parser(TIMESTAMP_BEFORE_MAX_MS, 0, LONG_MAX)),
    ConfigKey(name=TIMESTAMP_AFTER_MAX_MS, default=str(LONG_MAX), type="LONG",
              documentation="how far ahead of the broker's clock a CreateTime may be",
              parse=integer_parser(TIMESTAMP_AFTER_MAX_MS, 0, LONG_MAX)),
    ConfigKey(name=TIMESTAMP_DIFFERENCE_MAX_MS, default=str(LONG_MAX), type="LONG",
              documentation="how far from the broker's clock a CreateTime may be, either "
                            "way (deprecated)",
              parse=integer_parser(TIMESTAMP_DIFFERENCE_MAX_MS, 0, LONG_MAX)),
    ConfigKey(name=UNCLEAN_LEADER_ELECTION, default="false", type="BOOLEAN",
              documentation="elect a live replica outside the ISR when no ISR member is "
                            "unfenced (records only the ISR held may be lost)",
              parse=_boolean(UNCLEAN_LEADER_ELECTION)),
    ConfigKey(name="remote.storage.enable", default="false", type="BOOLEAN",
              documentation="tiered storage (only false: not supported here)",
              parse=_false_only("remote.storage.enable", "tiered storage is not supported")),
    ConfigKey(name=CLEANUP_POLICY, default="delete", type="LIST",
              documentation="delete (retention), compact (log compaction) or both",
              parse=_cleanup_policy),
    ConfigKey(name=DELETE_RETENTION_MS, default="86400000", type="LONG",
              documentation="how long a compacted log keeps a tombstone once cleaned",
              parse=integer_parser(DELETE_RETENTION_MS, 0, LONG_MAX)),
    ConfigKey(name=MAX_COMPACTION_LAG_MS, default=str(LONG_MAX), type="LONG",
              documentation="the age past which a dirty record makes its log cleanable",
              parse=integer_parser(MAX_COMPACTION_LAG_MS, 1, LONG_MAX)),
    ConfigKey(name=MIN_CLEANABLE_DIRTY_RATIO, default="0.5", type="DOUBLE",
              documentation="the dirty share of a compacted log that makes it cleanable",
              parse=_ratio(MIN_CLEANABLE_DIRTY_RATIO)),
    ConfigKey(name=MIN_COMPACTION_LAG_MS, default="0", type="LONG",
              documentation="the age below which a record is never compacted",
              parse=integer_parser(MIN_COMPACTION_LAG_MS, 0, LONG_MAX)),
    ConfigKey(name=ORDERED_DELIVERY, default="false", type="BOOLEAN",
              documentation="keep per-key order across partition count changes (KIP-253)",
              parse=_boolean(ORDERED_DELIVERY)),
    ConfigKey(name=MIN_INSYNC_REPLICAS, default="1", type="INT",
              documentation="in-sync replicas an acks=all produce needs",
              parse=integer_parser(MIN_INSYNC_REPLICAS, 1, INT_MAX)),
    ConfigKey(name=RETENTION_BYTES, default="-1", type="LONG",
              documentation="the size past which a partition log's oldest segments go",
              parse=integer_parser(RETENTION_BYTES, -1, LONG_MAX)),
    ConfigKey(name=RETENTION_MS, default="604800000", type="LONG",
              documentation="the age past which a partition log's oldest segments go",
              parse=integer_parser(RETENTION_MS, -1, LONG_MAX)),
    ConfigKey(name=SEGMENT_BYTES, default="1073741824", type="INT",
              documentation="the size at which a partition log starts a new segment",
              parse=integer_parser(SEGMENT_BYTES, 14, INT_MAX)),
    ConfigKey(name=SEGMENT_MS, default="604800000", type="LONG",
              documentation="the age at which a partition log starts a new segment",
              parse=integer_parser(SEGMENT_MS, 1, LONG_MAX)),
)}
LIST_KEYS = frozenset(k.name for k in KEYS.values() if k.type == "LIST")


def validate(key: str, value: str | None) -> str:
    """The canonical value for `key` (e.g. "007" -> "7"), or InvalidConfig."""
    spec = KEYS.get(key)
    if spec is None:
        raise InvalidConfig(f"unknown topic config {key!r} (supported: "
                            f"{', '.join(sorted(KEYS))})")
    if value is None:
        raise InvalidConfig(f"no value for configuration {key}")
    return spec.parse(value)


def list_after(key: str, current: str | None, operand: str | None, *, subtract: bool) -> str:
    """Kafka's APPEND (`subtract` False) or SUBTRACT on the list config `key`: the items
    of its `current` value (its default when unset) with the operand's items it lacks
    added at the end, or with the operand's items removed (not yet validated).
    InvalidConfig, with Kafka's message, for a key that is no list."""
    if key not in KEYS:
        validate(key, operand)  # raises: an unknown key
    if key not in LIST_KEYS:
        raise InvalidConfig(f"Config value {'subtract' if subtract else 'append'} is not "
                            f"allowed for config key: {key}")
    items = [i.strip() for i in (KEYS[key].default if current is None else current)
             .split(",") if i.strip()]
    operands = [i.strip() for i in (operand or "").split(",") if i.strip()]
    return ",".join([i for i in items if i not in operands] if subtract
                    else items + [i for i in operands if i not in items])


def validate_all(configs: Iterable[tuple[str, str | None]], *,
                 ordered_default: bool = False) -> dict[str, str]:
    """Configs given at creation: each key once, each valid. Returns canonical values,
    with `enable.ordered.delivery=true` added when none is given and `ordered_default`
    (the cluster's) is on: the log then says so, whatever the replaying node's config."""
    result: dict[str, str] = {}
    given = list(configs)
    for key, value in given:
        if key in result:
            raise InvalidConfig(f"config {key!r} given more than once")
        result[key] = validate(key, value)
    if ordered_default:
        result.setdefault(ORDERED_DELIVERY, "true")
    return result


def effective(configs: Mapping[str, str] | Iterable[tuple[str, str]], key: str) -> str:
    """The value `key` has for a topic with `configs` set: its own, or the default."""
    values = dict(configs)
    value = values.get(key)
    return KEYS[key].default if value is None else value


def min_insync_replicas(configs: Iterable[tuple[str, str]]) -> int:
    return int(effective(configs, MIN_INSYNC_REPLICAS))
