"""A stored magic v2 batch as the log cleaner reads and rewrites it (pure: bytes in,
bytes out).

`cleaner_batch` decodes a batch's records (offset, key, timestamp, tombstone) for
broker.kafka.partitions.cleaner; `rewrite` builds the batch the cleaner's plan keeps, as
Kafka's cleaner does: the same base offset, last offset delta, producer fields, max
timestamp and leader epoch, only the kept records (their bytes as stored, each
timestamp delta re-based when a delete horizon becomes the base timestamp), the record
count and the CRC32C recomputed, compressed bodies compressed again in their codec
(broker.kafka.partitions.compression). Control batches, and bodies that do not decode,
are not decoded: the cleaner keeps them whole. `recompressed` is the same batch in
another codec (a topic's `compression.type`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from broker.kafka.partitions import compression
from broker.kafka.partitions.cleaner import BatchPlan, CleanerBatch, KeyedRecord
from broker.kafka.partitions.producer_state import CONTROL_FLAG
from broker.kafka.partitions.segments import NO_TIMESTAMP
from raft.common.kafka.record_batch import encode_varint, read_varint

DELETE_HORIZON_FLAG = 0x40  # Kafka's: the base timestamp holds the delete horizon
HEADER_BYTES = 61
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_PRODUCER_ID = struct.Struct(">q")
_COUNT = struct.Struct(">i")
_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class _Record:
    offset: int
    timestamp: int
    after_timestamp: bytes  # offset delta .. headers, as stored
    attributes: int
    key: bytes | None
    tombstone: bool


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """read_varint, with the one-byte case (most deltas and lengths) inline."""
    byte = data[position]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), position + 1
    return read_varint(data, position)


def _body(batch: bytes, attributes: int) -> bytes:
    return compression.decompress(attributes & compression.CODEC_MASK, batch[HEADER_BYTES:])


def _records(batch: bytes) -> list[_Record] | None:
    """The records of `batch`, or None when it is not decoded here."""
    (attributes,) = _ATTRIBUTES.unpack_from(batch, 21)
    if attributes & CONTROL_FLAG:
        return None
    base_offset = _TIMESTAMP.unpack_from(batch, 0)[0]
    (base_timestamp,) = _TIMESTAMP.unpack_from(batch, 27)
    (count,) = _COUNT.unpack_from(batch, 57)
    try:
        body = _body(batch, attributes)
        records = []
        position = 0
        for _ in range(count):
            length, position = _varint(body, position)
            end = position + length
            record_attributes = body[position]
            timestamp_delta, after = _varint(body, position + 1)
            offset_delta, cursor = _varint(body, after)
            key_length, cursor = _varint(body, cursor)
            key = None if key_length < 0 else body[cursor:cursor + key_length]
            value_length, _ = _varint(body, cursor + max(0, key_length))
            if end > len(body):
                return None
            records.append(_Record(offset=base_offset + offset_delta,
                                   timestamp=base_timestamp + timestamp_delta,
                                   after_timestamp=body[after:end],
                                   attributes=record_attributes, key=key,
                                   tombstone=value_length < 0))
            position = end
        return records
    except (ValueError, IndexError):  # CompressionError is a ValueError
        return None


def delete_horizon(batch: bytes) -> int:
    (attributes,) = _ATTRIBUTES.unpack_from(batch, 21)
    if not attributes & DELETE_HORIZON_FLAG:
        return NO_TIMESTAMP
    return int(_TIMESTAMP.unpack_from(batch, 27)[0])


def cleaner_batch(batch: bytes) -> CleanerBatch:
    base_offset = int(_TIMESTAMP.unpack_from(batch, 0)[0])
    last_offset = base_offset + int(_LENGTH.unpack_from(batch, 23)[0])
    records = _records(batch)
    keyed = None if records is None else tuple(
        KeyedRecord(record.offset, record.key, record.timestamp, record.tombstone)
        for record in records)
    return CleanerBatch(base_offset=base_offset, last_offset=last_offset,
                        producer_id=int(_PRODUCER_ID.unpack_from(batch, 43)[0]),
                        delete_horizon_ms=delete_horizon(batch), records=keyed)


def batch_records(batch: bytes) -> list[tuple[int, bytes | None, bytes | None]] | None:
    """(offset, key, value) of each record of `batch` (None: a tombstone's value), or
    None when the batch is not decoded here (`kraft replay` reads the values)."""
    records = _records(batch)
    if records is None:
        return None
    out = []
    for record in records:
        _, cursor = _varint(record.after_timestamp, 0)  # the offset delta
        key_length, cursor = _varint(record.after_timestamp, cursor)
        value_length, cursor = _varint(record.after_timestamp, cursor + max(0, key_length))
        value = None if value_length < 0 else \
            bytes(record.after_timestamp[cursor:cursor + value_length])
        out.append((record.offset, None if record.key is None else bytes(record.key), value))
    return out


def keyless_record_indexes(batch: bytes) -> list[int]:
    """The positions in `batch` of its records without a key (Kafka refuses those on a
    compacted topic: compaction keeps one record per key); a batch not decoded here:
    none."""
    return [index for index, record in enumerate(cleaner_batch(batch).records or ())
            if record.key is None]


def rewrite(batch: bytes, plan: BatchPlan) -> bytes:
    """`batch` with only the records at `plan.offsets` and the plan's delete horizon
    (the batch must decode: `cleaner_batch(batch).records` is not None)."""
    records = _records(batch)
    assert records is not None, "only a decoded batch is rewritten"
    (attributes,) = _ATTRIBUTES.unpack_from(batch, 21)
    (base_timestamp,) = _TIMESTAMP.unpack_from(batch, 27)
    if plan.delete_horizon_ms != NO_TIMESTAMP:
        attributes |= DELETE_HORIZON_FLAG
        base_timestamp = plan.delete_horizon_ms
    kept = set(plan.offsets)
    body = bytearray()
    for record in records:
        if record.offset in kept:
            encoded = bytes([record.attributes]) + \
                encode_varint(record.timestamp - base_timestamp) + record.after_timestamp
            body += encode_varint(len(encoded)) + encoded
    out = bytearray(batch[:HEADER_BYTES]) + \
        compression.compress(attributes & compression.CODEC_MASK, bytes(body))
    _LENGTH.pack_into(out, 8, len(out) - 12)
    _ATTRIBUTES.pack_into(out, 21, attributes)
    _TIMESTAMP.pack_into(out, 27, base_timestamp)
    _COUNT.pack_into(out, 57, len(kept))
    _CRC.pack_into(out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def recompressed(batch: bytes, codec: int, level: int | None = None) -> bytes:
    """`batch` with its records' bytes in `codec` (at `level`); itself when it is in
    `codec` already, a control batch, or does not decode (the caller's checks refuse a
    client's malformed batch before)."""
    (attributes,) = _ATTRIBUTES.unpack_from(batch, 21)
    if attributes & compression.CODEC_MASK == codec or attributes & CONTROL_FLAG:
        return batch
    try:
        body = _body(batch, attributes)
    except compression.CompressionError:
        return batch
    attributes = (attributes & ~compression.CODEC_MASK) | codec
    out = bytearray(batch[:HEADER_BYTES]) + compression.compress(codec, body, level)
    _LENGTH.pack_into(out, 8, len(out) - 12)
    _ATTRIBUTES.pack_into(out, 21, attributes)
    _CRC.pack_into(out, 17, crc32c(bytes(out[21:])))
    return bytes(out)
