"""Kafka's magic v2 record batch, the few pieces this project writes itself: zigzag varints
and an uncompressed batch of (key, value) records. The broker's group coordinator writes
`__consumer_offsets` with it, `kraft produce` and the ordered producer their batches,
and the tests theirs; the partition log reads batches back
(`broker.kafka.partitions.partition_log`).

Layout (Kafka's DefaultRecordBatch): base offset (8), batch length (4), partition leader
epoch (4), magic (1), CRC32C (4) of everything after it, attributes (2), last offset
delta (4), first and max timestamps (8 + 8), producer id (8), producer epoch (2), base
sequence (4), record count (4), then the records, each a varint length and attributes,
timestamp delta, offset delta, key, value and header count.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c  # Kafka's batch checksum is CRC32C (Castagnoli), not zlib's CRC32

_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. record count


def encode_varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def read_varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """The zigzag varint at `position`: (value, next position). ValueError when it runs
    past the data or past 64 bits."""
    shift = result = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7


def encode_batch(records: Sequence[tuple[bytes | None, bytes | None]], *,
                 timestamps: Sequence[int], producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, partition_leader_epoch: int = -1,
                 headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    """One uncompressed batch of (key, value) records (None: a null key or value, a
    tombstone's), record i at `timestamps[i]`, each with `headers` ((name, value) pairs);
    base offset 0, which the leader's log stamps."""
    if not records or len(timestamps) != len(records):
        raise ValueError("a batch needs at least one record, and one timestamp per record")
    first = timestamps[0]
    body = bytearray()
    for delta, ((key, value), stamp) in enumerate(zip(records, timestamps, strict=True)):
        record = bytearray(b"\x00")  # attributes
        record += encode_varint(stamp - first) + encode_varint(delta)
        record += encode_varint(-1) if key is None else encode_varint(len(key)) + key
        record += encode_varint(-1) if value is None else encode_varint(len(value)) + value
        record += encode_varint(len(headers))
        for name, header in headers:
            encoded = name.encode()
            record += encode_varint(len(encoded)) + encoded
            record += encode_varint(-1) if header is None else \
                encode_varint(len(header)) + header
        body += encode_varint(len(record)) + record
    after_crc = _AFTER_CRC.pack(0, len(records) - 1, first, max(timestamps), producer_id,
                                producer_epoch, base_sequence, len(records)) + bytes(body)
    rest = struct.pack(">ibI", partition_leader_epoch, 2, crc32c(after_crc)) + after_crc
    return _BATCH_HEAD.pack(0, len(rest)) + rest
