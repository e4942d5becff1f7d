"""Topic configs and manual assignments with a real client (confluent-kafka): create with
configs and an assignment, DescribeConfigs, IncrementalAlterConfigs, refusals, and
min.insync.replicas enforced on acks=all; `kraft configs` against the same cluster.
One 1-voter + 3-broker cluster for the module."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from broker.kafka.partitions.partition_log import split_batches
from broker.kafka.partitions.producer_state import read_header
from tests.support.quorum_support import FAST_SETTINGS, running_cluster, wait_until
from tools.cli import main
from tools.client.connection import KafkaClient, metadata_request
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

BROKERS = (2, 3, 4)
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "replica.lag.time.max.ms": 1000}
WAIT_S = 20.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("configs") / "cluster", SETTINGS,
                         voters=1, brokers=len(BROKERS)) as started:
        yield started


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return ",".join(a for n in BROKERS if (a := cluster.node(n).client_address))


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> Any:
    return admin_mod.AdminClient({"bootstrap.servers": bootstrap})


def isr_seen_by(address: str, topic: str) -> list[int]:
    """Partition 0's ISR in the Metadata answer of the broker at `address` itself."""
    async def ask() -> list[int]:
        client = KafkaClient([address], ssl_context=None, sasl=None)
        try:
            metadata = await client.call(address, metadata_request(topic))
        finally:
            await client.aclose()
        (found,) = metadata.topics
        return sorted(int(n) for n in found.partitions[0].isr_nodes)
    return trio.run(ask)


def topic_resource(name: str) -> Any:
    return admin_mod.ConfigResource(admin_mod.ResourceType.TOPIC, name)


def describe(admin: Any, name: str) -> dict[str, Any]:
    (future,) = admin.describe_configs([topic_resource(name)]).values()
    return future.result(WAIT_S)  # type: ignore[no-any-return]


def alter(admin: Any, name: str, *entries: tuple[str, str | None]) -> None:
    resource = topic_resource(name)
    for key, value in entries:
        op = (admin_mod.AlterConfigOpType.DELETE if value is None
              else admin_mod.AlterConfigOpType.SET)
        resource.add_incremental_config(admin_mod.ConfigEntry(key, value,
                                                              incremental_operation=op))
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(WAIT_S)


def error_of(future: Any) -> Any:
    with pytest.raises(confluent_kafka.KafkaException) as info:
        future.result(WAIT_S)
    return info.value.args[0]


