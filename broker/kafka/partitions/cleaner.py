"""Log compaction's decisions (pure: the clock is passed in), as Kafka's log cleaner.

A compacted partition log keeps, below the point it was cleaned to, the latest record of
each key. The cleaner looks only at the segments below the active one, below the high
watermark (an uncommitted record may be truncated away, and must never have removed the
committed one it superseded) and whose records are all `min.compaction.lag.ms` old
(`cleanable_end`). A log is cleaned when its dirty part (the bytes from the offset the
last cleaning reached) is at least `min.cleanable.dirty.ratio` of those segments, or
when its oldest dirty batch is older than `max.compaction.lag.ms`, or when the delete
horizon of a tombstone it keeps has passed (Kafka's KIP-534: else a log that stopped
receiving writes would keep its tombstones for ever).

Cleaning (`clean`) keeps a record when no later record of the cleaned range has its key
(records without a key, and batches this broker cannot decode, are kept). A tombstone
(null value) that survives a cleaning gets a delete horizon, `now + delete.retention.ms`,
stored in its batch as Kafka's does (attribute bit 0x40, the horizon in the base
timestamp); a cleaning at or past the horizon removes it. Offsets never move: a batch
keeps its base and last offset whatever records it loses (gaps are legal), and a batch
that loses every record goes, unless it is its idempotent producer's last batch in the
log, whose header (producer id, epoch, sequences) is kept as an empty batch so the
producer's next sequence is still checked after a restart rebuilds the state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from broker.kafka.partitions.segments import NO_TIMESTAMP, SegmentStat

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSettings:
    """The topic's compaction configs (Kafka's defaults)."""
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86_400_000


@dataclass(frozen=True, slots=True)
class KeyedRecord:
    offset: int
    key: bytes | None
    timestamp: int
    tombstone: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanerBatch:
    """One stored batch as the cleaner sees it; `records` None when it cannot be decoded
    here (a codec without a decoder, a control batch): kept whole."""
    base_offset: int
    last_offset: int
    producer_id: int
    delete_horizon_ms: int = NO_TIMESTAMP  # NO_TIMESTAMP: none set yet
    records: tuple[KeyedRecord, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchPlan:
    """What becomes of one batch: dropped, or kept with the records at `offsets` and
    `delete_horizon_ms` (NO_TIMESTAMP: none); `tombstones` when it keeps any."""
    base_offset: int
    dropped: bool
    offsets: tuple[int, ...]
    delete_horizon_ms: int
    tombstones: bool = False

    def changes(self, batch: CleanerBatch) -> bool:
        return self.dropped or batch.records is not None and (
            len(self.offsets) != len(batch.records)
            or self.delete_horizon_ms != batch.delete_horizon_ms)


def cleanable_end(segments: Sequence[SegmentStat], *, first_dirty: int, high_watermark: int,
                  now_ms: int, settings: CompactionSettings,
                  delete_horizon_ms: int = NO_TIMESTAMP) -> int | None:
    """The offset to clean the log below (a segment boundary), or None when the log is
    not cleanable now. `segments` are the log's, oldest first, the last one active;
    `first_dirty` is where the last cleaning stopped (the log start when none did);
    `delete_horizon_ms` the earliest horizon of the tombstones it left (`next_horizon`)."""
    lag_limit = now_ms - settings.min_compaction_lag_ms
    cleanable: list[SegmentStat] = []
    for segment in segments[:-1]:
        if segment.end_offset > high_watermark or segment.max_timestamp > lag_limit:
            break
        cleanable.append(segment)
    dirty = [segment for segment in cleanable if segment.end_offset > first_dirty]
    total = sum(segment.size for segment in cleanable)
    if not cleanable or total == 0:
        return None
    if delete_horizon_ms != NO_TIMESTAMP and now_ms >= delete_horizon_ms:
        return cleanable[-1].end_offset
    if not dirty:
        return None
    ratio = sum(segment.size for segment in dirty) / total
    oldest = dirty[0].first_timestamp
    overdue = oldest != NO_TIMESTAMP and now_ms - oldest > settings.max_compaction_lag_ms
    if ratio >= settings.min_cleanable_dirty_ratio or overdue:
        return cleanable[-1].end_offset
    return None


def clean(batches: Sequence[CleanerBatch], *, now_ms: int, delete_retention_ms: int,
          producer_last_offsets: Mapping[int, int]) -> list[BatchPlan]:
    """The plan for every batch of the cleaned range (`batches`, in offset order);
    `producer_last_offsets` maps each producer id to the last offset of its last batch
    in the whole log."""
    latest: dict[bytes, int] = {}
    for batch in batches:
        for record in batch.records or ():
            if record.key is not None:
                latest[record.key] = record.offset
    plans = []
    for batch in batches:
        if batch.records is None:
            plans.append(BatchPlan(base_offset=batch.base_offset, dropped=False,
                                   offsets=(), delete_horizon_ms=batch.delete_horizon_ms))
            continue
        expired = batch.delete_horizon_ms != NO_TIMESTAMP and now_ms >= batch.delete_horizon_ms
        kept = [record for record in batch.records
                if record.key is None or latest[record.key] == record.offset
                and not (record.tombstone and expired)]
        horizon = batch.delete_horizon_ms
        if horizon == NO_TIMESTAMP and any(record.tombstone for record in kept):
            horizon = now_ms + delete_retention_ms
        producers_last = batch.producer_id >= 0 and \
            producer_last_offsets.get(batch.producer_id) == batch.last_offset
        plans.append(BatchPlan(base_offset=batch.base_offset,
                               dropped=not kept and not producers_last,
                               offsets=tuple(record.offset for record in kept),
                               delete_horizon_ms=horizon,
                               tombstones=any(record.tombstone for record in kept)))
    return plans


def next_horizon(plans: Sequence[BatchPlan]) -> int:
    """The earliest delete horizon among the batches that keep tombstones (NO_TIMESTAMP:
    none): the cleaning that removes them is due then."""
    return min((plan.delete_horizon_ms for plan in plans if plan.tombstones),
               default=NO_TIMESTAMP)


def throttle_delay(bytes_done: int, elapsed_s: float, bytes_per_second: float) -> float:
    """How long to pause so `bytes_done` in `elapsed_s` stays within the rate
    (`log.cleaner.io.max.bytes.per.second`)."""
    return max(0.0, bytes_done / bytes_per_second - elapsed_s)
