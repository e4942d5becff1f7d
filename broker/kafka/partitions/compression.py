"""The record-batch codecs of Kafka's magic v2 format (pure: bytes in, bytes out), so the
broker reads every batch a client may send (the cleaner, timestamp look-ups, a compacted
topic's key check) and stores batches in a topic's `compression.type`, as Kafka's
LogValidator does.

Codec ids are the low three bits of the batch attributes: 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. Kafka's framings: gzip a gzip stream; snappy Java's xerial framing (a
16-byte header, then length-prefixed raw blocks; librdkafka reads and may write plain raw
snappy, which is read too); lz4 an LZ4 frame (KIP-57); zstd a zstd frame. cramjam
(Rust's codecs) does the snappy, lz4 and zstd work; zlib the gzip.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_MASK = 0x07
BY_NAME = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with 1
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size
_LENGTH = struct.Struct(">i")
_ZLIB_GZIP = 16 + zlib.MAX_WBITS
# the level keys of compression.type (metadata/topic_configs.py), and Kafka's defaults
LEVEL_KEYS = {GZIP: ("compression.gzip.level", -1), LZ4: ("compression.lz4.level", 9),
              ZSTD: ("compression.zstd.level", 3)}


class CompressionError(ValueError):
    """A body that does not decode with its codec, or a codec id Kafka has not."""


def decompress(codec: int, body: bytes) -> bytes:
    try:
        if codec == NONE:
            return bytes(body)
        if codec == GZIP:
            return zlib.decompress(body, _ZLIB_GZIP)
        if codec == SNAPPY:
            return _snappy_decompress(bytes(body))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(bytes(body)))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(body)))
    except (zlib.error, cramjam.DecompressionError, struct.error) as exc:
        raise CompressionError(f"a {name(codec)} body does not decode: {exc}") from None
    raise CompressionError(f"unknown compression codec {codec}")


def compress(codec: int, body: bytes, level: int | None = None) -> bytes:
    """`body` in `codec`, at `level` where the codec has levels (None: Kafka's default)."""
    if codec == NONE:
        return bytes(body)
    if codec == GZIP:
        compressor = zlib.compressobj(-1 if level is None else level, wbits=_ZLIB_GZIP)
        return compressor.compress(bytes(body)) + compressor.flush()
    if codec == SNAPPY:
        blocks = [bytes(body[i:i + _XERIAL_BLOCK])
                  for i in range(0, len(body), _XERIAL_BLOCK)]
        out = bytearray(_XERIAL_HEADER)
        for block in blocks:
            compressed = bytes(cramjam.snappy.compress_raw(block))
            out += _LENGTH.pack(len(compressed)) + compressed
        return bytes(out)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(bytes(body), level=level))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(bytes(body), level=3 if level is None else level))
    raise CompressionError(f"unknown compression codec {codec}")


def level_for(codec: int, configs: Mapping[str, str]) -> int | None:
    """The topic's level for `codec` (None: the codec has no level)."""
    if codec not in LEVEL_KEYS:
        return None
    key, default = LEVEL_KEYS[codec]
    return int(configs.get(key, default))


def name(codec: int) -> str:
    return next((n for n, c in BY_NAME.items() if c == codec), f"codec {codec}")


def _snappy_decompress(body: bytes) -> bytes:
    if not body.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(body))
    out = bytearray()
    position = len(_XERIAL_HEADER)
    while position < len(body):
        (length,) = _LENGTH.unpack_from(body, position)
        position += _LENGTH.size
        if length < 0 or position + length > len(body):
            raise CompressionError("a snappy (xerial) block runs past the batch")
        out += bytes(cramjam.snappy.decompress_raw(body[position:position + length]))
        position += length
    return bytes(out)
