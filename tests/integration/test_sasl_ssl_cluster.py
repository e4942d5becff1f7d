"""SASL_SSL (real processes, 127.0.0.1): the launcher's TLS cluster (`Cluster.create(...,
tls=True)`: its CA and certificates, mutual TLS on the controller listener) with the
brokers' listener mapped to SASL_SSL (which asks no client certificate unless its
listener's ssl.client.auth does, as Kafka since KIP-684), its controller formatted with
`kraft format --add-scram`. The brokers replicate over TLS as the bootstrap admin
(SCRAM-SHA-512), kafka-python and confluent-kafka log in with SCRAM-SHA-256 over TLS, and
a client with a valid certificate but no SASL is closed unanswered: on SASL_SSL the
principal comes from SASL."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.quorum_support import FAST_SETTINGS, kraft, wait_until
from tools import tls_certs
from tools.cluster import Cluster, ClusterError, is_alive

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")

VOTER, BROKERS = 1, (2, 3)
WAIT_S = 30.0
ADMIN_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')
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
    voter = made.node(VOTER)
    shutil.rmtree(voter.data_dir)
    formatted = kraft("format", "--dir", voter.data_dir, "--node-id", str(VOTER),
                      "--cluster-id", made.cluster_id,
                      "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
                      "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert formatted.returncode == 0, formatted.stderr
    try:
        started = kraft("quorum", "start", "--cluster", str(directory), timeout=90)
        assert started.returncode == 0, started.stderr
        yield Cluster.load(directory)
    finally:
        try:
            loaded = Cluster.load(directory)
        except ClusterError:
            return
        for node in loaded.nodes.values():
            if node.pid and is_alive(node.pid, node.config):
                os.kill(node.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return ",".join(a for n in BROKERS if (a := cluster.node(n).client_address))


def certificates(cluster: Cluster) -> dict[str, str]:
    tls_dir = cluster.directory / tls_certs.TLS_DIR
    return {"ca": str(tls_dir / "ca.pem"), "cert": str(tls_dir / "client-cert.pem"),
            "key": str(tls_dir / "client-key.pem")}


def test_clients_log_in_over_tls_and_brokers_replicate_when_the_listener_is_sasl_ssl(
        cluster: Cluster, bootstrap: str) -> None:
    kraft_result = kraft("topics", "--cluster", str(cluster.directory), "--create",
                         "--topic", "over-tls", "--partitions", "1",
                         "--replication-factor", "2", timeout=60)
    assert kraft_result.returncode == 0, kraft_result.stderr
    wait_until(lambda: all(
        (s := cluster.broker_status(n)) is not None
        and any(h["topic"] == "over-tls" for h in s["hosted"]) for n in BROKERS),
        WAIT_S, "both brokers to host the topic")
    files = certificates(cluster)
    login: dict[str, Any] = {
        "bootstrap_servers": bootstrap, "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret", "ssl_cafile": files["ca"],
        "ssl_certfile": files["cert"], "ssl_keyfile": files["key"]}
    producer = kafka.KafkaProducer(acks="all", request_timeout_ms=20_000, **login)
    futures = [producer.send("over-tls", value=f"m{i}".encode()) for i in range(5)]
    producer.flush(WAIT_S)
    assert [f.get(WAIT_S).offset for f in futures] == list(range(5))
    producer.close()
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
        "sasl.password": "alice-secret", "ssl.ca.location": files["ca"],
        "ssl.certificate.location": files["cert"], "ssl.key.location": files["key"],
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
        cluster: Cluster, bootstrap: str) -> None:
    files = certificates(cluster)
    with pytest.raises(kafka.errors.KafkaTimeoutError, match="Unable to bootstrap"):
        kafka.KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL",
                            ssl_cafile=files["ca"], ssl_certfile=files["cert"],
                            ssl_keyfile=files["key"], max_block_ms=3000)
