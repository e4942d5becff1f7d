"""A throttled reassignment under load, with the active controller killed halfway: real
processes on 127.0.0.1, 3 voters and brokers 4, 5, 6, a topic of 6 partitions with 3
replicas on {4, 5, 6} holding PRELOAD bytes (partition p holds p + 1 shares, so the
partitions finish copying one after another), and an idempotent acks=all producer
sending RATE_PER_S records, each at its due time (`test_controlled_shutdown.Producer`).

Broker 7 is added and every partition is reassigned to {5, 6, 7} with `kraft
reassign-partitions --execute --throttle THROTTLE`. When some but not all partitions
have moved, the active controller is SIGKILLed and restarted. The reassignment
completes (ListPartitionReassignments empty, every replica set {5, 6, 7}); the producer
saw no error; a consumer reads every acknowledged record; and the bytes broker 7 took
in over the catch-up (its replicas' sizes, as its DescribeLogDirs reports them) stay
within what the follower quota lets through (`allowed_bytes`). `-s` prints the figures
and the producer's p99."""

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
from tests.integration.test_controlled_shutdown import RATE_PER_S, Producer
from tests.integration.test_reassign_partitions import SETTINGS, consume
from tests.support.quorum_support import kraft, wait_until
from tools.client.admin import BrokerAdminClient
from tools.cluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.soak]  # about 60 s: over make test's budget

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")

WAIT_S = 60.0
TOPIC = "load"
OLD, NEW = (4, 5, 6), (5, 6, 7)
BEFORE = [[OLD[(p + i) % 3] for i in range(3)] for p in range(6)]
AFTER = [[NEW[(p + i) % 3] for i in range(3)] for p in range(6)]
VALUE = 32 << 10
SHARE = 24  # records of VALUE bytes per share: partition p holds p + 1 shares
PRELOAD = sum(p + 1 for p in range(6)) * SHARE * VALUE
THROTTLE = 512 << 10
RECORD_BYTES = 256  # at most, a paced record in the log (100 bytes, its batch's overhead)


def allowed_bytes(duration_s: float, produced: int) -> float:
    """What broker 7 may take in over `duration_s`: per stretch of SAMPLES - 1 samples,
    the follower quota over the whole window plus the fetches in flight when it was
    crossed (one per leader, each up to its 2 partitions' PARTITION_MAX_BYTES), and the
    `produced` records, which an in-sync replica fetches unthrottled."""
    stretches = math.ceil(duration_s * 1000 / ((SAMPLES - 1) * SAMPLE_MS))
    per_stretch = THROTTLE * SAMPLES * SAMPLE_MS / 1000 + len(OLD) * 2 * PARTITION_MAX_BYTES
    return stretches * per_stretch + produced * RECORD_BYTES


def bootstrap(cluster: Cluster) -> str:
    return ",".join(a for n in (*OLD, 7) if (a := cluster.node(n).client_address))


def unfenced(cluster: Cluster, broker: int) -> bool:
    status = cluster.broker_status(broker)
    return status is not None and not status.get("is_fenced", True)


def preload(cluster: Cluster) -> set[bytes]:
    """PRELOAD bytes, acks=all: the values acknowledged."""
    acknowledged: set[bytes] = set()

    def delivered(error: object, message: Any) -> None:
        if error is None:
            acknowledged.add(message.value())

    producer = ck.Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                            "enable.idempotence": True, "linger.ms": 5})
    for p in range(6):
        for n in range((p + 1) * SHARE):
            producer.produce(TOPIC, value=f"pre-{p}-{n}".encode().ljust(VALUE, b"."),
                             partition=p, on_delivery=delivered)
            producer.poll(0)
    assert producer.flush(WAIT_S) == 0
    return acknowledged


def size_on(admin: Any, broker: int) -> int:
    """The bytes of TOPIC's replicas on `broker`, as its DescribeLogDirs reports them."""
    (answer,) = admin.describe_log_dirs(topic_partitions={TOPIC: list(range(6))},
                                        brokers=[broker])
    return sum(p["partition_size"] for log_dir in answer["log_dirs"]
               for t in log_dir["topics"] if t["name"] == TOPIC for p in t["partitions"])


def replica_sets(lister: BrokerAdminClient) -> list[set[int]]:
    (topic,) = [t for t in lister.metadata().topics if t.name == TOPIC]
    return [set(map(int, p.replica_nodes))
            for p in sorted(topic.partitions, key=lambda p: int(p.partition_index))]


def p99(answered: list[tuple[float, float]], low: float, high: float) -> float:
    """The p99 latency (ms) of the records sent within [low, high)."""
    within = sorted(latency for sent, latency in answered if low <= sent < high)
    return within[int(len(within) * 0.99)] * 1000 if within else math.nan


