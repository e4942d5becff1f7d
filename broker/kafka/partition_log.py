"""One partition's log in its partition directory: Kafka magic v2 record batches, stored
intact (client CRCs and compression untouched) in `00000000000000000000.log`.

The broker assigns base offsets and stamps its leader epoch; both lie outside the
batch's CRC32C (which covers attributes .. end), so the client's CRC stays valid and
consumers verify it end to end. An append is durable (write + fsync) before it is
acknowledged. Opening a log rescans it and truncates a torn or corrupt tail.

Blocking file I/O: the Trio shell calls `append` through a worker thread, one at a time
per partition.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c  # Kafka's batch checksum is CRC32C (Castagnoli), not zlib's CRC32

log = logging.getLogger(__name__)

LOG_FILE = "00000000000000000000.log"
HEADER_BYTES = 61  # up to and including recordsCount
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC_V2 = 2
_OFFSET_LENGTH = struct.Struct(">qi")
_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_LAST_DELTA = struct.Struct(">i")
_COUNT = struct.Struct(">i")
MAX_BATCH_BYTES = 64 * 1024 * 1024


class InvalidBatchError(ValueError):
    """Produced bytes are not valid magic v2 batches; `corrupt` distinguishes a CRC or
    framing error (CORRUPT_MESSAGE) from an unsupported format (INVALID_RECORD)."""

    def __init__(self, message: str, *, corrupt: bool) -> None:
        super().__init__(message)
        self.corrupt = corrupt


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchInfo:
    base_offset: int
    last_offset: int
    leader_epoch: int
    position: int
    size: int


def split_batches(data: bytes) -> list[bytes]:
    """Validate `data` as one or more complete magic v2 batches (framing, magic, CRC32C,
    record count); returns each batch's bytes."""
    batches: list[bytes] = []
    view = memoryview(data)
    position = 0
    while position < len(view):
        if len(view) - position < HEADER_BYTES:
            raise InvalidBatchError("truncated batch header", corrupt=True)
        _, length = _OFFSET_LENGTH.unpack_from(view, position)
        end = position + LOG_OVERHEAD + length
        if length < HEADER_BYTES - LOG_OVERHEAD or end > len(view) or \
                length > MAX_BATCH_BYTES:
            raise InvalidBatchError(f"bad batch length {length}", corrupt=True)
        magic = view[position + 16]
        if magic != MAGIC_V2:
            raise InvalidBatchError(f"magic {magic} batches are not supported", corrupt=False)
        (crc,) = _CRC.unpack_from(view, position + 17)
        if crc32c(view[position + 21:end]) != crc:
            raise InvalidBatchError("batch CRC32C mismatch", corrupt=True)
        (last_delta,) = _LAST_DELTA.unpack_from(view, position + 23)
        (count,) = _COUNT.unpack_from(view, position + 57)
        if last_delta < 0 or count < 0 or count > last_delta + 1:
            raise InvalidBatchError(f"bad record count {count} for last offset delta "
                                    f"{last_delta}", corrupt=True)
        batches.append(bytes(view[position:end]))
        position = end
    if not batches:
        raise InvalidBatchError("no record batch", corrupt=True)
    return batches


def last_offset_delta(batch: bytes | bytearray | memoryview, position: int = 0) -> int:
    return int(_LAST_DELTA.unpack_from(batch, position + 23)[0])


