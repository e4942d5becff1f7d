"""A real broker SIGKILLed at seeded points while its cleaner compacts a topic, and while
retention deletes another topic's segments under a producer (confluent-kafka, acks=all,
idempotent; 1 voter, 1 broker, replication factor 1, so the killed broker's disk is the
only copy). Each round writes more, kills the broker a seeded delay later and starts it
again; then, against a model of the acknowledged writes:
- compacted: every record a consumer reads from offset 0 is one written at that offset,
  and every key's latest value is there;
- retention: every acknowledged record at or above the log start is read at its offset;
- both: once the broker has stopped (gracefully) after serving those reads, every
  segment's `.index` and `.timeindex` are exactly the index of its batches
  (tests/support/log_kill.py), whatever the start-up had to repair.
The cleaner is paced (`log.cleaner.io.max.bytes.per.second`) so that cleaning takes
seconds. Every other compaction kill waits until a cleaner file (`.cleaned` or `.swap`)
is on disk and lands a seeded moment after it, so those kills surely strike mid-cleaning;
the others land anywhere. 20 kills each, under `make soak` (about 7 minutes); the default
run kills the partition-log writer processes instead (test_partition_log_kill.py,
test_compaction_kill.py: 4 kills each, seconds)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.partitions.segments import RollLimits
from tests.support.log_kill import index_problems
from tests.support.quorum_support import FAST_SETTINGS, running_cluster, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

BROKER = 2
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "controlled.shutdown.enable": False,  # the only broker: nowhere to hand over
            "log.cleaner.backoff.ms": 100, "log.cleaner.io.max.bytes.per.second": 500_000,
            "log.retention.check.interval.ms": 100}
SEGMENT_BYTES = 16 * 1024
LIMITS = RollLimits(segment_bytes=SEGMENT_BYTES)  # the topics' index.interval.bytes: 4096
WAIT_S = 30.0
KEYS = 1_000
KILLS = 20  # per test
PADDING = b"." * 200


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path / "cluster", SETTINGS, voters=1, brokers=1) as started:
        yield started


def _bootstrap(cluster: Cluster) -> str:
    return str(cluster.node(BROKER).client_address)


def _create(cluster: Cluster, topic: str, configs: dict[str, str]) -> Path:
    admin = admin_mod.AdminClient({"bootstrap.servers": _bootstrap(cluster)})
    admin.create_topics([admin_mod.NewTopic(topic, num_partitions=1, replication_factor=1,
                                            config={"segment.bytes": str(SEGMENT_BYTES),
                                                    **configs})])[topic].result(WAIT_S)
    return Path(cluster.node(BROKER).data_dir) / f"{topic}-0"


class Acknowledged:
    """An idempotent acks=all producer and what it was acknowledged: offset -> (key,
    value)."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.topic = topic
        self.records: dict[int, tuple[bytes, bytes]] = {}
        self.producer = confluent_kafka.Producer({
            "bootstrap.servers": _bootstrap(cluster), "acks": "all",
            "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 60_000,
            "batch.num.messages": 20})  # a few batches a segment: many segments to clean

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.records[message.offset()] = (message.key(), message.value())

    def send(self, writes: list[tuple[bytes, bytes]]) -> None:
        for key, value in writes:
            self.producer.produce(self.topic, key=key, value=value,
                                  on_delivery=self._delivered)
            self.producer.poll(0)

    def flush(self) -> None:
        assert self.producer.flush(WAIT_S) == 0, "writes left unanswered"