def test_a_throttled_reassignment_under_load_survives_a_controller_kill(
        make_cluster: ClusterFactory, tmp_path: Path) -> None:
    cluster = make_cluster(voters=3, brokers=4, start=False, settings=SETTINGS)
    for node in (1, 2, 3, *OLD):
        cluster.start_node(node)
    cluster.wait_for_leader(WAIT_S)
    wait_until(lambda: all(unfenced(cluster, b) for b in OLD), WAIT_S, "brokers 4-6 up")
    client = ck_admin.AdminClient({"bootstrap.servers": bootstrap(cluster)})
    client.create_topics([ck_admin.NewTopic(TOPIC, num_partitions=6,
                                            replica_assignment=BEFORE)],
                         request_timeout=WAIT_S)[TOPIC].result(WAIT_S)
    acknowledged = preload(cluster)
    cluster.start_node(7)
    wait_until(lambda: unfenced(cluster, 7), WAIT_S, "broker 7 added")
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap(cluster).split(","),
                                   request_timeout_ms=10_000)
    lister = BrokerAdminClient(bootstrap(cluster).split(","), ssl_context=None, sasl=None,
                               timeout_s=WAIT_S)

    producer = Producer(bootstrap(cluster), TOPIC)
    wait_until(lambda: len(producer.latencies) >= RATE_PER_S // 2, WAIT_S, "records acked")
    moved = tmp_path / "move.json"
    moved.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": r} for p, r in enumerate(AFTER)]}))
    sent_before = len(producer.latencies)
    started = time.monotonic()
    execute = kraft("reassign-partitions", "--cluster", str(cluster.directory),
                    "--reassignment-json-file", str(moved), "--execute",
                    "--throttle", str(THROTTLE))
    assert execute.returncode == 0, execute.stderr

    killed: tuple[int, int] | None = None  # (controller, partitions still moving)
    killed_at = math.inf
    deadline = started + WAIT_S
    while time.monotonic() < deadline:
        ongoing = {p for t, p in lister.list_reassignments() if t == TOPIC}
        if killed is None and 0 < len(ongoing) < 6:
            controller = int(cluster.describe()["leader_id"])
            killed_at = time.monotonic()
            cluster.kill(controller)
            cluster.start_node(controller)
            killed = (controller, len(ongoing))
        if not ongoing and replica_sets(lister) == [set(NEW)] * 6:
            break
        time.sleep(0.25)
    done = time.monotonic()
    taken_in = size_on(admin, 7)
    produced = len(producer.latencies) - sent_before
    assert not lister.list_reassignments()
    assert replica_sets(lister) == [set(NEW)] * 6
    assert killed is not None, "every partition moved before the controller could be killed"

    wait_until(lambda: len(producer.latencies) >= sent_before + produced + RATE_PER_S,
               WAIT_S, "records acknowledged after the reassignment")
    assert producer.stop() == 0
    verified = kraft("reassign-partitions", "--cluster", str(cluster.directory),
                     "--reassignment-json-file", str(moved), "--verify")
    assert "Clearing broker-level throttles on brokers 4,5,6,7" in verified.stdout
    wanted = acknowledged | set(producer.acknowledged)
    assert wanted <= consume(bootstrap(cluster), TOPIC, 6, wanted)

    duration = done - started
    allowed = allowed_bytes(duration, produced)
    latencies = sorted(producer.latencies)
    spans = {"before": (0.0, started), "moving": (started, killed_at),
             "5 s after the kill": (killed_at, killed_at + 5),
             "after": (killed_at + 5, math.inf)}
    p99s = ", ".join(f"{name} {p99(producer.answered, low, high):.0f} ms"
                     for name, (low, high) in spans.items())
    print(f"reassignment of 6 partitions ({PRELOAD >> 20} MiB) to {{5, 6, 7}} at "
          f"{RATE_PER_S} records/s, controller {killed[0]} killed with {killed[1]} "
          f"partitions still moving: {duration:.1f} s; into broker 7 {taken_in >> 10} KiB, "
          f"{taken_in / duration / 1024:.0f} KiB/s against a throttle of {THROTTLE >> 10} "
          f"KiB/s (the window allows {allowed / duration / 1024:.0f} KiB/s over "
          f"{duration:.1f} s); {len(latencies)} records produced, {len(producer.errors)} "
          f"errors, {len(wanted)} acknowledged (with the preload) all read back; p99 "
          f"{latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms ({p99s})")
    assert producer.errors == []
    assert PRELOAD <= taken_in <= allowed
    admin.close()
