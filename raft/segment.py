"""On-disk batch format, shared by the log, `kraft dump-log` and the Spark replay.

A segment file `<base offset, 20 digits>.log` is a run of batches, each:

    header (24 bytes, big-endian)    base_offset i64 | epoch i32 | record_count i32
                                     | payload_length i32 | crc u32
    payload                          msgpack array of bin, one bin per record

`crc` is CRC-32 (zlib) over the first 20 header bytes and the payload, so a flipped bit
anywhere in a batch is caught. Reading stops cleanly at a torn tail (a partial header or
payload at the very end); a batch that fails its CRC or decode is a `CorruptBatchError`
naming the file and byte position, and the caller decides whether that is a torn tail.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack

from raft.common.slots import positional_constructor
from raft.types import Batch

HEADER = struct.Struct(">qiiiI")
HEADER_BYTES = HEADER.size
_UNCHECKED = struct.Struct(">qiii")
_CRC = struct.Struct(">I")
SEGMENT_SUFFIX = ".log"
# Batch(base_offset, epoch, records) without its __init__: a third of the cost, for a
# batch decoded from every segment read and encoded for every append (raft.common.slots)
new_batch = positional_constructor(Batch)


class CorruptBatchError(Exception):
    """A batch whose bytes are wrong; `path` and `position` say where."""

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt batch at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def segment_base_offset(path: Path) -> int:
    return int(path.name[: -len(SEGMENT_SUFFIX)])


def list_segments(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob(f"*{SEGMENT_SUFFIX}")
                  if p.name[: -len(SEGMENT_SUFFIX)].isdigit())


def encode_batch(batch: Batch) -> bytes:
    records = batch.records
    # a tuple packs as the same msgpack array as a list, without the copy
    payload: bytes = msgpack.packb(records, use_bin_type=True)
    unchecked = _UNCHECKED.pack(batch.base_offset, batch.epoch, len(records), len(payload))
    crc = zlib.crc32(payload, zlib.crc32(unchecked))
    return unchecked + _CRC.pack(crc) + payload


@dataclass(frozen=True, slots=True)
class StoredBatch:
    batch: Batch
    position: int  # byte position of the header in its file
    size: int  # header + payload
    crc: int


def iter_batches(data: bytes | memoryview, path: str = "<memory>") -> Iterator[StoredBatch]:
    """Decode the batches of one segment's bytes. Stops at a torn tail (incomplete last
    batch); raises CorruptBatchError for a complete batch with a bad CRC or payload."""
    view = memoryview(data)
    position = 0
    while position + HEADER_BYTES <= len(view):
        base_offset, epoch, count, length, crc = HEADER.unpack_from(view, position)
        if length < 0 or count < 0:
            raise CorruptBatchError(path, position, f"negative length {length} or count {count}")
        end = position + HEADER_BYTES + length
        if end > len(view):
            return  # torn tail: the caller checks whether it was really the tail
        payload = view[position + HEADER_BYTES:end]
        actual = zlib.crc32(payload, zlib.crc32(view[position:position + 20]))
        if actual != crc:
            raise CorruptBatchError(path, position,
                                    f"CRC mismatch (stored {crc:#010x}, computed {actual:#010x})")
        try:
            records = msgpack.unpackb(payload, raw=False, use_list=True)
        except Exception as exc:  # msgpack raises several unrelated types
            raise CorruptBatchError(path, position, f"undecodable payload: {exc}") from None
        if not isinstance(records, list) or len(records) != count or \
                not all(isinstance(r, bytes) for r in records):
            raise CorruptBatchError(path, position, "payload is not the declared records")
        yield StoredBatch(new_batch(base_offset, epoch, tuple(records)), position,
                          end - position, crc)
        position = end


def valid_prefix_length(data: bytes | memoryview) -> int:
    """Bytes taken by the whole batches at the start of `data` (what survives a torn tail)."""
    end = 0
    for stored in iter_batches(data):
        end = stored.position + stored.size
    return end
