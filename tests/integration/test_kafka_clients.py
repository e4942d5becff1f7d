"""Unmodified Kafka clients (kafka-python, confluent-kafka/librdkafka, default settings)
against a local 3-voter + 3-broker cluster over the brokers' Kafka listeners."""

from __future__ import annotations

import datetime
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from raft.common.errors import ErrorCode
from raft.common.kafka.wire_client import call
from tests.support.quorum_support import FAST_SETTINGS, running_cluster, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

BROKERS = (4, 5, 6)
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "socket.request.max.bytes": 8 << 20}
WAIT_S = 30.0


def is_unfenced(cluster: Cluster, node_id: int) -> bool:
    status = cluster.broker_status(node_id)
    return status is not None and status.get("is_fenced") is False


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("kafka") / "cluster", SETTINGS,
                         voters=3, brokers=len(BROKERS)) as started:
        yield started


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return ",".join(a for n in BROKERS if (a := cluster.node(n).client_address))


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Iterator[Any]:
    client = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    yield client
    client.close()


def partition_counts(admin: Any, name: str) -> list[int | None]:
    """What each broker's image says of topic `name`: its partition count, None if
    unknown (Metadata v12 straight to every broker)."""
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=name),),
                              allow_auto_topic_creation=False,  # a probe: creates nothing
                              include_topic_authorized_operations=False)
    counts: list[int | None] = []
    for address in admin.config["bootstrap_servers"].split(","):
        (topic,) = call(address, request).topics
        counts.append(len(topic.partitions) if topic.error_code == ErrorCode.NONE else None)
    return counts


def wait_everywhere(admin: Any, name: str, count: int | None) -> None:
    """Broker images converge (each fetches the metadata log): wait, bounded, until
    every broker shows `name` with `count` partitions (None: absent), so the next
    request sees the change whichever broker the client picks."""
    wait_until(lambda: partition_counts(admin, name) == [count] * len(BROKERS), WAIT_S,
               f"every broker to show {name} with {count} partitions")


def create(admin: Any, name: str, partitions: int = 1, replication: int = 1) -> uuid.UUID:
    result = admin.create_topics({name: {"num_partitions": partitions,
                                         "replication_factor": replication}})
    (topic,) = result["topics"]
    assert topic["error_code"] == 0, topic
    wait_everywhere(admin, name, partitions)
    return uuid.UUID(str(topic["topic_id"]))


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, count: int
                         ) -> list[tuple[bytes, bytes]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10_000)
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got = []
        for message in consumer:
            got.append((message.key, message.value))
            if len(got) == count:
                break
        return got
    finally:
        consumer.close()


def confluent_consume(bootstrap: str, topic: str, partitions: int, count: int
                      ) -> list[tuple[bytes, bytes]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                        "group.id": f"test-{topic}"})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p,
                                                        confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions)])
        got: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.key(), message.value()))
        return got
    finally:
        consumer.close()


