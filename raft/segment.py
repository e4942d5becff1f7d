"""On-disk batch format, shared by the log, `kraft dump-log` and the Spark replay.

A segment file `<base offset, 20 digits>.log` is a run of batches, each a header then its
payload. Two headers exist; the top bit of the count field says which (`TIMED_FLAG`):

    untimed (24 bytes, big-endian)   base_offset i64 | epoch i32 | record_count i32
                                     | payload_length i32 | crc u32
    timed (32 bytes, big-endian)     base_offset i64 | epoch i32 | record_count u32 with
                                     TIMED_FLAG set | payload_length i32
                                     | append_time_ms i64 | crc u32
    payload                          msgpack array of bin, one bin per record

The timed header carries the leader's time (ms) when it created the batch
(`Batch.append_time_ms`): the `now_ms` its core was given, which a node reads from its
clock (`RaftNode.now_ms`: the wall clock read at start, advanced monotonically).
Followers store it unchanged.

Format change: logs written before batches were timed hold untimed batches only, and
they read as before, each batch's time unknown (None). A batch whose time is unknown (it
came from such a log) is still written untimed, byte for byte as before, so its CRC is
the same on every replica; a log may mix both headers. The code before the change sees a
timed batch's count as negative and refuses it as corrupt: it never misreads one.

`crc` is CRC-32 (zlib) over every header byte before it and the payload, so a flipped bit
anywhere in a batch, its time included, is caught. Reading stops cleanly at a torn tail
(a partial header or payload at the very end); a batch that fails its CRC or decode is a
`CorruptBatchError` naming the file and byte position, and the caller decides whether that
is a torn tail.
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

PREFIX = struct.Struct(">qiIi")  # base_offset, epoch, count (and TIMED_FLAG), length
_TIMED_PREFIX = struct.Struct(">qiIiq")  # ... and append_time_ms
_CRC = struct.Struct(">I")
_TIME_AND_CRC = struct.Struct(">qI")
_unpack_prefix, _unpack_crc = PREFIX.unpack_from, _CRC.unpack_from
_unpack_time_and_crc = _TIME_AND_CRC.unpack_from
TIMED_FLAG = 1 << 31
HEADER_BYTES = PREFIX.size + _CRC.size  # an untimed header
TIMED_HEADER_BYTES = PREFIX.size + _TIME_AND_CRC.size
SEGMENT_SUFFIX = ".log"
# Batch(base_offset, epoch, records, append_time_ms) without its __init__: a third of the
# cost, for a batch decoded from every segment read and encoded for every append
# (raft.common.slots)
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
    append_time_ms = batch.append_time_ms
    if append_time_ms is None:
        unchecked = PREFIX.pack(batch.base_offset, batch.epoch, len(records), len(payload))
    else:
        unchecked = _TIMED_PREFIX.pack(batch.base_offset, batch.epoch,
                                       len(records) | TIMED_FLAG, len(payload), append_time_ms)
    crc = zlib.crc32(payload, zlib.crc32(unchecked))
    return unchecked + _CRC.pack(crc) + payload


# (base_offset, epoch, record_count, append_time_ms, crc, payload start, batch end)
CheckedHeader = tuple[int, int, int, int | None, int, int, int]


def checked_header(view: bytes | memoryview, position: int, path: str) -> CheckedHeader | None:
    """The header of the batch at `position`, untimed or timed, once its CRC holds; None
    when the bytes end inside the batch (a torn tail: the caller checks whether it was
    really the tail); CorruptBatchError for a negative length or a CRC mismatch. A plain
    tuple: it runs for every batch read."""
    size = len(view)
    if position + HEADER_BYTES > size:
        return None
    base_offset, epoch, count, length = _unpack_prefix(view, position)
    if count & TIMED_FLAG:
        start = position + TIMED_HEADER_BYTES
        if start > size:
            return None
        append_time_ms, crc = _unpack_time_and_crc(view, position + PREFIX.size)
        count ^= TIMED_FLAG
    else:
        start = position + HEADER_BYTES
        append_time_ms = None
        crc, = _unpack_crc(view, position + PREFIX.size)
    if length < 0:
        raise CorruptBatchError(path, position, f"negative length {length}")
    end = start + length
    if end > size:
        return None
    actual = zlib.crc32(view[start:end], zlib.crc32(view[position:start - _CRC.size]))
    if actual != crc:
        raise CorruptBatchError(path, position,
                                f"CRC mismatch (stored {crc:#010x}, computed {actual:#010x})")
    return base_offset, epoch, count, append_time_ms, crc, start, end


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
    while (header := checked_header(view, position, path)) is not None:
        base_offset, epoch, count, append_time_ms, crc, start, end = header
        try:
            records = msgpack.unpackb(view[start:end], raw=False, use_list=True)
        except Exception as exc:  # msgpack raises several unrelated types
            raise CorruptBatchError(path, position, f"undecodable payload: {exc}") from None
        if not isinstance(records, list) or len(records) != count or \
                not all(isinstance(r, bytes) for r in records):
            raise CorruptBatchError(path, position, "payload is not the declared records")
        yield StoredBatch(new_batch(base_offset, epoch, tuple(records), append_time_ms),
                          position, end - position, crc)
        position = end


def valid_prefix_length(data: bytes | memoryview) -> int:
    """Bytes taken by the whole batches at the start of `data` (what survives a torn tail)."""
    end = 0
    for stored in iter_batches(data):
        end = stored.position + stored.size
    return end
