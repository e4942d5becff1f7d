"""Consumer groups under faults, with unmodified clients against a 3-voter + 3-broker
cluster: a SIGKILLed consumer's partitions move to the survivor within its session
timeout (+3 s), and committed offsets (records in the replicated __consumer_offsets)
survive SIGKILL of their coordinator and then of every broker in turn."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.quorum_support import FAST_SETTINGS, coordinator_of, running_cluster, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
pytest.importorskip("confluent_kafka")

BROKERS = (4, 5, 6)
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "broker.session.timeout.ms": 2000, "replica.lag.time.max.ms": 3000,
            "offsets.topic.num.partitions": 3}
WAIT_S = 20.0
SESSION_MS = 6000

# A librdkafka consumer in its own process (so it can be SIGKILLed): prints its
# assignment after every rebalance, polls until killed.
VICTIM = """
import sys, confluent_kafka
bootstrap, topic, group, session_ms = sys.argv[1:5]
def on_assign(consumer, partitions):
    print("assigned", ",".join(str(p.partition) for p in partitions), flush=True)
consumer = confluent_kafka.Consumer({
    "bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": int(session_ms),
    "heartbeat.interval.ms": 300, "max.poll.interval.ms": 10000,
    "partition.assignment.strategy": "range", "enable.auto.commit": False})
consumer.subscribe([topic], on_assign=on_assign)
while True:
    consumer.poll(0.2)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("groups") / "cluster", SETTINGS,
                         voters=3, brokers=len(BROKERS)) as started:
        yield started


def addresses(cluster: Cluster) -> list[str]:
    return [a for n in BROKERS if (a := cluster.node(n).client_address)]


def is_unfenced(cluster: Cluster, node_id: int) -> bool:
    status = cluster.broker_status(node_id)
    return status is not None and status.get("is_fenced") is False


def create_topic(cluster: Cluster, name: str, partitions: int) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=",".join(addresses(cluster)))
    try:
        admin.create_topics([kafka.admin.NewTopic(name, partitions, 3)])
    finally:
        admin.close()


class Victim:
    """The subprocess consumer and the assignments it reports."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", VICTIM, bootstrap, topic, group, str(SESSION_MS)],
            stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.assigned: set[int] = set()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def poll(self) -> set[int]:
        while not self.lines.empty():
            _, _, rest = self.lines.get().strip().partition(" ")
            self.assigned = {int(p) for p in rest.split(",") if p}
        return self.assigned

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)


def test_dead_consumers_partitions_reassigned_within_session_timeout_when_sigkilled(
        cluster: Cluster) -> None:
    """A librdkafka consumer process and a kafka-python consumer share 4 partitions;
    once the librdkafka process is SIGKILLed (no LeaveGroup), the coordinator expires
    it after its session timeout and the survivor owns all 4 within that + 3 s."""
    bootstrap = ",".join(addresses(cluster))
    create_topic(cluster, "shared", 4)
    victim = Victim(bootstrap, "shared", "pair")
    survivor = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, group_id="pair", session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=300, max_poll_interval_ms=10_000, enable_auto_commit=False)
    try:
        wait_until(lambda: victim.poll(), WAIT_S, "the victim's first assignment")
        survivor.subscribe(["shared"])

        def split() -> bool:
            survivor.poll(timeout_ms=100)
            mine = {tp.partition for tp in survivor.assignment()}
            return bool(mine) and bool(victim.poll()) and \
                mine | victim.assigned == {0, 1, 2, 3} and not mine & victim.assigned
        wait_until(split, WAIT_S, "the partitions split between the two consumers")
        victim.kill()
        killed_at = time.monotonic()

        def owns_all() -> bool:
            survivor.poll(timeout_ms=100)
            return {tp.partition for tp in survivor.assignment()} == {0, 1, 2, 3}
        wait_until(owns_all, SESSION_MS / 1000 + 10, "the survivor owning every partition")
        elapsed = time.monotonic() - killed_at
    finally:
        victim.kill()
        survivor.close()
    assert elapsed <= SESSION_MS / 1000 + 3.0, elapsed


def committed(bootstrap: str, group: str, topic: str) -> int | None:
    """The group's committed offset of partition 0, read by a fresh kafka-python
    consumer (None when the coordinator cannot answer yet)."""
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                   enable_auto_commit=False, request_timeout_ms=3000)
    try:
        offset = consumer.committed(kafka.TopicPartition(topic, 0))
        return None if offset is None else int(offset)
    except Exception:  # coordinator moving: NotCoordinator, timeouts, ...
        return None
    finally:
        consumer.close()


def commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                   enable_auto_commit=False)
    try:
        partition = kafka.TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.commit({partition: kafka.OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def test_committed_offsets_survive_when_coordinator_then_every_broker_sigkilled(
        cluster: Cluster) -> None:
    """A commit is acknowledged only once the ISR of its __consumer_offsets partition
    holds it: SIGKILL the group's coordinator, then each other broker in turn (each
    restarted before the next), committing a new offset before every kill; after each
    kill the last commit is read back from whichever broker coordinates then."""
    bootstrap = ",".join(addresses(cluster))
    create_topic(cluster, "kept", 1)
    group = "durable-group"
    commit(bootstrap, group, "kept", 1)
    first = wait_until(lambda: coordinator_of(cluster, group), WAIT_S, "a coordinator")
    order = [first] + [b for b in BROKERS if b != first]
    for round_number, victim in enumerate(order, start=2):
        commit(bootstrap, group, "kept", round_number)
        assert committed(bootstrap, group, "kept") == round_number
        cluster.kill(victim)
        moved = wait_until(lambda v=victim: (c := coordinator_of(cluster, group, (v,)))
                           not in (None, v) and c, WAIT_S, "a new coordinator")
        assert moved != victim
        survivors = ",".join(cluster.node(b).client_address or "" for b in BROKERS
                             if b != victim)
        wait_until(lambda s=survivors, n=round_number: committed(s, group, "kept") == n,
                   WAIT_S, f"offset {round_number} read back after broker {victim} died")
        cluster.start_node(victim)
        wait_until(lambda v=victim: is_unfenced(cluster, v), WAIT_S,
                   f"broker {victim} back")
    assert committed(bootstrap, group, "kept") == len(order) + 1


def test_described_members_carry_their_client_id_and_host(cluster: Cluster) -> None:
    """DescribeGroups answers each member's client.id and address, and the caller's
    authorized operations on the group when asked, as Kafka does."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    bootstrap = ",".join(addresses(cluster))
    create_topic(cluster, "described", 1)
    assigned: list[object] = []
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "described-group",
        "client.id": "describe-me", "session.timeout.ms": SESSION_MS})
    try:
        consumer.subscribe(["described"], on_assign=lambda c, p: assigned.append(p))
        wait_until(lambda: consumer.poll(0.2) is not None or assigned, WAIT_S,
                   "the consumer's assignment")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        (future,) = admin.describe_consumer_groups(["described-group"],
                                                   include_authorized_operations=True).values()
        described = future.result(WAIT_S)
    finally:
        consumer.close()
    (member,) = described.members
    assert member.client_id == "describe-me"
    assert member.host == "/127.0.0.1"
    assert {op.name for op in described.authorized_operations} == {"READ", "DELETE",
                                                                   "DESCRIBE"}
