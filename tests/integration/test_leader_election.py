"""ElectLeaders with confluent-kafka's `AdminClient.elect_leaders` and `kraft
leader-election`, against real processes on 127.0.0.1 (1 voter, 3 brokers):
- PREFERRED: a partition whose preferred replica's broker was killed is led by the
  other replica; while the preferred one is away the election is refused
  (PREFERRED_LEADER_NOT_AVAILABLE); once its broker is restarted and back in the ISR the
  election gives it the leadership back, and `kraft leader-election` then says a valid
  replica is already elected (an unknown topic there: one line on stderr, exit 1);
  kafka-python's elect_leaders and describe_topic_partitions (KIP-966, paged) agree;
- UNCLEAN: two topics on the same two brokers lose their ISR's last member while the
  other replica is down; when that replica comes back, the topic with
  `unclean.leader.election.enable=true` is led by it at once (the controller elects it
  when it is unfenced), the topic without stays leaderless until an UNCLEAN election,
  the operator's decision as in Kafka, makes the out-of-ISR replica its leader and whole
  ISR."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metadata import admin
from tests.integration.conftest import ClusterFactory
from tests.integration.test_broker import admin_request
from tests.support.quorum_support import kraft, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")
kafka = pytest.importorskip("kafka")

WAIT_S = 30.0
SETTINGS = {"broker.heartbeat.interval.ms": 200, "broker.session.timeout.ms": 3000,
            "replica.lag.time.max.ms": 2000}
NO_LEADER = -1


def bootstrap(cluster: Cluster, brokers: tuple[int, ...]) -> str:
    return ",".join(a for n in brokers if (a := cluster.node(n).client_address))


def create(client: Any, name: str, replicas: list[int], configs: dict[str, str]) -> None:
    futures = client.create_topics([ck_admin.NewTopic(
        name, num_partitions=1, replica_assignment=[replicas], config=configs)],
        request_timeout=WAIT_S)
    futures[name].result(WAIT_S)


def partition(cluster: Cluster, name: str) -> admin.PartitionDescription:
    """Partition 0 as the active controller's committed image has it."""
    response = admin_request(cluster, "DescribeTopics",
                             admin.DescribeTopicsRequest(names=(name,)))
    (topic,) = response.topics
    assert topic.error_code == 0, topic
    return topic.partitions[0]


def wait_state(cluster: Cluster, name: str, leader: int, isr: tuple[int, ...] | None,
               what: str) -> admin.PartitionDescription:
    def check() -> admin.PartitionDescription | None:
        state = partition(cluster, name)
        return state if state.leader == leader and (
            isr is None or tuple(sorted(state.isr)) == isr) else None
    return wait_until(check, WAIT_S, what)


def elect(client: Any, kind: Any, name: str) -> Any:
    """The per-partition outcome of one election of `name`-0: None (elected) or its
    KafkaError's code."""
    tp = ck.TopicPartition(name, 0)
    # no timeouts passed: confluent-kafka 2.16's binding refuses any keyword argument
    # here (SystemError); its default is socket.timeout.ms
    outcome = client.elect_leaders(kind, [tp]).result(WAIT_S)
    error = outcome[tp]
    return None if error is None else error.code()


