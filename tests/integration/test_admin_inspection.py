"""What kafka-log-dirs.sh and kafka-transactions.sh describe-producers read, asked by
kafka-python's admin client and `kraft log-dirs`: DescribeLogDirs (sizes of the
partitions each broker holds, its file system's bytes) and DescribeProducers (the
idempotent producers a leader remembers). One 1-voter + 2-broker cluster for the
module."""

from __future__ import annotations

import json
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
