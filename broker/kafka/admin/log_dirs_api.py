"""DescribeLogDirs (API 35, v1-v4), AlterReplicaLogDirs (API 34, v1-v2) and
DescribeProducers (API 61, v0), as Kafka's kafka-log-dirs.sh,
kafka-reassign-partitions.sh's log-dir moves and kafka-transactions.sh describe-producers
use them.

DescribeLogDirs answers for this broker's one log directory: each hosted partition whose
directory exists, with its size (the bytes of its segment files) and an offset lag of 0
(no future replicas here), and the file system's total and usable bytes (v4). Asked for
no topics (null), every hosted partition; a named partition not here is left out, as
Kafka does. Kafka authorizes it with DESCRIBE on the cluster: refused, the answer is
CLUSTER_AUTHORIZATION_FAILED (v3+) with no results.

AlterReplicaLogDirs moves replicas between a broker's log directories; a broker here has
one, so a move to it is done already (NONE, also for a partition not hosted yet: Kafka
then keeps the preference) and any other path is LOG_DIR_NOT_FOUND, as Kafka answers a
directory that is not among its log.dirs. ALTER on the cluster (else
CLUSTER_AUTHORIZATION_FAILED for every partition).

DescribeProducers answers from the partition's leader: the idempotent producers its log
remembers (`broker.kafka.partitions.producer_state`), each with its epoch and last
sequence. No transactions here: coordinator epoch and transaction start are -1; the
last timestamp is not kept (-1). READ on the topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio

from broker.hosting import hosted_partitions
from broker.kafka import authz
from broker.kafka import response_shapes as shapes
from broker.kafka.context import BrokerContext
from broker.kafka.partitions.segments import segment_bases, segment_name
from broker.kafka.replication.replica import check_partition
from broker.reconcile import partition_dir_name
from raft.common.errors import ErrorCode


def partition_size(directory: Path) -> int | None:
    """The bytes of the partition's segment files (as its log recognises them:
    `segment_bases`); None when its directory is gone."""
    try:
        with os.scandir(directory) as entries:
            sizes = {e.name: e.stat().st_size for e in entries}
    except FileNotFoundError:
        return None
    return sum(sizes[segment_name(base)] for base in segment_bases(sizes))


def describe_log_dir(log_dir: Path, wanted: list[tuple[str, int]]) -> shapes.LogDirResult:
    """Blocking: one result for `log_dir`, for the (topic, partition) pairs `wanted`."""
    by_topic: dict[str, list[shapes.LogDirPartition]] = {}
    for topic, partition in wanted:
        size = partition_size(log_dir / partition_dir_name(topic, partition))
        if size is not None:
            by_topic.setdefault(topic, []).append({
                "partition_index": partition, "partition_size": size, "offset_lag": 0,
                "is_future_key": False})
    disk = os.statvfs(log_dir)
    return {"error_code": 0, "log_dir": str(log_dir.resolve()),
            "topics": [{"name": t, "partitions": p} for t, p in sorted(by_topic.items())],
            "total_bytes": disk.f_blocks * disk.f_frsize,
            "usable_bytes": disk.f_bavail * disk.f_frsize}


async def handle_describe_log_dirs_request(context: BrokerContext, request: Any,
                                           version: int) -> shapes.DescribeLogDirsResponse:
    if not authz.cluster_allowed(context, authz.Op.DESCRIBE):
        return {"throttle_time": 0, "error_code": authz.CLUSTER_AUTHORIZATION_FAILED,
                "results": []}
    hosted = [(h.topic, h.partition)
              for h in hosted_partitions(context.image, context.broker_id)]
    if request.topics is not None:
        asked = {(t.topic, int(p)) for t in request.topics for p in t.partitions}
        hosted = [key for key in hosted if key in asked]
    try:
        result = await trio.to_thread.run_sync(describe_log_dir, context.replicas.log_dir,
                                               hosted)
    except OSError:  # the log dir failed: Kafka names it with KAFKA_STORAGE_ERROR
        result = {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR),
                  "log_dir": str(context.replicas.log_dir), "topics": [], "total_bytes": -1,
                  "usable_bytes": -1}
    return {"throttle_time": 0, "error_code": 0, "results": [result]}


def move_error(path: str, log_dir: Path, allowed: bool) -> ErrorCode:
    """A move of replicas to `path` on a broker whose one log directory is `log_dir`
    (compared as absolute paths, as Kafka does)."""
    if not allowed:
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if os.path.abspath(path) == os.path.abspath(log_dir):
        return ErrorCode.NONE
    return ErrorCode.LOG_DIR_NOT_FOUND


async def handle_alter_replica_log_dirs_request(
        context: BrokerContext, request: Any, version: int
) -> shapes.AlterReplicaLogDirsResponse:
    allowed = authz.cluster_allowed(context, authz.Op.ALTER)
    results: list[shapes.ReplicaLogDirTopicResult] = []
    for wanted in request.dirs:
        error = move_error(wanted.path, context.replicas.log_dir, allowed)
        results += [{"topic_name": topic.name, "partitions": [
            {"partition_index": int(p), "error_code": int(error)} for p in topic.partitions]}
            for topic in wanted.topics]
    return {"throttle_time": 0, "results": results}


async def _producers_of(context: BrokerContext, name: str, index: int
                        ) -> shapes.ProducersPartition:
    def answer(error: ErrorCode, producers: list[shapes.ActiveProducer] | None = None
               ) -> shapes.ProducersPartition:
        return {"partition_index": index, "error_code": int(error), "error_message": None,
                "active_producers": producers or []}

    resolved = check_partition(context.image, context.broker_id, partition=index, name=name)
    if resolved.error != ErrorCode.NONE:
        return answer(resolved.error)
    error, state = await context.replicas.open(resolved)
    if state is None:
        return answer(error)
    return answer(ErrorCode.NONE, [
        {"producer_id": entry.producer_id, "producer_epoch": entry.epoch,
         "last_sequence": entry.last_seq, "last_timestamp": -1, "coordinator_epoch": -1,
         "current_txn_start_offset": -1}
        for entry in sorted(state.log.producers.entries.values(),
                            key=lambda e: e.producer_id)])


async def handle_describe_producers_request(context: BrokerContext, request: Any,
                                            version: int) -> shapes.DescribeProducersResponse:
    topics: list[shapes.ProducersTopic] = []
    for topic in request.topics:
        indexes = [int(i) for i in topic.partition_indexes]
        partitions: list[shapes.ProducersPartition]
        if not authz.topic_allowed(context, authz.Op.READ, topic.name):
            partitions = [{"partition_index": i, "error_code": authz.TOPIC_AUTHORIZATION_FAILED,
                           "error_message": None, "active_producers": []} for i in indexes]
        else:
            partitions = [await _producers_of(context, topic.name, i) for i in indexes]
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
