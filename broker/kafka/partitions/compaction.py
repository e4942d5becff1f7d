"""Log compaction: every `log.cleaner.backoff.ms` each replica (leader or follower, as in
Kafka each cleans its own copy) of a topic whose `cleanup.policy` holds `compact` cleans
its partition log when broker.kafka.partitions.cleaner says it is cleanable.

The work runs in a worker thread, off the request path and without the partition's
lock: it reads the segments below the cleanable end (immutable: only the active segment
is appended to) twice, once for the keys and once to write each changed segment's
cleaned copy (broker.kafka.partitions.segment_swap, steps one and two), paced to
`log.cleaner.io.max.bytes.per.second` of reads and writes together. Then, under the
lock, each copy replaces its segment if that segment is still as it was read (retention
may have deleted it meanwhile: the copy is dropped), and the in-memory index follows.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio

from broker.kafka.partitions.batch_rewrite import cleaner_batch, rewrite
from broker.kafka.partitions.cleaner import (
    CompactionSettings,
    clean,
    cleanable_end,
    next_horizon,
    throttle_delay,
)
from broker.kafka.partitions.partition_log import BatchInfo, PartitionLog, split_batches
from broker.kafka.partitions.producer_state import BatchHeader, read_header
from broker.kafka.partitions.segment_swap import promote, swap_path, write_cleaned
from broker.kafka.partitions.segments import SegmentStat, segment_name
from broker.kafka.replication.replica import PartitionState, ReplicaManager
from metadata.image import TopicImage
from metadata.topic_configs import (
    DELETE_RETENTION_MS,
    MAX_COMPACTION_LAG_MS,
    MIN_CLEANABLE_DIRTY_RATIO,
    MIN_COMPACTION_LAG_MS,
    cleanup_policies,
    effective,
)
from raft.common.durable import fsync_dir

log = logging.getLogger(__name__)

_EPOCH = struct.Struct(">i")


def topic_compaction(topic: TopicImage) -> CompactionSettings | None:
    """The topic's compaction settings; None when its cleanup.policy has no `compact`."""
    if "compact" not in cleanup_policies(topic.configs):
        return None
    return CompactionSettings(
        min_cleanable_dirty_ratio=float(effective(topic.configs, MIN_CLEANABLE_DIRTY_RATIO)),
        min_compaction_lag_ms=int(effective(topic.configs, MIN_COMPACTION_LAG_MS)),
        max_compaction_lag_ms=int(effective(topic.configs, MAX_COMPACTION_LAG_MS)),
        delete_retention_ms=int(effective(topic.configs, DELETE_RETENTION_MS)))


