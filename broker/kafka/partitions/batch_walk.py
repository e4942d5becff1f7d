"""The batches of a partition segment's bytes, by the rule a broker opens them with.

`whole_batches` yields the span of each whole magic v2 batch whose CRC32C holds, from
the segment's start up to the first one that is not: a torn or corrupt tail, which a
broker opening the segment cuts (`partition_log.PartitionLog._recover_segment`). The
replay (`tools/replay/partition_logs.py`) and the chaos checker (`tools/chaos/final.py`)
read a stopped broker's segments by the same rule.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from crc32c import crc32c  # Kafka's batch checksum is CRC32C (Castagnoli), not zlib's CRC32

HEADER_BYTES = 61  # up to and including recordsCount
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC_V2 = 2
_LENGTH = struct.Struct(">i")  # batchLength, at byte 8
_CRC = struct.Struct(">I")  # at byte 17, over the bytes from 21 to the batch's end


def whole_batches(data: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """(position, end) of each whole magic v2 batch of `data` (a segment's bytes) whose
    CRC32C holds, up to the first that is not; the last `end` is where a broker cuts."""
    position = 0
    while position + HEADER_BYTES <= len(data):
        (length,) = _LENGTH.unpack_from(data, position + 8)
        end = position + LOG_OVERHEAD + length
        if length < HEADER_BYTES - LOG_OVERHEAD or end > len(data) or \
                data[position + 16] != MAGIC_V2 or \
                crc32c(data[position + 21:end]) != _CRC.unpack_from(data, position + 17)[0]:
            return
        yield position, end
        position = end