def test_preferred_election_gives_the_leadership_back_after_a_restart(
        make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(voters=1, brokers=3, settings=SETTINGS)
    cluster.wait_for_brokers(WAIT_S)
    client = ck_admin.AdminClient({"bootstrap.servers": bootstrap(cluster, (2, 3, 4))})
    create(client, "pref", [2, 3], {})
    wait_state(cluster, "pref", 2, (2, 3), "broker 2 leading pref-0")
    cluster.kill(2)
    moved = wait_state(cluster, "pref", 3, (3,), "broker 3 leading once 2 is fenced")
    client = ck_admin.AdminClient({"bootstrap.servers": bootstrap(cluster, (3, 4))})
    assert elect(client, ck.ElectionType.PREFERRED, "pref") == \
        ck.KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    assert partition(cluster, "pref").leader == 3
    cluster.start_node(2)
    wait_state(cluster, "pref", 3, (2, 3), "broker 2 back in the ISR")
    assert elect(client, ck.ElectionType.PREFERRED, "pref") is None
    back = partition(cluster, "pref")
    assert back.leader == 2
    assert back.leader_epoch > moved.leader_epoch
    # the broker answered once its own image showed it: its Metadata names the leader
    metadata = client.list_topics("pref", timeout=WAIT_S)
    assert metadata.topics["pref"].partitions[0].leader == 2

    again = kraft("leader-election", "--cluster", str(cluster.directory), "--election-type",
                  "PREFERRED", "--topic", "pref", "--partition", "0")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["Valid replica already elected for partitions pref-0"]
    listed = kraft("leader-election", "--cluster", str(cluster.directory), "--election-type",
                   "preferred", "--all-topic-partitions", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"election_type": "PREFERRED", "partitions": []}
    kafka_python_sees_the_same(cluster)

    unknown = kraft("leader-election", "--cluster", str(cluster.directory),
                    "--election-type", "PREFERRED", "--topic", "nope", "--partition", "0")
    assert unknown.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in unknown.stdout
    assert len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr


def kafka_python_sees_the_same(cluster: Cluster) -> None:
    """kafka-python's elect_leaders (nothing to elect: ELECTION_NOT_NEEDED) and its
    describe_topic_partitions, two partitions a page, followed through the cursor."""
    client = kafka.KafkaAdminClient(bootstrap_servers=bootstrap(cluster, (2, 3, 4)),
                                    request_timeout_ms=int(WAIT_S * 1000))
    try:
        client.create_topics([kafka.admin.NewTopic("three", 3, 1)])
        answer = client.elect_leaders(0, {"pref": [0]})
        assert [(r.topic, p.partition_id, p.error_code) for r in answer.replica_election_results
                for p in r.partition_result] == [("pref", 0, ck.KafkaError.ELECTION_NOT_NEEDED)]
        seen, cursor = [], None
        for _ in range(4):  # 4 partitions, 2 a page: 2 pages, a third would be a bug
            page = client.describe_topic_partitions(["three", "pref"],
                                                    response_partition_limit=2, cursor=cursor)
            seen += [(t["name"], p["partition_index"], p["leader_id"]) for t in page["topics"]
                     for p in t["partitions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert [(name, index) for name, index, _ in seen] == [
            ("pref", 0), ("three", 0), ("three", 1), ("three", 2)]
        assert seen[0][2] == 2
    finally:
        client.close()


def test_unclean_election_only_where_the_topic_allows_it(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(voters=1, brokers=3, settings=SETTINGS)
    cluster.wait_for_brokers(WAIT_S)
    client = ck_admin.AdminClient({"bootstrap.servers": bootstrap(cluster, (2, 3, 4))})
    create(client, "clean", [3, 4], {})
    create(client, "dirty", [3, 4], {"unclean.leader.election.enable": "true"})
    for name in ("clean", "dirty"):
        wait_state(cluster, name, 3, (3, 4), f"{name}-0 on 3 and 4")
    cluster.kill(4)
    for name in ("clean", "dirty"):
        wait_state(cluster, name, 3, (3,), f"broker 4 out of {name}-0's ISR")
    cluster.kill(3)  # the ISR's last member: nobody live is in sync
    for name in ("clean", "dirty"):
        wait_state(cluster, name, NO_LEADER, (3,), f"{name}-0 leaderless")
    cluster.start_node(4)
    dirty = wait_state(cluster, "dirty", 4, (4,), "dirty-0 led by 4 once it is unfenced")
    assert dirty.replicas == (3, 4)
    # broker 4 is unfenced (it leads dirty-0), in the same batch as any election of clean-0
    assert partition(cluster, "clean").leader == NO_LEADER

    client = ck_admin.AdminClient({"bootstrap.servers": bootstrap(cluster, (2,))})
    described = client.describe_configs([ck_admin.ConfigResource(
        ck_admin.ResourceType.TOPIC, name) for name in ("clean", "dirty")])
    entries = {resource.name: future.result(WAIT_S)["unclean.leader.election.enable"]
               for resource, future in described.items()}
    assert (entries["clean"].value, entries["clean"].source) == \
        ("false", ck_admin.ConfigSource.DEFAULT_CONFIG.value)
    assert (entries["dirty"].value, entries["dirty"].source) == \
        ("true", ck_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert elect(client, ck.ElectionType.UNCLEAN, "clean") is None
    elected = partition(cluster, "clean")
    assert (elected.leader, elected.isr) == (4, (4,))
    assert elect(client, ck.ElectionType.UNCLEAN, "clean") == ck.KafkaError.ELECTION_NOT_NEEDED
    # the new leaders serve: an acks=all write to each is acknowledged
    for name in ("clean", "dirty"):
        assert produce(bootstrap(cluster, (2, 4)), name) >= 0


def produce(servers: str, name: str) -> int:
    """The offset an acks=all write to `name`-0 got."""
    producer = ck.Producer({"bootstrap.servers": servers, "acks": "all",
                            "message.timeout.ms": int(WAIT_S * 1000)})
    delivered: list[Any] = []
    producer.produce(name, b"after the election", partition=0,
                     on_delivery=lambda error, message: delivered.append((error, message)))
    assert producer.flush(WAIT_S) == 0
    ((error, message),) = delivered
    assert error is None, error
    return int(message.offset())

