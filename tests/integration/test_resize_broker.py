"""Ordered delivery across a shrink, the broker's side, multi-process on 127.0.0.1: a
Produce with a stale undeleted partition count gets INVALID_PARTITION_METADATA (253),
the right count or none is taken; PartitionLeaderEpochs answers the counts; after a
shrink the marked partition refuses produce from everyone, its leader reports it empty,
the controller removes it and the broker stages its directory under deleting/."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from metadata import admin
from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build, request_schema
from raft.common.kafka.ordered_schemas import (
    LeaderEpochsRequestTopic,
    PartitionLeaderEpochsRequest,
)
from raft.common.kafka.wire_client import call
from tests.integration.conftest import ClusterFactory
from tests.integration.test_broker import (
    BROKER_SETTINGS,
    admin_request,
    create_topic,
    partition_dirs,
    staged_dirs,
)
from tests.support.kafka_support import record_batch
from tests.support.quorum_support import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 30.0
TOPIC = "ordered"


def produce_error(address: str, partition: int, count: int | None) -> int:
    body = build(request_schema(0, 9), {
        "acks": -1, "timeout": 5000, "transactional_id": None,
        "topic_data": [{"name": TOPIC, "undeleted_partition_count": count, "partition_data": [
            {"index": partition, "records": record_batch([b"v"])}]}]})
    response = call(address, body, tolerant=True)
    return int(response.responses[0].partition_responses[0].error_code)


def leader_epochs(address: str, topic_id: uuid.UUID) -> Any:
    (topic,) = call(address, PartitionLeaderEpochsRequest(
        topics=(LeaderEpochsRequestTopic(topic_id=topic_id),))).topics
    return topic


def resize(cluster: Any, count: int) -> None:
    response = admin_request(cluster, "CreatePartitions", admin.CreatePartitionsRequest(
        topics=(admin.CreatePartitionsTopic(name=TOPIC, count=count),)))
    assert [r.error_code for r in response.results] == [0], response


def test_stale_count_refused_and_marked_partition_removed_after_shrink(
        make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(voters=1, brokers=1, settings={
        **BROKER_SETTINGS, "delete.topic.delay.ms": 600_000})
    (broker,) = cluster.wait_for_brokers(WAIT_S)
    address = cluster.node(broker).client_address
    assert address is not None
    created = create_topic(cluster, TOPIC, partitions=2, replication_factor=1, ordered=True)
    topic_id = uuid.UUID(bytes=created.topic_id.to_bytes())

    counts = wait_until(lambda: (t := leader_epochs(address, topic_id)).error_code == 0 and t,
                        WAIT_S, "the topic in the broker's image")
    assert (counts.initial_partition_count, counts.undeleted_partition_count,
            counts.ordered_delivery) == (2, 2, True)
    # the partition's directory appears once the broker reconciled: until then a
    # retriable NOT_LEADER_OR_FOLLOWER
    wait_until(lambda: produce_error(address, 0, 2) == 0, WAIT_S, "a produce with the count")
    assert produce_error(address, 0, 1) == ErrorCode.INVALID_PARTITION_METADATA
    assert produce_error(address, 0, 3) == ErrorCode.INVALID_PARTITION_METADATA
    assert produce_error(address, 0, None) == 0

    resize(cluster, 3)  # grow (a shrink goes no lower than the initial count)
    wait_until(lambda: leader_epochs(address, topic_id).undeleted_partition_count == 3,
               WAIT_S, "the growth in the broker's image")
    assert produce_error(address, 0, 2) == ErrorCode.INVALID_PARTITION_METADATA
    resize(cluster, 2)
    shrunk = wait_until(
        lambda: (t := leader_epochs(address, topic_id)).undeleted_partition_count == 2 and t,
        WAIT_S, "the shrink in the broker's image")
    assert produce_error(address, 0, 3) == ErrorCode.INVALID_PARTITION_METADATA  # now stale
    assert produce_error(address, 0, 2) == 0
    if len(shrunk.partitions) == 3:  # not removed yet
        assert [p.before_deletion != () for p in shrunk.partitions] == [False, False, True]
    # the mark refuses everyone (3, UNKNOWN_TOPIC_OR_PARTITION: removed meanwhile); a
    # record taken here would keep the partition from ever being removed
    assert produce_error(address, 2, None) in (ErrorCode.INVALID_PARTITION_METADATA, 3)

    # partition 2 never held a record: its leader reports it empty, the controller
    # removes it, the broker stops serving it and stages its directory
    wait_until(lambda: [p.partition for p in leader_epochs(address, topic_id).partitions]
               == [0, 1], WAIT_S, "partition 2 removed")
    assert produce_error(address, 2, None) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    wait_until(lambda: f"{TOPIC}-2" not in partition_dirs(cluster, broker)
               and f"{created.topic_id}_2" in staged_dirs(cluster, broker),
               WAIT_S, "the removed partition's directory staged under deleting/")
    assert {f"{TOPIC}-0", f"{TOPIC}-1"} <= set(partition_dirs(cluster, broker))
