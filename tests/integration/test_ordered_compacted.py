"""A compacted ordered topic end to end (broker/kafka/ordered/split_tombstones.py), on real
processes (1 voter + 1 broker): growth moves a key away from the partitions it lived in,
the ordered producer leaves a tombstone of it in each of them, and the brokers' cleaners
then remove the key's old values there, which nothing else ever would (its new values go
to the new partition). An ordered consumer from the beginning delivers the key's live
value and never the tombstones.

With N = 2, `key-2` maps to partitions 0, 2, 6 at counts 2, 3, 8: v0 goes to 0, v1 to 2
after the growth to 3, v2 to 6 after the growth to 8."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from broker.kafka.ordered.partitioner import partition_for
from broker.kafka.ordered.split_tombstones import SPLIT_TOMBSTONE_HEADER
from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until
from tools.client.connection import KafkaClient
from tools.client.consumer import ConsumedRecord, OrderedConsumer
from tools.client.producer import OrderedProducer
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC, KEY = "ordered-compacted", b"key-2"
SETTINGS = {**FAST_SETTINGS, "log.cleaner.backoff.ms": 200}
WAIT_S = 60.0


def admin(cluster: Cluster, verb: str, *args: str) -> None:
    done = kraft(verb, "--cluster", str(cluster.directory), *args, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr


def grow(cluster: Cluster, partitions: int) -> None:
    """Alter the topic's count, then wait until the broker applied it: a producer whose
    broker still has the old count routes by the old count, as it may."""
    admin(cluster, "topics", "--alter", "--topic", TOPIC, "--partitions", str(partitions))
    committed = cluster.describe()["high_watermark"]
    brokers = [n for n, info in cluster.nodes.items() if not info.is_voter]
    wait_until(lambda: all((cluster.broker_status(n) or {}).get("applied_offset", -1)
                           >= committed - 1 for n in brokers), WAIT_S,
               f"the brokers applied the growth to {partitions}")


def bootstrap(cluster: Cluster) -> list[str]:
    return [n.client_address for n in cluster.nodes.values() if n.client_address]


def filler(partition: int, count: int, number: int) -> bytes:
    """A key of its own in `partition` at `count`: written after a tombstone so that the
    tombstone's segment is not the active one, which no cleaner touches."""
    keys = (b"filler-%d" % i for i in range(number * 1000, (number + 1) * 1000))
    return next(k for k in keys if partition_for(k, 2, count) == partition)


def read_partition(cluster: Cluster, partition: int
                   ) -> list[tuple[bytes, bytes | None, list[str]]]:
    """(key, value, header names) of every record of `partition`, from offset 0."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": ",".join(bootstrap(cluster)),
                                         "group.id": "check", "enable.auto.commit": False})
    try:
        start = confluent_kafka.TopicPartition(TOPIC, partition, 0)
        _, high = consumer.get_watermark_offsets(start, timeout=WAIT_S)
        consumer.assign([start])
        out: list[tuple[bytes, bytes | None, list[str]]] = []
        last = -1
        while last < high - 1:
            message = consumer.poll(WAIT_S)
            assert message is not None, f"nothing read below {high}"
            assert message.error() is None, message.error()
            last = message.offset()
            out.append((message.key(), message.value(),
                        [name for name, _ in message.headers() or []]))
        return out
    finally:
        consumer.close()


def test_growth_leaves_tombstones_that_compaction_uses_and_consumers_skip(
        tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster", SETTINGS, voters=1, brokers=1) as cluster:
        admin(cluster, "topics", "--create", "--topic", TOPIC, "--partitions", "2",
              "--replication-factor", "1", "--config", "cleanup.policy=compact",
              "--config", "enable.ordered.delivery=true", "--config", "segment.bytes=14",
              "--config", "min.cleanable.dirty.ratio=0.01")
        assert [partition_for(KEY, 2, n) for n in (2, 3, 8)] == [0, 2, 6]

        async def produce_all() -> int:
            client = KafkaClient(bootstrap(cluster), ssl_context=None, sasl=None)
            try:
                producer = OrderedProducer(client, TOPIC, timeout_s=WAIT_S)
                assert (await producer.send(KEY, b"0")).partition == 0
                await trio.to_thread.run_sync(grow, cluster, 3)
                assert (await producer.send(KEY, b"1")).partition == 2
                await trio.to_thread.run_sync(grow, cluster, 8)
                assert (await producer.send(KEY, b"2")).partition == 6
                await producer.send(KEY, b"3")  # its splits were tombstoned already
                sent = producer.split_tombstones
                for number, partition in enumerate((0, 2)):
                    await producer.send(filler(partition, 8, number), b"f")
                return sent
            finally:
                await client.aclose()

        # 0 after v1 (1 record from before the split to 3), then 2 and 0 after v2, but
        # 0 already has this key's tombstone
        assert trio.run(produce_all) == 2

        def only_tombstones_left() -> bool:
            records = [r for p in (0, 2) for r in read_partition(cluster, p) if r[0] == KEY]
            return records == [(KEY, None, [SPLIT_TOMBSTONE_HEADER])] * 2
        wait_until(only_tombstones_left, WAIT_S, "the key's old values compacted away")

        delivered: list[tuple[int, bytes | None]] = []

        async def consume() -> None:
            client = KafkaClient(bootstrap(cluster), ssl_context=None, sasl=None)
            consumer = OrderedConsumer(client, TOPIC, "compacted-group")

            async def deliver(record: ConsumedRecord) -> Any:
                if record.key == KEY:
                    delivered.append((record.partition, record.value))
                    if record.value == b"3":
                        nursery.cancel_scope.cancel()
            try:
                with trio.fail_after(WAIT_S):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(consumer.run, deliver)
            finally:
                await client.aclose()
        trio.run(consume)
        assert delivered == [(6, b"2"), (6, b"3")]
