"""Kafka's promises to producers, on real broker processes (3 voters + 3 brokers on
127.0.0.1): idempotent producers across a leader SIGKILL and a broker restart (the
producer state is replicated with the batches and rebuilt from the log), Produce v13 by
topic ID, acks=0 failures closing the connection, transactional producers refused at
once, ListOffsets by timestamp per record."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from raft.common.kafka.wire_client import call, encode_request
from tests.support.kafka_support import record_batch, with_producer
from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

BROKERS = (4, 5, 6)
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "broker.session.timeout.ms": 2000, "socket.request.max.bytes": 8 << 20}
WAIT_S = 20.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("producers") / "cluster", SETTINGS,
                         voters=3, brokers=len(BROKERS)) as started:
        yield started


def address(cluster: Cluster, node_id: int) -> str:
    return cluster.node(node_id).client_address or ""


def live_brokers(cluster: Cluster) -> list[int]:
    return [b for b in BROKERS if cluster.is_running(b)]


def bootstrap(cluster: Cluster) -> str:
    return ",".join(address(cluster, b) for b in live_brokers(cluster))


def create_topic(cluster: Cluster, name: str, replication: int = 3,
                 config: dict[str, str] | None = None) -> uuid.UUID:
    admin = confluent_admin.AdminClient({"bootstrap.servers": bootstrap(cluster)})
    futures = admin.create_topics([confluent_admin.NewTopic(name, 1, replication,
                                                            config=config or {})])
    futures[name].result(WAIT_S)
    return wait_until(lambda: topic_leader(cluster, name)[0], WAIT_S, f"{name} everywhere")


def topic_leader(cluster: Cluster, name: str) -> tuple[uuid.UUID | None, int, int]:
    """(topic id, leader, leader epoch) as every live broker's image shows it; (None, ..)
    until they agree."""
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=name),),
                              allow_auto_topic_creation=False,  # a probe: creates nothing
                              include_topic_authorized_operations=False)
    seen = set()
    for broker in live_brokers(cluster):
        (topic,) = call(address(cluster, broker), request).topics
        if topic.error_code != ErrorCode.NONE:
            return None, -1, -1
        part = topic.partitions[0]
        seen.add((topic.topic_id, int(part.leader_id), int(part.leader_epoch)))
    if len(seen) != 1:
        return None, -1, -1
    return seen.pop()


def produce_v13(cluster: Cluster, broker: int, topic_id: uuid.UUID, batch: bytes,
                acks: int = -1) -> tuple[ErrorCode, int]:
    request = build(load_request_schema(0, 13), {
        "acks": acks, "timeout": int(WAIT_S * 1000), "topic_data": [
            {"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}]})
    part = call(address(cluster, broker), request, timeout_s=WAIT_S).responses[0]
    answer = part.partition_responses[0]
    return answer.error_code, int(answer.base_offset)


def idem(value: str, producer_id: int, seq: int, epoch: int = 0) -> bytes:
    return with_producer(record_batch([value.encode()]), producer_id, seq, epoch)


def consume_values(cluster: Cluster, topic: str, count: int) -> list[str]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap(cluster), "group.id": f"check-{uuid.uuid4()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[str] = []
    deadline = time.monotonic() + WAIT_S
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
        # anything beyond `count` (a duplicate) must show too: read to the end
        low, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=WAIT_S)
        while consumer.position([confluent_kafka.TopicPartition(topic, 0)])[0].offset < high:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value().decode())
    finally:
        consumer.close()
    return values


def wait_new_leader(cluster: Cluster, name: str, old: int) -> tuple[int, int]:
    def moved() -> tuple[int, int] | None:
        topic_id, leader, epoch = topic_leader(cluster, name)
        return (leader, epoch) if topic_id is not None and leader not in (old, -1) else None
    return wait_until(moved, WAIT_S, f"a new leader of {name}")


def restart(cluster: Cluster, broker: int) -> None:
    cluster.start_node(broker)
    wait_until(lambda: (s := cluster.broker_status(broker)) is not None
               and s.get("is_fenced") is False, WAIT_S, f"broker {broker} unfenced")


def test_new_leader_decides_retries_as_the_old_leader_when_state_was_replicated(
        cluster: Cluster) -> None:
    """Produce v13 by topic ID with acks=all (every ISR replica holds the batches and
    the producer state built from them); SIGKILL the leader; the new leader answers a
    retry with the original offset, a gap with OUT_OF_ORDER_SEQUENCE_NUMBER, a stale
    epoch with INVALID_PRODUCER_EPOCH, and takes the next sequence."""
    topic_id = create_topic(cluster, "handover")
    _, leader, _ = topic_leader(cluster, "handover")
    pid = 1 << 40
    for seq in range(6):
        assert produce_v13(cluster, leader, topic_id, idem(f"v{seq}", pid, seq, 1)) == \
            (ErrorCode.NONE, seq)
    cluster.kill(leader, signal.SIGKILL)
    try:
        new_leader, _ = wait_new_leader(cluster, "handover", leader)
        for seq in (1, 5):  # retained batches: duplicates, not stored again
            assert produce_v13(cluster, new_leader, topic_id, idem(f"v{seq}", pid, seq, 1)) \
                == (ErrorCode.NONE, seq)
        assert produce_v13(cluster, new_leader, topic_id, idem("gap", pid, 8, 1))[0] == \
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce_v13(cluster, new_leader, topic_id, idem("old", pid, 6, 0))[0] == \
            ErrorCode.INVALID_PRODUCER_EPOCH
        assert produce_v13(cluster, new_leader, topic_id, idem("v6", pid, 6, 1)) == \
            (ErrorCode.NONE, 6)
        unknown = uuid.uuid4()
        assert produce_v13(cluster, new_leader, unknown, idem("x", pid, 7, 1))[0] == \
            ErrorCode.UNKNOWN_TOPIC_ID
    finally:
        restart(cluster, leader)
    assert consume_values(cluster, "handover", 7) == [f"v{i}" for i in range(7)]


def test_restarted_broker_rebuilds_producer_state_from_its_log(cluster: Cluster) -> None:
    """Replication factor 1, SIGKILL (no snapshot on close) then restart: the producer
    state is rebuilt from the log, so a retry is still a duplicate and a gap is still
    refused."""
    topic_id = create_topic(cluster, "rebuilt", replication=1)
    _, leader, _ = topic_leader(cluster, "rebuilt")
    pid = 2 << 40
    for seq in range(3):
        assert produce_v13(cluster, leader, topic_id, idem(f"r{seq}", pid, seq)) == \
            (ErrorCode.NONE, seq)
    cluster.kill(leader, signal.SIGKILL)
    restart(cluster, leader)
    wait_until(lambda: topic_leader(cluster, "rebuilt")[1] == leader, WAIT_S,
               "the restarted broker leading again")
    assert produce_v13(cluster, leader, topic_id, idem("r2", pid, 2)) == (ErrorCode.NONE, 2)
    assert produce_v13(cluster, leader, topic_id, idem("gap", pid, 5))[0] == \
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_v13(cluster, leader, topic_id, idem("r3", pid, 3)) == (ErrorCode.NONE, 3)


def test_idempotent_producer_leaves_no_duplicate_when_leader_killed_mid_stream(
        cluster: Cluster) -> None:
    """librdkafka with enable.idempotence: its leader is SIGKILLed while batches are in
    flight; it retries at the new leader, and the partition holds every message exactly
    once, in the order produced."""
    create_topic(cluster, "exactly-once")
    _, leader, _ = topic_leader(cluster, "exactly-once")
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap(cluster), "enable.idempotence": True,
        "linger.ms": 5, "batch.num.messages": 20, "message.timeout.ms": int(WAIT_S * 1000),
        "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 500})
    total, kill_after = 600, 200
    delivered: list[int] = []
    failed: list[str] = []
    half = threading.Event()

    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(str(error))
        else:
            delivered.append(message.offset())
            if len(delivered) >= kill_after:
                half.set()

    try:
        for i in range(total):
            producer.produce("exactly-once", value=str(i).encode(), partition=0,
                             on_delivery=on_delivery)
            producer.poll(0)
            if i == kill_after + 50:  # batches are in flight: kill the leader now
                while not half.is_set():
                    producer.poll(0.05)
                cluster.kill(leader, signal.SIGKILL)
        assert producer.flush(WAIT_S) == 0
    finally:
        if not cluster.is_running(leader):
            restart(cluster, leader)
    assert failed == []
    assert consume_values(cluster, "exactly-once", total) == [str(i) for i in range(total)]


def test_failed_acks_zero_produce_closes_the_connection(cluster: Cluster) -> None:
    """Kafka closes the connection of an acks=0 produce that failed (there is no
    response to carry the error): here, a produce to a broker that is not the leader."""
    topic_id = create_topic(cluster, "fire-and-forget", replication=1)
    _, leader, _ = topic_leader(cluster, "fire-and-forget")
    other = next(b for b in live_brokers(cluster) if b != leader)
    host, _, port = address(cluster, other).rpartition(":")
    request = build(load_request_schema(0, 13), {"acks": 0, "timeout": 1000, "topic_data": [
        {"topic_id": topic_id, "partition_data": [{"index": 0,
                                                   "records": record_batch([b"x"])}]}]})
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(encode_request(request))
        assert sock.recv(16) == b""  # closed, no response


def test_transactional_producer_fails_fast_with_a_fatal_error(cluster: Cluster) -> None:
    """No transactions here: init_transactions fails at once with a fatal error instead
    of retrying COORDINATOR_NOT_AVAILABLE until its timeout."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster),
                                         "transactional.id": "tx-1"})
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        producer.init_transactions(30)  # a retriable error would be a timeout after 30 s
    error = raised.value.args[0]
    assert error.code() == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert not error.retriable()


