"""Topic auto-creation with a real client (confluent-kafka) against real processes (1
voter + 2 brokers, `num.partitions=3`, `default.replication.factor=2`): a producer's first
record to a topic nobody created is delivered and the topic has the configured shape; a
Metadata request that does not allow auto-creation creates nothing; a record to an
illegal name fails at once with Kafka's topic error instead of waiting out its timeout."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from kio.index import load_request_schema

from raft.common.errors import ErrorCode
from raft.common.kafka.codec import build
from tests.support.quorum_support import FAST_SETTINGS, kraft, running_cluster, wait_until
from tools.client.admin import METADATA
from tools.client.connection import KafkaClient
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

SETTINGS = {**FAST_SETTINGS, "num.partitions": 3, "default.replication.factor": 2}
WAIT_S = 30.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("autocreate") / "cluster", SETTINGS,
                         voters=1, brokers=2) as started:
        yield started


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return ",".join(a for n in (2, 3) if (a := cluster.node(n).client_address))


def produce_one(bootstrap: str, topic: str) -> Any:
    """The delivery report of one record (its error, or None)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "message.timeout.ms": int(WAIT_S * 1000)})
    reports: list[Any] = []
    producer.produce(topic, b"v", key=b"k", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(WAIT_S + 5)
    assert len(reports) == 1
    return reports[0]


def described(cluster: Cluster, topic: str) -> dict[str, Any] | None:
    shown = kraft("topics", "--cluster", str(cluster.directory), "--describe", "--topic",
                  topic, "--json")
    if shown.returncode != 0:
        return None
    found: dict[str, Any] = json.loads(shown.stdout)["topics"][0]
    return found


def metadata_error(address: str, topic: str, *, allow: bool) -> int:
    async def ask() -> int:
        client = KafkaClient([address], ssl_context=None, sasl=None)
        try:
            request = build(load_request_schema(METADATA, 12), {
                "topics": [{"name": topic, "topic_id": None}],
                "allow_auto_topic_creation": allow})
            (answer,) = (await client.call(address, request)).topics
        finally:
            await client.aclose()
        return int(answer.error_code)
    return trio.run(ask)


def test_a_producers_first_record_creates_the_topic(cluster: Cluster, bootstrap: str) -> None:
    assert described(cluster, "auto-orders") is None
    assert produce_one(bootstrap, "auto-orders") is None
    topic = described(cluster, "auto-orders")
    assert topic is not None
    assert topic["partition_count"] == 3
    assert {len(p["replicas"]) for p in topic["partitions"]} == {2}


def test_a_metadata_request_that_does_not_allow_it_creates_nothing(cluster: Cluster) -> None:
    address = cluster.node(2).client_address or ""
    assert metadata_error(address, "not-asked", allow=False) == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # one that allows it, on the same broker: its creator sends names in the order asked
    assert metadata_error(address, "asked", allow=True) == ErrorCode.LEADER_NOT_AVAILABLE
    wait_until(lambda: described(cluster, "asked"), WAIT_S, "the asked topic created")
    assert described(cluster, "not-asked") is None


def test_a_record_to_an_illegal_name_fails_with_the_topic_error(bootstrap: str) -> None:
    error = produce_one(bootstrap, "no spaces allowed")
    assert error is not None
    assert error.code() == confluent_kafka.KafkaError.TOPIC_EXCEPTION
