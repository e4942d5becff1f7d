"""SASL on the brokers' Kafka listeners (real processes, 127.0.0.1): one controller
formatted with `kraft format --add-scram` and two brokers whose listener is
SASL_PLAINTEXT, replicating to each other with SCRAM-SHA-512 (the bootstrap `admin`).
Users made by `kraft format --add-scram` and by `kraft users` (through the controllers
and through a broker) produce and consume with kafka-python and confluent-kafka, with
SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; a wrong password is SASL_AUTHENTICATION_FAILED;
a client without SASL is closed without an answer; the credentials survive a snapshot
and a controller restart."""

from __future__ import annotations

import itertools
import json
import random
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from kio.index import load_request_schema

from broker.kafka.sasl import sasl_client
from broker.kafka.sasl.sasl_settings import SaslClientSettings
from raft.common.kafka.codec import build
from raft.common.kafka.wire_client import encode_request
from tests.support.quorum_support import FAST_SETTINGS, kraft, wait_until
from tests.support.secure_cluster import (
    ADMIN_JAAS,
    WAIT_S,
    bootstrap_servers,
    create_topic,
    format_with_scram,
    kafka_python_sasl,
    librdkafka_sasl,
    quorum_started,
)
from tools.cluster import Cluster

pytestmark = pytest.mark.integration

kafka = pytest.importorskip("kafka")
confluent_kafka = pytest.importorskip("confluent_kafka")

VOTER, BROKERS = 1, (2, 3)
SETTINGS = {
    **FAST_SETTINGS, "broker.heartbeat.interval.ms": 200,
    "socket.request.max.bytes": 8 << 20,
    # a follower that cannot log in never catches up; with this lag it stays in the ISR,
    # so an acks=all produce completes only once it fetched (as admin, SCRAM-SHA-512)
    "replica.lag.time.max.ms": 600_000,
    "listener.security.protocol.map":
        "CONTROLLER:PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT,STATUS:PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "listener.name.plaintext.scram-sha-512.sasl.jaas.config": ADMIN_JAAS,
    "sasl.plain.users": "plainuser:plain-pw",
}
BOOTSTRAP_USERS = ("SCRAM-SHA-512=[name=admin,password=admin-secret]",
                   "SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("sasl") / "cluster"
    made = Cluster.create(directory, voters=1, brokers=len(BROKERS), settings=SETTINGS)
    shutil.rmtree(made.node(VOTER).data_dir)  # formatted again, as a user would, with the users
    format_with_scram(made, VOTER, BOOTSTRAP_USERS)
    with quorum_started(directory, "--json") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def bootstrap(cluster: Cluster) -> str:
    return bootstrap_servers(cluster, BROKERS)


@pytest.fixture(scope="module")
def admin_properties(cluster: Cluster) -> Path:
    path = cluster.directory / "admin.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={ADMIN_JAAS}\n")
    return path


