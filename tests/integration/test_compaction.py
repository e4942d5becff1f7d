"""Log compaction with a real client (confluent-kafka) on a 1-voter + 3-broker cluster: a
topic created with cleanup.policy=compact, each key written several times and one key
deleted by a tombstone; once the brokers' cleaners have run, a consumer reading from
offset 0 gets exactly the latest value of each live key, at the offsets they were
written at. At scale: 10,000 keys written 5 times each, a few of them last by a
tombstone, in many small segments; once every replica's cleaner reports (its log line) a
cleaning up to its active segment that left no tombstone pending, a consumer from offset
0 reads exactly each live key's latest value and nothing of a tombstoned key. A record
without a key is refused with INVALID_RECORD. `__consumer_offsets` is compacted too: a
group's many commits shrink to a few records, and after every broker restarts, the
coordinator loads the last commit from the compacted log."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.partitions.segments import NO_TIMESTAMP, segment_bases
from tests.support.quorum_support import FAST_SETTINGS, running_cluster, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

BROKERS = (2, 3, 4)
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "replica.lag.time.max.ms": 1000, "log.cleaner.backoff.ms": 200,
            "offsets.topic.num.partitions": 1, "offsets.topic.segment.bytes": 1024}
WAIT_S = 30.0
TOPIC = "compacted"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("compaction") / "cluster", SETTINGS,
                         voters=1, brokers=len(BROKERS)) as started:
        yield started


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return ",".join(a for n in BROKERS if (a := cluster.node(n).client_address))


def _produce(bootstrap: str, writes: list[tuple[str, str | None]]) -> dict[str, int]:
    """Each write in its own batch (segment.bytes is tiny: each in its own segment, the
    last one alone in the active segment); the offset of each key's last write."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 0})
    offsets: dict[str, int] = {}

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        offsets[message.key().decode()] = message.offset()

    for key, value in writes:
        producer.produce(TOPIC, key=key.encode(),
                         value=None if value is None else value.encode(),
                         on_delivery=delivered)
        assert producer.flush(WAIT_S) == 0
    return offsets


def _read_from_start(bootstrap: str, topic: str = TOPIC
                     ) -> list[tuple[int, bytes, bytes | None]]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                         "group.id": "compaction-check",
                                         "enable.auto.commit": False})
    try:
        partition = confluent_kafka.TopicPartition(topic, 0, 0)
        _, high = consumer.get_watermark_offsets(partition, timeout=WAIT_S)
        consumer.assign([partition])
        out: list[tuple[int, bytes, bytes | None]] = []
        while not out or out[-1][0] < high - 1:
            message = consumer.poll(WAIT_S)
            assert message is not None, f"nothing read after {out}, below {high}"
            assert message.error() is None, message.error()
            out.append((message.offset(), message.key(), message.value()))
        return out
    finally:
        consumer.close()


def test_a_consumer_reads_the_latest_value_of_each_live_key_once_cleaned(
        bootstrap: str) -> None:
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([admin_mod.NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                                            config={"cleanup.policy": "compact",
                                                    "segment.bytes": "14",
                                                    "min.cleanable.dirty.ratio": "0.01",
                                                    "delete.retention.ms": "0"})]
                        )[TOPIC].result(WAIT_S)
    writes: list[tuple[str, str | None]] = [
        (f"k{key}", f"v{key}.{round_}") for round_ in range(3) for key in range(4)]
    writes += [("k2", None), ("last", "end")]
    offsets = _produce(bootstrap, writes)
    expected = sorted((offsets[key], key, value) for key, value in
                      {"k0": "v0.2", "k1": "v1.2", "k3": "v3.2", "last": "end"}.items())
    seen: list[list[tuple[int, str, str | None]]] = []

    def compacted() -> bool:
        seen.append([(offset, key.decode(), None if value is None else value.decode())
                     for offset, key, value in _read_from_start(bootstrap)])
        return seen[-1] == expected

    wait_until(compacted, WAIT_S, "the compacted topic read back as its latest values")


