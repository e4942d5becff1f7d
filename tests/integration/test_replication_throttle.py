"""Replication throttles with real processes (1 voter, brokers 2 and 3): a partition of
SIZE bytes on broker 2 alone is reassigned onto {2, 3}, and broker 3 copies it.

Unthrottled, the copy runs at the speed of the machine. With `kraft reassign-partitions
--execute --throttle RATE` (leader.replication.throttled.rate and
follower.replication.throttled.rate at RATE bytes/s on brokers 2 and 3, the topic's
throttled replicas 0:2 on the leader side and 0:3 on the follower side) it cannot be
faster than the quota window lets it: within any SAMPLES - 1 samples a quota passes at
most RATE over the whole window plus one fetch (`broker.kafka.partitions.replication_quota`,
its property test), so SIZE bytes take at least `min_catch_up_s`. Progress is measured
from what broker 3 reports, its replica's size in DescribeLogDirs, polled until it
equals the leader's. `--verify` then removes the throttles.

On the way, `kraft configs --entity-type brokers` sets, describes (sources and synonyms
in kafka-configs.sh's lines) and deletes a cluster-wide default, and a static key is
refused with Kafka's error."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.partitions.replication_quota import SAMPLE_MS, SAMPLES
from broker.kafka.replication.follower import PARTITION_MAX_BYTES
from tests.integration.conftest import ClusterFactory
from tests.integration.test_reassign_partitions import SETTINGS
from tests.support.quorum_support import kraft, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")

WAIT_S = 60.0
SIZE = 5 << 20
RATE = 256 << 10
VALUE = 64 << 10


def min_catch_up_s(size: int, rate: int) -> float:
    """The least time `size` bytes take through a quota of `rate` bytes/s: each stretch
    of SAMPLES - 1 samples carries at most rate x SAMPLES samples plus one fetch."""
    stretch_s = (SAMPLES - 1) * SAMPLE_MS / 1000
    per_stretch = rate * SAMPLES * SAMPLE_MS / 1000 + PARTITION_MAX_BYTES
    return (math.ceil(size / per_stretch) - 1) * stretch_s


def bootstrap(cluster: Cluster) -> str:
    return ",".join(a for n in (2, 3) if (a := cluster.node(n).client_address))


def fill(cluster: Cluster, topic: str) -> None:
    """SIZE bytes of records on partition 0 of `topic` (replicas: broker 2)."""
    producer = ck.Producer({"bootstrap.servers": bootstrap(cluster), "acks": "1",
                            "linger.ms": 5, "compression.type": "none"})
    for n in range(SIZE // VALUE):
        producer.produce(topic, value=bytes([n % 251]) * VALUE, partition=0)
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0


def replica_size(admin: Any, broker: int, topic: str) -> int:
    """The bytes of `topic`-0 on `broker`, as its DescribeLogDirs reports them."""
    (answer,) = admin.describe_log_dirs(topic_partitions={topic: [0]}, brokers=[broker])
    sizes = [p["partition_size"] for log_dir in answer["log_dirs"]
             for t in log_dir["topics"] if t["name"] == topic for p in t["partitions"]]
    return sizes[0] if sizes else 0


def reassign(cluster: Cluster, moved: Path, *options: str) -> str:
    done = kraft("reassign-partitions", "--cluster", str(cluster.directory),
                 "--reassignment-json-file", str(moved), *options)
    assert done.returncode == 0, done.stderr
    return done.stdout


def catch_up_s(cluster: Cluster, admin: Any, moved: Path, topic: str, *options: str
               ) -> float:
    """Reassign `topic`-0 from {2} onto {2, 3}; the seconds until broker 3's replica is
    as large as broker 2's (polled, bounded by WAIT_S)."""
    target = replica_size(admin, 2, topic)
    assert target >= SIZE
    moved.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 3]}]}))
    started = time.monotonic()
    reassign(cluster, moved, "--execute", *options)
    wait_until(lambda: replica_size(admin, 3, topic) >= target, WAIT_S,
               f"broker 3 holding all of {topic}-0")
    return time.monotonic() - started


