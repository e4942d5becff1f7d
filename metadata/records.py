"""Metadata log records and their codec.

A record is one msgpack map `{"type": int, "version": int, ...fields}` made by the shared
codec (raft.common.codec): Uuid fields as 16-byte bin, tuples as arrays, None fields left
out. The raft layer stores each record as opaque bytes, so the same bytes are compared
across nodes by the replay. Optional fields (default None) leave room to grow a record
without a new version; decoding ignores unknown keys for forward compatibility, checks
every known one against its type, and raises `RecordError` naming the field.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack

from metadata.uuid import Uuid, pack
from raft.common.codec import Codec, CodecError


class RecordError(ValueError):
    """A record's bytes cannot be decoded; the message says why."""


class RecordType(enum.IntEnum):
    LEADER_CHANGE = 1  # control record written by each new raft leader
    METADATA_TOPIC = 2
    REGISTER_BROKER = 3
    FENCE_BROKER = 4
    UNFENCE_BROKER = 5
    TOPIC = 6
    PARTITION = 7
    PARTITION_CHANGE = 8
    REMOVE_TOPIC = 9
    NO_OP = 10
    RENAME_TOPIC = 11


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    TYPE: ClassVar[RecordType]
    VERSION: ClassVar[int] = 0

    def to_dict(self) -> dict[str, Any]:
        """The map `encode` packs: type, version, then the fields (Uuids as 16 bytes)."""
        return {"type": int(self.TYPE), "version": self.VERSION, **_CODEC.encode(self)}

    def encode(self) -> bytes:
        return pack(self.to_dict())


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChange(Record):
    TYPE = RecordType.LEADER_CHANGE
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataTopic(Record):
    TYPE = RecordType.METADATA_TOPIC
    topic_id: Uuid


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
class NoOp(Record):
    TYPE = RecordType.NO_OP


_CODEC = Codec(omit_none=True, ignore_unknown=True)
_CODEC.register(Uuid, wire=bytes, encode=Uuid.to_bytes, decode=Uuid.from_bytes,
                name="a 16-byte Uuid")
_JSON_CODEC = Codec(omit_none=True)  # dump-log and replay show topic IDs as KIP-516 text
_JSON_CODEC.register(Uuid, wire=str, encode=str, decode=Uuid.from_string, name="a Uuid")

RECORD_CLASSES: dict[int, type[Record]] = {
    int(cls.TYPE): cls
    for cls in (LeaderChange, MetadataTopic, RegisterBroker, FenceBroker, UnfenceBroker,
                Topic, Partition, PartitionChange, RemoveTopic, RenameTopic, NoOp)
}


def from_dict(data: Mapping[str, Any]) -> Record:
    type_id = data.get("type")
    cls = RECORD_CLASSES.get(type_id) if type(type_id) is int else None
    if cls is None:
        raise RecordError(f"unknown record type {type_id!r}")
    try:  # "type" and "version" are keys the codec ignores, like any unknown one
        return _CODEC.decode(cls, data)
    except CodecError as exc:
        raise RecordError(f"bad {cls.__name__} record: {exc}") from exc


def decode(data: bytes) -> Record:
    try:
        obj = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise RecordError(f"undecodable record: {exc}") from None
    if not isinstance(obj, dict):
        raise RecordError(f"record is not a map: {type(obj).__name__}")
    return from_dict(obj)


def to_json(record: Record) -> dict[str, Any]:
    """A JSON-friendly view: the record's class name, Uuids as their base64 text."""
    return {"type": type(record).__name__, "version": record.VERSION,
            **_JSON_CODEC.encode(record)}
