"""A cluster started by `kraft quorum start --tls` (real processes, mutual TLS on every
listener, 127.0.0.1): it elects a leader, the CLI drives it through the cluster's
client.properties, kafka-python and confluent-kafka produce and consume over SSL with the
generated CA, and the listeners refuse a plaintext client, a client without a
certificate, and a process whose valid certificate is node 7's claiming to be voter 1."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from raft import messages
from raft.common.framing import FrameDecoder, encode_frame
from raft.common.kafka.wire_client import encode_request
from tests.support.quorum_support import FAST_SETTINGS, kraft, log_events
from tests.support.secure_cluster import (
    WAIT_S,
    bootstrap_servers,
    create_topic,
    kafka_python_ssl,
    librdkafka_ssl,
    quorum_started,
)
from tools import tls_certs
from tools.cluster import Cluster, ClusterError
from tools.quorum_client import request

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")

BROKERS = (4, 5)
API_VERSIONS = encode_request(ApiVersionsRequest(client_software_name="t",
                                                 client_software_version="1"))
SETTINGS = {**FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
            "socket.request.max.bytes": 8 << 20}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("tls") / "cluster"
    with quorum_started(directory, "--voters", "3", "--brokers", str(len(BROKERS)), "--tls",
                        "--json", *(f"--set={k}={v}" for k, v in SETTINGS.items())) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return bootstrap_servers(cluster, BROKERS)


@pytest.fixture(scope="module")
def tls_dir(cluster: Cluster) -> Path:
    return cluster.directory / tls_certs.TLS_DIR


def cli(cluster: Cluster, *args: str) -> Any:
    result = kraft(*args, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_tls_cluster_elects_a_leader_when_started_with_tls(cluster: Cluster) -> None:
    status = json.loads(cli(cluster, "quorum", "describe", "--cluster", str(cluster.directory),
                            "--status", "--json"))
    assert status["LeaderId"] in (1, 2, 3)
    assert sorted(o["id"] for o in status["CurrentObservers"]) == list(BROKERS)
    properties = (cluster.directory / "client.properties").read_text()
    assert "security.protocol=SSL" in properties
    assert cluster.client_ssl is not None


def test_topic_created_described_and_deleted_through_the_cli_when_the_cluster_is_tls(
        cluster: Cluster, bootstrap: str) -> None:
    directory = str(cluster.directory)
    create_topic(cluster, "cli-tls", BROKERS, partitions=2)
    described = cli(cluster, "topics", "--cluster", directory, "--describe", "--topic",
                    "cli-tls")
    assert "PartitionCount: 2" in described
    through_broker = cli(cluster, "topics", "--bootstrap-server", bootstrap,
                         "--command-config", str(cluster.directory / "client.properties"),
                         "--list")
    assert "cli-tls" in through_broker.split()
    cli(cluster, "topics", "--cluster", directory, "--delete", "--topic", "cli-tls")
    listed = cli(cluster, "topics", "--cluster", directory, "--list")
    assert "cli-tls" not in listed.split()


def test_kafka_python_produces_and_consumes_when_the_listener_is_ssl(
        cluster: Cluster, bootstrap: str, tls_dir: Path) -> None:
    create_topic(cluster, "kp-tls", BROKERS)
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, **kafka_python_ssl(tls_dir))
    sent = [(f"k{i}".encode(), f"over tls {i}".encode()) for i in range(10)]
    futures = [producer.send("kp-tls", key=k, value=v) for k, v in sent]
    producer.flush(WAIT_S)
    assert [f.get(WAIT_S).offset for f in futures] == list(range(10))
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10_000,
                                   **kafka_python_ssl(tls_dir))
    try:
        consumer.assign([kafka.TopicPartition("kp-tls", 0)])
        consumer.seek_to_beginning()
        got = [(m.key, m.value) for _, m in zip(range(len(sent)), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == sent


def test_confluent_kafka_produces_and_consumes_when_the_listener_is_ssl(
        cluster: Cluster, bootstrap: str, tls_dir: Path) -> None:
    create_topic(cluster, "ck-tls", BROKERS)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         **librdkafka_ssl(tls_dir)})
    sent = [(f"key-{i}".encode(), f"librdkafka tls {i}".encode()) for i in range(10)]
    for key, value in sent:
        producer.produce("ck-tls", key=key, value=value)
    assert producer.flush(WAIT_S) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-tls",
                                         **librdkafka_ssl(tls_dir)})
    got: list[tuple[bytes, bytes]] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition("ck-tls", 0,
                                                        confluent_kafka.OFFSET_BEGINNING)])
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.key(), message.value()))
    finally:
        consumer.close()
    assert got == sent


def _closed_without_answer(sock: socket.socket) -> bool:
    """True when the peer closes (or resets) the connection without sending a byte."""
    sock.settimeout(10)
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def test_plaintext_client_is_refused_when_the_listeners_are_ssl(cluster: Cluster) -> None:
    frame = encode_frame({"api": "DescribeQuorumRequest", "version": 0, "correlation_id": 1,
                          "cluster_id": "", "body": messages.encode_message(
                              messages.DescribeQuorumRequest(cluster_id=""))[1]})
    targets = [cluster.node(1).controller_address, cluster.node(BROKERS[0]).status_address,
               cluster.node(BROKERS[0]).client_address]
    for address in targets:
        assert address is not None
        host, _, port = address.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=10) as plain:
            plain.sendall(frame if address != targets[-1] else API_VERSIONS)
            assert _closed_without_answer(plain), address


def test_client_without_certificate_is_refused_when_client_auth_is_required(
        cluster: Cluster, tls_dir: Path) -> None:
    anonymous = ssl.create_default_context(cafile=str(tls_dir / "ca.pem"))
    body = messages.encode_message(messages.DescribeQuorumRequest(cluster_id=""))[1]
    for address in (cluster.node(1).controller_address, cluster.node(BROKERS[0]).status_address):
        assert address is not None
        with pytest.raises(ClusterError):
            request(address, "DescribeQuorumRequest", body, timeout_s=5,
                    ssl_context=anonymous)
    kafka_address = cluster.node(BROKERS[0]).client_address
    assert kafka_address is not None
    host, _, port = kafka_address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        try:
            with anonymous.wrap_socket(raw, server_hostname=host) as sock:
                sock.sendall(API_VERSIONS)  # TLS 1.3: the refusal comes after the handshake
                assert _closed_without_answer(sock)
        except ssl.SSLError:
            pass  # refused during the handshake itself


def _stray(cluster: Cluster, node_id_in_cert: int) -> ssl.SSLContext:
    """A client context holding a valid certificate (the cluster's CA) for another node."""
    path = tls_certs.write_node_keystore(cluster.directory, tls_certs.load_ca(cluster.directory),
                                         node_id_in_cert)
    context = ssl.create_default_context(cafile=str(cluster.directory / "tls" / "ca.pem"))
    context.load_cert_chain(str(path))
    return context


def _send_raw(address: str, context: ssl.SSLContext, frame: dict[str, Any]
              ) -> dict[str, Any] | None:
    """One frame over TLS: the answer, or None when the connection closes without one."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as sock:
        sock.sendall(encode_frame(frame))
        decoder = FrameDecoder()
        while True:
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, ssl.SSLError):
                return None
            if not data:
                return None
            for reply in decoder.feed(data):
                return dict(reply)


def test_a_node_7_certificate_claiming_voter_1_is_refused_when_it_asks_for_a_vote(
        cluster: Cluster) -> None:
    """The stray Vote would move voter 2 to a far higher epoch if it reached the core;
    refused at the transport, the quorum's epoch stays where it was."""
    before = cluster.describe()
    target = 2 if before["leader_id"] != 2 else 3
    stray = _stray(cluster, 7)
    vote = messages.VoteRequest(cluster_id=cluster.cluster_id,
                                candidate_epoch=before["leader_epoch"] + 50, candidate_id=1,
                                last_offset_epoch=before["leader_epoch"] + 50,
                                last_offset=1 << 40)
    address = cluster.node(target).controller_address
    assert address is not None
    frame = {"api": "VoteRequest", "version": 0, "correlation_id": 9,
             "cluster_id": cluster.cluster_id, "body": messages.encode_message(vote)[1],
             "src": 1}
    assert _send_raw(address, stray, frame) is None
    assert _send_raw(address, stray, frame) is None  # again: refused, logged once
    after = cluster.describe()
    assert (after["leader_id"], after["leader_epoch"]) == (before["leader_id"],
                                                           before["leader_epoch"])
    refusals = [e for e in log_events(cluster, target)
                if e.get("msg") == "refused a node identity"]
    assert len(refusals) == 1
    assert refusals[0]["claimed"] == 1
    assert refusals[0]["certificate_node"] == 7
    assert refusals[0]["subject"] == "CN=kraft-node-7,O=kraft-py"
    # the same certificate is answered when it claims no id but its own
    describe = {"api": "DescribeQuorumRequest", "version": 0, "correlation_id": 10,
                "cluster_id": cluster.cluster_id,
                "body": messages.encode_message(messages.DescribeQuorumRequest(
                    cluster_id=cluster.cluster_id))[1], "src": 7}
    reply = _send_raw(address, stray, describe)
    assert reply is not None
    assert reply["correlation_id"] == 10


def test_node_exits_2_naming_the_key_when_its_keystore_does_not_load(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    config = tmp_path / "node.properties"
    config.write_text("process.roles=controller\nnode.id=1\n"
                      "controller.quorum.voters=1@127.0.0.1:1\n"
                      "listeners=CONTROLLER://127.0.0.1:1\n"
                      "listener.security.protocol.map=CONTROLLER:SSL\n"
                      f"ssl.keystore.location={tmp_path / 'junk.pem'}\n"
                      f"log.dirs={tmp_path / 'data'}\n")
    result = kraft("node", "--config", str(config))
    assert result.returncode == 2
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert line.startswith(f"error: {config}: ssl.keystore.location: ")
    assert "no PEM certificate and private key could be read" in line