MANY_KEYS = 10_000
ROUNDS = 5
TOMBSTONED = frozenset(range(0, MANY_KEYS // 2, 500))
FILLERS = 3_000  # more than a segment's worth (segment.bytes 32 KiB)
CLEANED = "the cleaner compacted a partition log"  # broker/kafka/partitions/compaction.py


def _produce_rounds(bootstrap: str, topic: str) -> dict[bytes, tuple[int, bytes | None]]:
    """Every key written ROUNDS times, round by round, the tombstoned keys' last write a
    tombstone, then FILLERS keys once; each key's last (offset, value) as acknowledged."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True, "linger.ms": 5,
                                         "batch.num.messages": 500})
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    errors: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(error)
            return
        key = message.key()
        if key not in latest or latest[key][0] < message.offset():
            latest[key] = (message.offset(), message.value())

    writes = [(b"k%d" % key, None if round_ == ROUNDS - 1 and key in TOMBSTONED
               else b"v%d.%d" % (key, round_))
              for round_ in range(ROUNDS) for key in range(MANY_KEYS)]
    # the cleaner never looks at the active segment (as Kafka's): keys of their own
    # after the rounds take every write of a round into segments it cleans
    writes += [(b"filler%d" % number, b"f") for number in range(FILLERS)]
    for key, value in writes:
        producer.produce(topic, key=key, value=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0
    assert errors == []
    assert len(latest) == MANY_KEYS + FILLERS
    return latest


def _cleaned_up_to_active_segment(cluster: Cluster, broker: int, topic: str) -> bool:
    """The broker's cleaner logged a cleaning of `topic` below its active segment that
    left no tombstone with a horizon pending (every one past delete.retention.ms gone)."""
    node = cluster.node(broker)
    active = segment_bases(p.name for p in (Path(node.data_dir) / f"{topic}-0").iterdir())[-1]
    for line in Path(node.log_path).read_text().splitlines():
        event = json.loads(line) if line.startswith("{") else {}
        if event.get("msg") == CLEANED and event.get("topic") == topic and \
                event.get("cleaned_below") == active and \
                event.get("delete_horizon_ms") == NO_TIMESTAMP:
            return True
    return False


def test_ten_thousand_keys_written_five_times_read_back_as_their_latest_values(
        cluster: Cluster, bootstrap: str) -> None:
    topic = "compacted-many"
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([admin_mod.NewTopic(topic, num_partitions=1, replication_factor=3,
                                            config={"cleanup.policy": "compact",
                                                    "segment.bytes": str(32 * 1024),
                                                    "min.cleanable.dirty.ratio": "0.01",
                                                    "delete.retention.ms": "1000"})]
                        )[topic].result(WAIT_S)
    started = time.monotonic()
    latest = _produce_rounds(bootstrap, topic)
    produced_s = time.monotonic() - started
    wait_until(lambda: all(_cleaned_up_to_active_segment(cluster, broker, topic)
                           for broker in BROKERS), 90.0,
               "every replica cleaned below its active segment, no tombstone left")
    read = _read_from_start(bootstrap, topic)
    expected = sorted((offset, key, value) for key, (offset, value) in latest.items()
                      if value is not None)
    assert len(expected) == MANY_KEYS + FILLERS - len(TOMBSTONED)
    assert read == expected, (f"{len(read)} records read, {len(expected)} live keys; "
                              f"produced in {produced_s:.1f} s")


def test_a_record_without_a_key_is_refused_by_a_compacted_topic(bootstrap: str) -> None:
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([admin_mod.NewTopic("keyed", num_partitions=1, replication_factor=1,
                                            config={"cleanup.policy": "compact,delete"})]
                        )["keyed"].result(WAIT_S)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "retries": 0})
    errors: list[Any] = []
    producer.produce("keyed", value=b"no key", on_delivery=lambda e, _: errors.append(e))
    assert producer.flush(WAIT_S) == 0
    assert [e.code() for e in errors] == [confluent_kafka.KafkaError.INVALID_RECORD]
    producer.produce("keyed", key=b"k", value=b"keyed",
                     on_delivery=lambda e, _: errors.append(e))
    assert producer.flush(WAIT_S) == 0
    assert errors[1:] == [None]


def test_consumer_offsets_are_compacted_and_reloaded_from_the_compacted_log(
        cluster: Cluster, bootstrap: str) -> None:
    commits = 80
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                                         "enable.auto.commit": False})
    try:
        for offset in range(1, commits + 1):
            consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, offset)],
                            asynchronous=False)
    finally:
        consumer.close()
    counts: list[int] = []

    def compacted() -> bool:  # one record a commit until cleaned
        counts.append(len(_read_from_start(bootstrap, "__consumer_offsets")))
        return counts[-1] < commits // 4

    wait_until(compacted, WAIT_S, "__consumer_offsets compacted")
    for broker in BROKERS:  # every coordinator's state now comes from a compacted log
        cluster.restart(broker)
    cluster.wait_for_brokers(WAIT_S)
    reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                                       "enable.auto.commit": False})
    try:
        (committed,) = reader.committed([confluent_kafka.TopicPartition(TOPIC, 0)],
                                        timeout=WAIT_S)
        assert committed.offset == commits
    finally:
        reader.close()