class PartitionLog:
    """Appends and reads; `log_end_offset` is the next offset to assign. The high
    watermark is kept by the caller (it follows the ISR)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOG_FILE
        self._batches: list[BatchInfo] = []
        self._bases: list[int] = []
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset): epoch cache
        self.log_end_offset = 0
        self._size = 0
        self._recover()
        self._file = open(self.path, "ab")  # noqa: SIM115 - closed by close()

    def _recover(self) -> None:
        data = self.path.read_bytes() if self.path.exists() else b""
        position = 0
        view = memoryview(data)
        while position + HEADER_BYTES <= len(view):
            base, length = _OFFSET_LENGTH.unpack_from(view, position)
            end = position + LOG_OVERHEAD + length
            if length < HEADER_BYTES - LOG_OVERHEAD or end > len(view) or \
                    view[position + 16] != MAGIC_V2 or \
                    crc32c(view[position + 21:end]) != _CRC.unpack_from(view, position + 17)[0]:
                break
            (epoch,) = _EPOCH.unpack_from(view, position + 12)
            last = base + last_offset_delta(view, position)
            self._add(BatchInfo(base_offset=base, last_offset=last, leader_epoch=epoch,
                                position=position, size=end - position))
            position = end
        if position < len(data):
            log.warning("truncating the torn tail of a partition log", extra={
                "path": str(self.path), "offset": self.log_end_offset, "position": position,
                "dropped_bytes": len(data) - position})
            with open(self.path, "r+b") as handle:
                handle.truncate(position)
                os.fsync(handle.fileno())
        self._size = position

    def _add(self, info: BatchInfo) -> None:
        self._batches.append(info)
        self._bases.append(info.base_offset)
        self.log_end_offset = info.last_offset + 1
        if not self._epoch_starts or info.leader_epoch > self._epoch_starts[-1][0]:
            self._epoch_starts.append((info.leader_epoch, info.base_offset))

    @property
    def log_start_offset(self) -> int:
        return 0

    def append(self, batches: list[bytes], leader_epoch: int) -> tuple[int, int]:
        """Assign offsets from the log end, stamp `leader_epoch`, write and fsync.
        Returns (base offset of the first batch, last offset)."""
        first = self.log_end_offset
        out = bytearray()
        infos: list[BatchInfo] = []
        next_offset = first
        for batch in batches:
            stamped = bytearray(batch)
            struct.pack_into(">q", stamped, 0, next_offset)
            _EPOCH.pack_into(stamped, 12, leader_epoch)
            last = next_offset + last_offset_delta(stamped)
            infos.append(BatchInfo(base_offset=next_offset, last_offset=last,
                                   leader_epoch=leader_epoch,
                                   position=self._size + len(out), size=len(stamped)))
            out += stamped
            next_offset = last + 1
        self._file.write(out)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._size += len(out)
        for info in infos:
            self._add(info)
        return first, next_offset - 1

    def append_replicated(self, batches: list[bytes]) -> None:
        """A follower's append: offsets and epochs as the leader assigned them."""
        out = bytearray()
        for batch in batches:
            base, length = _OFFSET_LENGTH.unpack_from(batch, 0)
            if base < self.log_end_offset:
                continue
            (epoch,) = _EPOCH.unpack_from(batch, 12)
            self._add(BatchInfo(base_offset=base, last_offset=base + last_offset_delta(batch),
                                leader_epoch=epoch, position=self._size + len(out),
                                size=len(batch)))
            out += batch
        self._file.write(out)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._size += len(out)

    @property
    def last_epoch(self) -> int:
        """The leader epoch of the last batch (-1 for an empty log)."""
        return self._batches[-1].leader_epoch if self._batches else -1

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= `offset` (a follower whose log diverged
        from the new leader's), durably."""
        keep = [b for b in self._batches if b.last_offset < offset]
        if len(keep) == len(self._batches):
            return
        size = keep[-1].position + keep[-1].size if keep else 0
        self._file.flush()
        os.truncate(self.path, size)
        os.fsync(self._file.fileno())
        log.warning("truncated a diverging partition log", extra={
            "path": str(self.path), "from_offset": self.log_end_offset,
            "to_offset": keep[-1].last_offset + 1 if keep else 0})
        self._batches, self._bases, self._epoch_starts = [], [], []
        for info in keep:
            self._add(info)
        self._size = size
        self.log_end_offset = keep[-1].last_offset + 1 if keep else 0

    def read(self, offset: int, max_bytes: int, upper_offset: int) -> bytes:
        """Whole batches holding offsets from `offset` below `upper_offset`, up to
        `max_bytes` (at least one batch, so a large batch is never stuck)."""
        if offset >= upper_offset or not self._batches:
            return b""
        index = max(0, bisect.bisect_right(self._bases, offset) - 1)
        if self._batches[index].last_offset < offset:
            index += 1
        chosen: list[BatchInfo] = []
        total = 0
        for info in self._batches[index:]:
            if info.last_offset >= upper_offset or (chosen and total + info.size > max_bytes):
                break
            chosen.append(info)
            total += info.size
        if not chosen:
            return b""
        with open(self.path, "rb") as handle:
            handle.seek(chosen[0].position)
            return handle.read(total)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, the end offset of that epoch) — OffsetForLeaderEpoch,
        from the epoch cache (O(log epochs)). (-1, -1) when no batch has such an epoch."""
        index = bisect.bisect_right(self._epoch_starts, (epoch, 1 << 63)) - 1
        if index < 0:
            return -1, -1
        found = self._epoch_starts[index][0]
        if index + 1 < len(self._epoch_starts):
            return found, self._epoch_starts[index + 1][1]
        return found, self.log_end_offset

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The first offset of the first batch whose max timestamp is >= `timestamp_ms`
        (batch granularity), or the log end."""
        if not self._batches:
            return self.log_end_offset
        with open(self.path, "rb") as handle:
            for info in self._batches:
                handle.seek(info.position + 35)
                (max_ts,) = struct.unpack(">q", handle.read(8))
                if max_ts >= timestamp_ms:
                    return info.base_offset
        return self.log_end_offset

    def close(self) -> None:
        self._file.close()
