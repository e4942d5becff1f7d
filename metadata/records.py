"""Metadata log records: every record type of the metadata log, decoded by `decode`.

The framing (a msgpack map `{"type", "version", ...fields}`, decoded strictly, errors
as `RecordError`) is shared with raft's control records (`raft.common.record`); raft's
own `LeaderChange` and `MetadataTopic` (`raft.control_records`) are part of this set, and
so are its snapshot files' `SnapshotHeader` and `SnapshotFooter`. The raft layer stores
each record as opaque bytes, so the same bytes are compared across nodes by the replay.

`RetiredTopicId` and `ReplayAnomalies` exist for snapshots (`metadata.image_snapshot`):
they carry what an image holds that no other record can say, the IDs of topics no longer
live (never to be reused) and the records replay skipped (part of the image's hash).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from raft.common.codec import Codec
from raft.common.record import Record, RecordError, RecordSet
from raft.common.uuid import Uuid
from raft.control_records import (
    LEADER_CHANGE,
    METADATA_TOPIC,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    LeaderChange,
    MetadataTopic,
    SnapshotFooter,
    SnapshotHeader,
)

__all__ = ["METADATA_RECORDS", "FenceBroker", "LeaderChange", "MetadataTopic", "NoOp",
           "Partition", "PartitionChange", "Record", "RecordError", "RecordType",
           "RegisterBroker", "RemoveTopic", "RenameTopic", "ReplayAnomalies",
           "RetiredTopicId", "SnapshotFooter", "SnapshotHeader", "Topic", "TopicConfig",
           "UnfenceBroker",
           "decode", "from_dict", "to_json"]


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
    # KIP-253 epoch maps, filled in when partitions are added or removed.
    leader_epoch_after_creation: int | None = None
    leader_epoch_before_deletion: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChange(Record):
    """Fields left None are unchanged; replay bumps the epochs (leader_epoch on a new leader)."""

    TYPE = RecordType.PARTITION_CHANGE
    topic_id: Uuid
    partition: int
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None


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
                              RetiredTopicId, ReplayAnomalies, TopicConfig))
RECORD_CLASSES = METADATA_RECORDS.classes
from_dict = METADATA_RECORDS.from_dict
decode = METADATA_RECORDS.decode


def to_json(record: Record) -> dict[str, Any]:
    """A JSON-friendly view: the record's class name, Uuids as their base64 text."""
    return {"type": type(record).__name__, "version": record.VERSION,
            **_JSON_CODEC.encode(record)}
