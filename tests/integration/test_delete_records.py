"""DeleteRecords and retention on a local 3-voter + 3-broker cluster, with unmodified
clients: kafka-python's and confluent-kafka's delete_records move every replica's log
start (low watermark answered, beyond the high watermark refused), consumers that
start at the beginning (auto.offset.reset=earliest) begin at the new log start, and a
topic whose retention.bytes is small (its own, or the brokers' log.retention.bytes)
loses whole old segments on every replica."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.partitions.segments import segment_bases, segment_name
from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
kafka_errors = pytest.importorskip("kafka.errors")
confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

BROKER_IDS = (4, 5, 6)
# log.retention.bytes: the brokers' default for topics that set no retention.bytes (one
# segment.bytes of 1 GiB, the default, keeps the other topics here in their active segment)
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "log.retention.check.interval.ms": 200, "replica.lag.time.max.ms": 1000,
            "log.retention.bytes": 2000}
WAIT_S = 30.0


@dataclass(frozen=True)
class Brokers:
    cluster: Cluster
    bootstrap: str
    admin: Any  # kafka-python's KafkaAdminClient


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    with running_cluster(tmp_path_factory.mktemp("delete-records") / "cluster", SETTINGS,
                         voters=3, brokers=len(BROKER_IDS)) as cluster:
        bootstrap = ",".join(a for n in BROKER_IDS if (a := cluster.node(n).client_address))
        admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            yield Brokers(cluster=cluster, bootstrap=bootstrap, admin=admin)
        finally:
            admin.close()


def create(admin: Any, bootstrap: str, name: str, configs: dict[str, str] | None = None
           ) -> None:
    result = admin.create_topics({name: {"num_partitions": 1, "replication_factor": 3,
                                         "configs": configs or {}}})
    (topic,) = result["topics"]
    assert topic["error_code"] == 0, topic
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        wait_until(lambda: consumer.partitions_for_topic(name) == {0}, WAIT_S,
                   f"{name} in the brokers' metadata")
    finally:
        consumer.close()


def produce(bootstrap: str, name: str, count: int, size: int = 10) -> None:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        for n in range(count):
            producer.send(name, value=str(n).encode().ljust(size, b".")).get(WAIT_S)
    finally:
        producer.close()


def earliest(bootstrap: str, name: str) -> int:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        partition = kafka.TopicPartition(name, 0)
        return int(consumer.beginning_offsets([partition])[partition])
    finally:
        consumer.close()


def consume_from_beginning(bootstrap: str, name: str, count: int,
                           group: str | None = None) -> list[int]:
    """The offsets a consumer of `group` (default a new one) reads with
    auto.offset.reset=earliest."""
    consumer = kafka.KafkaConsumer(name, bootstrap_servers=bootstrap,
                                   group_id=group or f"g-{name}",
                                   auto_offset_reset="earliest", consumer_timeout_ms=15_000)
    try:
        offsets = []
        for message in consumer:
            offsets.append(message.offset)
            if len(offsets) == count:
                break
        return offsets
    finally:
        consumer.close()


def leader_and_isr(admin: Any, name: str, attempts: int = 5) -> tuple[int, list[int]]:
    for attempt in range(attempts):
        try:
            (topic,) = admin.describe_topics([name])
            break
        except kafka_errors.KafkaConnectionError:
            # the client asked a broker the test killed; it backs off from that one
            if attempt == attempts - 1:
                raise
    (partition,) = topic["partitions"]
    return int(partition["leader_id"]), sorted(int(n) for n in partition["isr_nodes"])


def replica_segments(cluster: Cluster, name: str) -> list[list[int]]:
    return [segment_bases(p.name for p in (Path(cluster.node(n).data_dir) / f"{name}-0")
                          .iterdir())
            for n in BROKER_IDS]


def test_kafka_python_delete_records_moves_every_replica_start(brokers: Brokers) -> None:
    admin, bootstrap = brokers.admin, brokers.bootstrap
    create(admin, bootstrap, "dr-kp")
    produce(bootstrap, "dr-kp", 10)
    partition = kafka.TopicPartition("dr-kp", 0)
    result = admin.delete_records({partition: 4}, timeout_ms=10_000)
    assert result[partition]["low_watermark"] == 4  # every ISR replica's start reached it
    assert earliest(bootstrap, "dr-kp") == 4
    assert consume_from_beginning(bootstrap, "dr-kp", 6) == list(range(4, 10))
    assert admin.delete_records({partition: 2})[partition]["low_watermark"] == 4  # not back
    with pytest.raises(kafka_errors.OffsetOutOfRangeError):
        admin.delete_records({partition: 11})


def test_confluent_delete_records_to_the_high_watermark(brokers: Brokers) -> None:
    admin, bootstrap = brokers.admin, brokers.bootstrap
    create(admin, bootstrap, "dr-ck")
    produce(bootstrap, "dr-ck", 5)
    client = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
    futures = client.delete_records([confluent_kafka.TopicPartition(
        "dr-ck", 0, confluent_kafka.OFFSET_END)])
    (deleted,) = [future.result(WAIT_S) for future in futures.values()]
    assert deleted.low_watermark == 5
    assert earliest(bootstrap, "dr-ck") == 5


def test_retention_bytes_deletes_old_segments_on_every_replica(brokers: Brokers) -> None:
    """segment.bytes 1000 and retention.bytes 2000: the leader deletes its oldest segments
    every log.retention.check.interval.ms, the followers follow its start, and a new
    consumer group starts at that start."""
    admin, bootstrap, cluster = brokers.admin, brokers.bootstrap, brokers.cluster
    create(admin, bootstrap, "dr-ret", {"segment.bytes": "1000", "retention.bytes": "2000"})
    produce(bootstrap, "dr-ret", 60, size=100)
    # a follower trims when a Fetch answer brings the leader's start: wait for every one
    wait_until(lambda: all(bases and bases[0] > 0 and len(bases) <= 4
                           for bases in replica_segments(cluster, "dr-ret")),
               WAIT_S, "every replica to delete its first segments, down to 4 at most")
    start = earliest(bootstrap, "dr-ret")
    assert 0 < start < 60
    offsets = consume_from_beginning(bootstrap, "dr-ret", 60 - start)
    assert offsets[0] >= start  # retention may have moved on meanwhile, never back
    assert offsets == list(range(offsets[0], 60))


def test_a_topic_without_retention_bytes_takes_the_brokers_log_retention_bytes(
        brokers: Brokers) -> None:
    """segment.bytes 1000 and no retention.bytes: the brokers' log.retention.bytes (2000)
    deletes the oldest segments on every replica, as the topic's own would."""
    admin, bootstrap, cluster = brokers.admin, brokers.bootstrap, brokers.cluster
    create(admin, bootstrap, "dr-broker-default", {"segment.bytes": "1000"})
    produce(bootstrap, "dr-broker-default", 60, size=100)
    wait_until(lambda: all(bases and bases[0] > 0 and len(bases) <= 4
                           for bases in replica_segments(cluster, "dr-broker-default")),
               WAIT_S, "every replica to delete its first segments, down to 4 at most")
    assert 0 < earliest(bootstrap, "dr-broker-default") < 60


