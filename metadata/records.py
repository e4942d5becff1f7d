"""Metadata log records: every record type of the metadata log, decoded by `decode`.

The framing (a msgpack map `{"type", "version", ...fields}`, decoded strictly, errors
as `RecordError`) is shared with raft's control records (`raft.common.record`); raft's
own `LeaderChange` and `MetadataTopic` (`raft.control_records`) are part of this set, and
so are its snapshot files' `SnapshotHeader` and `SnapshotFooter`. The raft layer stores
each record as opaque bytes, so the same bytes are compared across nodes by the replay.

A field that holds a secret is marked on its definition, `field(metadata=SENSITIVE)`
(a SCRAM credential's salt and keys, as Kafka's RecordRedactor marks them); `to_json`,
the one view every tool prints a record through, shows it as `(redacted)` unless asked
(`print_sensitive`), and `sensitive_record_type` says which undecodable bytes belong
to a type with such fields.

`RetiredTopicId` and `ReplayAnomalies` exist for snapshots (`metadata.image_snapshot`):
they carry what an image holds that no other record can say, the IDs of topics no longer
live (never to be reused) and the records replay skipped (part of the image's hash).
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from msgpack import unpackb

from metadata.epoch_map import EpochMap
from raft.common.codec import Codec
from raft.common.record import Record, RecordError, RecordSet
from raft.common.uuid import Uuid
from raft.control_records import (
    KRAFT_VERSION,
    LEADER_CHANGE,
    METADATA_TOPIC,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    VOTERS,
    KRaftVersionRecord,
    LeaderChange,
    MetadataTopic,
    SnapshotFooter,
    SnapshotHeader,
    VotersRecord,
)

__all__ = ["METADATA_RECORDS", "AccessControlEntry", "RemoveAccessControlEntry",
           "FenceBroker", "LeaderChange", "MetadataTopic", "EpochMap", "NoOp",
           "Partition", "PartitionChange", "PartitionCount", "Record", "RecordError", "RecordType",
           "RegisterBroker", "RemovePartition", "RemoveTopic", "RenameTopic", "ReplayAnomalies",
           "RetiredTopicId", "SnapshotFooter", "SnapshotHeader", "Topic", "TopicConfig",
           "UnfenceBroker", "UserScramCredential", "RemoveUserScramCredential",
           "VotersRecord", "KRaftVersionRecord", "FeatureLevel", "ConfigRecord",
           "REDACTED", "SENSITIVE", "decode", "from_dict", "sensitive_fields",
           "sensitive_record_type", "to_json"]

# field metadata: a secret, shown only when asked (read-only: every marked field shares it)
SENSITIVE: Mapping[str, bool] = MappingProxyType({"sensitive": True})
REDACTED = "(redacted)"  # what a sensitive field is shown as, as in Kafka's tools


@enum.unique  # one id per type, raft's included: a RecordSet keeps only the last of a pair
class RecordType(enum.IntEnum):
    LEADER_CHANGE = LEADER_CHANGE  # raft's control records (raft.control_records)
    METADATA_TOPIC = METADATA_TOPIC
    REGISTER_BROKER = 3
    FENCE_BROKER = 4
    UNFENCE_BROKER = 5
    TOPIC = 6
    PARTITION = 7
    PARTITION_CHANGE = 8
    REMOVE_TOPIC = 9
    NO_OP = 10
    RENAME_TOPIC = 11
    SNAPSHOT_HEADER = SNAPSHOT_HEADER  # raft's snapshot files (raft.snapshot)
    SNAPSHOT_FOOTER = SNAPSHOT_FOOTER
    RETIRED_TOPIC_ID = 14
    REPLAY_ANOMALIES = 15
    TOPIC_CONFIG = 16
    PARTITION_COUNT = 17
    REMOVE_PARTITION = 18
    VOTERS = VOTERS  # raft's dynamic quorum (KIP-853, raft/voters.py)
    KRAFT_VERSION = KRAFT_VERSION
    USER_SCRAM_CREDENTIAL = 21
    REMOVE_USER_SCRAM_CREDENTIAL = 22
    # 19, 20: reserved; 21, 22: SCRAM credentials
    ACCESS_CONTROL_ENTRY = 23
    REMOVE_ACCESS_CONTROL_ENTRY = 24
    FEATURE_LEVEL = 25
    CONFIG_RECORD = 26


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBroker(Record):
    TYPE = RecordType.REGISTER_BROKER
    broker_id: int
    incarnation_id: Uuid
    broker_epoch: int
    endpoints: tuple[str, ...] = ()  # "NAME://host:port"
    rack: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBroker(Record):
    TYPE = RecordType.FENCE_BROKER
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfenceBroker(Record):
    TYPE = RecordType.UNFENCE_BROKER
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Topic(Record):
    TYPE = RecordType.TOPIC
    name: str
    topic_id: Uuid
    # KIP-253: partitions a topic was created with; later growth keeps per-key order.
    initial_partition_count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition(Record):
    TYPE = RecordType.PARTITION
    topic_id: Uuid
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # KIP-253: for a partition added by growth, each partition that existed then and its
    # leader epoch before the growth bumped it; for a partition marked for deletion
    # (non-empty), each partition that stays and its leader epoch before the shrink.
    leader_epoch_after_creation: EpochMap | None = None
    leader_epoch_before_deletion: EpochMap | None = None
    # KIP-455: an ongoing reassignment's replicas joining and leaving (metadata.reassignments)
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChange(Record):
    """Fields left None are unchanged; replay bumps the epochs (leader_epoch on a new leader,
    or with `bump_leader_epoch`: a resize fences produces made with the old count).
    `leader_epoch_before_deletion` marks the partition for deletion (KIP-253).
    `adding_replicas` / `removing_replicas` (KIP-455, metadata.reassignments): () clears."""

    TYPE = RecordType.PARTITION_CHANGE
    topic_id: Uuid
    partition: int
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    bump_leader_epoch: bool | None = None
    leader_epoch_before_deletion: EpochMap | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionCount(Record):
    """KIP-253: the topic's undeleted partition count (producers hash keys over it).
    `initial_partition_count` is given when the topic had none (created before it was
    recorded): the count linear hashing starts from."""

    TYPE = RecordType.PARTITION_COUNT
    topic_id: Uuid
    undeleted_partition_count: int
    initial_partition_count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RemovePartition(Record):
    """KIP-253: the topic's last partition, marked for deletion and found empty by its
    leader (what it reported: the epoch it led in, log start == log end), is gone."""

    TYPE = RecordType.REMOVE_PARTITION
    topic_id: Uuid
    partition: int
    leader_epoch: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopic(Record):
    TYPE = RecordType.REMOVE_TOPIC
    topic_id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameTopic(Record):
    TYPE = RecordType.RENAME_TOPIC
    topic_id: Uuid
    new_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfig(Record):
    """One topic config key set to `value` (Kafka's ConfigRecord for a TOPIC resource),
    or removed when `value` is None. Keyed by topic ID, not name: a rename keeps the
    configs. Keys and values are validated by the controller (metadata.topic_configs);
    replay stores them as given."""

    TYPE = RecordType.TOPIC_CONFIG
    topic_id: Uuid
    key: str
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntry(Record):
    """One ACL (Kafka's AccessControlEntryRecord, KIP-500), with Kafka's numeric codes
    (`metadata.authorizer`: resource type, pattern type, operation, permission type).
    `id` is the ACL's own Uuid: RemoveAccessControlEntry names it. Replay skips an entry
    whose codes are not a concrete ACL's (e.g. ANY) or whose id is taken."""

    TYPE = RecordType.ACCESS_CONTROL_ENTRY
    id: Uuid
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str  # "User:alice", "User:*"
    host: str  # an IP address or "*"
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveAccessControlEntry(Record):
    """The ACL `id` is gone (Kafka's RemoveAccessControlEntryRecord)."""

    TYPE = RecordType.REMOVE_ACCESS_CONTROL_ENTRY
    id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScramCredential(Record):
    """A user's SCRAM credential for one mechanism (Kafka's UserScramCredentialRecord):
    the salted values a SCRAM server checks a client's proof with (RFC 5802), never the
    password. Replaces the user's credential for that mechanism, if any
    (`metadata.scram_credentials` says what replay accepts)."""

    TYPE = RecordType.USER_SCRAM_CREDENTIAL
    name: str
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    # with the salt, the keys let anyone try passwords offline; ServerKey also lets one
    # pose as the server to a client
    salt: bytes = field(metadata=SENSITIVE)
    stored_key: bytes = field(metadata=SENSITIVE)
    server_key: bytes = field(metadata=SENSITIVE)
    iterations: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveUserScramCredential(Record):
    """The user's credential for `mechanism` is gone (Kafka's
    RemoveUserScramCredentialRecord)."""

    TYPE = RecordType.REMOVE_USER_SCRAM_CREDENTIAL
    name: str
    mechanism: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevel(Record):
    """A finalized feature's level from this offset on (Kafka's FeatureLevelRecord);
    0 removes the feature. `metadata.features` says what each metadata.version level
    lets the controller write."""

    TYPE = RecordType.FEATURE_LEVEL
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord(Record):
    """One config key of a resource set to `value`, or removed when `value` is None
    (Kafka's ConfigRecord). Here only on BROKER resources (type 4; name "" for the
    cluster-wide default, "<id>" for one broker): topic configs are TopicConfig records,
    keyed by topic ID. `metadata.broker_configs` says what replay and the controller
    accept."""

    TYPE = RecordType.CONFIG_RECORD
    resource_type: int
    resource_name: str
    name: str
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOp(Record):
    TYPE = RecordType.NO_OP


@dataclass(frozen=True, slots=True, kw_only=True)
class RetiredTopicId(Record):
    """An ID that a topic, now removed, had: replay marks it used so it is never reused.
    A snapshot cannot say it with Topic + RemoveTopic, since the image keeps no name."""

    TYPE = RecordType.RETIRED_TOPIC_ID
    topic_id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayAnomalies(Record):
    """The records replay skipped before a snapshot (`MetadataImage.anomaly_count` and the
    first ones in full, the i-th from offsets[i], record_types[i] and reasons[i]): they
    are part of the image's hash, which every node must agree on however it got there.
    Snapshot-only: replay skips it in a log."""

    TYPE = RecordType.REPLAY_ANOMALIES
    count: int
    offsets: tuple[int, ...] = ()
    record_types: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()


_JSON_CODEC = Codec(omit_none=True)  # dump-log and replay show topic IDs as KIP-516 text
_JSON_CODEC.register(Uuid, wire=str, encode=str, decode=Uuid.from_string, name="a Uuid")

METADATA_RECORDS = RecordSet((LeaderChange, MetadataTopic, RegisterBroker, FenceBroker,
                              UnfenceBroker, Topic, Partition, PartitionChange, RemoveTopic,
                              RenameTopic, NoOp, SnapshotHeader, SnapshotFooter,
                              RetiredTopicId, ReplayAnomalies, TopicConfig,
                              PartitionCount, RemovePartition,
                              UserScramCredential, RemoveUserScramCredential,
                              AccessControlEntry, RemoveAccessControlEntry,
                              VotersRecord, KRaftVersionRecord, FeatureLevel,
                              ConfigRecord))
RECORD_CLASSES = METADATA_RECORDS.classes
from_dict = METADATA_RECORDS.from_dict
decode = METADATA_RECORDS.decode


def sensitive_fields(cls: type[Record]) -> frozenset[str]:
    """The names of `cls`'s fields marked SENSITIVE."""
    return frozenset(f.name for f in fields(cls) if f.metadata.get("sensitive"))


def to_json(record: Record, *, print_sensitive: bool = False) -> dict[str, Any]:
    """A JSON-friendly view: the record's class name, Uuids as their base64 text, bytes
    as base64, and every sensitive field as REDACTED unless `print_sensitive`."""
    view = _JSON_CODEC.encode(record)
    for name, value in view.items():
        if isinstance(value, bytes):  # JSON has no bytes: base64, as SCRAM writes them
            view[name] = base64.b64encode(value).decode("ascii")
    if not print_sensitive:
        for name in sensitive_fields(type(record)):
            if name in view:
                view[name] = REDACTED
    return {"type": type(record).__name__, "version": record.VERSION, **view}


def sensitive_record_type(data: bytes) -> str | None:
    """The name of the record type `data` claims, when that type has sensitive fields:
    bytes that do not decode are shown raw, and then must not show a secret either."""
    try:
        obj = unpackb(data, raw=False)
    except Exception:  # msgpack raises several unrelated types; nothing to go by
        return None
    type_id = obj.get("type") if isinstance(obj, dict) else None
    cls = RECORD_CLASSES.get(type_id) if type(type_id) is int else None
    return cls.__name__ if cls is not None and sensitive_fields(cls) else None
