"""Segments of a partition log: where a batch goes and which file holds an offset (pure).

A partition log is a run of segment files named as Kafka's, `<base offset, 20 digits>.log`,
each holding the batches from its base offset up to the next segment's. Only the last
(active) segment is appended to. A new segment starts (rolls) when the batches would
take the active one past `segment.bytes`, or when its first batch was written
`segment.ms` ago (by the broker's clock, as Kafka's for batches without timestamps: a
producer's timestamps may be years old, and must not roll a segment per append); an
empty segment never rolls, so a batch larger than `segment.bytes` still gets stored,
alone in its segment.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from metadata.topic_configs import RETENTION_BYTES, RETENTION_MS, SEGMENT_MS

SEGMENT_SUFFIX = ".log"
NO_TIMESTAMP = -1
MAX_RELATIVE_OFFSET = 2**31 - 1  # the indexes hold offsets as int32 past the base
INDEX_INTERVAL_BYTES = 4096  # Kafka's index.interval.bytes (broker.kafka.partitions.segment_index)


WEEK_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDefaults:
    """The broker's `log.retention.*` and `log.roll.*` (Kafka's defaults: 7 days, no
    size limit, 7 days): a topic's `retention.ms`, `retention.bytes` and `segment.ms`
    when it sets none."""
    retention_ms: int = WEEK_MS
    retention_bytes: int = -1
    segment_ms: int = WEEK_MS


def topic_defaults(defaults: LogDefaults) -> dict[str, str]:
    """The topic configs the broker's `defaults` stand for, by key."""
    return {RETENTION_MS: str(defaults.retention_ms),
            RETENTION_BYTES: str(defaults.retention_bytes), SEGMENT_MS: str(defaults.segment_ms)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RollLimits:
    """`segment.bytes` and `segment.ms` of the topic (Kafka's defaults: 1 GiB, 7 days),
    and the bytes between two index entries."""
    segment_bytes: int = 1 << 30
    segment_ms: int = WEEK_MS
    index_interval_bytes: int = INDEX_INTERVAL_BYTES


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def segment_bases(names: Iterable[str]) -> list[int]:
    """The base offsets of the segment files among `names` (a directory listing),
    ascending; other files (snapshots, partition.metadata) are ignored."""
    bases = []
    for name in names:
        stem = name[:-len(SEGMENT_SUFFIX)]
        if name.endswith(SEGMENT_SUFFIX) and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def should_roll(*, segment_bytes_used: int, append_bytes: int, first_write_ms: int,
                now_ms: int, limits: RollLimits, relative_last_offset: int = 0) -> bool:
    """Whether an append of `append_bytes` whose last offset is `relative_last_offset`
    past the active segment's base starts a new segment rather than going into the
    active one, which holds `segment_bytes_used` bytes and got its first batch at
    `first_write_ms` (NO_TIMESTAMP when unknown). As Kafka's, an offset the segment's
    indexes cannot hold (an int32 past its base) rolls too; in an empty segment every
    batch's fits (a batch spans at most an int32 of offsets)."""
    if segment_bytes_used == 0:
        return False
    if segment_bytes_used + append_bytes > limits.segment_bytes or \
            relative_last_offset > MAX_RELATIVE_OFFSET:
        return True
    return first_write_ms != NO_TIMESTAMP and now_ms - first_write_ms >= limits.segment_ms


def segment_for(bases: Sequence[int], offset: int) -> int:
    """The index of the segment that holds `offset` among segments starting at the
    ascending `bases`: the last one starting at or below it (the first for an offset
    below every base)."""
    return max(0, bisect.bisect_right(bases, offset) - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentStat:
    """What retention and compaction look at in one segment: its offsets [base, end),
    its size, its records' largest timestamp and its first batch's (NO_TIMESTAMP when
    it has none)."""
    base_offset: int
    end_offset: int
    size: int
    max_timestamp: int
    first_timestamp: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """`retention.ms` and `retention.bytes` of the topic (-1: unlimited)."""
    retention_ms: int = -1
    retention_bytes: int = -1


def retention_start(segments: Sequence[SegmentStat], *, log_start: int, high_watermark: int,
                    now_ms: int, retention: Retention) -> int:
    """The log start after retention, as Kafka's `deleteOldSegments`: the oldest segments
    go while their records are all `retention.ms` old or the log without them still
    holds `retention.bytes`; never one holding an offset at or above the high watermark.
    The active (last) segment goes too when it qualifies and holds bytes (Kafka rolls a
    new one first): the start is then the log end, the log empty, as a partition marked
    for deletion must become to be removed. The start never moves back."""
    total = sum(segment.size for segment in segments)
    start = log_start
    for index, segment in enumerate(segments):
        if index == len(segments) - 1 and segment.size == 0:
            break
        expired = retention.retention_ms >= 0 and \
            segment.max_timestamp != NO_TIMESTAMP and \
            now_ms - segment.max_timestamp > retention.retention_ms
        oversize = retention.retention_bytes >= 0 and \
            total - segment.size >= retention.retention_bytes
        if segment.end_offset > high_watermark or not (expired or oversize):
            break
        total -= segment.size
        start = max(start, segment.end_offset)
    return start
