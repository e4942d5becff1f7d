"""Log compaction with a real client (confluent-kafka) on a 1-voter + 3-broker cluster: a
topic created with cleanup.policy=compact, each key written several times and one key
deleted by a tombstone; once the brokers' cleaners have run, a consumer reading from
offset 0 gets exactly the latest value of each live key, at the offsets they were
written at. A record without a key is refused with INVALID_RECORD. `__consumer_offsets` is
compacted too: a group's many commits shrink to a few records, and after every broker
restarts, the coordinator loads the last commit from the compacted log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

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
