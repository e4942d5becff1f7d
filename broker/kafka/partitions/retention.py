"""Retention: every `log.retention.check.interval.ms` the leader of each open partition
of a topic whose `cleanup.policy` holds `delete` deletes its oldest segments past the
topic's `retention.ms` / `retention.bytes`, below its high watermark, the active one
too once it qualifies, as Kafka (the decision is pure:
broker.kafka.partitions.segments.retention_start), and its log start advances (past an
active segment, to the log end: the file stays until the log rolls). Followers
do not decide: they follow the leader's log start (broker.kafka.replication.follower).
"""

from __future__ import annotations

import logging
import time

import trio

from broker.kafka.partitions.segments import (
    LogDefaults,
    Retention,
    retention_start,
    topic_defaults,
)
from broker.kafka.replication.replica import ReplicaManager
from metadata.image import TopicImage
from metadata.topic_configs import RETENTION_BYTES, RETENTION_MS, cleanup_policies

log = logging.getLogger(__name__)


def topic_retention(topic: TopicImage, defaults: LogDefaults) -> Retention | None:
    """The topic's retention (its own `retention.ms` / `retention.bytes`, else the
    broker's `defaults`); None when its cleanup.policy has no `delete` (compact only:
    its old segments are the cleaner's)."""
    if "delete" not in cleanup_policies(topic.configs):
        return None
    values = {**topic_defaults(defaults), **dict(topic.configs)}
    return Retention(retention_ms=int(values[RETENTION_MS]),
                     retention_bytes=int(values[RETENTION_BYTES]))


async def apply_retention(replicas: ReplicaManager, now_ms: int) -> int:
    """One retention pass over the partitions this broker leads; the number of logs
    whose start moved."""
    moved = 0
    for state, _ in replicas.led_partitions():
        topic = replicas.image.topic(state.topic_id)
        retention = None if topic is None else topic_retention(topic, replicas.log_defaults)
        if topic is None or retention is None:
            continue
        async with state.lock:
            start = retention_start(state.log.segment_stats(),
                                    log_start=state.log.log_start_offset,
                                    high_watermark=state.high_watermark, now_ms=now_ms,
                                    retention=retention)
            if start <= state.log.log_start_offset:
                continue
            try:
                await trio.to_thread.run_sync(state.log.advance_log_start, start)
            except OSError as exc:  # staged for deletion under us: nothing to keep
                log.info("retention skipped a partition", extra={
                    "topic": topic.name, "partition": state.partition, "reason": str(exc)})
                continue
        moved += 1
        log.info("retention advanced a log start", extra={
            "topic": topic.name, "partition": state.partition, "log_start_offset": start})
    return moved


async def retention_loop(replicas: ReplicaManager, interval_ms: int) -> None:
    while True:
        await trio.sleep(interval_ms / 1000)
        await apply_retention(replicas, now_ms=int(time.time() * 1000))