def _read_from_start(cluster: Cluster, topic: str) -> tuple[int, dict[int, tuple[bytes, bytes]]]:
    """(the log start, offset -> (key, value) of every record up to the high watermark)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": _bootstrap(cluster),
                                         "group.id": "kill-check",
                                         "enable.auto.commit": False})
    try:
        partition = confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)
        low, high = consumer.get_watermark_offsets(partition, timeout=WAIT_S)
        consumer.assign([partition])
        out: dict[int, tuple[bytes, bytes]] = {}
        last = low - 1
        while last < high - 1:
            message = consumer.poll(WAIT_S)
            assert message is not None, f"nothing read after offset {last}, below {high}"
            assert message.error() is None, message.error()
            last = message.offset()
            out[last] = (message.key(), message.value())
        return low, out
    finally:
        consumer.close()


def _cleaner_files(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith((".cleaned", ".swap"))]


def _kill_and_restart(cluster: Cluster, delay_s: float) -> None:
    """SIGKILL the broker `delay_s` after now (the seeded kill point), start it again and
    wait until it serves."""
    time.sleep(delay_s)  # the kill point itself, drawn from the seed: not a wait for state
    cluster.kill(BROKER)
    cluster.start_node(BROKER)
    cluster.wait_for_brokers(WAIT_S)


def _indexes_after_a_stop(cluster: Cluster, directory: Path) -> list[str]:
    """Stop the broker gracefully (nothing moves under the check), check every index
    file, start it again."""
    cluster.stop_node(BROKER)
    try:
        return index_problems(directory, LIMITS)
    finally:
        cluster.start_node(BROKER)
        cluster.wait_for_brokers(WAIT_S)


@pytest.mark.timeout(900)
@pytest.mark.soak
def test_a_broker_killed_while_cleaning_keeps_every_keys_latest_value(
        cluster: Cluster) -> None:
    topic = "kill-compacted"
    directory = _create(cluster, topic, {"cleanup.policy": "compact",
                                         "min.cleanable.dirty.ratio": "0.01"})
    chooser = random.Random(36)
    written = Acknowledged(cluster, topic)
    for round_ in range(KILLS):
        # a new value for every key, then keys of their own: the round's writes leave
        # the active segment, so the cleaner has them to clean
        written.send([(b"k%d" % key, b"%d.%d" % (key, round_) + PADDING)
                      for key in range(KEYS)])
        written.send([(b"f%d.%d" % (round_, n), PADDING) for n in range(100)])
        written.flush()
        if round_ % 2:
            wait_until(lambda: _cleaner_files(directory), WAIT_S, "a cleaner file on disk")
            _kill_and_restart(cluster, chooser.uniform(0.0, 0.2))
        else:
            _kill_and_restart(cluster, chooser.uniform(0.0, 3.0))
        latest = {key: offset for offset, (key, _) in sorted(written.records.items())}
        _, read = _read_from_start(cluster, topic)
        unwritten = {o: r for o, r in read.items() if written.records.get(o) != r}
        assert unwritten == {}, "records not written at those offsets"
        assert set(latest.values()) <= set(read), "a key's latest value was lost"
        assert _indexes_after_a_stop(cluster, directory) == []


@pytest.mark.timeout(900)
@pytest.mark.soak
def test_a_broker_killed_during_retention_keeps_everything_above_its_log_start(
        cluster: Cluster) -> None:
    topic = "kill-retained"
    directory = _create(cluster, topic, {"retention.bytes": str(4 * SEGMENT_BYTES)})
    chooser = random.Random(253)
    written = Acknowledged(cluster, topic)
    starts = []
    for round_ in range(KILLS):
        # the kill lands while these are written and retention deletes segments under them
        written.send([(b"r%d.%d" % (round_, n), PADDING) for n in range(600)])
        _kill_and_restart(cluster, chooser.uniform(0.0, 1.0))
        written.flush()  # librdkafka sends again what the kill left unanswered
        start, read = _read_from_start(cluster, topic)
        starts.append(start)
        kept = {o: r for o, r in written.records.items() if o >= start}
        missing = sorted(o for o, r in kept.items() if read.get(o) != r)
        assert missing == [], f"acknowledged records lost above the log start {start}"
        assert _indexes_after_a_stop(cluster, directory) == []
    assert starts[-1] > 0, "retention never moved the log start"
