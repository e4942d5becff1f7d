"""The records of the internal `__consumer_offsets` topic, and which of its partitions
coordinates a group (pure: no I/O, no clock).

Partition of a group: `abs(java_string_hashcode(group_id)) % partitions`, with Kafka's
hash (Java's String.hashCode over UTF-16 code units, wrapping at 32 bits) and Kafka's
`abs`, which maps -2**31 to 0 (Java's Math.abs would leave it negative), so every
client-side tool that computes a group's coordinator partition agrees with ours.

Record format (our own, not Kafka's binary schemas). Each record of a magic v2 batch
(uncompressed, producer id -1) carries a msgpack key and a msgpack value:

    key   [0, group_id, topic, partition]        an offset commit
    value {"offset": int, "leader_epoch": int, "metadata": str | None,
           "commit_timestamp": int (ms)}

    key   [1, group_id]                          a group's metadata after a rebalance
    value {"protocol_type": str | None, "protocol": str | None, "generation": int,
           "leader": str | None, "members": [
              {"member_id", "instance_id", "client_id", "client_host",
               "session_timeout_ms", "rebalance_timeout_ms",
               "subscription": bytes (the chosen protocol's metadata),
               "assignment": bytes}, ...]}

A null value is a tombstone: the offset, or the group (its metadata), is deleted. A
later record for the same key replaces an earlier one, so loading a partition is a
replay from its first record to its log end. Unknown key kinds are skipped (a newer
broker's record), as are batches that are compressed or not magic v2.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack

from metadata.topic_names import GROUP_METADATA_TOPIC_NAME
from raft.common.kafka import record_batch

OFFSETS_TOPIC = GROUP_METADATA_TOPIC_NAME
# (offset, key, value, headers as (name, value) pairs) of one record of a batch
Record = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
OFFSET_KEY, GROUP_KEY = 0, 1
_INT32 = 1 << 32


def java_string_hashcode(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a
    signed 32-bit int."""
    data = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for (unit,) in struct.iter_unpack(">H", data):
        value = (31 * value + unit) & (_INT32 - 1)
    return value - _INT32 if value >= 1 << 31 else value


def kafka_abs(value: int) -> int:
    """Kafka's Utils.abs: |value|, but Integer.MIN_VALUE maps to 0."""
    return 0 if value == -(1 << 31) else abs(value)


def partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition whose leader coordinates `group_id`."""
    return kafka_abs(java_string_hashcode(group_id)) % partitions


# --- keys and values --------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberValue:
    member_id: str
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 10_000
    subscription: bytes = b""
    assignment: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupValue:
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


Key = OffsetKey | GroupKey
Value = OffsetValue | GroupValue


class RecordFormatError(ValueError):
    """A key or value that is not in the format above."""


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetKey):
        return bytes(msgpack.packb([OFFSET_KEY, key.group_id, key.topic, key.partition]))
    return bytes(msgpack.packb([GROUP_KEY, key.group_id]))


def encode_value(value: Value | None) -> bytes | None:
    """msgpack of the value; None (a tombstone) stays None."""
    if value is None:
        return None
    if isinstance(value, OffsetValue):
        return bytes(msgpack.packb({
            "offset": value.offset, "leader_epoch": value.leader_epoch,
            "metadata": value.metadata, "commit_timestamp": value.commit_timestamp}))
    return bytes(msgpack.packb({
        "protocol_type": value.protocol_type, "protocol": value.protocol,
        "generation": value.generation, "leader": value.leader,
        "members": [{"member_id": m.member_id, "instance_id": m.instance_id,
                     "client_id": m.client_id, "client_host": m.client_host,
                     "session_timeout_ms": m.session_timeout_ms,
                     "rebalance_timeout_ms": m.rebalance_timeout_ms,
                     "subscription": m.subscription, "assignment": m.assignment}
                    for m in value.members]}))


def decode_key(data: bytes) -> Key | None:
    """The key, or None for a kind this broker does not know (skipped on load)."""
    try:
        items = msgpack.unpackb(data)
    except Exception as exc:  # msgpack raises several types on malformed input
        raise RecordFormatError(f"undecodable key: {exc}") from None
    if not isinstance(items, list) or not items or not isinstance(items[0], int):
        raise RecordFormatError(f"key is not [kind, ...]: {items!r}")
    try:
        if items[0] == OFFSET_KEY:
            _, group_id, topic, partition = items
            return OffsetKey(group_id=_str(group_id), topic=_str(topic),
                             partition=_int(partition))
        if items[0] == GROUP_KEY:
            _, group_id = items
            return GroupKey(group_id=_str(group_id))
    except ValueError as exc:
        raise RecordFormatError(f"bad key {items!r}: {exc}") from None
    return None


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value for `key` (None: a tombstone)."""
    if data is None:
        return None
    try:
        raw = msgpack.unpackb(data)
        if not isinstance(raw, dict):
            raise RecordFormatError(f"value is not a map: {raw!r}")
        if isinstance(key, OffsetKey):
            return OffsetValue(offset=_int(raw["offset"]),
                               leader_epoch=_int(raw.get("leader_epoch", -1)),
                               metadata=_opt_str(raw.get("metadata")),
                               commit_timestamp=_int(raw.get("commit_timestamp", 0)))
        return GroupValue(
            protocol_type=_opt_str(raw.get("protocol_type")),
            protocol=_opt_str(raw.get("protocol")),
            generation=_int(raw.get("generation", 0)), leader=_opt_str(raw.get("leader")),
            members=tuple(_member(m) for m in raw.get("members", ())))
    except RecordFormatError:
        raise
    except Exception as exc:  # a missing field, a wrong type
        raise RecordFormatError(f"bad value for {key}: {exc!r}") from None