def test_configs_and_assignment_are_honoured_when_a_topic_is_created(
        admin: Any, cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    new = admin_mod.NewTopic("cfg", num_partitions=2, replica_assignment=[[2, 3], [4, 2]],
                             config={"retention.ms": "1000", "min.insync.replicas": "2"})
    admin.create_topics([new])["cfg"].result(WAIT_S)
    described = admin.describe_topics(confluent_kafka.TopicCollection(["cfg"]))
    partitions = described["cfg"].result(WAIT_S).partitions
    assert [[r.id for r in p.replicas] for p in partitions] == [[2, 3], [4, 2]]

    configs = describe(admin, "cfg")
    assert configs["retention.ms"].value == "1000"
    assert not configs["retention.ms"].is_default
    assert configs["retention.ms"].source == admin_mod.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].is_default
    assert configs["cleanup.policy"].value == "delete"

    alter(admin, "cfg", ("retention.ms", "2000"), ("min.insync.replicas", None))
    configs = describe(admin, "cfg")
    assert configs["retention.ms"].value == "2000"
    assert configs["min.insync.replicas"].is_default

    # the CLI sees the same (through the controller's admin API)
    assert main(["configs", "--cluster", str(cluster.directory), "--entity-type", "topics",
                 "--entity-name", "cfg", "--alter", "--add-config", "segment.bytes=1048576",
                 "--delete-config", "retention.ms"]) == 0
    capsys.readouterr()
    assert main(["configs", "--cluster", str(cluster.directory), "--entity-type", "topics",
                 "--entity-name", "cfg", "--describe", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["configs"]}
    assert rows["segment.bytes"] == {"name": "segment.bytes", "value": "1048576",
                                     "default": False}
    assert rows["retention.ms"]["default"]


def test_unknown_and_unsupported_configs_are_refused_when_created_or_altered(
        admin: Any) -> None:
    bad = admin_mod.NewTopic("bad", num_partitions=1, replication_factor=1,
                             config={"no.such.config": "1"})
    error = error_of(admin.create_topics([bad])["bad"])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    lagged = admin_mod.NewTopic("bad", num_partitions=1, replication_factor=1,
                                config={"cleanup.policy": "compact",
                                        "min.compaction.lag.ms": "-1"})
    error = error_of(admin.create_topics([lagged])["bad"])
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "min.compaction.lag.ms" in error.str()
    both = admin_mod.NewTopic("bad", num_partitions=1, replication_factor=1)
    admin.create_topics([both])["bad"].result(WAIT_S)
    resource = topic_resource("bad")
    resource.add_incremental_config(admin_mod.ConfigEntry(
        "no.such.config", "1", incremental_operation=admin_mod.AlterConfigOpType.SET))
    (future,) = admin.incremental_alter_configs([resource]).values()
    assert error_of(future).code() == confluent_kafka.KafkaError.INVALID_CONFIG
    (future,) = admin.describe_configs([topic_resource("nope")]).values()
    assert error_of(future).code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def produce_with(bootstrap: str, topic: str, value: bytes, timestamp: int = 0) -> Any:
    """The delivery report of one record (error, message), no retries."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "retries": 0,
                                         "enable.idempotence": False,
                                         "message.max.bytes": 10_000_000,
                                         "message.timeout.ms": int(WAIT_S * 1000)})
    reports: list[Any] = []
    producer.produce(topic, value, key=b"k", timestamp=timestamp,
                     on_delivery=lambda err, msg: reports.append((err, msg)))
    producer.flush(WAIT_S + 5)
    (report,) = reports
    return report


def test_kafka_record_configs_are_enforced_on_produce(admin: Any, bootstrap: str) -> None:
    """max.message.bytes refuses a larger batch;
    message.timestamp.before.max.ms an old CreateTime; LogAppendTime stamps the batch,
    and a consumer reads that time back."""
    topics = {"small": {"max.message.bytes": "2000", "compression.type": "zstd"},
              "recent": {"message.timestamp.before.max.ms": "60000"},
              "stamped": {"message.timestamp.type": "LogAppendTime"}}
    futures = admin.create_topics([
        admin_mod.NewTopic(name, num_partitions=1, replication_factor=1, config=config)
        for name, config in topics.items()])
    for future in futures.values():
        future.result(WAIT_S)
    assert describe(admin, "small")["compression.type"].value == "zstd"
    error, _ = produce_with(bootstrap, "small", b"x" * 5000)
    assert error is not None
    assert error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_with(bootstrap, "small", b"x" * 100)[0] is None
    error, _ = produce_with(bootstrap, "recent", b"old", timestamp=1_000)
    assert error is not None
    assert error.code() == confluent_kafka.KafkaError.INVALID_TIMESTAMP
    assert produce_with(bootstrap, "recent", b"new")[0] is None
    before_ms = int(time.time() * 1000)
    error, sent = produce_with(bootstrap, "stamped", b"v", timestamp=1_000)
    assert error is None
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ts",
                                         "auto.offset.reset": "earliest"})
    try:
        consumer.assign([confluent_kafka.TopicPartition("stamped", 0, 0)])
        message = wait_until(lambda: consumer.poll(1.0), WAIT_S, "the stamped record")
    finally:
        consumer.close()
    kind, stamp = message.timestamp()
    assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME
    assert before_ms <= stamp <= int(time.time() * 1000)
    assert sent.timestamp() == (kind, stamp)  # the produce answer carried it


def test_legacy_alter_configs_replaces_the_whole_set(admin: Any) -> None:
    """confluent-kafka's alter_configs is Kafka's legacy AlterConfigs (API 33): the
    configs given become the topic's whole set, so a key left out returns to its
    default ("not supported by broker" before)."""
    admin.create_topics([admin_mod.NewTopic(
        "legacy", num_partitions=1, replication_factor=1,
        config={"retention.ms": "60000", "segment.bytes": "1048576"})])["legacy"].result(WAIT_S)
    resource = topic_resource("legacy")
    resource.set_config("max.message.bytes", "4096")
    resource.set_config("retention.ms", "120000")
    (future,) = admin.alter_configs([resource]).values()
    future.result(WAIT_S)
    described = describe(admin, "legacy")
    assert described["max.message.bytes"].value == "4096"
    assert described["retention.ms"].value == "120000"
    assert described["segment.bytes"].is_default
    bad = topic_resource("legacy")
    bad.set_config("min.insync.replicas", "0")
    (future,) = admin.alter_configs([bad]).values()
    assert error_of(future).name() == "INVALID_CONFIG"
    assert describe(admin, "legacy")["max.message.bytes"].value == "4096"


def test_authorized_operations_are_answered_when_asked(admin: Any) -> None:
    """Without an authorizer the caller may do everything: Kafka's 8 topic and 7 cluster
    operations (librdkafka got none before)."""
    admin.create_topics([admin_mod.NewTopic("ops", num_partitions=1,
                                            replication_factor=1)])["ops"].result(WAIT_S)
    topics = admin.describe_topics(confluent_kafka.TopicCollection(["ops"]),
                                   include_authorized_operations=True)
    topic_ops = {op.name for op in topics["ops"].result(WAIT_S).authorized_operations}
    assert topic_ops == {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
                         "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(WAIT_S)
    assert {op.name for op in cluster.authorized_operations} == {
        "CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE"}


# Last in the module: it leaves broker 4 down.
PRODUCER_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(cluster: Cluster, broker: int, topic: str) -> list[int]:
    """The codec of every batch in partition 0's segment files on `broker`."""
    directory = Path(cluster.node(broker).data_dir) / f"{topic}-0"
    return [read_header(batch).attributes & 0x07
            for segment in sorted(directory.glob("*.log"))
            for batch in split_batches(segment.read_bytes())]


def level(copies: list[list[int]]) -> list[list[int]] | None:
    """The copies, once they hold the same number of batches."""
    return copies if len({len(c) for c in copies}) == 1 else None


def test_compression_type_recompresses_on_the_leader_for_every_codec(
        admin: Any, bootstrap: str, cluster: Cluster) -> None:
    """confluent-kafka producers in each of Kafka's codecs write to a topic of each
    compression.type: every replica stores every batch in the topic's codec (as sent for
    `producer`), and a consumer reads back exactly what was sent."""
    topics = {"as-sent": "producer", "in-zstd": "zstd", "in-snappy": "snappy",
              "plain": "uncompressed"}
    futures = admin.create_topics([
        admin_mod.NewTopic(name, num_partitions=1, replication_factor=3,
                           config={"compression.type": codec})
        for name, codec in topics.items()])
    for future in futures.values():
        future.result(WAIT_S)
    sent = []
    for codec in PRODUCER_CODECS:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "compression.type": codec, "acks": "all",
            "linger.ms": 5, "enable.idempotence": True})
        values = [f"{codec}-{i}-".encode() + b"x" * 200 for i in range(20)]
        for topic in topics:
            for value in values:
                producer.produce(topic, value, key=value[:8], partition=0)
            assert producer.flush(WAIT_S) == 0
        sent += values
    for topic, codec in topics.items():
        copies = wait_until(  # every batch was acknowledged: followers end level
            lambda t=topic: level([stored_codecs(cluster, b, t) for b in BROKERS]),
            WAIT_S, f"{topic}'s replicas to hold the same batches")
        for codecs in copies:
            assert len(codecs) >= len(PRODUCER_CODECS)
            if codec == "producer":
                assert set(codecs) == {CODEC_IDS[c] for c in PRODUCER_CODECS}
            else:
                assert set(codecs) == {CODEC_IDS[codec]}, topic
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                             "group.id": f"read-{topic}",
                                             "auto.offset.reset": "earliest"})
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        read: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        try:
            while len(read) < len(sent) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    read.append(message.value())
        finally:
            consumer.close()
        assert read == sent, topic