def cli(*args: str) -> str:
    result = kraft(*args, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def described(cluster: Cluster) -> dict[str, dict[str, int]]:
    users = json.loads(cli("users", "--cluster", str(cluster.directory), "--describe",
                           "--json"))["users"]
    return {u["user"]: {c["mechanism"]: c["iterations"] for c in u["credentials"]}
            for u in users}


@pytest.fixture(scope="module")
def users(cluster: Cluster, bootstrap: str, admin_properties: Path) -> dict[str, str]:
    """carol through the controllers, bob through a broker (logged in as admin)."""
    cli("users", "--cluster", str(cluster.directory), "--alter", "--entity-name", "carol",
        "--add-config", "SCRAM-SHA-256=[password=carol-pw]")
    cli("users", "--bootstrap-server", bootstrap, "--command-config", str(admin_properties),
        "--alter", "--entity-name", "bob", "--add-config",
        "SCRAM-SHA-512=[iterations=5000,password=bob-pw],SCRAM-SHA-256=[password=bob-pw]")
    return {"alice": "alice-secret", "admin": "admin-secret", "carol": "carol-pw",
            "bob": "bob-pw", "plainuser": "plain-pw"}


def test_users_from_format_and_kraft_users_are_described_when_created(
        cluster: Cluster, users: dict[str, str]) -> None:
    assert described(cluster) == {
        "admin": {"SCRAM-SHA-512": 4096}, "alice": {"SCRAM-SHA-256": 8192},
        "bob": {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 5000},
        "carol": {"SCRAM-SHA-256": 4096}}
    shown = cli("metadata-shell", "--cluster", str(cluster.directory), "--",
                "cat", "/image/scram/SCRAM-SHA-256/alice")
    assert json.loads(shown)["iterations"] == 8192


def produce_consume_kafka_python(bootstrap: str, topic: str, login: dict[str, Any]) -> None:
    producer = kafka.KafkaProducer(acks="all", request_timeout_ms=20_000, **login)
    futures = [producer.send(topic, value=f"{topic}-{i}".encode()) for i in range(5)]
    producer.flush(WAIT_S)
    assert [f.get(WAIT_S).offset for f in futures] == list(range(5))
    producer.close()
    # The five offsets above are the partition's whole log: read exactly those, bounded
    # by the timeout (fewer in time fails the comparison), instead of waiting it out.
    consumer = kafka.KafkaConsumer(consumer_timeout_ms=WAIT_S * 1000, **login)
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        read = [m.value for m in itertools.islice(consumer, 5)]
        assert read == [f"{topic}-{i}".encode() for i in range(5)]
    finally:
        consumer.close()


def produce_consume_confluent(bootstrap: str, topic: str, login: dict[str, Any]) -> None:
    producer = confluent_kafka.Producer({**login, "acks": "all"})
    delivered: list[int] = []
    for i in range(5):
        producer.produce(topic, value=f"{topic}-{i}".encode(),
                         on_delivery=lambda err, msg: delivered.append(
                             -1 if err else msg.offset()))
    assert producer.flush(WAIT_S) == 0
    assert delivered == list(range(5))
    consumer = confluent_kafka.Consumer({**login, "group.id": f"g-{topic}",
                                         "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == [f"{topic}-{i}".encode() for i in range(5)]


@pytest.mark.parametrize(("user", "mechanism", "client"), [
    ("alice", "SCRAM-SHA-256", "kafka-python"),  # kraft format --add-scram
    ("admin", "SCRAM-SHA-512", "confluent-kafka"),  # kraft format --add-scram
    ("carol", "SCRAM-SHA-256", "confluent-kafka"),  # kraft users --cluster
    ("bob", "SCRAM-SHA-512", "kafka-python"),  # kraft users --bootstrap-server
    ("plainuser", "PLAIN", "kafka-python"),  # sasl.plain.users (tests only)
])
def test_user_produces_and_consumes_when_logged_in_with_sasl(
        cluster: Cluster, bootstrap: str, users: dict[str, str], user: str, mechanism: str,
        client: str) -> None:
    topic = f"sasl-{user}-{mechanism.lower()}"
    create_topic(cluster, topic, BROKERS)
    if client == "kafka-python":
        produce_consume_kafka_python(bootstrap, topic, kafka_python_sasl(
            bootstrap, user, users[user], mechanism))
    else:
        produce_consume_confluent(bootstrap, topic, librdkafka_sasl(
            bootstrap, user, users[user], mechanism))


def test_brokers_replicate_as_the_inter_broker_user_when_the_listener_is_sasl(
        cluster: Cluster, bootstrap: str, users: dict[str, str]) -> None:
    """The acks=all produces above completed with both replicas in the ISR (the lag
    never drops the follower): the follower fetched, logged in as admin."""
    create_topic(cluster, "replicated", BROKERS)
    produce_consume_kafka_python(bootstrap, "replicated", kafka_python_sasl(
        bootstrap, "alice", users["alice"], "SCRAM-SHA-256"))
    logins = [json.loads(line) for n in BROKERS
              for line in Path(cluster.node(n).log_path).read_text().splitlines()
              if "SASL authenticated" in line]
    assert any(e["principal"] == "User:admin" and e["mechanism"] == "SCRAM-SHA-512"
               for e in logins)
    assert all("secret" not in json.dumps(e) for e in logins)


def first_address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


def test_wrong_password_is_refused_with_sasl_authentication_failed_when_logging_in(
        cluster: Cluster, bootstrap: str, users: dict[str, str]) -> None:
    async def login() -> str:
        stream = await trio.open_tcp_stream(*first_address(bootstrap))
        async with stream:
            with pytest.raises(sasl_client.SaslClientError) as caught:
                await sasl_client.authenticate(stream, SaslClientSettings(
                    mechanism="SCRAM-SHA-256", username="alice", password="wrong"),
                    rng=random.Random(1))
            assert await stream.receive_some(1) == b""  # and the broker closed it
            return str(caught.value)
    refused = trio.run(login)
    assert "SASL_AUTHENTICATION_FAILED" in refused
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in refused

    errors: list[Any] = []
    producer = confluent_kafka.Producer({
        **librdkafka_sasl(bootstrap, "alice", "wrong", "SCRAM-SHA-256"),
        "error_cb": errors.append})
    wait_until(lambda: producer.poll(0.2) is not None and errors, WAIT_S,
               "librdkafka to report the refused login")
    assert errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION
    assert "invalid credentials" in errors[0].str()


def test_client_without_sasl_is_closed_unanswered_when_it_sends_a_request(
        cluster: Cluster, bootstrap: str) -> None:
    metadata = encode_request(build(load_request_schema(3, 12), {
        "topics": None, "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}))
    with socket.create_connection(first_address(bootstrap), timeout=10) as sock:
        sock.sendall(metadata)
        assert sock.recv(4) == b""
    # each attempt is closed unanswered at once; kafka-python retries until its
    # bootstrap_timeout_ms (30 s by default; max_block_ms does not bound the bootstrap)
    with pytest.raises(kafka.errors.KafkaTimeoutError, match="Unable to bootstrap"):
        kafka.KafkaProducer(bootstrap_servers=bootstrap, bootstrap_timeout_ms=3000)  # no SASL
    refused = kraft("users", "--bootstrap-server", bootstrap, "--describe", "--timeout", "3")
    assert refused.returncode == 1
    assert "SASL listener closes a connection that has not logged in" in refused.stderr


def test_credentials_survive_a_snapshot_and_a_controller_restart_when_restarted(
        cluster: Cluster, bootstrap: str, users: dict[str, str]) -> None:
    before = described(cluster)
    snapshot = json.loads(cli("quorum", "snapshot", "--cluster", str(cluster.directory),
                              "--node", str(VOTER), "--json"))
    assert snapshot
    cli("quorum", "restart", "--cluster", str(cluster.directory), "--node", str(VOTER))
    wait_until(lambda: kraft("users", "--cluster", str(cluster.directory), "--describe",
                             "--json", "--timeout", "5").returncode == 0, WAIT_S,
               "the restarted controller to answer")
    assert described(cluster) == before
    checkpoints = sorted((Path(cluster.node(VOTER).data_dir) / "__cluster_metadata-0")
                         .glob("*.checkpoint"))
    assert checkpoints
    from_snapshot = cli("metadata-shell", "--snapshot", str(checkpoints[-1]), "--",
                        "ls", "/image/scram/SCRAM-SHA-512")
    assert from_snapshot.split() == ["admin", "bob"]
    create_topic(cluster, "after-restart", BROKERS)
    produce_consume_kafka_python(bootstrap, "after-restart", kafka_python_sasl(
        bootstrap, "bob", users["bob"], "SCRAM-SHA-512"))


def test_kraft_topics_lists_through_a_broker_when_its_command_config_logs_in(
        cluster: Cluster, bootstrap: str, admin_properties: Path) -> None:
    create_topic(cluster, "listed-over-sasl", BROKERS)
    listed = cli("topics", "--bootstrap-server", bootstrap, "--command-config",
                 str(admin_properties), "--list")
    assert "listed-over-sasl" in listed.split()
    wrong = cluster.directory / "wrong.properties"
    wrong.write_text(admin_properties.read_text().replace("admin-secret", "not-it"))
    refused = kraft("topics", "--bootstrap-server", bootstrap, "--command-config", str(wrong),
                    "--list", "--timeout", "10")
    assert refused.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr
    assert "not-it" not in refused.stderr


def test_kraft_produce_and_consume_log_in_with_their_command_config(
        cluster: Cluster, bootstrap: str, admin_properties: Path) -> None:
    create_topic(cluster, "console-over-sasl", BROKERS)
    login = ("--bootstrap-server", bootstrap, "--command-config", str(admin_properties),
             "--topic", "console-over-sasl")
    assert cli("produce", *login, "--key-separator", ":", "k1:v1", "k2:v2").strip() == \
        "produced 2 records to console-over-sasl-0 at offset 0"
    assert cli("produce", *login, "--acks", "0", "v3") == \
        "produced 1 records to console-over-sasl-0 at offset -1\n"  # acks=0: none known
    consumed = cli("consume", *login, "--from-beginning", "--max-messages", "3",
                   "--duration", "30")
    assert consumed.splitlines() == ["v1", "v2", "v3"]
    wrong = cluster.directory / "wrong-produce.properties"
    wrong.write_text(admin_properties.read_text().replace("admin-secret", "not-it"))
    # refused at once, not retried: given an hour, it must end within the harness's guard
    refused = kraft("produce", *login[:2], "--command-config", str(wrong), *login[4:], "v",
                    "--timeout", "3600", timeout=120)
    assert refused.returncode == 1
    (line,) = refused.stderr.splitlines()
    assert "SASL_AUTHENTICATION_FAILED" in line
    assert "not-it" not in line
