"""SASL_SSL (real processes, 127.0.0.1): the launcher's TLS cluster (`Cluster.create(...,
tls=True)`: its CA and certificates, mutual TLS on the controller listener) with the
brokers' listener mapped to SASL_SSL (which asks no client certificate unless its
listener's ssl.client.auth does, as Kafka since KIP-684), its controller formatted with
`kraft format --add-scram`. The brokers replicate over TLS as the bootstrap admin
(SCRAM-SHA-512), kafka-python and confluent-kafka log in with SCRAM-SHA-256 over TLS, and
a client with a valid certificate but no SASL is closed unanswered: on SASL_SSL the
principal comes from SASL."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS
from tests.support.secure_cluster import (
    ADMIN_JAAS,
    WAIT_S,
    bootstrap_servers,
    create_topic,
    format_with_scram,
    kafka_python_sasl,
    kafka_python_ssl,
    librdkafka_sasl,
    librdkafka_ssl,
    quorum_started,
)
from tools import tls_certs
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")

VOTER, BROKERS = 1, (2, 3)
SETTINGS = {
    **FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
    "socket.request.max.bytes": 8 << 20,
    "replica.lag.time.max.ms": 600_000,  # acks=all completes only once the follower fetched
    "listener.security.protocol.map": "CONTROLLER:SSL,SSL:SASL_SSL,STATUS:SSL",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "listener.name.ssl.scram-sha-512.sasl.jaas.config": ADMIN_JAAS,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("sasl-ssl") / "cluster"
    made = Cluster.create(directory, voters=1, brokers=len(BROKERS), settings=SETTINGS,
                          tls=True)
    shutil.rmtree(made.node(VOTER).data_dir)
    format_with_scram(made, VOTER, ("SCRAM-SHA-512=[name=admin,password=admin-secret]",
                                    "SCRAM-SHA-256=[name=alice,password=alice-secret]"))
    with quorum_started(directory) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return bootstrap_servers(cluster, BROKERS)


@pytest.fixture(scope="module")
def tls_dir(cluster: Cluster) -> Path:
    return cluster.directory / tls_certs.TLS_DIR


def test_clients_log_in_over_tls_and_brokers_replicate_when_the_listener_is_sasl_ssl(
        cluster: Cluster, bootstrap: str, tls_dir: Path) -> None:
    create_topic(cluster, "over-tls", BROKERS)
    login: dict[str, Any] = {**kafka_python_ssl(tls_dir), **kafka_python_sasl(
        bootstrap, "alice", "alice-secret", "SCRAM-SHA-256", protocol="SASL_SSL")}
    producer = kafka.KafkaProducer(acks="all", request_timeout_ms=20_000, **login)
    futures = [producer.send("over-tls", value=f"m{i}".encode()) for i in range(5)]
    producer.flush(WAIT_S)
    assert [f.get(WAIT_S).offset for f in futures] == list(range(5))
    producer.close()
    consumer = confluent_kafka.Consumer({
        **librdkafka_ssl(tls_dir),
        **librdkafka_sasl(bootstrap, "alice", "alice-secret", "SCRAM-SHA-256",
                          protocol="SASL_SSL"),
        "group.id": "tls-readers", "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.subscribe(["over-tls"])
        deadline = time.monotonic() + WAIT_S
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == [f"m{i}".encode() for i in range(5)]
    logins = [line for n in BROKERS for line in
              Path(cluster.node(n).log_path).read_text().splitlines()
              if "SASL authenticated" in line]
    assert any('"User:admin"' in line and "SCRAM-SHA-512" in line for line in logins)
    assert any('"User:alice"' in line for line in logins)


def test_client_with_a_certificate_but_no_sasl_is_refused_when_the_listener_is_sasl_ssl(
        cluster: Cluster, bootstrap: str, tls_dir: Path) -> None:
    # each attempt is closed unanswered at once; kafka-python retries until its
    # bootstrap_timeout_ms (30 s by default; max_block_ms does not bound the bootstrap)
    with pytest.raises(kafka.errors.KafkaTimeoutError, match="Unable to bootstrap"):
        kafka.KafkaProducer(bootstrap_servers=bootstrap, **kafka_python_ssl(tls_dir),
                            bootstrap_timeout_ms=3000)