def test_acks_all_is_refused_with_not_enough_replicas_when_a_replica_is_down(
        admin: Any, bootstrap: str, cluster: Cluster) -> None:
    new = admin_mod.NewTopic("isr3", num_partitions=1, replica_assignment=[[2, 3, 4]],
                             config={"min.insync.replicas": "3"})
    admin.create_topics([new])["isr3"].result(WAIT_S)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "retries": 0, "enable.idempotence": False,
                                         "message.timeout.ms": 10_000})
    outcomes: list[Any] = []

    def produce() -> Any:
        outcomes.clear()
        producer.produce("isr3", b"v", partition=0,
                         on_delivery=lambda err, msg: outcomes.append(err))
        producer.flush(WAIT_S)
        assert len(outcomes) == 1
        return outcomes[0]

    assert produce() is None  # the full ISR: acked
    cluster.kill(4)

    # The leader decides on its own image: the shrink must be in broker 2's, not just in
    # the image of whichever broker the admin client asks (a lagging leader would store
    # the record, then answer NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    leader_address = cluster.node(2).client_address
    assert leader_address is not None
    wait_until(lambda: isr_seen_by(leader_address, "isr3") == [2, 3], WAIT_S,
               "the leader's ISR to shrink without broker 4")
    error = produce()
    assert error is not None
    assert error.code() == confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS

