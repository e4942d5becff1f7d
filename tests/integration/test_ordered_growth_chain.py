"""KIP-253 schedule c end to end (docs/kip-253.md, "Schedules"), on real processes
(1 voter + 1 broker): a key whose new partition was split from a partition that itself
came from a growth must still be delivered in order.

With N = 2, `key-2` maps to partitions 0, 2, 2, 6 at counts 2, 3, 4, 8. v0 goes to
partition 0 behind more than a fetch's worth of other records (so the consumer cannot
deliver it in the same fetch as partition 6); the topic grows 2 -> 4 -> 8 with nothing
in partition 2; v1 goes to 6. A 2-member ordered group reading from the beginning
(round-robin puts 0, 2, 4, 6 on one member) must deliver v0 before v1: partition 6 waits
on 2, whose start counts only once 2's own gate (on 0, past v0) has opened."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from broker.kafka.ordered.partitioner import partition_for
from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until
from tests.support.resize_run import OutputProcess
from tools.client.connection import KafkaClient
from tools.client.groups_admin import GroupsAdmin
from tools.client.producer import Acknowledged, OrderedProducer
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

TOPIC, GROUP, KEY = "chain", "chain-group", b"key-2"
WAIT_S = 60.0
FILLER_BYTES = 100_000  # 12 of them: more than a consumer's 1 MiB per partition and fetch
FILLERS = 12


def admin(cluster: Cluster, verb: str, *args: str) -> None:
    done = kraft(verb, "--cluster", str(cluster.directory), *args, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr


def produce(cluster: Cluster, records: list[tuple[bytes, bytes]]) -> list[Acknowledged]:
    """Each record through the ordered producer (acknowledged before the next)."""
    addresses = [n.client_address for n in cluster.nodes.values() if n.client_address]

    async def send_all() -> list[Acknowledged]:
        client = KafkaClient(addresses, ssl_context=None, sasl=None)
        try:
            producer = OrderedProducer(client, TOPIC, timeout_s=WAIT_S)
            return [await producer.send(key, value) for key, value in records]
        finally:
            await client.aclose()
    return trio.run(send_all)


def first_delivery(consumers: list[OutputProcess], value: str) -> tuple[float, int, int] | None:
    """(delivery ms, consumer, line) of the first delivery of `KEY`'s `value`."""
    found = [(float(row["ts_ms"]), c, line)
             for c, consumer in enumerate(consumers)
             for line, row in enumerate(consumer.snapshot())
             if row["key"] == KEY.decode() and row["value"] == value]
    return min(found) if found else None


def group_size(cluster: Cluster) -> int:
    addresses = [n.client_address for n in cluster.nodes.values() if n.client_address]

    async def members() -> int:
        client = KafkaClient(addresses, ssl_context=None, sasl=None)
        try:
            return len((await GroupsAdmin(client).describe(GROUP)).members)
        finally:
            await client.aclose()
    return trio.run(members)


def test_a_chain_of_growths_delivers_a_key_in_order(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "cluster", FAST_SETTINGS, voters=1,
                         brokers=1) as cluster:
        run_chain(cluster, tmp_path)


def run_chain(cluster: Cluster, tmp_path: Path) -> None:
    admin(cluster, "topics", "--create", "--topic", TOPIC, "--partitions", "2",
          "--replication-factor", "1")
    admin(cluster, "configs", "--entity-type", "topics", "--entity-name", TOPIC, "--alter",
          "--add-config", "enable.ordered.delivery=true")
    assert [partition_for(KEY, 2, n) for n in (2, 3, 4, 8)] == [0, 2, 2, 6]
    fillers = [k for k in (f"filler-{i}".encode() for i in range(200))
               if partition_for(k, 2, 2) == 0][:FILLERS]
    acked = produce(cluster, [(k, b"x" * FILLER_BYTES) for k in fillers] + [(KEY, b"0")])
    assert {a.partition for a in acked} == {0}
    admin(cluster, "topics", "--alter", "--topic", TOPIC, "--partitions", "4")
    admin(cluster, "topics", "--alter", "--topic", TOPIC, "--partitions", "8")
    (v1,) = produce(cluster, [(KEY, b"1")])
    assert v1.partition == 6

    consumers: list[OutputProcess] = []
    try:
        for index in range(2):
            consumers.append(OutputProcess(f"consumer-{index}", [
                "consume", "--cluster", str(cluster.directory), "--topic", TOPIC,
                "--group", GROUP, "--ordered", "--json", "--duration", str(int(WAIT_S))],
                tmp_path))
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not all(
                first_delivery(consumers, v) for v in ("0", "1")):
            time.sleep(0.1)
        # stopped only once both have joined: one still starting (its signal handling not
        # installed yet: a loaded host slows the start) would die of the SIGTERM
        wait_until(lambda: group_size(cluster) == 2, WAIT_S, "both consumers in the group")
    finally:
        codes = [consumer.stop() for consumer in consumers]
    v0_at, v1_at = first_delivery(consumers, "0"), first_delivery(consumers, "1")
    tails = [consumer.stderr_tail() for consumer in consumers]
    assert v0_at is not None, (codes, tails)
    assert v1_at is not None, (codes, tails)
    same_consumer = v0_at[1] == v1_at[1]
    assert v0_at[2] < v1_at[2] if same_consumer else v0_at[0] < v1_at[0], \
        f"v1 delivered before v0: {v1_at} then {v0_at}"
    assert codes == [0, 0], tails

