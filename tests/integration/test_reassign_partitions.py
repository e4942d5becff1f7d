"""Partition reassignment end to end, against real processes on 127.0.0.1 (1 voter, 4
brokers 2-5): a topic of 3 partitions, replication factor 3 on brokers {2, 3, 4}, holding
the records an acks=all idempotent confluent-kafka producer had acknowledged, is moved to
{3, 4, 5} (the target `kraft reassign-partitions --generate` proposes) with `--execute`.
Broker 5 copies the data, joins the ISR, and the controller completes each partition:
ListPartitionReassignments is empty, every partition's replicas are {3, 4, 5},
`--verify` says completed, a consumer reads every acknowledged record, and broker 2 no
longer holds the partition directories (staged under deleting/). A cancel with nothing
ongoing is refused per partition (exit 1, NO_REASSIGNMENT_IN_PROGRESS); an unknown
broker is one line and exit 2, nothing sent. confluent-kafka 2.16's AdminClient has no
alter/list_partition_reassignments, so they are not exercised here."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from metadata import admin
from tests.integration.conftest import ClusterFactory
from tests.integration.test_broker import admin_request, partition_dirs, staged_dirs
from tests.support.quorum_support import kraft, wait_until
from tools.client.admin import BrokerAdminClient
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

WAIT_S = 60.0
SETTINGS = {"broker.heartbeat.interval.ms": 200, "broker.session.timeout.ms": 3000,
            "replica.lag.time.max.ms": 2000, "delete.topic.delay.ms": 600_000}
TOPIC = "moved"
BEFORE = [[2, 3, 4], [3, 4, 2], [4, 2, 3]]
AFTER = [[3, 4, 5], [4, 5, 3], [5, 3, 4]]
RECORDS = 300


def bootstrap(cluster: Cluster) -> str:
    return ",".join(a for n in (2, 3, 4, 5) if (a := cluster.node(n).client_address))


def produce(cluster: Cluster) -> set[bytes]:
    """The values the producer had acknowledged (acks=all, idempotent)."""
    acknowledged: set[bytes] = set()

    def delivered(error: object, message: object) -> None:
        if error is None:
            acknowledged.add(message.value())

    producer = ck.Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                            "enable.idempotence": True})
    for n in range(RECORDS):
        producer.produce(TOPIC, key=str(n % 7).encode(), value=f"v{n}".encode(),
                         on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0
    return acknowledged


def consume(servers: str, topic: str, partitions: int, wanted: set[bytes]) -> set[bytes]:
    """The values read from every partition of `topic` (until all `wanted` are, bounded)."""
    consumer = ck.Consumer({"bootstrap.servers": servers, "group.id": "reader",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: set[bytes] = set()
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + WAIT_S
        while not wanted <= got and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.add(message.value())
    finally:
        consumer.close()
    return got


def replicas(cluster: Cluster) -> list[list[int]]:
    """Each partition's replicas as the active controller's committed image has them."""
    response = admin_request(cluster, "DescribeTopics",
                             admin.DescribeTopicsRequest(names=(TOPIC,)))
    (topic,) = response.topics
    return [list(p.replicas) for p in topic.partitions]


def reassign(cluster: Cluster, path: Path, *options: str
             ) -> subprocess.CompletedProcess[str]:
    return kraft("reassign-partitions", "--cluster", str(cluster.directory),
                 "--reassignment-json-file", str(path), *options)


def move_file(tmp_path: Path, name: str, targets: list[list[int]]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": r} for p, r in enumerate(targets)]}))
    return path


def test_a_topic_moves_to_new_brokers_keeping_every_acknowledged_record(
        make_cluster: ClusterFactory, tmp_path: Path) -> None:
    cluster = make_cluster(voters=1, brokers=4, settings=SETTINGS)
    cluster.wait_for_brokers(WAIT_S)
    client = ck_admin.AdminClient({"bootstrap.servers": bootstrap(cluster)})
    client.create_topics([ck_admin.NewTopic(TOPIC, num_partitions=3,
                                            replica_assignment=BEFORE)],
                         request_timeout=WAIT_S)[TOPIC].result(WAIT_S)
    acknowledged = produce(cluster)
    assert len(acknowledged) == RECORDS
    assert {d for d in partition_dirs(cluster, 2) if d.startswith(TOPIC)} == \
        {f"{TOPIC}-{p}" for p in range(3)}

    unknown = reassign(cluster, move_file(tmp_path, "unknown.json", [[3, 4, 9]]), "--execute")
    assert unknown.returncode == 2
    assert "[9]" in unknown.stderr
    assert replicas(cluster) == BEFORE

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    generated = kraft("reassign-partitions", "--cluster", str(cluster.directory),
                      "--generate", "--topics-to-move-json-file", str(topics),
                      "--broker-list", "3,4,5", "--json")
    assert generated.returncode == 0, generated.stderr
    proposal = json.loads(generated.stdout)
    assert [p["replicas"] for p in proposal["current"]["partitions"]] == BEFORE
    assert [p["replicas"] for p in proposal["proposed"]["partitions"]] == AFTER

    moved = move_file(tmp_path, "move.json", AFTER)
    started = reassign(cluster, moved, "--execute")
    assert started.returncode == 0, started.stderr
    assert f"Successfully started partition reassignments for {TOPIC}-0, {TOPIC}-1, " \
        f"{TOPIC}-2" in started.stdout

    lister = BrokerAdminClient(bootstrap(cluster).split(","), ssl_context=None, sasl=None,
                               timeout_s=WAIT_S)
    wait_until(lambda: not lister.list_reassignments() and replicas(cluster) == AFTER,
               WAIT_S, "every reassignment completed")
    verified = reassign(cluster, moved, "--verify")
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.count("is completed.") == 3

    assert acknowledged <= consume(bootstrap(cluster), TOPIC, len(BEFORE), acknowledged)
    wait_until(lambda: not any(d.startswith(TOPIC) for d in partition_dirs(cluster, 2)),
               WAIT_S, "broker 2 staging the partitions it no longer hosts")
    assert len(staged_dirs(cluster, 2)) >= 3

    cancelled = reassign(cluster, moved, "--cancel")
    assert cancelled.returncode == 1
    assert cancelled.stdout.count("NO_REASSIGNMENT_IN_PROGRESS") == 3
    assert len(cancelled.stderr.strip().splitlines()) == 1
