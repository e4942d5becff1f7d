"""Multi-process: bounded logs. Three voters and one broker on 127.0.0.1 with tiny
segments, snapshots every few hundred bytes and no retention, so every node's log start
advances to its snapshots and the segments below are deleted. A broker started with an
empty metadata directory then catches up by FetchSnapshot (the leader's log no longer
holds offset 0), in several chunks, and reaches the controller's image."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raft.log import METADATA_PARTITION_DIR
from raft.segment import list_segments, segment_base_offset
from raft.storage import read_log_start
from tests.support.quorum_support import (
    FAST_SETTINGS,
    create_topic_with,
    log_events,
    running_cluster,
    wait_until,
)
from tests.support.snapshot_support import image_of, partition_dir
from tools.admin_client import AdminClient
from tools.cluster import Cluster
from tools.commands.quorum_snapshot import request_snapshot
from tools.quorum_client import append_records

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SETTINGS = {**FAST_SETTINGS, "metadata.log.max.record.bytes.between.snapshots": 600,
            "log.segment.bytes": 1024, "metadata.max.retention.bytes": 0,
            "fetch.snapshot.max.bytes": 512,
            "broker.heartbeat.interval.ms": 200, "broker.session.timeout.ms": 1500}
BROKER = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("log-start") / "cluster", SETTINGS) as cluster:
        yield cluster


def log_start(cluster: Cluster, node_id: int) -> int:
    return read_log_start(partition_dir(cluster.node(node_id).data_dir))[0]


def first_segment_base(cluster: Cluster, node_id: int) -> int:
    return segment_base_offset(list_segments(partition_dir(cluster.node(node_id).data_dir))[0])


def test_voters_delete_their_early_segments_and_an_empty_broker_catches_up_by_snapshot(
        cluster: Cluster) -> None:
    admin = AdminClient(cluster.controller_addresses(), cluster_id=cluster.cluster_id)
    create_topic_with(admin, "t-before", 2, 1)  # while the broker is unfenced: RF 1 needs one
    cluster.stop_node(BROKER)
    broker_dir = Path(cluster.node(BROKER).data_dir)
    shutil.rmtree(broker_dir / METADATA_PARTITION_DIR)

    def voters_dropped_offset_zero() -> bool:
        # NoOps, not topics: the stopped broker is fenced after its session timeout, and
        # a topic then has no broker to be placed on
        append_records(cluster.controller_addresses(), 20, cluster_id=cluster.cluster_id)
        return all(first_segment_base(cluster, n) > 0 and log_start(cluster, n) > 0
                   for n in cluster.voter_ids)
    wait_until(voters_dropped_offset_zero, 40, "every voter to delete its first segment")

    cluster.start_node(BROKER)
    leader = cluster.describe()["leader_id"]

    def broker_matches_leader() -> dict[str, Any] | None:
        status = cluster.broker_status(BROKER)
        if not status or not status["caught_up"]:
            return None
        answer = request_snapshot(cluster, cluster.node(leader), 10.0)
        if "error" in answer or answer["end_offset"] - 1 != status["applied_offset"]:
            return None
        return status if image_of(Path(answer["path"])).content_hash() == \
            status["image_hash"] else None
    status = wait_until(broker_matches_leader, 40, "the broker to reach the leader's image")
    assert status["applied_offset"] >= log_start(cluster, leader) - 1
    # It got there by FetchSnapshot (the leader's log no longer held offset 0): it loaded
    # the leader's snapshot, and its own log starts at or after it.
    loaded = [e for e in log_events(cluster, BROKER)
              if e.get("msg") == "loaded a snapshot fetched from the leader"]
    assert loaded, "the broker never loaded a fetched snapshot"
    assert 0 < loaded[0]["end_offset"] <= status["applied_offset"] + 1
    assert 0 < loaded[0]["end_offset"] <= log_start(cluster, BROKER)
    newest = request_snapshot(cluster, cluster.node(BROKER), 10.0)
    assert image_of(Path(newest["path"])).topic_by_name("t-before") is not None
    errors = [e for e in log_events(cluster, BROKER) if e.get("level") == "ERROR"]
    assert errors == []
