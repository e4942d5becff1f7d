"""Metadata log records and their codec.

A record is one msgpack map `{"type": int, "version": int, ...fields}`; Uuid fields travel
as 16-byte bin. The raft layer stores each record as opaque bytes, so the same bytes are
compared across nodes by the replay. Optional fields (default None) leave room to grow a
record without a new version; decoding ignores unknown keys for forward compatibility.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack

from metadata.uuid import Uuid, pack


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
        out: dict[str, Any] = {"type": int(self.TYPE), "version": self.VERSION}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[field.name] = list(value) if isinstance(value, tuple) else value
        return out

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


RECORD_CLASSES: dict[int, type[Record]] = {
    int(cls.TYPE): cls
    for cls in (LeaderChange, MetadataTopic, RegisterBroker, FenceBroker, UnfenceBroker,
                Topic, Partition, PartitionChange, RemoveTopic, RenameTopic, NoOp)
}


def _field_converters(cls: type[Record]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    converters: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        hint = str(hints[field.name])
        if "Uuid" in hint:
            converters[field.name] = Uuid.from_bytes
        elif "tuple" in hint:
            converters[field.name] = tuple
    return converters


_CONVERTERS = {type_id: _field_converters(cls) for type_id, cls in RECORD_CLASSES.items()}
_FIELD_NAMES = {type_id: {f.name for f in dataclasses.fields(cls)}
                for type_id, cls in RECORD_CLASSES.items()}


def from_dict(data: Mapping[str, Any]) -> Record:
    type_id = data.get("type")
    cls = RECORD_CLASSES.get(type_id) if isinstance(type_id, int) else None
    if cls is None:
        raise RecordError(f"unknown record type {type_id!r}")
    converters = _CONVERTERS[type_id]  # type: ignore[index]
    kwargs = {}
    try:  # a converter (Uuid.from_bytes, tuple) fails on bad input too
        for name in _FIELD_NAMES[type_id]:  # type: ignore[index]
            if name in data:
                value = data[name]
                convert = converters.get(name)
                kwargs[name] = convert(value) if convert and value is not None else value
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise RecordError(f"bad {cls.__name__} record: {exc}") from None


def decode(data: bytes) -> Record:
    try:
        obj = msgpack.unpackb(data, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise RecordError(f"undecodable record: {exc}") from None
    if not isinstance(obj, dict):
        raise RecordError(f"record is not a map: {type(obj).__name__}")
    return from_dict(obj)


def to_json(record: Record) -> dict[str, Any]:
    """A JSON-friendly view: Uuids as their base64 text."""
    out = record.to_dict()
    out["type"] = type(record).__name__
    for key, value in out.items():
        if isinstance(value, Uuid):
            out[key] = str(value)
    return out