def test_kafka_python_creates_describes_and_deletes_by_id_when_topic_ids_are_used(
        admin: Any, cluster: Cluster, bootstrap: str) -> None:
    """KIP-516: CreateTopics v7 returns the ID, Metadata v12 describes by ID,
    DeleteTopics v6 deletes by ID; confluent-kafka sees the same ID."""
    topic_id = create(admin, "ids", partitions=2)
    (by_id,) = admin.describe_topics([topic_id])
    assert by_id["error_code"] == 0
    assert by_id["name"] == "ids"
    assert len(by_id["partitions"]) == 2
    (by_name,) = admin.describe_topics(["ids"])
    assert uuid.UUID(str(by_name["topic_id"])) == topic_id
    other = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
    futures = other.describe_topics(confluent_kafka.TopicCollection(["ids"]))
    description = futures["ids"].result(WAIT_S)
    assert _confluent_uuid_equals(description.topic_id, topic_id)
    assert len(description.partitions) == 2
    cluster_view = admin.describe_cluster()
    assert sorted(b["broker_id"] for b in cluster_view["brokers"]) == list(BROKERS)
    assert cluster_view["cluster_id"] == cluster.cluster_id
    result = admin.delete_topics([topic_id])
    assert [t["error_code"] for t in result["topics"]] == [0]
    wait_everywhere(admin, "ids", None)
    assert "ids" not in admin.list_topics()
    (gone,) = admin.describe_topics([topic_id])
    assert gone["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
    again = admin.delete_topics([topic_id], raise_errors=False)
    assert [t["error_code"] for t in again["topics"]] == [ErrorCode.UNKNOWN_TOPIC_ID]


def _confluent_uuid_equals(value: Any, topic_id: uuid.UUID) -> bool:
    most, least = value.get_most_significant_bits(), value.get_least_significant_bits()
    return ((most & (2**64 - 1)) << 64 | (least & (2**64 - 1))) == topic_id.int


def test_kafka_python_round_trip_when_produced_and_consumed_with_assign(
        admin: Any, bootstrap: str) -> None:
    """Produce (idempotent by default: InitProducerId) and consume back exact keys and
    values over two partitions."""
    create(admin, "kp", partitions=2)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    sent = [(f"k{i}".encode(), f"value {i}".encode()) for i in range(20)]
    futures = [producer.send("kp", key=k, value=v, partition=i % 2)
               for i, (k, v) in enumerate(sent)]
    producer.flush(WAIT_S)
    offsets = sorted((f.get(WAIT_S).partition, f.get(WAIT_S).offset) for f in futures)
    producer.close()
    assert offsets == sorted((p, o) for p in (0, 1) for o in range(10))
    got = kafka_python_consume(bootstrap, "kp", 2, len(sent))
    assert sorted(got) == sorted(sent)


def test_confluent_round_trip_and_cross_client_when_using_librdkafka(
        admin: Any, bootstrap: str) -> None:
    """librdkafka creates a topic, produces and consumes back exact keys and values;
    kafka-python reads what librdkafka wrote (batches stored intact, CRC32C checked by
    the consumer); librdkafka deletes it by name."""
    other = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
    other.create_topics([confluent_admin.NewTopic("ck", 1, 1)])["ck"].result(WAIT_S)
    wait_everywhere(admin, "ck", 1)
    assert "ck" in other.list_topics(timeout=WAIT_S).topics
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    sent = [(f"key-{i}".encode(), f"librdkafka {i}".encode()) for i in range(15)]
    for key, value in sent:
        producer.produce("ck", key=key, value=value)
    assert producer.flush(WAIT_S) == 0
    assert confluent_consume(bootstrap, "ck", 1, len(sent)) == sent
    assert kafka_python_consume(bootstrap, "ck", 1, len(sent)) == sent
    other.delete_topics(["ck"])["ck"].result(WAIT_S)
    wait_everywhere(admin, "ck", None)
    assert "ck" not in other.list_topics(timeout=WAIT_S).topics


def fetch_v13(address: str, topic_id: uuid.UUID, partition: int = 0,
              offset: int = 0, replica_id: int = -1) -> Any:
    request = FetchRequest(
        replica_id=replica_id, max_wait=datetime.timedelta(milliseconds=0), min_bytes=0,
        max_bytes=1 << 20,
        topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=())
    return call(address, request)


def test_stale_topic_id_fetch_gets_unknown_topic_id_when_topic_recreated(
        admin: Any, cluster: Cluster, bootstrap: str) -> None:
    """KIP-516 stale reads: A (replicated on all three brokers) is deleted and recreated;
    a Fetch v13 still holding A's old ID, as consumer or as follower, gets
    UNKNOWN_TOPIC_ID and no records; no replica of the new A holds the old data."""
    old_id = create(admin, "recreated", replication=3)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    producer.send("recreated", key=b"k", value=b"old-value").get(WAIT_S)
    (described,) = admin.describe_topics([old_id])
    leader = described["partitions"][0]["leader_id"]
    address = cluster.node(leader).client_address
    assert address is not None
    before = fetch_v13(address, old_id).responses[0].partitions[0]
    assert before.error_code == ErrorCode.NONE
    assert b"old-value" in (before.records or b"")

    admin.delete_topics([old_id])
    wait_everywhere(admin, "recreated", None)
    new_id = create(admin, "recreated", replication=3)
    assert new_id != old_id
    producer.send("recreated", key=b"k", value=b"new-value").get(WAIT_S)
    producer.close()

    for node_id in BROKERS:  # every broker, leader or not
        stale = fetch_v13(cluster.node(node_id).client_address or "", old_id)
        (part,) = stale.responses[0].partitions
        assert part.error_code == ErrorCode.UNKNOWN_TOPIC_ID
        assert not part.records
    follower = next(b for b in BROKERS if b != leader)  # a replica fetching as follower
    stale = fetch_v13(address, old_id, replica_id=follower).responses[0].partitions[0]
    assert stale.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert not stale.records
    (described,) = admin.describe_topics([new_id])
    new_address = cluster.node(described["partitions"][0]["leader_id"]).client_address
    fresh = fetch_v13(new_address or "", new_id).responses[0].partitions[0]
    assert fresh.error_code == ErrorCode.NONE
    assert b"new-value" in (fresh.records or b"")
    assert b"old-value" not in (fresh.records or b"")
    for node_id in BROKERS:  # acks=all: every replica has the new data, none the old
        data = partition_log_bytes(cluster, node_id, "recreated-0")
        assert b"new-value" in data
        assert b"old-value" not in data


def partition_log_bytes(cluster: Cluster, node_id: int, directory: str) -> bytes:
    path = Path(cluster.node(node_id).data_dir) / directory / "00000000000000000000.log"
    return path.read_bytes() if path.exists() else b""


def test_every_replica_holds_the_batch_when_acks_all_with_replication_factor_three(
        admin: Any, cluster: Cluster, bootstrap: str) -> None:
    """Followers fetch from the leader (Fetch v13 by topic ID); the leader's high
    watermark follows the ISR, so acks=all returns once all three replicas hold it."""
    create(admin, "rf3", partitions=1, replication=3)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    metadata = producer.send("rf3", key=b"k", value=b"replicated value").get(WAIT_S)
    producer.close()
    assert metadata.offset == 0
    for node_id in BROKERS:  # acked with acks=all: already on every replica's disk
        assert b"replicated value" in partition_log_bytes(cluster, node_id, "rf3-0")
    assert kafka_python_consume(bootstrap, "rf3", 1, 1) == [(b"k", b"replicated value")]
    assert confluent_consume(bootstrap, "rf3", 1, 1) == [(b"k", b"replicated value")]


def test_subscribed_consumers_get_every_record_when_using_consumer_groups(
        admin: Any, bootstrap: str) -> None:
    """Consumer groups (JoinGroup/SyncGroup/Heartbeat, committed offsets): a kafka-python
    and a librdkafka consumer subscribe in their own groups and each reads everything;
    the committed offsets cover every record."""
    create(admin, "subscribed", partitions=2)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    sent = {f"value {i}".encode() for i in range(12)}
    for value in sent:
        producer.send("subscribed", value=value)
    producer.flush(WAIT_S)
    producer.close()
    consumer = kafka.KafkaConsumer("subscribed", bootstrap_servers=bootstrap, group_id="kp",
                                   auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    got = set()
    for message in consumer:
        got.add(message.value)
        if len(got) == len(sent):
            break
    consumer.commit()
    consumer.close()
    assert got == sent
    committed = admin.list_group_offsets("kp")["kp"]  # OffsetFetch on the coordinator
    assert sum(o.offset for o in committed.values()) == len(sent)
    other = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ck",
                                      "auto.offset.reset": "earliest"})
    other.subscribe(["subscribed"])
    seen: set[bytes] = set()
    deadline = time.monotonic() + WAIT_S
    while seen != sent and time.monotonic() < deadline:
        message = other.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.value())
    other.close()
    assert seen == sent


