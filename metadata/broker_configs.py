"""Dynamic broker configs: the keys a broker takes from the metadata log, their
validation, and the value a broker resolves for each (pure).

Stored as Kafka stores them: a `ConfigRecord` on resource type BROKER (4) with resource
name "" for the cluster-wide default and "<id>" for one broker (a None value deletes
the key); the image keeps them as `MetadataImage.broker_configs`, (resource name, key,
value) triples sorted, only the keys set. A broker resolves a key as Kafka's
DynamicBrokerConfig does: its own dynamic value (DYNAMIC_BROKER_CONFIG), else the
cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG), else its configuration file's
(STATIC_BROKER_CONFIG: none of these keys is read from it here), else the default.

The keys are Kafka 3.9's (`metadata.broker_config_keys`), checked as its broker checks
an alter, all or nothing, each refusal INVALID_CONFIG with Kafka's message:
- a read-only key (`broker.id`, `log.dirs`, ...): "Cannot update these configs
  dynamically";
- an SSL keystore or truststore key without `listener.name.<listener>.`: "These
  security configs can be dynamically updated only per-listener using the listener
  prefix";
- a value its type or range refuses;
- on the cluster default (""), a per-broker key (listener and security keys, and any
  listener-prefixed one but the connection limits): "Cannot update these configs at
  default cluster level, broker id must be specified".
A dynamic key is stored as given once checked; a name Kafka does not know is stored
too, as Kafka does (a plugin's key). A resource name that is neither "" nor a broker id
is INVALID_REQUEST ("Invalid broker name"), as Kafka's controller answers.

Only two keys take effect here: `leader.replication.throttled.rate`,
`follower.replication.throttled.rate` (LONG bytes/s, >= 0, default Long.MAX_VALUE:
unlimited), the replication quotas of `broker.kafka.partitions.replication_quota`, over
the replicas the topics' `*.replication.throttled.replicas` name
(`metadata.topic_configs`). Every other key is stored and described without effect
(`metadata.broker_config_keys.STORED_ONLY`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from metadata import records as rec
from metadata.admin import (
    BROKER_RESOURCE,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    AlterConfigsResource,
)
from metadata.broker_config_keys import (
    CLUSTER_LEVEL_LISTENER_KEYS,
    LISTENER_PREFIX,
    LISTENER_PREFIX_ONLY,
    NO_DEFAULT,
    PER_BROKER,
    READ_ONLY,
    STORED_ONLY,
)
from metadata.topic_configs import LONG_MAX, ConfigKey, InvalidConfig, integer_parser
from raft.common.errors import ErrorCode

DEFAULT_RESOURCE = ""  # the cluster-wide default's resource name
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
UNLIMITED = LONG_MAX

# Kafka's DescribeConfigs config_source values
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5

DYNAMIC_KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    ConfigKey(name=LEADER_RATE, default=str(UNLIMITED), type="LONG",
              documentation="bytes/s a leader sends to the throttled replicas' followers "
                            "out of sync (leader.replication.throttled.replicas)",
              parse=integer_parser(LEADER_RATE, 0, LONG_MAX)),
    ConfigKey(name=FOLLOWER_RATE, default=str(UNLIMITED), type="LONG",
              documentation="bytes/s a follower out of sync fetches for its throttled "
                            "replicas (follower.replication.throttled.replicas)",
              parse=integer_parser(FOLLOWER_RATE, 0, LONG_MAX)),
    *STORED_ONLY,
)}

# (resource name, key, value), sorted: the image's broker configs
BrokerConfigs = tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class Resolved:
    """A key's value for one broker and where it comes from (a config_source above),
    with every level that sets it, highest first (Kafka's synonyms)."""

    value: str | None  # None: no level sets it and Kafka's default is null
    source: int
    synonyms: tuple[tuple[str, int], ...]


def broker_name_error(name: str) -> str | None:
    """Why `name` names no broker resource ("" or a broker id), or None."""
    if name == DEFAULT_RESOURCE or (name.isascii() and name.isdigit()):
        return None
    return f"Invalid broker name {name!r}"


def replay_refusal(record: rec.ConfigRecord) -> str | None:
    """Why replay skips a ConfigRecord, or None. Keys and values are the controller's
    to check (a later build may know more keys): replay stores them as given."""
    if record.resource_type != BROKER_RESOURCE:
        return (f"ConfigRecord on resource type {record.resource_type}: only BROKER "
                f"({BROKER_RESOURCE}) is kept here (topic configs are TopicConfig records)")
    return broker_name_error(record.resource_name)


def applied(configs: BrokerConfigs, record: rec.ConfigRecord) -> BrokerConfigs:
    """`configs` with the (valid) `record` applied."""
    kept = [c for c in configs if (c[0], c[1]) != (record.resource_name, record.name)]
    if record.value is not None:
        kept.append((record.resource_name, record.name, record.value))
    return tuple(sorted(kept))


def resource_configs(configs: BrokerConfigs, name: str) -> dict[str, str]:
    """The keys set on resource `name` ("" for the default)."""
    return {key: value for resource, key, value in configs if resource == name}


def resolve(configs: BrokerConfigs, broker_id: int | None, key: str,
            static: Mapping[str, str] | None = None) -> Resolved:
    """`key`'s value on `broker_id`, by Kafka's precedence (see the module's docstring);
    None: the cluster-wide default's view, without any one broker's level."""
    own = None if broker_id is None else resource_configs(configs, str(broker_id)).get(key)
    levels = [(own, DYNAMIC_BROKER_CONFIG),
              (resource_configs(configs, DEFAULT_RESOURCE).get(key),
               DYNAMIC_DEFAULT_BROKER_CONFIG),
              ((static or {}).get(key), STATIC_BROKER_CONFIG),
              (default_of(key), DEFAULT_CONFIG)]
    synonyms = tuple((value, source) for value, source in levels if value is not None)
    value, source = synonyms[0] if synonyms else (None, DEFAULT_CONFIG)
    return Resolved(value=value, source=source, synonyms=synonyms)


def rate(configs: BrokerConfigs, broker_id: int, key: str) -> int | None:
    """The bytes/s limit `key` sets on `broker_id`, None when unlimited."""
    value = int(resolve(configs, broker_id, key).value or UNLIMITED)
    return None if value >= UNLIMITED else value


def base_key(key: str) -> str:
    """The key a `listener.name.<listener>.<key>` override is of, else `key` itself."""
    if key.startswith(LISTENER_PREFIX):
        return key[len(LISTENER_PREFIX):].partition(".")[2] or key
    return key


def spec_of(key: str) -> ConfigKey:
    """`key`'s type, default and check: a listener override takes its base key's, a name
    Kafka does not know is kept as given (Kafka's UNKNOWN type)."""
    spec = DYNAMIC_KEYS.get(key) or DYNAMIC_KEYS.get(base_key(key))
    if spec is None:
        return ConfigKey(name=key, default="", type="UNKNOWN", parse=lambda value: value,
                         documentation="a key Kafka does not know (stored; no effect here)")
    return spec


def default_of(key: str) -> str | None:
    """`key`'s default, None where Kafka's is null (a listener override or unknown key)."""
    spec = DYNAMIC_KEYS.get(key)
    return None if spec is None or key in NO_DEFAULT else spec.default


def is_per_broker(key: str) -> bool:
    """Kafka's PerBrokerConfigs, and every listener override but the connection limits."""
    base = base_key(key)
    return key in PER_BROKER or (base != key and base not in CLUSTER_LEVEL_LISTENER_KEYS)


def _refused(why: str, keys: Iterable[str]) -> str:
    return f"{why}: Set({', '.join(sorted(keys))})"


def key_refusal(names: list[str], *, default_resource: bool) -> str | None:
    """Why Kafka's broker refuses to set these keys dynamically, or None (its order of
    checks: read-only, listener prefix, then the default resource's per-broker keys)."""
    for why, refused in (
            ("Cannot update these configs dynamically", [k for k in names if k in READ_ONLY]),
            ("These security configs can be dynamically updated only per-listener using "
             "the listener prefix", [k for k in names if k in LISTENER_PREFIX_ONLY]),
            ("Cannot update these configs at default cluster level, broker id must be "
             "specified", [k for k in names if default_resource and is_per_broker(k)])):
        if refused:
            return _refused(why, refused)
    return None


def list_after(key: str, current: str | None, operand: str | None, *,
               subtract: bool) -> str | InvalidConfig:
    """Kafka's APPEND (`subtract` False) or SUBTRACT on the LIST key `key`: its `current`
    value (its default when unset) with the operand's items it lacks added at the end, or
    with the operand's items removed, checked; InvalidConfig, with Kafka's message, for a
    key that is no list or a result the key refuses."""
    spec = spec_of(key)
    if spec.type != "LIST":
        return InvalidConfig(f"Config value {'subtract' if subtract else 'append'} is not "
                             f"allowed for config key: {key}")
    base = default_of(key) if current is None else current
    items = [i.strip() for i in (base or "").split(",") if i.strip()]
    operands = [i.strip() for i in (operand or "").split(",") if i.strip()]
    try:
        return spec.parse(",".join([i for i in items if i not in operands] if subtract
                                   else items + [i for i in operands if i not in items]))
    except InvalidConfig as exc:
        return exc


def config_changes(configs: BrokerConfigs, resource: AlterConfigsResource, *,
                   replace: bool) -> list[rec.ConfigRecord] | tuple[ErrorCode, str]:
    """The ConfigRecords one BROKER resource asks for (SET and DELETE; for the legacy
    AlterConfigs, `replace`: the named keys set, the others deleted), or (error,
    message): the resource is all or nothing."""
    name = resource.resource_name
    invalid_name = broker_name_error(name)
    if invalid_name is not None:
        return ErrorCode.INVALID_REQUEST, invalid_name
    counts = Counter(c.name for c in resource.configs)
    repeated = sorted(k for k, n in counts.items() if n > 1)
    if repeated:
        return ErrorCode.INVALID_REQUEST, f"config {repeated[0]!r} appears more than once"
    refusal = key_refusal([c.name for c in resource.configs],
                          default_resource=name == DEFAULT_RESOURCE)
    if refusal is not None:
        return ErrorCode.INVALID_CONFIG, refusal
    current = resource_configs(configs, name)
    wanted = {} if not replace else dict.fromkeys(current)  # replace: unnamed ones go
    for config in resource.configs:
        operation = OP_SET if replace and config.value is not None else (
            OP_DELETE if replace else config.config_operation)
        if operation == OP_SET:
            try:
                wanted[config.name] = spec_of(config.name).parse(config.value or "")
            except InvalidConfig as exc:
                return ErrorCode.INVALID_CONFIG, str(exc)
        elif operation == OP_DELETE:
            wanted[config.name] = None
        elif operation in (OP_APPEND, OP_SUBTRACT):
            listed = list_after(config.name, current.get(config.name), config.value,
                                subtract=operation == OP_SUBTRACT)
            if isinstance(listed, InvalidConfig):
                return ErrorCode.INVALID_CONFIG, str(listed)
            wanted[config.name] = listed
        else:
            return ErrorCode.INVALID_REQUEST, f"unknown config operation {operation}"
    return [rec.ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=name, name=key,
                             value=value)
            for key, value in sorted(wanted.items()) if current.get(key) != value]
