"""What kafka-log-dirs.sh, kafka-transactions.sh describe-producers and
kafka-consumer-groups.sh read and change, asked by kafka-python's admin client, `kraft
log-dirs` and `kraft consumer-groups`: DescribeLogDirs (sizes of the partitions each
broker holds, its file system's bytes), DescribeProducers (the idempotent producers a
leader remembers), and a confluent-kafka group's members, offsets and lag, reset and
deleted. One 1-voter + 2-broker cluster for the module."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")

BROKERS = (2, 3)
RECORDS = 25
WAIT_S = 20.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("inspect") / "cluster", FAST_SETTINGS,
                         voters=1, brokers=len(BROKERS)) as started:
        yield started


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[Any]:
    bootstrap = [a for n in BROKERS if (a := cluster.node(n).client_address)]
    client = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    client.create_topics([kafka.admin.NewTopic("inspect", num_partitions=2,
                                               replication_factor=2)])
    producer = confluent_kafka.Producer({"bootstrap.servers": ",".join(bootstrap),
                                         "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce("inspect", value=b"x" * 100, key=str(i).encode(), partition=0)
    assert producer.flush(WAIT_S) == 0
    yield client
    client.close()


def test_log_dirs_report_each_brokers_partitions_with_their_sizes(admin: Any) -> None:
    answers = {a["broker"]: a["log_dirs"] for a in admin.describe_log_dirs()}
    assert set(answers) == set(BROKERS)
    for broker, (log_dir,) in answers.items():
        assert log_dir["error_code"] == 0, broker
        assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
        (topic,) = [t for t in log_dir["topics"] if t["name"] == "inspect"]
        sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
        assert sizes.keys() == {0, 1}  # replication factor 2 on 2 brokers: both here
        assert sizes[0] > RECORDS * 100 > sizes[1]  # partition 1 got nothing
    asked = admin.describe_log_dirs(topic_partitions={"inspect": [1]}, brokers=[BROKERS[0]])
    ((log_dir,),) = [a["log_dirs"] for a in asked]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
            for t in log_dir["topics"]] == [("inspect", [1])]


def test_producers_name_the_idempotent_producer_and_its_last_sequence(admin: Any) -> None:
    partition = kafka.TopicPartition("inspect", 0)
    (state,) = admin.describe_producers([partition]).values()
    (producer,) = state.active_producers
    assert producer.producer_id >= 0
    assert producer.last_sequence == RECORDS - 1
    assert producer.coordinator_epoch == -1  # no transactions
    assert admin.describe_producers([kafka.TopicPartition("inspect", 1)])[
        kafka.TopicPartition("inspect", 1)].active_producers == []


def test_log_dirs_verb_prints_kafkas_document_and_names_what_failed(
        admin: Any, cluster: Cluster) -> None:
    """`kraft log-dirs --describe`, as kafka-log-dirs.sh: two lines, then the JSON; an
    unknown broker is named on stderr with exit 1, a malformed list is exit 2."""
    bootstrap = cluster.node(BROKERS[0]).client_address
    assert bootstrap is not None
    done = kraft("log-dirs", "--bootstrap-server", bootstrap, "--describe",
                 "--topic-list", "inspect")
    assert done.returncode == 0, done.stderr
    first, second, body = done.stdout.splitlines()
    assert first == "Querying brokers for log directories information"
    assert second == "Received log directory information from brokers 2,3"
    found = json.loads(body)
    assert [b["broker"] for b in found["brokers"]] == list(BROKERS)
    for broker in found["brokers"]:
        (log_dir,) = broker["logDirs"]
        assert log_dir["error"] is None
        sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
        assert sizes.keys() == {"inspect-0", "inspect-1"}
        assert sizes["inspect-0"] > RECORDS * 100
    missing = kraft("log-dirs", "--bootstrap-server", bootstrap, "--describe",
                    "--broker-list", "2,9")
    assert missing.returncode == 1
    assert missing.stderr.strip() == "error: broker 9: no such broker in the cluster's metadata"
    assert [b["broker"] for b in json.loads(missing.stdout.splitlines()[2])["brokers"]] == [2]
    bad = kraft("log-dirs", "--bootstrap-server", bootstrap, "--describe",
                "--broker-list", "2,x")
    assert bad.returncode == 2
    assert "--broker-list: expected broker ids" in bad.stderr


def _groups(cluster: Cluster, *args: str) -> Any:
    bootstrap = cluster.node(BROKERS[0]).client_address
    assert bootstrap is not None
    return kraft("consumer-groups", "--bootstrap-server", bootstrap, *args)


def _rows(done: Any) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_consumer_groups_verb_describes_resets_and_deletes_a_real_group(
        admin: Any, cluster: Cluster) -> None:
    """A confluent-kafka member consumes `inspect` and commits: `kraft consumer-groups`
    shows it with its lag, refuses to reset it while it is active, resets it once it
    left (shown first with --dry-run, written only with --execute, clamped into the log)
    and deletes it, as kafka-consumer-groups.sh does."""
    bootstrap = ",".join(a for n in BROKERS if (a := cluster.node(n).client_address))
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "billing", "client.id": "billing-app",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["inspect"])
    seen = 0
    deadline = time.monotonic() + WAIT_S
    while seen < RECORDS - 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    assert seen == RECORDS - 5
    consumer.commit(asynchronous=False)  # offset 20 of 25 in partition 0
    described = _rows(_groups(cluster, "--describe", "--group", "billing", "--json"))
    by_partition = {row["partition"]: row for row in described}
    assert by_partition[0]["current-offset"] == RECORDS - 5
    assert by_partition[0]["log-end-offset"] == RECORDS
    assert by_partition[0]["lag"] == 5
    assert by_partition[0]["client-id"] == "billing-app"
    assert {row["consumer-id"] for row in described} != {None}
    (state,) = _rows(_groups(cluster, "--describe", "--group", "billing", "--state",
                             "--json"))
    assert (state["state"], state["members"]) == ("Stable", 1)
    assert ["billing", "Stable"] in [[g["group"], g["state"]] for g in _rows(
        _groups(cluster, "--list", "--state", "--json"))]
    active = _groups(cluster, "--reset-offsets", "--group", "billing", "--topic", "inspect",
                     "--to-earliest", "--execute")
    assert active.returncode == 1
    assert "is inactive, but the current state is Stable" in active.stderr
    consumer.close()

    left = _groups(cluster, "--describe", "--group", "billing")
    assert "Consumer group 'billing' has no active members." in left.stdout
    dry = _rows(_groups(cluster, "--reset-offsets", "--group", "billing", "--topic",
                        "inspect:0", "--to-earliest", "--json"))
    assert [(r["partition"], r["new-offset"]) for r in dry] == [(0, 0)]
    assert _rows(_groups(cluster, "--describe", "--group", "billing", "--json"))[0][
        "current-offset"] == RECORDS - 5  # a dry run writes nothing
    shifted = _rows(_groups(cluster, "--reset-offsets", "--group", "billing",
                            "--all-topics", "--shift-by", "100", "--execute", "--json"))
    assert [(r["partition"], r["new-offset"]) for r in shifted] == [(0, RECORDS)]  # clamped
    back = _rows(_groups(cluster, "--reset-offsets", "--group", "billing", "--topic",
                         "inspect", "--to-offset", "3", "--execute", "--json"))
    assert {r["partition"]: r["new-offset"] for r in back} == {0: 3, 1: 0}
    after = {r["partition"]: r["current-offset"] for r in _rows(
        _groups(cluster, "--describe", "--group", "billing", "--json"))}
    assert after == {0: 3, 1: 0}

    unknown_topic = _groups(cluster, "--reset-offsets", "--group", "billing", "--topic",
                            "nope", "--to-earliest")
    assert unknown_topic.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in unknown_topic.stderr
    no_target = _groups(cluster, "--reset-offsets", "--group", "billing", "--all-topics")
    assert no_target.returncode == 2
    deleted = _groups(cluster, "--delete", "--group", "billing")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == \
        "Deletion of requested consumer groups ('billing') was successful."
    gone = _groups(cluster, "--describe", "--group", "billing")
    assert gone.returncode == 1
    assert "consumer group 'billing' does not exist" in gone.stderr
