"""A topic's record policy on produce (pure; the broker's wall clock passed in), as Kafka's
LogValidator applies it (metadata/topic_configs.py has the keys):

- `max.message.bytes`: a batch larger than it -> MESSAGE_TOO_LARGE;
- `message.timestamp.type=CreateTime` (the default): each record's timestamp must lie
  within `message.timestamp.before.max.ms` behind and `message.timestamp.after.max.ms`
  ahead of the broker's clock (the deprecated `message.timestamp.difference.max.ms`
  bounds both), else INVALID_TIMESTAMP. Records are read in every codec; a batch whose
  body does not decode is judged by its header (its first record's timestamp and its
  maximum);
- `compression.type`: a batch in another codec than the topic's is stored re-compressed
  in it (`in_topic_codec`; `producer`, the default, stores every batch as sent);
- `message.timestamp.type=LogAppendTime`: the leader stamps each batch with its append
  time (`stamp_log_append_time`: the batch's timestamp type and maximum timestamp, as
  Kafka's brokers set them; the records keep theirs), and no timestamp is refused.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence

from crc32c import crc32c

from broker.kafka.partitions.batch_rewrite import cleaner_batch, recompressed
from broker.kafka.partitions.compression import BY_NAME, level_for
from metadata.topic_configs import (
    COMPRESSION_TYPE,
    LOG_APPEND_TIME,
    LONG_MAX,
    MAX_MESSAGE_BYTES,
    TIMESTAMP_AFTER_MAX_MS,
    TIMESTAMP_BEFORE_MAX_MS,
    TIMESTAMP_DIFFERENCE_MAX_MS,
    TIMESTAMP_TYPE,
    effective,
)
from raft.common.errors import ErrorCode

LOG_APPEND_TIME_FLAG = 0x08  # the batch attributes' timestamp-type bit
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")


Configs = Mapping[str, str] | Iterable[tuple[str, str]]  # a topic's, as set


def uses_log_append_time(configs: Configs) -> bool:
    return effective(configs, TIMESTAMP_TYPE) == LOG_APPEND_TIME


def in_topic_codec(configs: Configs, batches: list[bytes]) -> list[bytes]:
    """The batches as the topic's `compression.type` stores them."""
    configs = dict(configs)
    codec = BY_NAME.get(effective(configs, COMPRESSION_TYPE))
    if codec is None:  # producer: as sent
        return batches
    level = level_for(codec, configs)
    return [recompressed(batch, codec, level) for batch in batches]


def refusal(configs: Configs, batches: Sequence[bytes], now_ms: int
            ) -> tuple[ErrorCode, str] | None:
    """Why the topic's policy refuses a client's batches, if it does."""
    configs = dict(configs)
    limit = int(effective(configs, MAX_MESSAGE_BYTES))
    for batch in batches:
        if len(batch) > limit:
            return (ErrorCode.MESSAGE_TOO_LARGE,
                    f"a batch of {len(batch)} bytes is larger than max.message.bytes={limit}")
    if uses_log_append_time(configs):
        return None
    difference = int(effective(configs, TIMESTAMP_DIFFERENCE_MAX_MS))
    before = min(int(effective(configs, TIMESTAMP_BEFORE_MAX_MS)), difference)
    after = min(int(effective(configs, TIMESTAMP_AFTER_MAX_MS)), difference)
    if before == after == LONG_MAX:  # no bound set (the default): decode nothing
        return None
    low, high = now_ms - before, now_ms + after
    for batch in batches:
        for timestamp in _timestamps(batch):
            if not low <= timestamp <= high:
                return (ErrorCode.INVALID_TIMESTAMP,
                        f"timestamp {timestamp} is out of range: the broker accepts "
                        f"[{low}, {high}] (message.timestamp.before.max.ms={before}, "
                        f"message.timestamp.after.max.ms={after})")
    return None


def _timestamps(batch: bytes) -> Iterable[int]:
    records = cleaner_batch(batch).records
    if records is not None:
        return (record.timestamp for record in records)
    return (_TIMESTAMP.unpack_from(batch, 27)[0], _TIMESTAMP.unpack_from(batch, 35)[0])


def stamp_log_append_time(batch: bytes, now_ms: int) -> bytes:
    """`batch` marked as LogAppendTime with `now_ms` as its maximum timestamp."""
    out = bytearray(batch)
    (attributes,) = _ATTRIBUTES.unpack_from(out, 21)
    _ATTRIBUTES.pack_into(out, 21, attributes | LOG_APPEND_TIME_FLAG)
    _TIMESTAMP.pack_into(out, 35, now_ms)
    _CRC.pack_into(out, 17, crc32c(bytes(out[21:])))
    return bytes(out)
