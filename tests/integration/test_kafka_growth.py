"""Kafka's clients unharmed by KIP-253, with confluent-kafka on real processes: a topic
is ordered only when asked. A plain `create_partitions` of a default topic bumps no
leader epoch, so the AdminClient that grew it still answers `list_offsets` (a bump had
left it FENCED_LEADER_EPOCH for good); `cleanup.policy=compact` alone creates a
compacted topic; controllers started with `enable.ordered.delivery=true` record it with
each topic that sets none, and a topic's own `false` wins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

BROKERS = (2, 3)
WAIT_S = 30.0
ORDERED = "enable.ordered.delivery"


def bootstrap_of(cluster: Cluster) -> str:
    return ",".join(a for n in BROKERS if (a := cluster.node(n).client_address))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("growth") / "cluster", FAST_SETTINGS,
                         voters=1, brokers=len(BROKERS)) as started:
        yield started


def create(admin: Any, name: str, partitions: int, **config: str) -> None:
    (future,) = admin.create_topics([admin_mod.NewTopic(
        name, num_partitions=partitions, replication_factor=len(BROKERS),
        config=config)]).values()
    future.result(WAIT_S)


def leader_epochs(cluster: Cluster, name: str) -> list[int]:
    described = kraft("topics", "--cluster", str(cluster.directory), "--describe",
                      "--topic", name, "--json")
    assert described.returncode == 0, described.stderr
    (topic,) = json.loads(described.stdout)["topics"]
    return [p["leader_epoch"] for p in topic["partitions"]]


def topic_config(admin: Any, name: str, key: str) -> str:
    resource = admin_mod.ConfigResource(admin_mod.ResourceType.TOPIC, name)
    (future,) = admin.describe_configs([resource]).values()
    return future.result(WAIT_S)[key].value  # type: ignore[no-any-return]


def latest_offsets(admin: Any, name: str, partitions: range) -> list[int]:
    asked = {confluent_kafka.TopicPartition(name, p): admin_mod.OffsetSpec.latest()
             for p in partitions}
    answers = admin.list_offsets(asked, request_timeout=WAIT_S)
    return [answers[tp].result(WAIT_S).offset for tp in asked]


def test_list_offsets_answers_the_admin_client_that_grew_a_default_topic(
        cluster: Cluster) -> None:
    bootstrap = bootstrap_of(cluster)
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    create(admin, "plain", 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition in (0, 1):
        producer.produce("plain", value=b"before", partition=partition)
    assert producer.flush(WAIT_S) == 0
    assert latest_offsets(admin, "plain", range(2)) == [1, 1]  # it learns their epochs
    before = leader_epochs(cluster, "plain")
    (grown,) = admin.create_partitions([admin_mod.NewPartitions("plain", 3)]).values()
    grown.result(WAIT_S)
    each = [admin_mod.AdminClient({"bootstrap.servers": cluster.node(b).client_address})
            for b in BROKERS]
    wait_until(lambda: all(
        len(one.list_topics("plain", timeout=WAIT_S).topics["plain"].partitions) == 3
        for one in each), WAIT_S, "every broker with the third partition")
    assert leader_epochs(cluster, "plain") == [*before, 0]  # none bumped
    assert topic_config(admin, "plain", ORDERED) == "false"
    assert latest_offsets(admin, "plain", range(2)) == [1, 1]
    # the new partition: a client that has not cached the topic (librdkafka refreshes a
    # known topic's partitions only every topic.metadata.refresh.interval.ms)
    fresh = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
    assert latest_offsets(fresh, "plain", range(3)) == [1, 1, 0]


def test_compaction_alone_creates_a_compacted_topic_and_with_ordering_an_ordered_one(
        cluster: Cluster) -> None:
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap_of(cluster)})
    create(admin, "compacted", 1, **{"cleanup.policy": "compact"})
    assert topic_config(admin, "compacted", "cleanup.policy") == "compact"
    assert topic_config(admin, "compacted", ORDERED) == "false"
    create(admin, "both", 1, **{"cleanup.policy": "compact", ORDERED: "true"})
    assert (topic_config(admin, "both", "cleanup.policy"),
            topic_config(admin, "both", ORDERED)) == ("compact", "true")


def test_controllers_ordered_by_default_record_it_and_a_topics_own_value_wins(
        tmp_path: Any) -> None:
    with running_cluster(tmp_path / "cluster", {**FAST_SETTINGS, ORDERED: True},
                         voters=1, brokers=len(BROKERS)) as ordered_cluster:
        bootstrap = bootstrap_of(ordered_cluster)
        admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap})
        create(admin, "ordered", 1)
        create(admin, "unordered", 1, **{ORDERED: "false"})
        assert topic_config(admin, "ordered", ORDERED) == "true"
        assert topic_config(admin, "unordered", ORDERED) == "false"
        before = leader_epochs(ordered_cluster, "ordered")
        (grown,) = admin.create_partitions([admin_mod.NewPartitions("ordered", 2)]).values()
        grown.result(WAIT_S)
        assert leader_epochs(ordered_cluster, "ordered") == [before[0] + 1, 0]  # KIP-253