def test_kraft_delete_records_verb_prints_each_low_watermark(brokers: Brokers,
                                                             tmp_path: Path) -> None:
    """`kraft delete-records` as kafka-delete-records.sh: one line per partition, exit 1
    when one failed (beyond the high watermark), 2 on a bad offset file."""
    create(brokers.admin, brokers.bootstrap, "dr-cli")
    produce(brokers.bootstrap, "dr-cli", 3)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "dr-cli", "partition": 0, "offset": 2}]}))
    done = kraft("delete-records", "--bootstrap-server", brokers.bootstrap,
                 "--offset-json-file", str(offsets))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "partition: dr-cli-0\tlow_watermark: 2"
    offsets.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "dr-cli", "partition": 0, "offset": 9}]}))
    beyond = kraft("delete-records", "--bootstrap-server", brokers.bootstrap,
                   "--offset-json-file", str(offsets))
    assert beyond.returncode == 1
    assert beyond.stdout.splitlines()[-1] == "partition: dr-cli-0\terror: OFFSET_OUT_OF_RANGE"
    offsets.write_text('{"partitions": [{"topic": "dr-cli", "offset": "x"}]}')
    bad = kraft("delete-records", "--bootstrap-server", brokers.bootstrap,
                "--offset-json-file", str(offsets))
    assert bad.returncode == 2
    assert "partitions[0]" in bad.stderr
    assert earliest(brokers.bootstrap, "dr-cli") == 2


def test_follower_whose_log_ends_below_the_leader_start_resets_to_it(
        brokers: Brokers) -> None:
    """A follower down while the leader deleted past its log end: on restart its fetch
    is OFFSET_OUT_OF_RANGE with the leader's start, it empties its log, starts it there
    (one segment at that base) and rejoins the ISR."""
    admin, bootstrap, cluster = brokers.admin, brokers.bootstrap, brokers.cluster
    create(admin, bootstrap, "dr-reset")
    produce(bootstrap, "dr-reset", 3)
    leader, _ = leader_and_isr(admin, "dr-reset")
    follower = next(n for n in BROKER_IDS if n != leader)
    cluster.kill(follower)
    wait_until(lambda: follower not in leader_and_isr(admin, "dr-reset")[1], WAIT_S,
               "the ISR to drop the killed follower")
    produce(bootstrap, "dr-reset", 7)
    partition = kafka.TopicPartition("dr-reset", 0)
    assert admin.delete_records({partition: 10})[partition]["low_watermark"] == 10
    cluster.start_node(follower)
    produce(bootstrap, "dr-reset", 2)
    wait_until(lambda: leader_and_isr(admin, "dr-reset") == (leader, list(BROKER_IDS)),
               WAIT_S, "the restarted follower to rejoin the ISR")
    directory = Path(cluster.node(follower).data_dir) / "dr-reset-0"
    assert segment_bases(p.name for p in directory.iterdir()) == [10]
    assert (directory / segment_name(10)).stat().st_size > 0  # offsets 10 and 11


def test_group_whose_committed_offset_was_deleted_resets_to_the_log_start(
        brokers: Brokers) -> None:
    """auto.offset.reset=earliest after deletion: a group committed offset 2, the records
    up to 6 are deleted, its next consumer's Fetch at 2 is OFFSET_OUT_OF_RANGE and it
    resumes at the log start (6); with auto.offset.reset=none it gets the error."""
    admin, bootstrap = brokers.admin, brokers.bootstrap
    create(admin, bootstrap, "dr-reset-group")
    produce(bootstrap, "dr-reset-group", 10)
    partition = kafka.TopicPartition("dr-reset-group", 0)
    committer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id="g-reset",
                                    enable_auto_commit=False)
    try:
        committer.assign([partition])
        committer.commit({partition: kafka.OffsetAndMetadata(2, "", -1)})
    finally:
        committer.close()
    admin.delete_records({partition: 6})
    strict = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id="g-reset",
                                 auto_offset_reset="none", enable_auto_commit=False)
    try:
        strict.assign([partition])
        with pytest.raises(kafka_errors.OffsetOutOfRangeError):
            strict.poll(timeout_ms=10_000)  # one fetch at the deleted offset 2
    finally:
        strict.close()
    assert consume_from_beginning(bootstrap, "dr-reset-group", 4, group="g-reset") == [
        6, 7, 8, 9]