def test_new_partition_usable_when_partitions_added(admin: Any, bootstrap: str) -> None:
    """CreatePartitions (forwarded to the controller) grows a topic; the new partition
    takes records at once."""
    topic_id = create(admin, "grown", partitions=1)
    admin.create_partitions({"grown": 3})
    wait_everywhere(admin, "grown", 3)
    (described,) = admin.describe_topics([topic_id])
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2]
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    metadata = producer.send("grown", key=b"k", value=b"in p2", partition=2).get(WAIT_S)
    producer.close()
    assert (metadata.partition, metadata.offset) == (2, 0)


def test_data_survives_when_leader_broker_killed_and_restarted(
        admin: Any, cluster: Cluster, bootstrap: str) -> None:
    """Durable appends: every acknowledged record is read back after the partition's
    leader is SIGKILLed and restarted (the log is recovered from its directory)."""
    create(admin, "durable", partitions=1)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    sent = [(f"k{i}".encode(), f"durable {i}".encode()) for i in range(10)]
    for key, value in sent:
        producer.send("durable", key=key, value=value)
    producer.flush(WAIT_S)
    producer.close()
    (described,) = admin.describe_topics(["durable"])
    leader = described["partitions"][0]["leader_id"]
    cluster.kill(leader)
    cluster.start_node(leader)
    wait_until(lambda: is_unfenced(cluster, leader), WAIT_S, "the restarted broker unfenced")
    assert kafka_python_consume(bootstrap, "durable", 1, len(sent)) == sent


def test_garbage_closes_only_that_connection_when_sent_to_a_broker_process(
        cluster: Cluster, bootstrap: str) -> None:
    """Bad input to a real broker: the offending connection is closed with the reason
    logged; the broker keeps serving Kafka clients."""
    address = cluster.node(BROKERS[0]).client_address or ""
    host, _, port = address.rpartition(":")
    unknown_api = b"\x00\x00\x00\x0a\x7f\x7f\x00\x00\x00\x00\x00\x01\xff\xff"
    for garbage in (unknown_api, b"\x7f\xff\xff\xff"):
        with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
            sock.sendall(garbage)
            assert sock.recv(16) == b""  # closed by the broker
    log_path = Path(cluster.node(BROKERS[0]).dir) / "node.log"
    reasons = [json.loads(line).get("reason", "") for line in log_path.read_text().splitlines()
               if "closing Kafka connection" in line]
    assert any("unsupported api" in r for r in reasons)
    assert any("frame size" in r for r in reasons)
    client = kafka.KafkaAdminClient(bootstrap_servers=address)
    try:
        assert isinstance(client.list_topics(), list)
    finally:
        client.close()