def _member(raw: Any) -> MemberValue:
    if not isinstance(raw, dict):
        raise RecordFormatError(f"member is not a map: {raw!r}")
    return MemberValue(
        member_id=_str(raw["member_id"]), instance_id=_opt_str(raw.get("instance_id")),
        client_id=_str(raw.get("client_id", "")), client_host=_str(raw.get("client_host", "")),
        session_timeout_ms=_int(raw.get("session_timeout_ms", 10_000)),
        rebalance_timeout_ms=_int(raw.get("rebalance_timeout_ms", 10_000)),
        subscription=_bytes(raw.get("subscription", b"")),
        assignment=_bytes(raw.get("assignment", b"")))


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _bytes(value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError(f"expected bytes, got {value!r}")
    return value


# --- magic v2 record batches --------------------------------------------------------------

_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. records count
_COMPRESSION_MASK, _CONTROL_FLAG = 0x07, 0x20
_HEADER_BYTES = 61


def encode_batch(records: list[tuple[bytes, bytes | None]], *, timestamp_ms: int) -> bytes:
    """One uncompressed magic v2 batch of (key, value) records (value None: a null value,
    a tombstone); base offset 0 and leader epoch -1 are stamped by the leader's log."""
    return record_batch.encode_batch(records, timestamps=[timestamp_ms] * len(records))


def decode_batches(data: bytes) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every keyed record in the whole batches of `data`: a
    record without a key is no offset or group record, so it is skipped."""
    for offset, key, value in decode_records(data):
        if key is not None:
            yield offset, key, value


def decode_records(data: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in the whole batches of `data` (as a
    partition log reads them). Compressed and control batches are skipped. Raises
    RecordFormatError on a truncated batch."""
    for offset, key, value, _ in decode_records_with_headers(data):
        yield offset, key, value


def decode_records_with_headers(data: bytes) -> Iterator[Record]:
    """`decode_records` with each record's headers, (name, value) pairs."""
    view = memoryview(data)
    position = 0
    while position < len(view):
        if len(view) - position < _HEADER_BYTES:
            raise RecordFormatError("truncated batch header")
        base, length = _BATCH_HEAD.unpack_from(view, position)
        end = position + 12 + length
        if end > len(view) or length < _HEADER_BYTES - 12:
            raise RecordFormatError(f"bad batch length {length}")
        magic = view[position + 16]
        attributes = _AFTER_CRC.unpack_from(view, position + 21)[0]
        count = _AFTER_CRC.unpack_from(view, position + 21)[7]
        if magic == 2 and not attributes & (_COMPRESSION_MASK | _CONTROL_FLAG):
            yield from _records(view[position + _HEADER_BYTES:end], base, count)
        position = end


def _records(view: memoryview, base: int, count: int) -> Iterator[Record]:
    position = 0
    for _ in range(count):
        length, position = _read_varint(view, position)
        end = position + length
        if length < 0 or end > len(view):
            raise RecordFormatError("truncated record")
        cursor = position + 1  # attributes
        _, cursor = _read_varint(view, cursor)  # timestamp delta
        offset_delta, cursor = _read_varint(view, cursor)
        key_length, cursor = _read_varint(view, cursor)
        key = None if key_length < 0 else bytes(view[cursor:cursor + key_length])
        cursor += max(0, key_length)
        value_length, cursor = _read_varint(view, cursor)
        value = None if value_length < 0 else bytes(view[cursor:cursor + value_length])
        cursor += max(0, value_length)
        headers = []
        header_count, cursor = _read_varint(view, cursor)
        for _ in range(max(0, header_count)):
            name_length, cursor = _read_varint(view, cursor)
            name = bytes(view[cursor:cursor + max(0, name_length)])
            cursor += max(0, name_length)
            header_length, cursor = _read_varint(view, cursor)
            header = None if header_length < 0 else \
                bytes(view[cursor:cursor + header_length])
            cursor += max(0, header_length)
            headers.append((name.decode("utf-8", "replace"), header))
        if cursor > end:
            raise RecordFormatError("record fields overrun the record")
        position = end
        yield base + offset_delta, key, value, tuple(headers)


def _read_varint(view: memoryview, position: int) -> tuple[int, int]:
    try:
        return record_batch.read_varint(view, position)
    except ValueError as exc:
        raise RecordFormatError(str(exc)) from None
