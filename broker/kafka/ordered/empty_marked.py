"""Which marked partitions this broker leads with an empty log, for its heartbeat.

A partition marked for deletion refuses produce (`broker.kafka.partitions.produce`) once the mark
is in this broker's image, and its log can then only shrink: an empty log stays empty.
The leader reports each such partition whose log is empty (log start == log end) in its
BrokerHeartbeat (`metadata.admin.EmptyPartition`, with the leader epoch it checked in),
and the controller removes the partition. The ends are read under the partition lock,
which a produce holds from its mark check to the end of its append: either the append
is visible here, or the produce saw the mark and stored nothing.
"""

from __future__ import annotations

import logging

from broker.kafka.ordered.rules import MarkedLedPartitions
from broker.kafka.replication.replica import ReplicaManager, check_partition
from metadata.admin import EmptyPartition
from raft.common.errors import ErrorCode

log = logging.getLogger(__name__)


async def empty_marked_partitions(replicas: ReplicaManager,
                                  marked: MarkedLedPartitions | None = None
                                  ) -> tuple[EmptyPartition, ...]:
    """`marked`: the heartbeat's own, which walks only what changed since it last asked."""
    image = replicas.image
    found: list[EmptyPartition] = []
    for topic, partition in (marked or MarkedLedPartitions(replicas.broker_id))(image):
        resolved = check_partition(image, replicas.broker_id, partition=partition.partition,
                                   topic_id=topic.topic_id)
        if resolved.error != ErrorCode.NONE:
            continue
        try:
            error, state = await replicas.open(resolved)
        except OSError as exc:  # unreadable now: not reported, so not removed
            error, state = ErrorCode.KAFKA_STORAGE_ERROR, None
            log.warning("cannot open a marked partition", extra={
                "topic": topic.name, "partition": partition.partition, "reason": str(exc)})
        if state is None:
            log.info("cannot check a marked partition's log", extra={
                "topic": topic.name, "partition": partition.partition,
                "error": error.name})
            continue
        async with state.lock:
            start, end = state.log.log_start_offset, state.log.log_end_offset
        if start == end:
            found.append(EmptyPartition(
                topic_id=topic.topic_id, partition=partition.partition,
                leader_epoch=partition.leader_epoch, log_start_offset=start,
                log_end_offset=end))
    return tuple(found)