def test_offsets_for_times_finds_the_record_not_its_batch(cluster: Cluster) -> None:
    """ListOffsets by timestamp (Kafka clients' offsets_for_times): the first record at
    or after the time, within a batch; -1 when none is."""
    create_topic(cluster, "timed", replication=1)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster),
                                         "linger.ms": 1000})
    for i, stamp in enumerate((1000, 3000, 2000, 4000)):
        producer.produce("timed", value=str(i).encode(), partition=0, timestamp=stamp)
    assert producer.flush(WAIT_S) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap(cluster),
                                         "group.id": "timed-check"})
    try:
        found = [consumer.offsets_for_times([confluent_kafka.TopicPartition("timed", 0, t)],
                                            timeout=WAIT_S)[0].offset
                 for t in (2500, 3500, 5000)]  # one partition per call: a list dedups
        assert found == [1, 3, -1]
    finally:
        consumer.close()


def _stamp(number: int) -> int:
    """Rising timestamps, every fifth one older than the record before it."""
    return 100_000 + 10 * number - (300 if number % 5 == 4 else 0)


def test_offsets_for_times_is_the_first_record_at_or_after_across_segments(
        cluster: Cluster) -> None:
    """offsets_for_times on a topic of many segments, each with time index entries:
    every answer is the first offset whose timestamp is >= the time (records out of
    timestamp order included), as a scan of every record gives it."""
    total = 500
    create_topic(cluster, "timed-segments", replication=1, config={"segment.bytes": "16384"})
    _, leader, _ = topic_leader(cluster, "timed-segments")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap(cluster),
                                         "linger.ms": 0, "batch.num.messages": 1})
    for number in range(total):
        producer.produce("timed-segments", value=b"%080d" % number, partition=0,
                         timestamp=_stamp(number))
    assert producer.flush(WAIT_S) == 0
    directory = Path(cluster.node(leader).data_dir) / "timed-segments-0"
    segments = sorted(directory.glob("*.log"))
    assert len(segments) >= 3
    assert all(path.with_suffix(".timeindex").stat().st_size > 0 for path in segments[:-1])
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap(cluster),
                                         "group.id": "timed-segments-check"})
    try:
        for wanted in range(_stamp(0) - 5, _stamp(total - 1) + 20, 37):
            expected = next((n for n in range(total) if _stamp(n) >= wanted), -1)
            (found,) = consumer.offsets_for_times(
                [confluent_kafka.TopicPartition("timed-segments", 0, wanted)], timeout=WAIT_S)
            assert (wanted, found.offset) == (wanted, expected)
    finally:
        consumer.close()


def test_kraft_produce_writes_by_topic_id_as_an_idempotent_producer(
        cluster: Cluster) -> None:
    """The project's own producer: Produce v13 by topic ID with a producer ID from
    InitProducerId; the stored batch carries that producer id and sequence 0."""
    create_topic(cluster, "from-cli")
    first = kraft("produce", "--bootstrap-server", bootstrap(cluster), "--topic", "from-cli",
                  "--json", "one", "two")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["base_offset"] == 0
    second = kraft("produce", "--bootstrap-server", bootstrap(cluster), "--topic",
                   "from-cli", "--json", "three")
    assert json.loads(second.stdout)["base_offset"] == 2
    assert consume_values(cluster, "from-cli", 3) == ["one", "two", "three"]
    missing = kraft("produce", "--bootstrap-server", bootstrap(cluster), "--topic",
                    "no-such-topic", "--timeout", "2", "x")
    assert missing.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