def configs(cluster: Cluster, *options: str) -> str:
    done = kraft("configs", "--cluster", str(cluster.directory), "--entity-type", "brokers",
                 *options)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_throttled_follower_catches_up_no_faster_than_its_quota(
        make_cluster: ClusterFactory, tmp_path: Path) -> None:
    cluster = make_cluster(voters=1, brokers=2, settings=SETTINGS)
    cluster.wait_for_brokers(WAIT_S)
    client = ck_admin.AdminClient({"bootstrap.servers": bootstrap(cluster)})
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap(cluster).split(","),
                                   request_timeout_ms=10_000)
    for topic in ("free", "slow"):
        client.create_topics([ck_admin.NewTopic(topic, num_partitions=1,
                                                replica_assignment=[[2]])],
                             request_timeout=WAIT_S)[topic].result(WAIT_S)
        fill(cluster, topic)

    free_s = catch_up_s(cluster, admin, tmp_path / "free.json", "free")

    configs(cluster, "--entity-default", "--alter", "--add-config",
            f"follower.replication.throttled.rate={RATE}")
    refused = kraft("configs", "--cluster", str(cluster.directory), "--entity-type",
                    "brokers", "--entity-name", "3", "--alter", "--add-config",
                    "log.retention.hours=1")
    assert refused.returncode == 1
    assert "INVALID_CONFIG" in refused.stderr
    assert "Cannot update these configs dynamically: Set(log.retention.hours)" in refused.stderr
    assert configs(cluster, "--entity-name", "3", "--describe") == \
        "Dynamic configs for broker 3 are:\n"
    assert configs(cluster, "--entity-default", "--describe") == (
        "Default configs for brokers in the cluster are:\n"
        f"  follower.replication.throttled.rate={RATE} sensitive=false synonyms="
        f"{{DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate={RATE}, "
        "DEFAULT_CONFIG:follower.replication.throttled.rate=9223372036854775807}\n")
    configs(cluster, "--entity-default", "--alter", "--delete-config",
            "follower.replication.throttled.rate")
    assert configs(cluster, "--entity-default", "--describe") == \
        "Default configs for brokers in the cluster are:\n"

    moved = tmp_path / "slow.json"
    slow_s = catch_up_s(cluster, admin, moved, "slow", "--throttle", str(RATE))
    bound_s = min_catch_up_s(SIZE, RATE)
    print(f"catch-up of {SIZE >> 20} MiB: unthrottled {free_s:.2f} s; throttled at "
          f"{RATE >> 10} KiB/s {slow_s:.2f} s ({SIZE / slow_s / 1024:.0f} KiB/s; "
          f"at least {bound_s:.1f} s by the quota window)")
    assert slow_s >= bound_s
    assert slow_s >= 3 * free_s

    topic_configs = kraft("configs", "--bootstrap-server", bootstrap(cluster), "--entity-type",
                          "topics", "--entity-name", "slow", "--describe")
    assert topic_configs.stdout.splitlines()[0] == "Dynamic configs for topic slow are:"
    assert topic_configs.stdout.splitlines()[1:] == [  # topics describe no synonyms here
        "  follower.replication.throttled.replicas=0:3 sensitive=false synonyms={}",
        "  leader.replication.throttled.replicas=0:2 sensitive=false synonyms={}"]
    throttled = configs(cluster, "--entity-name", "2", "--describe")
    assert f"  leader.replication.throttled.rate={RATE} sensitive=false synonyms=" \
        f"{{DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate={RATE}, " in throttled
    every_key = configs(cluster, "--entity-name", "2", "--describe", "--all")
    assert "=None" not in every_key  # a key without a default, as kafka-configs.sh prints it
    assert "  ssl.keystore.location=null sensitive=false synonyms={}" in every_key.splitlines()
    wait_until(lambda: "is completed." in reassign(cluster, moved, "--verify"), WAIT_S,
               "the reassignment completed")
    assert "Clearing broker-level throttles on brokers 2,3" in \
        reassign(cluster, moved, "--verify")
    assert f"leader.replication.throttled.rate={RATE}" not in configs(
        cluster, "--entity-name", "2", "--describe")
    (topic,) = client.describe_configs([ck_admin.ConfigResource(
        ck_admin.ResourceType.TOPIC, "slow")]).values()
    assert topic.result(WAIT_S)["leader.replication.throttled.replicas"].value == ""
    admin.close()