class Pacer:
    """Sleeps the cleaner's thread so its I/O stays within `bytes_per_second`."""

    def __init__(self, bytes_per_second: float) -> None:
        self.bytes_per_second = bytes_per_second
        self._started = time.monotonic()
        self._done = 0

    def __call__(self, size: int) -> None:
        self._done += size
        time.sleep(throttle_delay(self._done, time.monotonic() - self._started,
                                  self.bytes_per_second))


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanedSegment:
    """A segment's cleaned copy, complete in its `.swap`, and its batch index."""
    base_offset: int
    original_size: int
    batches: list[tuple[BatchInfo, BatchHeader]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Cleaning:
    """A cleaning's changed segments and the earliest delete horizon it left."""
    segments: list[CleanedSegment]
    delete_horizon_ms: int


def _stored_batches(directory: Path, segment: SegmentStat,
                    pace: Callable[[int], None]) -> list[bytes]:
    with open(directory / segment_name(segment.base_offset), "rb") as handle:
        data = handle.read(segment.size)
    pace(len(data))
    return split_batches(data) if data else []


def prepare(directory: Path, segments: list[SegmentStat], *, now_ms: int,
            delete_retention_ms: int, producer_last_offsets: Mapping[int, int],
            pace: Callable[[int], None]) -> Cleaning:
    """Clean `segments` (below the active one): each changed segment's copy is written
    and made a swap. Blocking I/O: a worker thread's."""
    read = [[cleaner_batch(batch) for batch in _stored_batches(directory, segment, pace)]
            for segment in segments]
    every_plan = clean([batch for batches in read for batch in batches], now_ms=now_ms,
                       delete_retention_ms=delete_retention_ms,
                       producer_last_offsets=producer_last_offsets)
    plans = iter(every_plan)
    cleaned = []
    for segment, decoded in zip(segments, read, strict=True):
        segment_plans = [next(plans) for _ in decoded]
        if not any(plan.changes(batch) for batch, plan in zip(decoded, segment_plans,
                                                              strict=True)):
            continue
        data = bytearray()
        index: list[tuple[BatchInfo, BatchHeader]] = []
        for stored, batch, plan in zip(_stored_batches(directory, segment, pace), decoded,
                                       segment_plans, strict=True):
            if plan.dropped:
                continue
            kept = rewrite(stored, plan) if plan.changes(batch) else stored
            header = read_header(kept)
            index.append((BatchInfo(base_offset=batch.base_offset,
                                    last_offset=batch.last_offset,
                                    leader_epoch=_EPOCH.unpack_from(kept, 12)[0],
                                    position=len(data), size=len(kept),
                                    max_timestamp=header.max_timestamp,
                                    segment=segment.base_offset), header))
            data += kept
        write_cleaned(directory, segment.base_offset, bytes(data))
        pace(len(data))
        promote(directory, segment.base_offset)
        cleaned.append(CleanedSegment(base_offset=segment.base_offset,
                                      original_size=segment.size, batches=index))
    return Cleaning(segments=cleaned, delete_horizon_ms=next_horizon(every_plan))


def cleanable_segments(plog: PartitionLog, *, high_watermark: int, now_ms: int,
                       settings: CompactionSettings) -> tuple[int, list[SegmentStat]] | None:
    """(the offset to clean below, the segments below it) when `plog` is cleanable now."""
    stats = plog.segment_stats()
    end = cleanable_end(stats, first_dirty=max(plog.first_dirty_offset,
                                               plog.log_start_offset),
                        high_watermark=high_watermark, now_ms=now_ms, settings=settings,
                        delete_horizon_ms=plog.delete_horizon_ms)
    if end is None:
        return None
    return end, [segment for segment in stats if segment.end_offset <= end]


def install_all(plog: PartitionLog, cleaning: Cleaning, end: int) -> int:
    """Put the cleaned copies in place (under the partition's lock); the number of
    segments replaced. The caller fsyncs the directory after."""
    replaced = 0
    for segment in cleaning.segments:
        if plog.install_cleaned(segment.base_offset, segment.original_size, segment.batches):
            replaced += 1
        else:  # deleted or cut meanwhile: the copy describes nothing any more
            swap_path(plog.directory, segment.base_offset).unlink(missing_ok=True)
    plog.first_dirty_offset = max(plog.first_dirty_offset, end)
    plog.delete_horizon_ms = cleaning.delete_horizon_ms
    return replaced


async def compact_partition(state: PartitionState, settings: CompactionSettings,
                            now_ms: int, pace: Callable[[int], None]) -> int | None:
    """Clean one partition log if it is cleanable; the number of segments replaced (0:
    cleaned, nothing changed), None when it was not cleanable."""
    plog = state.log
    cleanable = cleanable_segments(plog, high_watermark=state.high_watermark, now_ms=now_ms,
                                   settings=settings)
    if cleanable is None:
        return None
    end, segments = cleanable
    cleaning = await trio.to_thread.run_sync(partial(
        prepare, plog.directory, segments, now_ms=now_ms,
        delete_retention_ms=settings.delete_retention_ms,
        producer_last_offsets=plog.producer_last_offsets(), pace=pace),
        abandon_on_cancel=True)
    async with state.lock:
        replaced = install_all(plog, cleaning, end)
    if cleaning.segments:
        await trio.to_thread.run_sync(fsync_dir, plog.directory)
    return replaced


async def compact_all(replicas: ReplicaManager, now_ms: int,
                      pace: Callable[[int], None]) -> int:
    """One cleaner pass over every open partition of a compacted topic; the number of
    segments replaced."""
    replaced = 0
    for state in replicas.open_states():
        topic = replicas.image.topic(state.topic_id)
        settings = None if topic is None else topic_compaction(topic)
        if topic is None or settings is None:
            continue
        try:
            count = await compact_partition(state, settings, now_ms, pace)
        except OSError as exc:  # staged for deletion under us: nothing to keep
            log.info("the cleaner skipped a partition", extra={
                "topic": topic.name, "partition": state.partition, "reason": str(exc)})
            continue
        if count is None:
            continue
        # every cleaning, with where it cleaned to and its tombstones' next horizon (even
        # one that changed nothing moves the first dirty offset): what operators and
        # tests can tell a log's state by
        log.info("the cleaner compacted a partition log", extra={
            "topic": topic.name, "partition": state.partition, "segments": count,
            "cleaned_below": state.log.first_dirty_offset,
            "delete_horizon_ms": state.log.delete_horizon_ms})
        replaced += count
    return replaced


async def compaction_loop(replicas: ReplicaManager, backoff_ms: int,
                          io_bytes_per_second: float) -> None:
    while True:
        await trio.sleep(backoff_ms / 1000)
        await compact_all(replicas, now_ms=int(time.time() * 1000),
                          pace=Pacer(io_bytes_per_second))
