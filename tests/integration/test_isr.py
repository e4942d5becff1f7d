"""ISR shrink and expansion through AlterPartition (KIP-497), multi-process on 127.0.0.1:
a broker that comes back rejoins the ISRs it was dropped from; a stopped (but unfenced)
follower is shrunk out once replica.lag.time.max.ms passes, so acks=all produces go on,
and rejoins once it runs again."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from kio.schema.metadata.v12.request import MetadataRequest

from metadata import admin
from raft.common.kafka.wire_client import call
from raft.common.uuid import Uuid
from tests.integration.conftest import ClusterFactory
from tests.integration.test_broker import admin_request, create_topic
from tests.support.quorum_support import FAST_SETTINGS, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")

BROKERS = (4, 5, 6)
WAIT_S = 30.0
LAG_MS = 2000


def partition_state(cluster: Cluster, topic_id: Uuid) -> admin.PartitionDescription:
    """Partition 0 as the active controller's committed image has it."""
    response = admin_request(cluster, "DescribeTopics",
                             admin.DescribeTopicsRequest(topic_ids=(topic_id,)))
    (topic,) = response.topics
    assert topic.error_code == 0, topic
    return topic.partitions[0]


def wait_isr(cluster: Cluster, topic_id: Uuid, predicate: Any, what: str
             ) -> admin.PartitionDescription:
    """Poll the committed state (bounded) until `predicate` holds; returns that state."""
    def check() -> admin.PartitionDescription | None:
        state = partition_state(cluster, topic_id)
        return state if predicate(state) else None
    return wait_until(check, WAIT_S, what)


def produce(bootstrap: str, topic: str, values: list[bytes], acks: Any) -> list[int]:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks=acks,
                                   request_timeout_ms=int(WAIT_S * 1000))
    try:
        futures = [producer.send(topic, value=v, partition=0) for v in values]
        return [f.get(WAIT_S).offset for f in futures]
    finally:
        producer.close()


def bootstrap_of(cluster: Cluster, brokers: tuple[int, ...]) -> str:
    return ",".join(a for n in brokers if (a := cluster.node(n).client_address))


def test_restarted_broker_rejoins_the_isr_when_it_catches_up(
        make_cluster: ClusterFactory) -> None:
    """Fencing drops a dead broker from the ISR; once it runs again, is unfenced and has
    fetched up to the high watermark, the leader's AlterPartition adds it back."""
    cluster = make_cluster(voters=3, brokers=3, settings={
        **FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
        "broker.session.timeout.ms": 4000, "replica.lag.time.max.ms": LAG_MS})
    cluster.wait_for_brokers(WAIT_S)
    created = create_topic(cluster, "rejoin", partitions=1, replication_factor=3)
    start = partition_state(cluster, created.topic_id)
    assert sorted(start.isr) == list(BROKERS)
    follower = next(r for r in start.replicas if r != start.leader)
    cluster.kill(follower)
    wait_isr(cluster, created.topic_id, lambda p: follower not in p.isr,
             f"broker {follower} dropped from the ISR once fenced")
    others = tuple(b for b in BROKERS if b != follower)
    assert produce(bootstrap_of(cluster, others), "rejoin", [b"while away"], "all") == [0]
    cluster.start_node(follower)
    wait_isr(cluster, created.topic_id, lambda p: sorted(p.isr) == list(BROKERS),
             f"broker {follower} back in the ISR")


def test_stopped_follower_is_shrunk_out_and_rejoins_when_continued(
        make_cluster: ClusterFactory) -> None:
    """A follower that stops fetching (SIGSTOP) but stays unfenced (long session
    timeout) is removed from the ISR by the leader once replica.lag.time.max.ms passes:
    an acks=all produce waiting on it completes. After SIGCONT it catches up and is
    added back. The records acknowledged meanwhile are on every ISR member."""
    cluster = make_cluster(voters=3, brokers=3, settings={
        **FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
        "broker.session.timeout.ms": 120_000, "replica.lag.time.max.ms": LAG_MS})
    cluster.wait_for_brokers(WAIT_S)
    created = create_topic(cluster, "stalled", partitions=1, replication_factor=3)
    start = partition_state(cluster, created.topic_id)
    follower = next(r for r in start.replicas if r != start.leader)
    others = tuple(b for b in BROKERS if b != follower)
    bootstrap = bootstrap_of(cluster, others)
    assert produce(bootstrap, "stalled", [b"before"], "all") == [0]
    cluster.send_signal(follower, signal.SIGSTOP)
    try:
        began = time.monotonic()
        assert produce(bootstrap, "stalled", [b"during"], "all") == [1]
        assert time.monotonic() - began >= LAG_MS / 1000 * 0.5  # it waited for the shrink
        shrunk = partition_state(cluster, created.topic_id)
        assert follower not in shrunk.isr
        assert sorted(shrunk.isr) == sorted(others)
        # unfenced: the shrink came from AlterPartition, not from fencing
        assert follower in advertised_brokers(bootstrap.split(",")[0])
    finally:
        cluster.send_signal(follower, signal.SIGCONT)
    wait_isr(cluster, created.topic_id, lambda p: sorted(p.isr) == list(BROKERS),
             f"broker {follower} back in the ISR after SIGCONT")
    assert produce(bootstrap, "stalled", [b"after"], "all") == [2]


def advertised_brokers(address: str) -> set[int]:
    """The brokers the broker at `address` shows clients: the unfenced ones. Asked of
    that broker alone (an admin client might pick the stopped one and time out)."""
    request = MetadataRequest(topics=(), include_topic_authorized_operations=False)
    return {int(b.node_id) for b in call(address, request).brokers}
